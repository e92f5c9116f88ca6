//! CronJob schedules as kube-controller-manager 1.20 reads them: the
//! parser of robfig/cron v1 (`cron.ParseStandard`, the version 1.20
//! vendors) and its `Next`, in UTC, on whole seconds since the Unix epoch
//! (the API's times have no fraction).
//!
//! - Five fields (minute, hour, day of month, month, day of week), each a
//!   comma-separated list of `*` (or `?`), `n`, `a-b`, with an optional
//!   `/step` (`n/step` runs from `n` to the field's maximum); months and
//!   weekdays also by their three-letter English names, in any case;
//!   weekdays 0 (Sunday) to 6.
//! - The descriptors `@yearly`/`@annually`, `@monthly`, `@weekly`,
//!   `@daily`/`@midnight`, `@hourly`, and `@every D` (a Go duration,
//!   rounded down to whole seconds, at least one second).
//! - When both the day of month and the day of week are restricted (neither
//!   starts with `*`), a day matching either runs; otherwise both must.
//!
//! The errors are robfig's messages, which the API server's validation
//! and the controller's Events quote.

/// The bit a field written with `*` (or `?`) carries, as robfig's `starBit`.
const STAR: u64 = 1 << 63;

/// A field's bounds and names.
struct Bounds {
    min: u32,
    max: u32,
    names: &'static [(&'static str, u32)],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DAYS_OF_MONTH: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DAYS_OF_WEEK: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

/// A schedule that does not parse, with robfig's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(String);

/// A parsed schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// Five fields (or a descriptor other than `@every`): one bit per
    /// allowed value, [`STAR`] when written with `*`. Seconds are always 0.
    Spec {
        minute: u64,
        hour: u64,
        dom: u64,
        month: u64,
        dow: u64,
    },
    /// `@every D`: this many seconds after the previous time.
    Every(i64),
}

impl Schedule {
    /// Parses `spec` as `cron.ParseStandard` does.
    ///
    /// # Errors
    /// robfig's message for a spec that does not parse.
    pub fn parse(spec: &str) -> Result<Self, ScheduleError> {
        if spec.is_empty() {
            return Err(ScheduleError("Empty spec string".into()));
        }
        if spec.starts_with('@') {
            return descriptor(spec);
        }
        let fields: Vec<&str> = spec.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(ScheduleError(format!(
                "Expected exactly 5 fields, found {}: {spec}",
                fields.len()
            )));
        }
        Ok(Schedule::Spec {
            minute: field(fields[0], &MINUTES)?,
            hour: field(fields[1], &HOURS)?,
            dom: field(fields[2], &DAYS_OF_MONTH)?,
            month: field(fields[3], &MONTHS)?,
            dow: field(fields[4], &DAYS_OF_WEEK)?,
        })
    }

    /// The first time after `t` (Unix seconds) the schedule runs, as
    /// robfig's `Next`; `None` where it returns the zero time (nothing
    /// within five years).
    #[must_use]
    pub fn next(&self, t: i64) -> Option<i64> {
        match *self {
            Schedule::Every(delay) => Some(t + delay),
            Schedule::Spec {
                minute,
                hour,
                dom,
                month,
                dow,
            } => spec_next(t, [minute, hour, dom, month, dow]),
        }
    }
}

fn descriptor(spec: &str) -> Result<Schedule, ScheduleError> {
    let all = |b: &Bounds| bits(b.min, b.max, 1) | STAR;
    let spec_of = |minute, hour, dom, month, dow| Schedule::Spec {
        minute,
        hour,
        dom,
        month,
        dow,
    };
    let first = |b: &Bounds| 1u64 << b.min;
    Ok(match spec {
        "@yearly" | "@annually" => spec_of(
            first(&MINUTES),
            first(&HOURS),
            first(&DAYS_OF_MONTH),
            first(&MONTHS),
            all(&DAYS_OF_WEEK),
        ),
        "@monthly" => spec_of(
            first(&MINUTES),
            first(&HOURS),
            first(&DAYS_OF_MONTH),
            all(&MONTHS),
            all(&DAYS_OF_WEEK),
        ),
        "@weekly" => spec_of(
            first(&MINUTES),
            first(&HOURS),
            all(&DAYS_OF_MONTH),
            all(&MONTHS),
            first(&DAYS_OF_WEEK),
        ),
        "@daily" | "@midnight" => spec_of(
            first(&MINUTES),
            first(&HOURS),
            all(&DAYS_OF_MONTH),
            all(&MONTHS),
            all(&DAYS_OF_WEEK),
        ),
        "@hourly" => spec_of(
            first(&MINUTES),
            all(&HOURS),
            all(&DAYS_OF_MONTH),
            all(&MONTHS),
            all(&DAYS_OF_WEEK),
        ),
        _ => {
            let Some(duration) = spec.strip_prefix("@every ") else {
                return Err(ScheduleError(format!("Unrecognized descriptor: {spec}")));
            };
            let nanos = go_duration(duration)
                .map_err(|e| ScheduleError(format!("Failed to parse duration {spec}: {e}")))?;
            // cron.Every: at least a second, rounded down to seconds.
            let nanos = nanos.max(NANOS_PER_SECOND);
            Schedule::Every(i64::try_from(nanos / NANOS_PER_SECOND).unwrap_or(i64::MAX))
        }
    })
}

/// One field: the union of its comma-separated ranges.
fn field(text: &str, bounds: &Bounds) -> Result<u64, ScheduleError> {
    let mut all = 0;
    for expr in text.split(',').filter(|e| !e.is_empty()) {
        all |= range(expr, bounds)?;
    }
    Ok(all)
}

/// `*`, `n`, `a-b`, each with an optional `/step`, as robfig's `getRange`.
fn range(expr: &str, b: &Bounds) -> Result<u64, ScheduleError> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end, extra) = if low_and_high[0] == "*" || low_and_high[0] == "?" {
        (i64::from(b.min), i64::from(b.max), STAR)
    } else {
        let start = int_or_name(low_and_high[0], b)?;
        let end = match low_and_high.len() {
            1 => start,
            2 => int_or_name(low_and_high[1], b)?,
            _ => return Err(ScheduleError(format!("Too many hyphens: {expr}"))),
        };
        (start, end, 0)
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = int(range_and_step[1])?;
            if single {
                end = i64::from(b.max);
            }
            step
        }
        _ => return Err(ScheduleError(format!("Too many slashes: {expr}"))),
    };
    if start < i64::from(b.min) {
        return Err(ScheduleError(format!(
            "Beginning of range ({start}) below minimum ({}): {expr}",
            b.min
        )));
    }
    if end > i64::from(b.max) {
        return Err(ScheduleError(format!(
            "End of range ({end}) above maximum ({}): {expr}",
            b.max
        )));
    }
    if start > end {
        return Err(ScheduleError(format!(
            "Beginning of range ({start}) beyond end of range ({end}): {expr}"
        )));
    }
    if step == 0 {
        return Err(ScheduleError(format!(
            "Step of range should be a positive number: {expr}"
        )));
    }
    // Bounded by the field's maximum (at most 59) above.
    let (start, end) = (start.unsigned_abs() as u32, end.unsigned_abs() as u32);
    Ok(bits(start, end, step.unsigned_abs()) | extra)
}

fn int_or_name(expr: &str, b: &Bounds) -> Result<i64, ScheduleError> {
    let lower = expr.to_ascii_lowercase();
    match b.names.iter().find(|(name, _)| *name == lower) {
        Some((_, value)) => Ok(i64::from(*value)),
        None => int(expr),
    }
}

/// Go's `strconv.Atoi`, then robfig's refusal of a negative number.
fn int(expr: &str) -> Result<i64, ScheduleError> {
    let digits = expr.strip_prefix(['+', '-']).unwrap_or(expr);
    let syntax = digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit());
    let parsed = expr.parse::<i64>();
    let num = match parsed {
        Ok(n) if !syntax => n,
        _ => {
            let why = if syntax {
                "invalid syntax"
            } else {
                "value out of range"
            };
            return Err(ScheduleError(format!(
                "Failed to parse int from {expr}: strconv.Atoi: parsing \"{expr}\": {why}"
            )));
        }
    };
    if num < 0 {
        return Err(ScheduleError(format!(
            "Negative number ({num}) not allowed: {expr}"
        )));
    }
    Ok(num)
}

/// The bits from `min` to `max` every `step`.
fn bits(min: u32, max: u32, step: u64) -> u64 {
    let mut out = 0u64;
    let mut i = u64::from(min);
    while i <= u64::from(max) {
        out |= 1 << i;
        i += step;
    }
    out
}

const NANOS_PER_SECOND: i128 = 1_000_000_000;

/// Go's `time.ParseDuration`, in nanoseconds, with its messages.
fn go_duration(text: &str) -> Result<i128, String> {
    let invalid = || format!("time: invalid duration \"{text}\"");
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let whole_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let whole = &rest[..whole_len];
        rest = &rest[whole_len..];
        let mut fraction = "";
        if let Some(after) = rest.strip_prefix('.') {
            let len = after.bytes().take_while(u8::is_ascii_digit).count();
            fraction = &after[..len];
            rest = &after[len..];
        }
        if whole.is_empty() && fraction.is_empty() {
            return Err(invalid());
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(rest.len(), |(i, _)| i);
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale: i128 = match unit {
            "" => return Err(format!("time: missing unit in duration \"{text}\"")),
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => NANOS_PER_SECOND,
            "m" => 60 * NANOS_PER_SECOND,
            "h" => 3_600 * NANOS_PER_SECOND,
            other => {
                return Err(format!(
                    "time: unknown unit \"{other}\" in duration \"{text}\""
                ));
            }
        };
        let whole: i128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| invalid())?
        };
        let mut value = whole.checked_mul(scale).ok_or_else(invalid)?;
        if !fraction.is_empty() {
            let digits: i128 = fraction.parse().map_err(|_| invalid())?;
            let denominator = 10i128
                .checked_pow(u32::try_from(fraction.len()).map_err(|_| invalid())?)
                .ok_or_else(invalid)?;
            value += digits * scale / denominator;
        }
        total = total.checked_add(value).ok_or_else(invalid)?;
        if total > i128::from(i64::MAX) {
            return Err(invalid());
        }
    }
    Ok(if negative { -total } else { total })
}

/// A UTC date and time of day.
#[derive(Debug, Clone, Copy)]
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    weekday: u32,
}

const DAY: i64 = 86_400;

/// Days since 1970-01-01 of a date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil(t: i64) -> Civil {
    let days = t.div_euclid(DAY);
    let secs = t.rem_euclid(DAY);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let small = |v: i64| u32::try_from(v).unwrap_or(0);
    Civil {
        year,
        month: small(month),
        day: small(day),
        hour: small(secs / 3600),
        minute: small(secs % 3600 / 60),
        // 1970-01-01 was a Thursday (4).
        weekday: small((days + 4).rem_euclid(7)),
    }
}

fn has(field: u64, value: u32) -> bool {
    value < 64 && field & (1 << value) != 0
}

/// robfig's `SpecSchedule.Next` for a schedule whose seconds are always 0:
/// from the second after `t`, the first month, day, hour and minute that
/// match, wrapping to the next year; `None` past five years.
fn spec_next(t: i64, [minute, hour, dom, month, dow]: [u64; 5]) -> Option<i64> {
    let day_matches = |c: &Civil| {
        let (dom_match, dow_match) = (has(dom, c.day), has(dow, c.weekday));
        if dom & STAR != 0 || dow & STAR != 0 {
            dom_match && dow_match
        } else {
            dom_match || dow_match
        }
    };
    let mut t = t + 1;
    let mut added = false;
    let year_limit = civil(t).year + 5;
    'wrap: loop {
        let mut c = civil(t);
        if c.year > year_limit {
            return None;
        }
        while !has(month, c.month) {
            if !added {
                added = true;
                t = days_from_civil(c.year, c.month, 1) * DAY;
            }
            let c1 = civil(t);
            let (y, m) = if c1.month == 12 {
                (c1.year + 1, 1)
            } else {
                (c1.year, c1.month + 1)
            };
            t = days_from_civil(y, m, c1.day) * DAY + t.rem_euclid(DAY);
            c = civil(t);
            if c.month == 1 {
                continue 'wrap;
            }
        }
        while !day_matches(&c) {
            if !added {
                added = true;
                t -= t.rem_euclid(DAY);
            }
            t += DAY;
            c = civil(t);
            if c.day == 1 {
                continue 'wrap;
            }
        }
        while !has(hour, c.hour) {
            if !added {
                added = true;
                t -= t.rem_euclid(3600);
            }
            t += 3600;
            c = civil(t);
            if c.hour == 0 {
                continue 'wrap;
            }
        }
        while !has(minute, c.minute) {
            if !added {
                added = true;
                t -= t.rem_euclid(60);
            }
            t += 60;
            c = civil(t);
            if c.minute == 0 {
                continue 'wrap;
            }
        }
        // Seconds: only 0 is allowed, so robfig's loop over them always
        // ends at the next minute and starts over.
        if t.rem_euclid(60) != 0 {
            added = true;
            t += 60 - t.rem_euclid(60);
            continue 'wrap;
        }
        return Some(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> i64 {
        text.parse::<jiff::Timestamp>().expect("a time").as_second()
    }

    fn show(t: i64) -> String {
        crate::time::timestamp(jiff::Timestamp::from_second(t).expect("in range"))
    }

    /// The next `n` times after `from`.
    fn runs(spec: &str, from: &str, n: usize) -> Vec<String> {
        let schedule = Schedule::parse(spec).expect("parses");
        let mut t = at(from);
        (0..n)
            .map(|_| {
                t = schedule.next(t).expect("a next time");
                show(t)
            })
            .collect()
    }

    #[test]
    fn every_minute_and_steps() {
        assert_eq!(
            runs("*/1 * * * *", "2026-12-02T18:30:25Z", 2),
            ["2026-12-02T18:31:00Z", "2026-12-02T18:32:00Z"]
        );
        assert_eq!(
            runs("*/1 * * * *", "2026-12-02T18:31:00Z", 1),
            ["2026-12-02T18:32:00Z"],
            "strictly after"
        );
        assert_eq!(
            runs("*/15 * * * *", "2026-12-02T18:31:00Z", 3),
            [
                "2026-12-02T18:45:00Z",
                "2026-12-02T19:00:00Z",
                "2026-12-02T19:15:00Z"
            ]
        );
        assert_eq!(
            runs("5/20 * * * *", "2026-12-02T18:31:00Z", 3),
            [
                "2026-12-02T18:45:00Z",
                "2026-12-02T19:05:00Z",
                "2026-12-02T19:25:00Z"
            ],
            "n/step runs to the maximum"
        );
        assert_eq!(
            runs("10-20/5,50 3 * * *", "2026-12-02T18:31:00Z", 5),
            [
                "2026-12-03T03:10:00Z",
                "2026-12-03T03:15:00Z",
                "2026-12-03T03:20:00Z",
                "2026-12-03T03:50:00Z",
                "2026-12-04T03:10:00Z"
            ]
        );
    }

    #[test]
    fn names_months_and_year_wraps() {
        assert_eq!(
            runs("0 0 1 jan,JUL *", "2026-12-02T18:31:00Z", 3),
            [
                "2027-01-01T00:00:00Z",
                "2027-07-01T00:00:00Z",
                "2028-01-01T00:00:00Z"
            ]
        );
        // 2026-12-02 is a Wednesday.
        assert_eq!(
            runs("30 9 * * mon-fri", "2026-12-04T10:00:00Z", 2),
            ["2026-12-07T09:30:00Z", "2026-12-08T09:30:00Z"]
        );
        assert_eq!(
            runs("0 12 29 2 *", "2026-12-02T18:31:00Z", 1),
            ["2028-02-29T12:00:00Z"],
            "the next leap day"
        );
        assert_eq!(
            runs("0 0 31 * *", "2026-12-31T00:00:00Z", 2),
            ["2027-01-31T00:00:00Z", "2027-03-31T00:00:00Z"],
            "months without a 31st are skipped"
        );
    }

    #[test]
    fn a_restricted_day_of_month_or_week_is_either() {
        // The 13th, or any Friday (2026-12-04 is a Friday).
        assert_eq!(
            runs("0 0 13 * 5", "2026-12-02T00:00:00Z", 3),
            [
                "2026-12-04T00:00:00Z",
                "2026-12-11T00:00:00Z",
                "2026-12-13T00:00:00Z"
            ]
        );
        // A star in either: both must match (Fridays the 13th are rare).
        assert_eq!(
            runs("0 0 */1 * 5", "2026-12-02T00:00:00Z", 1),
            ["2026-12-04T00:00:00Z"]
        );
        assert_eq!(
            runs("0 0 13 * *", "2026-12-02T00:00:00Z", 1),
            ["2026-12-13T00:00:00Z"]
        );
    }

    #[test]
    fn descriptors() {
        let from = "2026-12-02T18:31:40Z";
        assert_eq!(runs("@yearly", from, 1), ["2027-01-01T00:00:00Z"]);
        assert_eq!(runs("@annually", from, 1), ["2027-01-01T00:00:00Z"]);
        assert_eq!(runs("@monthly", from, 1), ["2027-01-01T00:00:00Z"]);
        assert_eq!(runs("@weekly", from, 1), ["2026-12-06T00:00:00Z"], "Sunday");
        assert_eq!(runs("@daily", from, 1), ["2026-12-03T00:00:00Z"]);
        assert_eq!(runs("@midnight", from, 1), ["2026-12-03T00:00:00Z"]);
        assert_eq!(runs("@hourly", from, 1), ["2026-12-02T19:00:00Z"]);
        assert_eq!(
            runs("@every 1m30s", from, 2),
            ["2026-12-02T18:33:10Z", "2026-12-02T18:34:40Z"]
        );
        assert_eq!(Schedule::parse("@every 1.5h"), Ok(Schedule::Every(5400)));
        assert_eq!(
            Schedule::parse("@every 1500ms"),
            Ok(Schedule::Every(1)),
            "rounded down"
        );
        assert_eq!(
            Schedule::parse("@every 10ms"),
            Ok(Schedule::Every(1)),
            "at least a second"
        );
    }

    #[test]
    fn nothing_within_five_years_is_none() {
        let never = Schedule::parse("0 0 30 2 *").expect("parses");
        assert_eq!(never.next(at("2026-12-02T00:00:00Z")), None);
    }

    fn error(spec: &str) -> String {
        Schedule::parse(spec).expect_err("refused").to_string()
    }

    #[test]
    fn errors_are_robfigs() {
        assert_eq!(error(""), "Empty spec string");
        assert_eq!(
            error("* * * *"),
            "Expected exactly 5 fields, found 4: * * * *"
        );
        assert_eq!(
            error("0 0 0 * * *"),
            "Expected exactly 5 fields, found 6: 0 0 0 * * *"
        );
        assert_eq!(
            error("60 * * * *"),
            "End of range (60) above maximum (59): 60"
        );
        assert_eq!(
            error("* * 0 * *"),
            "Beginning of range (0) below minimum (1): 0"
        );
        assert_eq!(error("* * * * 7"), "End of range (7) above maximum (6): 7");
        assert_eq!(
            error("5-1 * * * *"),
            "Beginning of range (5) beyond end of range (1): 5-1"
        );
        assert_eq!(
            error("*/0 * * * *"),
            "Step of range should be a positive number: */0"
        );
        assert_eq!(error("1-2-3 * * * *"), "Too many hyphens: 1-2-3");
        assert_eq!(error("*/2/3 * * * *"), "Too many slashes: */2/3");
        assert_eq!(
            error("x * * * *"),
            "Failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax"
        );
        assert_eq!(
            error("* * * foo *"),
            "Failed to parse int from foo: strconv.Atoi: parsing \"foo\": invalid syntax"
        );
        assert_eq!(error("@often"), "Unrecognized descriptor: @often");
        assert_eq!(
            error("@every 1d"),
            "Failed to parse duration @every 1d: time: unknown unit \"d\" in duration \"1d\""
        );
        assert_eq!(
            error("@every 5"),
            "Failed to parse duration @every 5: time: missing unit in duration \"5\""
        );
    }
}
