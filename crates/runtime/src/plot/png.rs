//! A PNG encoder for 8-bit RGB images: signature, IHDR, one IDAT, IEND.
//!
//! Each row gets the filter (None, Sub or Up) with the smallest sum of absolute bytes, the usual
//! heuristic; on a chart that turns white areas and repeated rows into runs of zeros. The zlib
//! stream is one fixed-Huffman deflate block with an LZ77 matcher that remembers one position
//! per 3-byte hash: a run of zeros matches itself at distance 1, so it costs a few bits per 258
//! bytes. Charts compress to tens of kilobytes, which is all a replay plot needs.

/// PNG's file signature.
const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];

/// The PNG file for `rgb`, `width` × `height` pixels of three bytes, rows top to bottom.
pub(super) fn encode(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend(width.to_be_bytes());
    ihdr.extend(height.to_be_bytes());
    // Bit depth 8, colour type 2 (RGB), deflate, adaptive filtering, no interlace.
    ihdr.extend([8, 2, 0, 0, 0]);
    let mut out = SIGNATURE.to_vec();
    chunk(&mut out, *b"IHDR", &ihdr);
    chunk(&mut out, *b"IDAT", &zlib(&filter(width as usize * 3, rgb)));
    chunk(&mut out, *b"IEND", &[]);
    out
}

fn chunk(out: &mut Vec<u8>, kind: [u8; 4], data: &[u8]) {
    out.extend((data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend(kind);
    out.extend(data);
    let crc = crc32(&out[start..]);
    out.extend(crc.to_be_bytes());
}

/// CRC-32 (ISO 3309, reflected, polynomial 0xEDB88320) as PNG chunks use it.
pub(super) fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn adler32(bytes: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 bytes is the most that can be summed before `b` could overflow.
    for block in bytes.chunks(5552) {
        for &x in block {
            a += u32::from(x);
            b += a;
        }
        a %= 65_521;
        b %= 65_521;
    }
    (b << 16) | a
}

/// Rows prefixed by their filter type, each filtered by whichever of None, Sub and Up leaves the
/// smallest bytes (read as signed).
fn filter(stride: usize, rgb: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(rgb.len() + rgb.len() / stride.max(1) + 1);
    let zero = vec![0u8; stride];
    let mut prev: &[u8] = &zero;
    let mut candidates = [vec![0u8; stride], vec![0u8; stride], vec![0u8; stride]];
    for row in rgb.chunks(stride.max(1)) {
        for i in 0..row.len() {
            let left = if i >= 3 { row[i - 3] } else { 0 };
            candidates[0][i] = row[i];
            candidates[1][i] = row[i].wrapping_sub(left);
            candidates[2][i] = row[i].wrapping_sub(prev[i]);
        }
        let cost = |c: &Vec<u8>| -> u64 {
            c[..row.len()]
                .iter()
                .map(|&b| u64::from((b as i8).unsigned_abs()))
                .sum()
        };
        let (kind, best) = candidates
            .iter()
            .enumerate()
            .min_by_key(|(_, c)| cost(c))
            .unwrap_or((0, &candidates[0]));
        out.push(kind as u8);
        out.extend(&best[..row.len()]);
        prev = row;
    }
    out
}

/// Writes bits least significant first, as deflate packs them.
struct Bits {
    out: Vec<u8>,
    acc: u64,
    len: u32,
}

impl Bits {
    fn put(&mut self, value: u32, count: u32) {
        self.acc |= u64::from(value) << self.len;
        self.len += count;
        while self.len >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.len -= 8;
        }
    }

    /// A Huffman code: deflate sends codes most significant bit first.
    fn code(&mut self, code: u32, count: u32) {
        self.put(code.reverse_bits() >> (32 - count), count);
    }

    /// A literal/length symbol in the fixed code of RFC 1951 §3.2.6.
    fn symbol(&mut self, sym: u32) {
        match sym {
            0..=143 => self.code(0x30 + sym, 8),
            144..=255 => self.code(0x190 + sym - 144, 9),
            256..=279 => self.code(sym - 256, 7),
            _ => self.code(0xc0 + sym - 280, 8),
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.len > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

const LENGTH_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LENGTH_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];
const WINDOW: usize = 32 * 1024;
const MAX_MATCH: usize = 258;
const HASH_BITS: u32 = 15;

/// The index of the largest `base` entry not above `value`.
fn bucket(base: &[u16], value: usize) -> usize {
    base.iter()
        .rposition(|&b| usize::from(b) <= value)
        .unwrap_or(0)
}

/// `data` as a zlib stream (RFC 1950) holding one fixed-Huffman deflate block (RFC 1951).
pub(super) fn zlib(data: &[u8]) -> Vec<u8> {
    let mut bits = Bits {
        // CMF 0x78: deflate with a 32K window; FLG 0x01 makes the header a multiple of 31.
        out: vec![0x78, 0x01],
        acc: 0,
        len: 0,
    };
    bits.put(1, 1); // last block
    bits.put(1, 2); // fixed Huffman codes
    let mut head = vec![usize::MAX; 1 << HASH_BITS];
    let hash = |i: usize| {
        let v = (u32::from(data[i]) << 16) | (u32::from(data[i + 1]) << 8) | u32::from(data[i + 2]);
        (v.wrapping_mul(0x9e37_79b1) >> (32 - HASH_BITS)) as usize
    };
    let mut i = 0;
    while i < data.len() {
        let mut best = (0, 0);
        if i + 3 <= data.len() {
            let h = hash(i);
            let candidate = head[h];
            head[h] = i;
            if candidate != usize::MAX && i - candidate <= WINDOW {
                let limit = (data.len() - i).min(MAX_MATCH);
                let len = (0..limit)
                    .take_while(|&k| data[candidate + k] == data[i + k])
                    .count();
                if len >= 3 {
                    best = (len, i - candidate);
                }
            }
        }
        let (len, dist) = best;
        if len == 0 {
            bits.symbol(u32::from(data[i]));
            i += 1;
            continue;
        }
        let l = bucket(&LENGTH_BASE, len);
        bits.symbol(257 + l as u32);
        bits.put(
            (len - usize::from(LENGTH_BASE[l])) as u32,
            u32::from(LENGTH_EXTRA[l]),
        );
        let d = bucket(&DIST_BASE, dist);
        bits.code(d as u32, 5);
        bits.put(
            (dist - usize::from(DIST_BASE[d])) as u32,
            u32::from(DIST_EXTRA[d]),
        );
        // Positions inside the match go into the table too, so the next match can start there.
        for k in i + 1..(i + len).min(data.len().saturating_sub(2)) {
            head[hash(k)] = k;
        }
        i += len;
    }
    bits.symbol(256);
    let mut out = bits.finish();
    out.extend(adler32(data).to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_match_known_values() {
        assert_eq!(crc32(b"IEND"), 0xae42_6082);
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
    }

    #[test]
    fn zlib_round_trips_through_an_independent_inflater() {
        let mut data = vec![0u8; 70_000];
        data.extend(b"abcabcabcabd the quick brown fox jumps over the lazy dog".repeat(40));
        data.extend((0..5000u32).map(|i| (i * 7 % 251) as u8));
        let packed = zlib(&data);
        assert!(packed.len() < data.len() / 4, "{} bytes", packed.len());
        let unpacked = miniz_oxide::inflate::decompress_to_vec_zlib(&packed).expect("inflates");
        assert_eq!(unpacked, data);
        assert_eq!(
            miniz_oxide::inflate::decompress_to_vec_zlib(&zlib(&[])).expect("inflates"),
            Vec::<u8>::new()
        );
    }

    #[test]
    fn filters_pick_up_for_a_repeated_row() {
        let row = [10u8, 200, 30, 40, 50, 60];
        let f = filter(6, &[row, row].concat());
        assert_eq!(f[0], 0, "first row unfiltered (Sub would not be smaller)");
        assert_eq!(f[7], 2, "second row is Up");
        assert!(f[8..].iter().all(|&b| b == 0));
    }
}
