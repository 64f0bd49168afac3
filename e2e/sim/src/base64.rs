//! Standard base64 (RFC 4648, with padding) for kubeconfig data fields, webhook `caBundle`s
//! and `AdmissionReview` patches. Decoding skips whitespace.

use ::base64::Engine as _;
use ::base64::engine::general_purpose::STANDARD;

/// Encodes bytes.
pub fn encode(data: &[u8]) -> String {
    STANDARD.encode(data)
}

/// Decodes; `None` when the text is not base64. White space (PEM bundles wrap lines) is skipped.
pub fn decode(s: &str) -> Option<Vec<u8>> {
    let compact: String = s.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    STANDARD.decode(compact).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_vectors_round_trip() {
        // upstream: RFC 4648 section 10 test vectors
        for (plain, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(encode(plain.as_bytes()), enc);
            assert_eq!(decode(enc).unwrap(), plain.as_bytes());
        }
        assert!(decode("!!").is_none());
    }
}
