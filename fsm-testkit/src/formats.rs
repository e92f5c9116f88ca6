//! The string `format`s a CRD schema may name, checked as the real server
//! checks them (kube-openapi's `strfmt` registry, itself go-openapi's and
//! govalidator's checks): `date-time`, `date`, `duration`, `uuid`
//! (`uuid3`, `uuid4`, `uuid5`), `hostname`, `email`, `ipv4`, `ipv6`,
//! `cidr`, `mac`, `byte`, `uri`, `hexcolor`, `rgbcolor`, `bsonobjectid`,
//! `password`. Names are compared as the registry compares them: case,
//! `-` and `_` aside (`date-time` is `datetime`).
//!
//! Not checked (accepted whatever they hold): `isbn`, `isbn10`, `isbn13`,
//! `creditcard`, `ssn`, and every format the registry does not know.

use std::net::IpAddr;
use std::sync::LazyLock;

use regex::Regex;

fn re(pattern: &str) -> Regex {
    // The patterns below are constants that compile.
    Regex::new(pattern).unwrap_or_else(|e| panic!("format pattern {pattern:?}: {e}"))
}

static DATE_TIME: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
});
static DATE: LazyLock<Regex> = LazyLock::new(|| re(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"));
static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
    )
});
static UUID: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static UUID3: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID4: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static BASE64: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
});
static GO_DURATION: LazyLock<Regex> =
    LazyLock::new(|| re(r"^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$"));
static LOOSE_DURATION: LazyLock<Regex> = LazyLock::new(|| re(r"((\d+)\s*([A-Za-zµ]+))"));
static HEXCOLOR: LazyLock<Regex> = LazyLock::new(|| re(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGBCOLOR: LazyLock<Regex> = LazyLock::new(|| {
    let c = r"\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*";
    re(&format!(r"^rgb\({c},{c},{c}\)$"))
});

/// Whether `value` is valid for `format`; unknown formats accept anything.
#[must_use]
pub fn is_valid(format: &str, value: &str) -> bool {
    let name: String = format
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect();
    match name.as_str() {
        "datetime" => is_date_time(value),
        "date" => is_date(value),
        "duration" => is_duration(value),
        "uuid" => UUID.is_match(value),
        "uuid3" => UUID3.is_match(value),
        "uuid4" => UUID4.is_match(value),
        "uuid5" => UUID5.is_match(value),
        "hostname" => is_hostname(value),
        "email" => is_email(value),
        "ipv4" => value.parse::<IpAddr>().is_ok() && value.contains('.'),
        "ipv6" => value.parse::<IpAddr>().is_ok() && value.contains(':'),
        "cidr" => is_cidr(value),
        "mac" => is_mac(value),
        "byte" => BASE64.is_match(value),
        "uri" => is_request_uri(value),
        "hexcolor" => HEXCOLOR.is_match(value),
        "rgbcolor" => RGBCOLOR.is_match(value),
        "bsonobjectid" => value.len() == 24 && value.chars().all(|c| c.is_ascii_hexdigit()),
        _ => true,
    }
}

/// go-openapi's `IsDateTime`: a date, a `t`, then a time checked by shape
/// and bounds (not calendar-exact).
fn is_date_time(value: &str) -> bool {
    if value.len() < 4 {
        return false;
    }
    let lower = value.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    DATE_TIME.captures(parts[1]).is_some_and(|m| {
        let at = |i: usize| m.get(i).map_or("", |g| g.as_str());
        at(1) <= "23" && at(2) <= "59" && at(3) <= "59"
    })
}

/// Go's `time.Parse("2006-01-02", …)`.
fn is_date(value: &str) -> bool {
    DATE.is_match(value) && value.parse::<jiff::civil::Date>().is_ok()
}

/// Go's `time.ParseDuration`, else the Scala-like `1 day` forms of
/// go-openapi's `ParseDuration`.
fn is_duration(value: &str) -> bool {
    if matches!(value, "0" | "+0" | "-0") || GO_DURATION.is_match(value) {
        return true;
    }
    const UNITS: [&[&str]; 8] = [
        &["ns", "nano"],
        &["us", "µs", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    LOOSE_DURATION.captures_iter(value).any(|m| {
        let unit = m.get(3).map_or("", |g| g.as_str()).trim().to_lowercase();
        UNITS.iter().any(|variants| {
            let last = variants.len() - 1;
            variants
                .iter()
                .enumerate()
                .any(|(i, v)| (i == last && unit.starts_with(v)) || unit.eq_ignore_ascii_case(v))
        })
    })
}

fn is_hostname(value: &str) -> bool {
    HOSTNAME.is_match(value) && value.len() <= 255 && value.split('.').all(|p| p.len() <= 63)
}

/// Close to Go's `mail.ParseAddress`: `local@domain`, optionally as
/// `Name <local@domain>`.
fn is_email(value: &str) -> bool {
    let address = match (value.rfind('<'), value.strip_suffix('>')) {
        (Some(open), Some(inner)) => &inner[open + 1..],
        _ => value.trim(),
    };
    match address.rsplit_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !address
                    .chars()
                    .any(|c| c.is_whitespace() || c == '<' || c == '>')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
        }
        None => false,
    }
}

fn is_cidr(value: &str) -> bool {
    let Some((ip, bits)) = value.split_once('/') else {
        return false;
    };
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return false;
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    !bits.is_empty()
        && bits.len() <= 3
        && bits.chars().all(|c| c.is_ascii_digit())
        && bits.parse::<u32>().is_ok_and(|b| b <= max)
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets as `01:23:…`, `01-23-…` or
/// `0123.4567.…`.
fn is_mac(value: &str) -> bool {
    let hex = |s: &str, n: usize| s.len() == n && s.chars().all(|c| c.is_ascii_hexdigit());
    let octets_ok = |n: usize| matches!(n, 6 | 8 | 20);
    for sep in [':', '-'] {
        let groups: Vec<&str> = value.split(sep).collect();
        if groups.len() > 1 {
            return octets_ok(groups.len()) && groups.iter().all(|g| hex(g, 2));
        }
    }
    let groups: Vec<&str> = value.split('.').collect();
    groups.len() > 1 && octets_ok(groups.len() * 2) && groups.iter().all(|g| hex(g, 4))
}

/// Go's `url.ParseRequestURI`: an absolute URI (`scheme:…`) or an absolute
/// path.
fn is_request_uri(value: &str) -> bool {
    if value.starts_with('/') {
        return !value.contains(char::is_whitespace);
    }
    let Some((scheme, _)) = value.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !value.contains(char::is_whitespace)
}

#[cfg(test)]
mod tests {
    use super::is_valid;

    #[test]
    fn as_the_real_server_checks_them() {
        let cases = [
            ("date-time", "2020-01-01T00:00:00Z", "yesterday"),
            (
                "date-time",
                "2020-01-01t10:20:30.5+02:00",
                "2020-01-01T24:00:00Z",
            ),
            ("date", "2020-12-01", "2020-13-01"),
            ("uuid", "6b7a3b2e-0000-0000-0000-000000000000", "nope"),
            ("ipv4", "1.2.3.4", "1.2.3"),
            ("ipv6", "::1", "zz"),
            ("cidr", "1.2.3.0/24", "1.2.3.4"),
            ("byte", "aGVsbG8=", "!!"),
            ("hostname", "good.host", "-bad-"),
            ("email", "a@b.c", "nope"),
            ("duration", "1h", "forever"),
            ("duration", "3 days", "days"),
            ("mac", "00:11:22:33:44:55", "zz"),
            ("uri", "https://example.com/x", "not a uri"),
        ];
        for (format, good, bad) in cases {
            assert!(is_valid(format, good), "{format}: {good}");
            assert!(!is_valid(format, bad), "{format}: {bad}");
        }
        assert!(is_valid("foo", "anything"));
        assert!(is_valid("DATE_TIME", "2020-01-01T00:00:00Z"));
    }
}
