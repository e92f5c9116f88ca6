//! The rows of `get` and `watch` for people: aligned columns, times as
//! spans from now. Pure.

use std::fmt::Write as _;

use fsm_core::Timestamp;
use fsm_core::text::human_duration;

use fsm_kube::records::rows::Row;

/// The longest last error a table shows; the rest is cut with `…`.
const ERROR_WIDTH: usize = 60;

/// The header and cells of `rows` as of `now`, with a `NAMESPACE` column
/// first when `namespaces`.
fn cells(rows: &[Row], now: Timestamp, namespaces: bool) -> Vec<Vec<String>> {
    let mut header = vec![
        "NAME",
        "STATE",
        "ATTEMPT",
        "IN-STATE",
        "NEXT-RETRY",
        "LAST-ERROR",
    ];
    if namespaces {
        header.insert(0, "NAMESPACE");
    }
    let mut out = vec![header.into_iter().map(str::to_owned).collect()];
    for row in rows {
        out.push(line(row, now, namespaces));
    }
    out
}

/// One row's cells as of `now`.
fn line(row: &Row, now: Timestamp, namespaces: bool) -> Vec<String> {
    let state = match (&row.state, row.compensating) {
        (Some(state), false) => state.clone(),
        (Some(state), true) => format!("{state}(compensating)"),
        (None, _) => "<none>".to_owned(),
    };
    let in_state = row.entered_at.map_or_else(
        || "-".to_owned(),
        |at| human_duration(now.duration_since(at).unsigned_abs()),
    );
    let next = match row.next_attempt_at {
        None => "-".to_owned(),
        Some(at) if at > now => format!(
            "in {}",
            human_duration(at.duration_since(now).unsigned_abs())
        ),
        Some(_) => "due".to_owned(),
    };
    let error = row
        .problem
        .as_deref()
        .or(row.last_error.as_deref())
        .map_or_else(|| "-".to_owned(), shorten);
    let mut cells = vec![
        row.name.clone(),
        state,
        row.attempt.to_string(),
        in_state,
        next,
        error,
    ];
    if namespaces {
        cells.insert(0, row.namespace.clone().unwrap_or_default());
    }
    cells
}

/// `text` on one line, at most [`ERROR_WIDTH`] characters.
fn shorten(text: &str) -> String {
    // Line breaks and tabs become spaces; any other control character
    // (an escape sequence) and bidirectional override is escaped.
    let spaced: String = text
        .chars()
        .map(|c| {
            if matches!(c, '\n' | '\r' | '\t') {
                ' '
            } else {
                c
            }
        })
        .collect();
    let flat = fsm_core::text::terminal_safe(&spaced).into_owned();
    if flat.chars().count() <= ERROR_WIDTH {
        flat
    } else {
        let mut cut: String = flat.chars().take(ERROR_WIDTH - 1).collect();
        cut.push('…');
        cut
    }
}

/// Cells as a table: columns three spaces apart, the last not padded.
fn align(cells: &[Vec<String>]) -> String {
    let columns = cells.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            cells
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in cells {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}   ", width = widths[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `get`'s table of `rows` as of `now`, as kubectl prints one:
///
/// ```text
/// NAME   STATE     ATTEMPT   IN-STATE   NEXT-RETRY   LAST-ERROR
/// j1     Done      0         5m12s      -            -
/// j2     Pending   2         40s        in 8s        connection refused
/// ```
pub fn render(rows: &[Row], now: Timestamp, namespaces: bool) -> String {
    if rows.is_empty() {
        return "No resources found.\n".to_owned();
    }
    align(&cells(rows, now, namespaces))
}

/// `watch`'s line for `row` as of `now`: the time, then the row's cells
/// one space apart (a stream cannot align its columns in advance).
pub fn watch_line(row: &Row, now: Timestamp, namespaces: bool) -> String {
    let time = now.strftime("%H:%M:%S");
    format!("{time} {}\n", line(row, now, namespaces).join(" "))
}

/// `watch`'s header.
pub fn watch_header(namespaces: bool) -> String {
    format!(
        "TIME {}\n",
        cells(&[], Timestamp::UNIX_EPOCH, namespaces)[0].join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn rows() -> Vec<Row> {
        vec![
            Row {
                name: "j1".into(),
                namespace: Some("a".into()),
                state: Some("Done".into()),
                attempt: 0,
                entered_at: Some(t("2026-01-01T00:00:00Z")),
                next_attempt_at: None,
                last_error: None,
                compensating: false,
                problem: None,
            },
            Row {
                name: "job-two".into(),
                namespace: Some("b".into()),
                state: Some("Pending".into()),
                attempt: 2,
                entered_at: Some(t("2026-01-01T00:04:32Z")),
                next_attempt_at: Some(t("2026-01-01T00:05:20Z")),
                last_error: Some("connection\nrefused".into()),
                compensating: true,
                problem: None,
            },
            Row::without_record("j3", Some("b"), "no record yet".into()),
        ]
    }

    #[test]
    fn escape_sequences_in_an_error_are_escaped_not_sent_to_the_terminal() {
        let mut hostile = rows();
        hostile[1].last_error = Some("\u{1b}]0;pwned\u{7}\u{1b}[2Jgone".into());
        let text = render(&hostile, t("2026-01-01T00:05:12Z"), false);
        assert!(
            !text.chars().any(|c| c != '\n' && c.is_control()),
            "{text:?}"
        );
        assert!(text.contains("\\u{1b}]0;pwned\\u{7}"), "{text}");
    }

    #[test]
    fn the_table_aligns_columns_and_shows_spans_from_now() {
        let text = render(&rows(), t("2026-01-01T00:05:12Z"), false);
        assert_eq!(
            text,
            "\
NAME      STATE                   ATTEMPT   IN-STATE   NEXT-RETRY   LAST-ERROR
j1        Done                    0         5m12s      -            -
job-two   Pending(compensating)   2         40s        in 8s        connection refused
j3        <none>                  0         -          -            no record yet
"
        );
    }

    #[test]
    fn all_namespaces_adds_a_column_and_due_retries_say_so() {
        let text = render(&rows()[1..2], t("2026-01-01T00:06:00Z"), true);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("NAMESPACE   NAME"), "{text}");
        assert!(lines[1].starts_with("b           job-two"), "{text}");
        assert!(lines[1].contains(" due "), "{text}");
    }

    #[test]
    fn long_errors_are_cut() {
        let long = "x".repeat(100);
        let cut = shorten(&long);
        assert_eq!(cut.chars().count(), ERROR_WIDTH);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn watch_lines_carry_the_time() {
        let line = watch_line(&rows()[0], t("2026-01-01T10:11:12Z"), false);
        assert_eq!(line, "10:11:12 j1 Done 0 10h11m - -\n");
        assert_eq!(
            watch_header(false),
            "TIME NAME STATE ATTEMPT IN-STATE NEXT-RETRY LAST-ERROR\n"
        );
    }

    #[test]
    fn no_rows_say_so() {
        assert_eq!(
            render(&[], t("2026-01-01T00:00:00Z"), false),
            "No resources found.\n"
        );
    }
}
