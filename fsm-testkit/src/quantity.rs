//! `resource.Quantity` in its canonical form, as the real server writes
//! every quantity of a built-in kind back (apimachinery's
//! `Quantity.CanonicalizeBytes`): `1000m` is stored as `1`, `0.5` as
//! `500m`, `1024Mi` as `1Gi`, `1.5` as `1500m`.
//!
//! The rules, from apimachinery:
//! - the format comes from the suffix: binary (`Ki` … `Ei`), decimal
//!   (`n`, `u`, `m`, none, `k`, `M`, `G`, `T`, `P`, `E`) or a decimal
//!   exponent (`e3`, `E-2`);
//! - precision finer than `1n` is rounded up to `1n`;
//! - zero is `0`;
//! - decimal and exponent forms: the number with its trailing zeros
//!   removed, scaled to an exponent that is a multiple of 3, written with
//!   that exponent's suffix (`k`, `m`, …) or as `e<exp>` (none for 0);
//! - a binary value strictly between -1024 and 1024, or that is not a
//!   whole number, is written in the decimal form; otherwise as the
//!   largest power of 1024 that divides it (`1536Mi`, `1Gi`);
//! - but a quantity written in what the parser takes for canonical form
//!   is kept as written (its fast path: a decimal number of at most 18
//!   digits, at a scale that is a multiple of 3 and at least nano, whose
//!   digits neither start with `0` nor end with `000`, such as `1E3`,
//!   `+5` or `1.`; a whole binary number whose value is not a multiple of
//!   8, such as `5Gi`);
//! - a decimal value past `E` (`1000E`) loses its suffix, as apimachinery's
//!   does (`1000E` is written `1`);
//! - in a resource list (a map of quantities: a container's `resources`,
//!   a quota), a value finer than milli is rounded up to milli first (core
//!   v1's `SetDefaults_ResourceList`): `0.1Ki` is `102400m`.
//!
//! # Caveats
//! A value whose digits do not fit 38 decimal digits (far beyond what a
//! Kubernetes quantity holds) is left as written.

/// The syntax every quantity must have, as the real server words it.
pub const QUANTITY_SYNTAX: &str = "quantities must match the regular expression \
    '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// The form a quantity is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    BinarySi,
    DecimalSi,
    DecimalExponent,
}

/// A parsed quantity: `mantissa × 10^exponent`, its format, and whether
/// the parser keeps the text as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Quantity {
    mantissa: i128,
    exponent: i32,
    format: Format,
    keeps_text: bool,
}

/// How the server writes `text` back, or `None` when it is no quantity
/// (see [`QUANTITY_SYNTAX`]). A quantity too large to canonicalise here
/// is returned as written.
pub fn canonical(text: &str) -> Option<String> {
    written(text, false)
}

/// [`canonical`] for a value of a resource list: rounded up to milli first.
pub fn canonical_in_resource_list(text: &str) -> Option<String> {
    written(text, true)
}

/// How two quantities compare by value (`Quantity.Cmp`), or `None` when
/// either is no quantity or too large to compare here.
#[must_use]
pub fn compare(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    let (Parsed::Quantity(a), Parsed::Quantity(b)) = (parse(a.trim()), parse(b.trim())) else {
        return None;
    };
    let exponent = a.exponent.min(b.exponent);
    let scaled = |q: Quantity| {
        u32::try_from(q.exponent - exponent)
            .ok()
            .and_then(|p| 10i128.checked_pow(p))
            .and_then(|f| q.mantissa.checked_mul(f))
    };
    Some(scaled(a)?.cmp(&scaled(b)?))
}

fn written(text: &str, resource_list: bool) -> Option<String> {
    let trimmed = text.trim();
    match parse(trimmed) {
        Parsed::Quantity(mut q) => {
            if resource_list && q.exponent < -3 {
                round_up(&mut q, -3);
            }
            if q.keeps_text {
                Some(trimmed.to_owned())
            } else {
                Some(format(q))
            }
        }
        Parsed::TooLarge => Some(trimmed.to_owned()),
        Parsed::Invalid => None,
    }
}

/// Rounds `q` up (away from zero) to `10^exponent`, when it is finer.
fn round_up(q: &mut Quantity, exponent: i32) {
    if q.exponent >= exponent {
        return;
    }
    q.keeps_text = false;
    match u32::try_from(exponent - q.exponent)
        .ok()
        .and_then(|p| 10i128.checked_pow(p))
    {
        Some(divisor) => {
            let rounded = q.mantissa / divisor;
            q.mantissa = if q.mantissa % divisor == 0 {
                rounded
            } else {
                rounded + q.mantissa.signum()
            };
        }
        None => q.mantissa = q.mantissa.signum(),
    }
    q.exponent = exponent;
}

/// Whether apimachinery's parser keeps `whole.fraction` with a suffix of
/// `format` (times `2^base2` or `10^base10`) as written: its fast path's
/// test for a number already in canonical form.
fn parser_keeps_text(whole: &str, fraction: &str, format: Format, base2: u32, base10: i32) -> bool {
    let digits = whole.len() + fraction.len();
    let shifted = format!("{whole}{fraction}");
    let Ok(value) = shifted.parse::<i64>() else {
        return false;
    };
    match format {
        Format::BinarySi => {
            // 1Mi has about 6 decimal digits: precision as the parser counts it.
            let precision = 15 - digits as i64 - i64::from(base2 * 3 / 10) - 1;
            fraction.is_empty()
                && precision >= 0
                && 1i64
                    .checked_shl(base2)
                    .is_some_and(|f| value.checked_mul(f).is_some())
                && base2.is_multiple_of(10)
                && value & 0x07 != 0
        }
        Format::DecimalSi | Format::DecimalExponent => {
            let Ok(fraction_len) = i32::try_from(fraction.len()) else {
                return false;
            };
            let scale = base10 - fraction_len;
            digits <= 18
                && scale >= -9
                && scale % 3 == 0
                && !shifted.ends_with("000")
                && !shifted.starts_with('0')
        }
    }
}

enum Parsed {
    Quantity(Quantity),
    TooLarge,
    Invalid,
}

fn parse(text: &str) -> Parsed {
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let number_len = rest
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b'.')
        .count();
    let (number, suffix) = rest.split_at(number_len);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return Parsed::Invalid;
    }
    let Some((format, base2, base10)) = suffix_value(suffix) else {
        return Parsed::Invalid;
    };
    let keeps_text = parser_keeps_text(whole, fraction, format, base2, base10);
    let digits = whole.trim_start_matches('0').len() + fraction.len();
    if digits > 36 {
        return Parsed::TooLarge;
    }
    let mut mantissa: i128 = 0;
    for b in whole.bytes().chain(fraction.bytes()) {
        mantissa = mantissa * 10 + i128::from(b - b'0');
    }
    let Ok(fraction_len) = i32::try_from(fraction.len()) else {
        return Parsed::TooLarge;
    };
    let mut exponent = base10 - fraction_len;
    if base2 > 0 {
        let Some(scaled) = 2i128
            .checked_pow(base2)
            .and_then(|f| mantissa.checked_mul(f))
        else {
            return Parsed::TooLarge;
        };
        mantissa = scaled;
    }
    if negative {
        mantissa = -mantissa;
    }
    // Finer than nano: rounded up (away from zero) to nano.
    if exponent < -9 {
        let Some(divisor) = u32::try_from(-9 - exponent)
            .ok()
            .and_then(|p| 10i128.checked_pow(p))
        else {
            // So small a fraction of a nano: one nano (or zero).
            let q = Quantity {
                mantissa: mantissa.signum(),
                exponent: -9,
                format,
                keeps_text: false,
            };
            return Parsed::Quantity(q);
        };
        let rounded = mantissa / divisor;
        mantissa = if mantissa % divisor == 0 {
            rounded
        } else {
            rounded + mantissa.signum()
        };
        exponent = -9;
    }
    Parsed::Quantity(Quantity {
        mantissa,
        exponent,
        format,
        keeps_text,
    })
}

/// The format a suffix gives, and the power of 2 and of 10 it multiplies
/// by.
fn suffix_value(suffix: &str) -> Option<(Format, u32, i32)> {
    let binary = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if let Some(i) = binary.iter().position(|s| *s == suffix) {
        let power = u32::try_from(10 * (i + 1)).ok()?;
        return Some((Format::BinarySi, power, 0));
    }
    let decimal = [
        ("n", -9),
        ("u", -6),
        ("m", -3),
        ("", 0),
        ("k", 3),
        ("M", 6),
        ("G", 9),
        ("T", 12),
        ("P", 15),
        ("E", 18),
    ];
    if let Some((_, power)) = decimal.iter().find(|(s, _)| *s == suffix) {
        return Some((Format::DecimalSi, 0, *power));
    }
    let exponent = suffix
        .strip_prefix('e')
        .or_else(|| suffix.strip_prefix('E'))?;
    let digits = exponent.trim_start_matches(['+', '-']);
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || exponent.len() - digits.len() > 1
    {
        return None;
    }
    Some((Format::DecimalExponent, 0, exponent.parse().ok()?))
}

fn format(q: Quantity) -> String {
    if q.mantissa == 0 {
        return "0".to_owned();
    }
    if q.format == Format::BinarySi
        && let Some(whole) = whole_value(q)
        && !(-1024 < whole && whole < 1024)
    {
        let (mut amount, mut power) = (whole, 0);
        while amount % 1024 == 0 && power < 6 {
            amount /= 1024;
            power += 1;
        }
        let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
        return format!("{amount}{suffix}");
    }
    let (mut amount, mut exponent) = (q.mantissa, q.exponent);
    while amount % 10 == 0 {
        amount /= 10;
        exponent += 1;
    }
    match exponent.rem_euclid(3) {
        1 => {
            amount *= 10;
            exponent -= 1;
        }
        2 => {
            amount *= 100;
            exponent -= 2;
        }
        _ => {}
    }
    if q.format == Format::DecimalExponent {
        return if exponent == 0 {
            amount.to_string()
        } else {
            format!("{amount}e{exponent}")
        };
    }
    // Past `E` apimachinery finds no suffix and writes none: `1000E` is
    // written `1` (kept as it does).
    let suffix = match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => "",
    };
    format!("{amount}{suffix}")
}

/// The quantity as a whole number, when it is one.
fn whole_value(q: Quantity) -> Option<i128> {
    if q.exponent >= 0 {
        let factor = 10i128.checked_pow(u32::try_from(q.exponent).ok()?)?;
        return q.mantissa.checked_mul(factor);
    }
    let divisor = 10i128.checked_pow(u32::try_from(-q.exponent).ok()?)?;
    (q.mantissa % divisor == 0).then_some(q.mantissa / divisor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_written_in_canonical_form() {
        for (written, stored) in [
            ("1000m", "1"),
            ("0.5", "500m"),
            ("1.5", "1500m"),
            ("100m", "100m"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("0.5Ki", "512"),
            ("1Ki", "1Ki"),
            ("1000Ki", "1000Ki"),
            ("2048", "2048"),
            ("1e3", "1e3"),
            ("1E3", "1E3"),
            ("1e1", "10"),
            ("1000k", "1M"),
            ("0.001", "1m"),
            ("0.0000000001", "1n"),
            ("+5", "+5"),
            ("5Gi", "5Gi"),
            ("0.1Ki", "102400m"),
            ("-1000m", "-1"),
            ("0", "0"),
            ("0Gi", "0"),
            ("000.0", "0"),
            ("1.", "1."),
            (".5", "500m"),
            ("12e-3", "12e-3"),
            ("1000E", "1"),
            ("10000E", "10"),
            ("1E", "1E"),
            (" 2 ", "2"),
        ] {
            assert_eq!(canonical(written).as_deref(), Some(stored), "{written}");
        }
    }

    /// What a real kube-apiserver 1.20 stored for a container's CPU limit
    /// (a resource list) written as each of these.
    #[test]
    fn resource_lists_are_rounded_up_to_milli_as_the_real_server_does() {
        for (written, stored) in [
            ("1e3", "1e3"),
            ("12e-3", "12e-3"),
            ("0.1Ki", "102400m"),
            ("1000k", "1M"),
            ("0.0000000001", "1m"),
            ("1E3", "1E3"),
            ("1000E", "1"),
            ("0.5Ki", "512"),
            ("1.5", "1500m"),
            ("100Gi", "100Gi"),
            ("1e1", "10"),
            (".5", "500m"),
            ("1.", "1."),
            ("0.5Gi", "512Mi"),
            ("1536Mi", "1536Mi"),
            ("0Gi", "0"),
            ("000.0", "0"),
            ("+5", "+5"),
            ("10000E", "10"),
            ("1Ki", "1Ki"),
            ("2048", "2048"),
            ("1e-3", "1e-3"),
            ("1.5Gi", "1536Mi"),
            ("0.1", "100m"),
            ("1000m", "1"),
            ("1024Mi", "1Gi"),
        ] {
            assert_eq!(
                canonical_in_resource_list(written).as_deref(),
                Some(stored),
                "{written}"
            );
        }
    }

    #[test]
    fn quantities_compare_by_value() {
        use std::cmp::Ordering::{Equal, Greater, Less};
        assert_eq!(compare("2", "1"), Some(Greater));
        assert_eq!(compare("500m", "1"), Some(Less));
        assert_eq!(compare("1Gi", "1024Mi"), Some(Equal));
        assert_eq!(compare("1G", "1Gi"), Some(Less));
        assert_eq!(compare("x", "1"), None);
    }

    #[test]
    fn what_is_no_quantity_is_refused() {
        for bad in [
            "", "abc", "1.2.3", ".", "1x", "1Kii", "1e", "1e+-3", "--1", "1 m",
        ] {
            assert_eq!(canonical(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn huge_quantities_are_left_as_written() {
        let huge = "9".repeat(40);
        assert_eq!(canonical(&huge).as_deref(), Some(huge.as_str()));
    }
}
