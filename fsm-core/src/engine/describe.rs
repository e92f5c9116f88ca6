//! How the engine words errors and durations for people: in `lastError`,
//! history reasons, conditions and events.

use std::time::Duration;

/// An error and its causes, `outer: inner: innermost`: a handler's error
/// often wraps the one that says what happened (`Kubernetes API call
/// failed` around the API's own message). A cause whose text the error
/// already shows is not repeated.
pub(crate) fn describe_error(error: &dyn std::error::Error) -> String {
    crate::text::display_chain(error, ": ")
}

/// A duration for people: `90s` → `1m30s`, `500ms`.
pub(crate) fn humanize(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let mut secs = d.as_secs();
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    if secs > 0 || out.is_empty() {
        out.push_str(&format!("{secs}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_largest_units_that_fit() {
        for (duration, text) in [
            (Duration::from_millis(0), "0ms"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_secs(1), "1s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(3_600), "1h"),
            (Duration::from_secs(86_400 + 61), "1d1m1s"),
        ] {
            assert_eq!(humanize(duration), text, "{duration:?}");
        }
    }

    #[test]
    fn a_handler_error_is_described_with_its_causes() {
        #[derive(Debug, thiserror::Error)]
        #[error("the API answered 409: conflict")]
        struct Api;
        #[derive(Debug, thiserror::Error)]
        enum Handler {
            #[error("Kubernetes API call failed")]
            Kube(#[source] Api),
            #[error("call failed: {0}")]
            Quoted(#[source] Api),
            #[error(transparent)]
            Transparent(Api),
        }
        assert_eq!(
            describe_error(&Handler::Kube(Api)),
            "Kubernetes API call failed: the API answered 409: conflict"
        );
        // A cause the message already quotes is not repeated.
        assert_eq!(
            describe_error(&Handler::Quoted(Api)),
            "call failed: the API answered 409: conflict"
        );
        assert_eq!(
            describe_error(&Handler::Transparent(Api)),
            "the API answered 409: conflict"
        );
    }
}
