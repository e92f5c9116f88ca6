//! Duration literals of the attributes (`"500ms"`, `"30s"`, `"10m"`,
//! `"1h30m"`), parsed at compile time.
//!
//! A literal is one or more components, each a decimal number followed by a
//! unit, largest unit first, each unit at most once: `d`, `h`, `m`, `s`,
//! `ms`. No spaces, signs or fractions; the total must fit in a `u64` of
//! milliseconds. [`literal`] writes a duration back in this grammar, for
//! messages.

use darling::FromMeta;
use proc_macro2::Span;
use syn::{Expr, Lit};

/// The units, largest first, with their length in milliseconds.
const UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// Why a duration literal was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// The literal is empty.
    Empty,
    /// A component has no number before its unit, or the text has
    /// something that is neither a digit nor a unit.
    Syntax,
    /// A number is not followed by a unit.
    MissingUnit,
    /// An unknown unit.
    UnknownUnit(String),
    /// Units are not in descending order or one is repeated.
    Order(String),
    /// The value does not fit.
    Overflow,
}

impl std::fmt::Display for DurationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DurationError::Empty => f.write_str("the duration is empty"),
            DurationError::Syntax => f.write_str("expected a number followed by a unit"),
            DurationError::MissingUnit => f.write_str("a number has no unit"),
            DurationError::UnknownUnit(u) => write!(f, "unknown unit `{u}`"),
            DurationError::Order(u) => {
                write!(
                    f,
                    "unit `{u}` is out of order (largest unit first, each once)"
                )
            }
            DurationError::Overflow => f.write_str("the duration is too large"),
        }
    }
}

/// Parses a duration literal into milliseconds.
///
/// # Errors
/// [`DurationError`] for anything but the grammar of the module docs.
pub fn parse_millis(text: &str) -> Result<u64, DurationError> {
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    let bytes = text.as_bytes();
    let mut pos = 0;
    let mut total: u64 = 0;
    // Index in UNITS of the smallest unit seen so far; the next one must be smaller.
    let mut last: Option<usize> = None;
    while pos < bytes.len() {
        let digits_start = pos;
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        if pos == digits_start {
            return Err(DurationError::Syntax);
        }
        let number: u64 = text[digits_start..pos]
            .parse()
            .map_err(|_| DurationError::Overflow)?;
        let unit_start = pos;
        while pos < bytes.len() && bytes[pos].is_ascii_alphabetic() {
            pos += 1;
        }
        let unit = &text[unit_start..pos];
        if unit.is_empty() {
            return Err(if pos == bytes.len() {
                DurationError::MissingUnit
            } else {
                DurationError::Syntax
            });
        }
        let Some(index) = UNITS.iter().position(|(u, _)| *u == unit) else {
            return Err(DurationError::UnknownUnit(unit.to_owned()));
        };
        if last.is_some_and(|l| index <= l) {
            return Err(DurationError::Order(unit.to_owned()));
        }
        last = Some(index);
        let millis = number
            .checked_mul(UNITS[index].1)
            .ok_or(DurationError::Overflow)?;
        total = total.checked_add(millis).ok_or(DurationError::Overflow)?;
    }
    Ok(total)
}

/// `ms` milliseconds as the shortest literal of the grammar (`"1h30m"`,
/// `"0s"`), the text [`parse_millis`] reads back.
pub fn literal(ms: u64) -> String {
    if ms == 0 {
        return "0s".to_owned();
    }
    let mut rest = ms;
    let mut out = String::new();
    for (unit, size) in UNITS {
        if rest >= size {
            out.push_str(&format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    out
}

/// A duration given in an attribute, with the span of its literal.
#[derive(Debug, Clone, Copy)]
pub struct DurationLit {
    /// The duration in milliseconds.
    pub millis: u64,
    /// Where the literal is.
    pub span: Span,
}

impl FromMeta for DurationLit {
    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        match expr {
            Expr::Lit(lit) => match &lit.lit {
                Lit::Str(s) => match parse_millis(&s.value()) {
                    Ok(millis) => Ok(DurationLit {
                        millis,
                        span: s.span(),
                    }),
                    Err(e) => Err(darling::Error::custom(format!(
                        "invalid duration {:?}: {e}; write e.g. \"500ms\", \"30s\", \"10m\" or \"1h30m\" (units d, h, m, s, ms)",
                        s.value()
                    ))
                    .with_span(s)),
                },
                other => Err(darling::Error::custom(
                    "a duration is a string literal, e.g. \"30s\" or \"1h30m\"",
                )
                .with_span(other)),
            },
            Expr::Group(group) => Self::from_expr(&group.expr),
            other => Err(darling::Error::custom(
                "a duration is a string literal, e.g. \"30s\" or \"1h30m\"",
            )
            .with_span(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_the_documented_forms() {
        assert_eq!(parse_millis("500ms"), Ok(500));
        assert_eq!(parse_millis("30s"), Ok(30_000));
        assert_eq!(parse_millis("10m"), Ok(600_000));
        assert_eq!(parse_millis("1h30m"), Ok(5_400_000));
        assert_eq!(parse_millis("2d"), Ok(172_800_000));
        assert_eq!(parse_millis("1d2h3m4s5ms"), Ok(93_784_005));
        assert_eq!(parse_millis("0s"), Ok(0));
    }

    #[test]
    fn refuses_garbage() {
        assert_eq!(parse_millis(""), Err(DurationError::Empty));
        assert_eq!(parse_millis("10"), Err(DurationError::MissingUnit));
        assert_eq!(parse_millis("s"), Err(DurationError::Syntax));
        assert_eq!(parse_millis("1 s"), Err(DurationError::Syntax));
        assert_eq!(parse_millis("-1s"), Err(DurationError::Syntax));
        assert_eq!(parse_millis("1.5s"), Err(DurationError::Syntax));
        assert_eq!(parse_millis("10 minutes"), Err(DurationError::Syntax));
        assert_eq!(
            parse_millis("10min"),
            Err(DurationError::UnknownUnit("min".into()))
        );
        assert_eq!(parse_millis("30m1h"), Err(DurationError::Order("h".into())));
        assert_eq!(parse_millis("1s1s"), Err(DurationError::Order("s".into())));
        assert_eq!(
            parse_millis("99999999999999999999s"),
            Err(DurationError::Overflow)
        );
        assert_eq!(
            parse_millis("999999999999999d"),
            Err(DurationError::Overflow)
        );
    }

    #[test]
    fn literals_use_the_largest_units() {
        assert_eq!(literal(5_400_000), "1h30m");
        assert_eq!(literal(1_500), "1s500ms");
        assert_eq!(literal(86_400_000), "1d");
        assert_eq!(literal(0), "0s");
    }

    fn render(parts: &[(usize, u32)]) -> String {
        parts
            .iter()
            .map(|(unit, n)| format!("{n}{}", UNITS[*unit].0))
            .collect()
    }

    proptest! {
        /// Any descending combination of units parses to the sum of its parts.
        #[test]
        fn descending_components_add_up(
            picks in proptest::collection::btree_map(0usize..5, 0u32..100_000, 1..=5)
        ) {
            let parts: Vec<(usize, u32)> = picks.into_iter().collect();
            let expected: u64 = parts.iter().map(|(u, n)| u64::from(*n) * UNITS[*u].1).sum();
            prop_assert_eq!(parse_millis(&render(&parts)), Ok(expected));
        }

        /// Components in any other order are refused.
        #[test]
        fn out_of_order_components_are_refused(
            picks in proptest::collection::btree_map(0usize..5, 0u32..1000, 2..=5)
        ) {
            let mut parts: Vec<(usize, u32)> = picks.into_iter().collect();
            parts.reverse();
            prop_assert!(matches!(parse_millis(&render(&parts)), Err(DurationError::Order(_))));
        }

        /// A literal reads back as the duration it was written from.
        #[test]
        fn literals_read_back(ms in any::<u64>()) {
            prop_assert_eq!(parse_millis(&literal(ms)), Ok(ms));
        }

        /// The parser never panics, whatever the text.
        #[test]
        fn never_panics(text in ".{0,20}") {
            let _ = parse_millis(&text);
        }
    }
}
