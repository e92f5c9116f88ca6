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

    /// Every non-empty set of units, largest first, each with a value from
    /// `values`: the combinations, as `(unit index, value)` lists.
    fn combinations(values: &[u32]) -> Vec<Vec<(usize, u32)>> {
        let mut all = Vec::new();
        for mask in 1u32..(1 << UNITS.len()) {
            let units: Vec<usize> = (0..UNITS.len()).filter(|u| mask & (1 << u) != 0).collect();
            let mut picks: Vec<Vec<(usize, u32)>> = vec![Vec::new()];
            for unit in units {
                picks = picks
                    .into_iter()
                    .flat_map(|p| {
                        values.iter().map(move |v| {
                            let mut p = p.clone();
                            p.push((unit, *v));
                            p
                        })
                    })
                    .collect();
            }
            all.extend(picks);
        }
        all
    }

    /// A fixed sequence of pseudo-random numbers (xorshift), so that a
    /// failure names the same inputs on every run.
    fn sweep(count: usize) -> impl Iterator<Item = u64> {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        std::iter::repeat_with(move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })
        .take(count)
    }

    // These were property tests; they are exhaustive over a grid (and a
    // fixed sweep) instead, so that this proc-macro crate needs no
    // dev-dependency: cargo resolves a proc-macro's dev-dependencies for
    // the host and would build them a second time in every test build.

    /// Any descending combination of units parses to the sum of its parts
    /// (all 3,124 combinations of the units with the values below).
    #[test]
    fn descending_components_add_up() {
        let combinations = combinations(&[0, 1, 59, 99_999]);
        assert_eq!(combinations.len(), 3_124);
        for parts in combinations {
            let expected: u64 = parts.iter().map(|(u, n)| u64::from(*n) * UNITS[*u].1).sum();
            assert_eq!(parse_millis(&render(&parts)), Ok(expected), "{parts:?}");
        }
    }

    /// Components in any other order are refused.
    #[test]
    fn out_of_order_components_are_refused() {
        for mut parts in combinations(&[0, 7, 999])
            .into_iter()
            .filter(|p| p.len() >= 2)
        {
            parts.reverse();
            let text = render(&parts);
            assert!(
                matches!(parse_millis(&text), Err(DurationError::Order(_))),
                "{text}"
            );
        }
    }

    /// A literal reads back as the duration it was written from: the
    /// edges, every unit's multiples around it, and a fixed sweep.
    #[test]
    fn literals_read_back() {
        let edges = [0, 1, 999, 1_000, 59_999, 60_000, u64::MAX - 1, u64::MAX];
        let around_units = UNITS
            .iter()
            .flat_map(|(_, ms)| [ms - 1, *ms, ms + 1, ms * 7 + 3]);
        let small = sweep(20_000).map(|x| x % 10_000_000_000);
        for ms in edges
            .into_iter()
            .chain(around_units)
            .chain(sweep(20_000))
            .chain(small)
        {
            assert_eq!(parse_millis(&literal(ms)), Ok(ms), "{}", literal(ms));
        }
    }

    /// The parser never panics, whatever the text: every string of up to
    /// three characters from an alphabet of digits, units, signs and
    /// other bytes, and a fixed sweep of longer ones.
    #[test]
    fn never_panics() {
        let alphabet: Vec<char> = "0159dhmsx .-+_\u{e9}\u{0}".chars().collect();
        let mut texts = vec![String::new()];
        for _ in 0..3 {
            let longer: Vec<String> = texts
                .iter()
                .filter(|t| t.chars().count() == texts.last().map_or(0, |l| l.chars().count()))
                .flat_map(|t| alphabet.iter().map(move |c| format!("{t}{c}")))
                .collect();
            texts.extend(longer);
        }
        for seed in sweep(5_000) {
            let len = (seed % 20) as usize;
            let text: String = sweep(len)
                .map(|x| alphabet[((x ^ seed) % alphabet.len() as u64) as usize])
                .collect();
            texts.push(text);
        }
        for text in &texts {
            let _ = parse_millis(text);
        }
        assert!(texts.len() > 5_000);
    }
}
