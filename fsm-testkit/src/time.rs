//! Times as the API writes them (RFC 3339 timestamps) and as tables and
//! `kubectl` print them (short ages).

/// The current time in the API's format (RFC 3339, seconds, UTC).
#[must_use]
pub fn timestamp(now: jiff::Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A Kubernetes-style short age (`45s`, `5m`, `3h`, `2d`) of an RFC 3339 time.
#[must_use]
pub fn age(created: &str, now: jiff::Timestamp) -> String {
    let Ok(t) = created.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    let secs = (now.as_second() - t.as_second()).max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 * 3 => format!("{}m", s / 60),
        s if s < 86400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_seconds_in_utc() {
        let t = jiff::Timestamp::from_second(1_000_000_000).unwrap();
        assert_eq!(timestamp(t), "2001-09-09T01:46:40Z");
    }

    #[test]
    fn ages_are_short_and_coarser_with_time() {
        let now = jiff::Timestamp::from_second(1_000_000).unwrap();
        let ago = |secs: i64| timestamp(jiff::Timestamp::from_second(1_000_000 - secs).unwrap());
        assert_eq!(age(&ago(45), now), "45s");
        assert_eq!(age(&ago(300), now), "5m");
        assert_eq!(age(&ago(4 * 3600), now), "4h");
        assert_eq!(age(&ago(3 * 86400), now), "3d");
        assert_eq!(age("not a time", now), "<unknown>");
    }
}
