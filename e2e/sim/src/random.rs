//! Seeded pseudo-randomness (`SplitMix64`) for uids, generated names, load noise and injected
//! error rates. Seeded so a scenario replays identically; not for anything secret.

use std::sync::atomic::{AtomicU64, Ordering};

/// A thread-safe `SplitMix64` generator.
#[derive(Debug)]
pub struct Rng {
    state: AtomicU64,
}

impl Rng {
    /// A generator starting at `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            state: AtomicU64::new(seed),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&self) -> u64 {
        mix(self
            .state
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15))
    }

    /// A float uniformly in [0, 1).
    pub fn next_f64(&self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A random RFC 4122 version-4 UUID string.
    pub fn uuid(&self) -> String {
        let a = self.next_u64();
        let b = self.next_u64();
        let bytes = [a.to_be_bytes(), b.to_be_bytes()].concat();
        let mut h: Vec<String> = bytes.iter().map(|x| format!("{x:02x}")).collect();
        h[6] = format!("4{}", &h[6][1..]);
        h[8] = format!("{:x}{}", 8 + (bytes[8] >> 6 & 0x3), &h[8][1..]);
        let s = h.concat();
        format!(
            "{}-{}-{}-{}-{}",
            &s[0..8],
            &s[8..12],
            &s[12..16],
            &s[16..20],
            &s[20..32]
        )
    }

    /// A random suffix of `n` characters from the alphabet kube-apiserver uses for
    /// `generateName` (consonants and digits that cannot spell words).
    pub fn name_suffix(&self, n: usize) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..n)
            .map(|_| ALPHABET[(self.next_u64() % ALPHABET.len() as u64) as usize] as char)
            .collect()
    }
}

/// The `SplitMix64` finaliser; also a decent 64-bit hash of an integer.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a hash of bytes (stable across runs, unlike `DefaultHasher`'s contract).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_v4_shaped_and_distinct() {
        let rng = Rng::new(7);
        let a = rng.uuid();
        let b = rng.uuid();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }

    #[test]
    fn same_seed_same_sequence() {
        let (a, b) = (Rng::new(1), Rng::new(1));
        assert_eq!(a.next_u64(), b.next_u64());
        assert!((0.0..1.0).contains(&a.next_f64()));
        assert_eq!(a.name_suffix(5).len(), 5);
    }
}
