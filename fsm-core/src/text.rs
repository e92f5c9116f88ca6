//! Text for people: an error with its causes on one line, a short
//! duration, and text escaped for HTML and SVG. The command line, the demo and the runtime's messages share
//! them, so that the same thing reads the same everywhere.

use std::error::Error;
use std::fmt::Write as _;
use std::time::Duration;

/// `error` and its causes (its `source()`s, outermost first) joined by
/// `separator`: `request failed: connection refused` with `": "`.
///
/// A cause whose text the message already shows is left out, so that an
/// error that prints its source in its own message (`"…: {source}"`) is
/// not followed by the same text again; causes below it still follow.
///
/// ```
/// use fsm_core::text::display_chain;
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("loading the config failed")]
/// struct Load(#[source] std::io::Error);
///
/// let error = Load(std::io::Error::other("permission denied"));
/// assert_eq!(
///     display_chain(&error, ": "),
///     "loading the config failed: permission denied"
/// );
/// assert_eq!(
///     display_chain(&error, "\n  caused by: "),
///     "loading the config failed\n  caused by: permission denied"
/// );
/// ```
pub fn display_chain(error: &dyn Error, separator: &str) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.is_empty() && !message.contains(&text) {
            message.push_str(separator);
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

/// A short duration for people, its two largest units at most: `850ms`,
/// `4.2s`, `42s`, `5m12s`, `2h03m`, `3d4h`.
///
/// Below a minute it keeps a tenth of a second (`4.2s`), dropped when it
/// is zero (`42s`); from a minute on, it is cut (not rounded) to whole
/// units of the smaller one.
///
/// ```
/// use std::time::Duration;
/// use fsm_core::text::human_duration;
///
/// assert_eq!(human_duration(Duration::from_millis(850)), "850ms");
/// assert_eq!(human_duration(Duration::from_secs(312)), "5m12s");
/// ```
#[must_use]
pub fn human_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    let secs = duration.as_secs();
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = match secs {
        0 => write!(text, "{millis}ms"),
        1..60 => match millis % 1_000 / 100 {
            0 => write!(text, "{secs}s"),
            tenths => write!(text, "{secs}.{tenths}s"),
        },
        60..3_600 => write!(text, "{}m{:02}s", secs / 60, secs % 60),
        3_600..86_400 => write!(text, "{}h{:02}m", secs / 3_600, secs % 3_600 / 60),
        _ => write!(text, "{}d{}h", secs / 86_400, secs % 86_400 / 3_600),
    };
    text
}

/// A generous estimate of how wide `text` is drawn in a sans-serif font of
/// `size` (bold when `bold`), in the font's units: boxes and labels of
/// the SVG pictures are sized by it so that they hold their text in the
/// usual fonts, without measuring any.
///
/// ```
/// use fsm_core::text::text_width;
///
/// assert!(text_width("Ready", 13.0, true) > text_width("Ready", 13.0, false));
/// assert!(text_width("Pending", 13.0, false) < text_width("Provisioning", 13.0, false));
/// ```
pub fn text_width(text: &str, size: f64, bold: bool) -> f64 {
    let ems: f64 = text
        .chars()
        .map(|c| match c {
            'i' | 'j' | 'l' | 'I' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | ' ' => 0.34,
            'f' | 't' | 'r' | '(' | ')' | '[' | ']' | '-' => 0.44,
            'm' | 'w' => 0.94,
            'M' | 'W' => 1.0,
            c if c.is_ascii_uppercase() => 0.76,
            c if c.is_ascii() => 0.64,
            _ => 1.0,
        })
        .sum();
    let weight = if bold { 1.1 } else { 1.0 };
    ems * size * weight
}

/// `text` with the characters that are special in HTML and XML (`&`, `<`,
/// `>`, `"`, `'`) escaped, so that it can stand in an element or a quoted
/// attribute: the web view's pages and the SVG diagrams use it.
///
/// ```
/// assert_eq!(
///     fsm_core::text::escape_markup(r#"<a href="x">Tom & 'Jerry'</a>"#),
///     "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
/// );
/// ```
pub fn escape_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` safe to print on a terminal: every control character (C0, DEL,
/// C1: escape sequences that set a window title, clear the screen, move
/// the cursor or hide text) and every Unicode bidirectional override (text
/// that reads otherwise than it is stored) is written as its escape
/// (`\u{1b}`), newlines and tabs too, so that one value stays on its line.
/// Every terminal output of ours that shows what came from the cluster (a
/// record's `lastError`, history reasons, events, conditions, commands)
/// goes through it.
///
/// ```
/// use fsm_core::text::terminal_safe;
///
/// let hostile = "boom\u{1b}]0;pwned\u{7}\u{1b}[2J\nState: Ready";
/// assert_eq!(
///     terminal_safe(hostile),
///     "boom\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\nState: Ready"
/// );
/// assert_eq!(terminal_safe("plain: ok, ü"), "plain: ok, ü");
/// ```
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Whether [`terminal_safe`] escapes `c`.
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Appends one line to `out`: `args` formatted, made [`terminal_safe`],
/// then a newline. What the line holds never starts another one.
///
/// ```
/// use fsm_core::text::push_line;
///
/// let mut out = String::new();
/// push_line(&mut out, format_args!("Last error:   {}", "a\nState: Ready"));
/// assert_eq!(out, "Last error:   a\\nState: Ready\n");
/// ```
pub fn push_line(out: &mut String, args: std::fmt::Arguments<'_>) {
    let line = args.to_string();
    out.push_str(&terminal_safe(&line));
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Middle);

    #[derive(Debug, thiserror::Error)]
    #[error("middle: {0}")]
    struct Middle(#[source] std::io::Error);

    #[test]
    fn a_chain_lists_every_cause_outermost_first() {
        let error = Outer(Middle(std::io::Error::other("inner")));
        assert_eq!(display_chain(&error, " / "), "outer / middle: inner");
    }

    #[test]
    fn a_cause_the_message_already_shows_is_not_repeated() {
        let error = Middle(std::io::Error::other("inner"));
        assert_eq!(display_chain(&error, ": "), "middle: inner");
    }

    #[test]
    fn an_error_without_a_source_is_its_message() {
        let error = std::io::Error::other("alone");
        assert_eq!(display_chain(&error, ": "), "alone");
    }

    #[test]
    fn durations_keep_their_two_largest_units() {
        let secs = Duration::from_secs;
        let millis = Duration::from_millis;
        assert_eq!(human_duration(Duration::ZERO), "0ms");
        assert_eq!(human_duration(millis(250)), "250ms");
        assert_eq!(human_duration(millis(999)), "999ms");
        assert_eq!(human_duration(millis(1_000)), "1s");
        assert_eq!(human_duration(millis(4_200)), "4.2s");
        assert_eq!(human_duration(millis(4_260)), "4.2s");
        assert_eq!(human_duration(secs(42)), "42s");
        assert_eq!(human_duration(millis(59_950)), "59.9s");
        assert_eq!(human_duration(secs(60)), "1m00s");
        assert_eq!(human_duration(secs(185)), "3m05s");
        assert_eq!(human_duration(secs(312)), "5m12s");
        assert_eq!(human_duration(secs(2 * 3_600 + 180)), "2h03m");
        assert_eq!(human_duration(secs(3 * 86_400 + 4 * 3_600)), "3d4h");
    }
}
