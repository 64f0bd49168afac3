//! A hash that every replica and every release computes alike (FNV-1a, 64 bit), for what must
//! agree across processes and releases: an object's shard, a cron job's id. The standard
//! library's hasher may change between Rust versions.

/// FNV-1a, 64 bit.
#[derive(Clone, Copy, Debug)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    /// Adds `bytes`.
    #[must_use]
    pub fn write(mut self, bytes: impl IntoIterator<Item = u8>) -> Self {
        for byte in bytes {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }

    /// The hash so far.
    pub fn finish(self) -> u64 {
        self.0
    }

    /// The hash of one string.
    pub fn of(text: &str) -> u64 {
        Self::default().write(text.bytes()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::Fnv1a;

    /// The published FNV-1a 64 test vectors: a change here would move every object's shard.
    #[test]
    fn matches_the_published_vectors() {
        assert_eq!(Fnv1a::of(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(Fnv1a::of("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(Fnv1a::of("foobar"), 0x8594_4171_f739_67e8);
    }
}
