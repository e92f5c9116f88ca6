//! Standard base64 (RFC 4648, with padding), the JSON encoding of
//! Kubernetes' `[]byte` fields (`Secret.data`, `ConfigMap.binaryData`,
//! discovery's `storageVersionHash`).

/// Standard base64 with padding (the encoding of `Secret.data`).
#[must_use]
pub fn encode(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let sextet = |shift: u32| char::from(ALPHABET[((n >> shift) & 63) as usize]);
        out.push(sextet(18));
        out.push(sextet(12));
        out.push(if chunk.len() > 1 { sextet(6) } else { '=' });
        out.push(if chunk.len() > 2 { sextet(0) } else { '=' });
    }
    out
}

/// Decodes standard base64 (padding optional), as Go's JSON reads `[]byte`;
/// `None` for a character outside the alphabet.
#[must_use]
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
        }
    }
    Some(out)
}

/// The length of what a standard base64 text decodes to.
#[must_use]
pub fn decoded_len(text: &str) -> usize {
    let text = text.trim_end();
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count();
    (text.len() / 4 * 3 + (text.len() % 4).saturating_sub(1)).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_matches_rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(encode(plain.as_bytes()), encoded);
        }
    }

    #[test]
    fn decode_reverses_encode_with_or_without_padding() {
        for plain in ["", "f", "fo", "foo", "foob", "fooba", "foobar"] {
            let encoded = encode(plain.as_bytes());
            assert_eq!(decode(&encoded).as_deref(), Some(plain.as_bytes()));
            let unpadded = encoded.trim_end_matches('=');
            assert_eq!(decode(unpadded).as_deref(), Some(plain.as_bytes()));
        }
        assert_eq!(decode("Zm9v!"), None);
    }

    #[test]
    fn decoded_length_of_base64() {
        for n in 0..20 {
            let text = encode(&vec![b'x'; n]);
            assert_eq!(decoded_len(&text), n, "{text}");
        }
    }
}
