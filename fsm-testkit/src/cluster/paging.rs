//! Continue tokens of paged lists: the revision of the first page and the
//! last key served, hex-encoded so they are opaque and URL-safe.

use crate::status::ApiError;

pub(super) fn encode_continue(revision: u64, ns: &str, name: &str) -> String {
    format!("{revision}\u{0}{ns}\u{0}{name}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(super) fn decode_continue(token: &str) -> Result<(u64, String, String), ApiError> {
    let bad = || ApiError::BadRequest(format!("invalid continue token {token:?}"));
    if !token.len().is_multiple_of(2) {
        return Err(bad());
    }
    let bytes: Vec<u8> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(token.get(i..i + 2).unwrap_or("zz"), 16))
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let mut parts = text.split('\u{0}');
    let (Some(rev), Some(ns), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    Ok((rev.parse().map_err(|_| bad())?, ns.into(), name.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_token_round_trips() {
        let t = encode_continue(42, "ns", "a.b");
        assert_eq!(
            decode_continue(&t).unwrap(),
            (42, "ns".into(), "a.b".into())
        );
    }
}
