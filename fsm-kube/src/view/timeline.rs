//! An object's [`Timeline`] drawn for its page: an SVG chart with a row
//! per state it entered (a bar per stay, as long as the stay; the marks of
//! its failed attempts, timeouts and next attempt on it), a row for the
//! commands people sent and one for the compensation, under an axis of
//! the time since the timeline's start; then the marks as a list, and the
//! compensation chain. Pure.

use std::fmt::Write as _;

use fsm_core::text::escape_markup as escape;
use fsm_core::text::{human_duration, text_width};
use fsm_core::{MachineGraph, MarkKind, Timeline};

/// The chart's width, in SVG user units (the page scales it).
const WIDTH: f64 = 960.0;
/// A row's height, and its bar's.
const ROW_H: f64 = 26.0;
const BAR_H: f64 = 16.0;
/// The axis's height above the rows.
const AXIS_H: f64 = 24.0;
/// The text size of row names, durations and ticks.
const TEXT_SIZE: f64 = 12.0;
/// The least distance between two marks' middles in a row.
const MARK_SPACING: f64 = 11.0;
/// The row of the commands people sent.
const COMMANDS_ROW: &str = "commands";
/// The row of the compensation.
const COMPENSATION_ROW: &str = "compensation";

/// A row of the chart: a state's, the commands' or the compensation's.
struct Rows {
    names: Vec<String>,
}

impl Rows {
    fn of(timeline: &Timeline) -> Self {
        let mut names: Vec<String> = Vec::new();
        for stay in &timeline.stays {
            if !names.contains(&stay.state) {
                names.push(stay.state.clone());
            }
        }
        for mark in &timeline.marks {
            if let Some(state) = &mark.state
                && !names.contains(state)
            {
                names.push(state.clone());
            }
        }
        if timeline.marks.iter().any(|m| m.state.is_none()) {
            names.push(COMMANDS_ROW.to_owned());
        }
        if timeline
            .compensation
            .as_ref()
            .is_some_and(|c| c.from.is_some())
        {
            names.push(COMPENSATION_ROW.to_owned());
        }
        Rows { names }
    }

    /// The top of row `name`'s band.
    fn top(&self, name: &str) -> f64 {
        let at = self.names.iter().position(|n| n == name).unwrap_or(0);
        AXIS_H + ROW_H * at as f64
    }
}

/// The colours of a state's bars: fill and border.
fn colours(graph: &MachineGraph, state: &str) -> (&'static str, &'static str) {
    match graph.state(state) {
        Some(s) if s.failed => ("#f6c9c4", "#b3261e"),
        Some(s) if s.ready => ("#c9e9d0", "#2a7a3a"),
        Some(s) if s.compensated => ("#fde3bf", "#c77800"),
        _ => ("#d3deef", "#456"),
    }
}

/// A mark's symbol at (`x`, `y`), in its colour.
fn symbol(kind: MarkKind, x: f64, y: f64) -> String {
    match kind {
        MarkKind::Error => format!(
            "<path d=\"M{:.1},{:.1} l8,8 m0,-8 l-8,8\" stroke=\"#b3261e\" stroke-width=\"2.4\"/>",
            x - 4.0,
            y - 4.0
        ),
        MarkKind::Timeout => format!(
            "<path d=\"M{x:.1},{:.1} l5,5 l-5,5 l-5,-5 z\" fill=\"#b86e00\"/>",
            y - 5.0
        ),
        MarkKind::NextAttempt => format!(
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"4.5\" fill=\"#fff\" stroke=\"#556\" stroke-width=\"1.6\" stroke-dasharray=\"2 2\"/>"
        ),
        MarkKind::Command => format!(
            "<path d=\"M{x:.1},{:.1} l5,9 l-10,0 z\" fill=\"#2f5fa8\"/>",
            y - 5.0
        ),
        MarkKind::Refused => format!(
            "<path d=\"M{x:.1},{:.1} l5,9 l-10,0 z\" fill=\"#fff\" stroke=\"#2f5fa8\" stroke-width=\"1.6\"/>",
            y - 5.0
        ),
        MarkKind::Moved => format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.5\" fill=\"#667\"/>"),
    }
}

/// The timeline's chart, as an SVG element that scales to its container.
pub(super) fn svg(timeline: &Timeline, graph: &MachineGraph) -> String {
    let rows = Rows::of(timeline);
    let label_w = rows
        .names
        .iter()
        .map(|n| text_width(n, TEXT_SIZE, false))
        .fold(90.0, f64::max)
        + 16.0;
    let (left, right) = (label_w, WIDTH - 16.0);
    let x_of = |at| left + timeline.fraction(at) * (right - left);
    let height = AXIS_H + ROW_H * rows.names.len() as f64 + 8.0;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"fsm-timeline\" viewBox=\"0 0 {WIDTH} {height}\" \
         width=\"{WIDTH}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"{TEXT_SIZE}\">\n"
    );
    // Rows' names and bands.
    for (i, name) in rows.names.iter().enumerate() {
        let top = rows.top(name);
        if i % 2 == 0 {
            let _ = write!(
                out,
                "<rect x=\"0\" y=\"{top:.1}\" width=\"{WIDTH}\" height=\"{ROW_H}\" fill=\"#f5f7fa\"/>"
            );
        }
        let style = if name == COMMANDS_ROW || name == COMPENSATION_ROW {
            " font-style=\"italic\" fill=\"#556\""
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "<text class=\"row\" x=\"8\" y=\"{:.1}\"{style}>{}</text>",
            top + ROW_H / 2.0 + 4.0,
            escape(name)
        );
    }
    // The axis: five ticks, the time since the start.
    let bottom = AXIS_H + ROW_H * rows.names.len() as f64;
    for tick in 0..5 {
        let fraction = f64::from(tick) / 4.0;
        let x = left + fraction * (right - left);
        let span = timeline.end.duration_since(timeline.start).as_secs_f64() * fraction;
        let text = if tick == 0 {
            "+0s".to_owned()
        } else {
            format!(
                "+{}",
                human_duration(std::time::Duration::from_secs_f64(span.max(0.0)))
            )
        };
        let anchor = match tick {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        let _ = writeln!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\" stroke=\"#dde2ea\"/>\
             <text class=\"tick\" x=\"{x:.1}\" y=\"14\" text-anchor=\"{anchor}\" fill=\"#667\">{}</text>",
            AXIS_H - 4.0,
            escape(&text)
        );
    }
    // The stays.
    for stay in &timeline.stays {
        let (x1, x2) = (x_of(stay.from), x_of(stay.until));
        let width = (x2 - x1).max(2.0);
        let y = rows.top(&stay.state) + (ROW_H - BAR_H) / 2.0;
        let (fill, stroke) = colours(graph, &stay.state);
        let duration = human_duration(stay.duration());
        let now = if stay.current { ", now" } else { "" };
        let _ = write!(
            out,
            "<g class=\"stay\" data-state=\"{s}\"><title>#{seq} {s}: {duration}{now}</title>\
             <rect x=\"{x1:.1}\" y=\"{y:.1}\" width=\"{width:.1}\" height=\"{BAR_H}\" rx=\"3\" fill=\"{fill}\" stroke=\"{stroke}\"/>",
            s = escape(&stay.state),
            seq = stay.seq,
        );
        if text_width(&duration, TEXT_SIZE - 1.0, false) + 8.0 < width {
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"{}\" fill=\"#223\">{}</text>",
                x1 + 4.0,
                y + BAR_H - 4.0,
                TEXT_SIZE - 1.0,
                escape(&duration)
            );
        }
        out.push_str("</g>\n");
    }
    // The compensation.
    if let Some(compensation) = &timeline.compensation
        && let (Some(from), Some(until)) = (compensation.from, compensation.until)
    {
        let (x1, x2) = (x_of(from), x_of(until));
        let width = (x2 - x1).max(2.0);
        let y = rows.top(COMPENSATION_ROW) + (ROW_H - BAR_H) / 2.0;
        let state = if compensation.running {
            "running"
        } else {
            "done"
        };
        let _ = writeln!(
            out,
            "<g class=\"compensation\"><title>compensation ({state}): {}</title>\
             <rect x=\"{x1:.1}\" y=\"{y:.1}\" width=\"{width:.1}\" height=\"{BAR_H}\" rx=\"3\" fill=\"#fde3bf\" stroke=\"#c77800\" stroke-dasharray=\"4 2\"/></g>",
            escape(compensation.reason.as_deref().unwrap_or_default())
        );
    }
    // The marks, each row's kept apart.
    let mut last_in_row: Vec<(String, f64)> = Vec::new();
    for mark in &timeline.marks {
        let row = mark.state.as_deref().unwrap_or(COMMANDS_ROW);
        let mut x = x_of(mark.at);
        if let Some((_, last)) = last_in_row.iter_mut().find(|(r, _)| r == row) {
            x = x.max(*last + MARK_SPACING);
            *last = x;
        } else {
            last_in_row.push((row.to_owned(), x));
        }
        let y = rows.top(row) + ROW_H / 2.0;
        let _ = writeln!(
            out,
            "<g class=\"mark {}\"><title>{}: {}</title>{}</g>",
            mark.kind.name(),
            escape(&timeline.offset(mark.at)),
            escape(&mark.text),
            symbol(mark.kind, x, y)
        );
    }
    // Now.
    let now = x_of(timeline.now);
    let _ = writeln!(
        out,
        "<line class=\"now\" x1=\"{now:.1}\" y1=\"{:.1}\" x2=\"{now:.1}\" y2=\"{bottom:.1}\" stroke=\"#1d2330\" stroke-dasharray=\"3 3\"/>",
        AXIS_H - 4.0
    );
    out.push_str("</svg>\n");
    out
}

/// The marks as a list, oldest first (when, symbol, what), and the
/// compensation chain.
pub(super) fn details(timeline: &Timeline) -> String {
    let mut out = String::from(
        "<p class=\"legend\"><span class=\"error\">✗ failed attempts, errors</span> \
         <span class=\"timeout\">◆ timeout</span> <span class=\"command\">▲ command</span> \
         <span class=\"refused\">△ refused command</span> \
         <span class=\"next-attempt\">○ next attempt</span> \
         <span class=\"moved\">● moved by the engine</span> \
         <span class=\"compensation\">▭ compensation</span></p>\n",
    );
    let _ = write!(
        out,
        "<p>From {} to {}{}.</p>",
        timeline.start,
        if timeline.end > timeline.now {
            "the next attempt"
        } else {
            "now"
        },
        if timeline.truncated {
            "; earlier transitions are no longer in the record's history"
        } else {
            ""
        }
    );
    if !timeline.marks.is_empty() {
        out.push_str("<ol class=\"marks\">");
        for mark in &timeline.marks {
            let _ = write!(
                out,
                "<li class=\"{}\"><time>{}</time> {}</li>",
                mark.kind.name(),
                escape(&timeline.offset(mark.at)),
                escape(&mark.text)
            );
        }
        out.push_str("</ol>\n");
    }
    if let Some(compensation) = &timeline.compensation {
        if let (Some(from), Some(reason)) = (compensation.from, &compensation.reason) {
            let state = if compensation.running {
                "running since"
            } else {
                "ran at"
            };
            let _ = write!(
                out,
                "<p class=\"compensation\">Compensation {state} {}: {}</p>",
                escape(&timeline.offset(from)),
                escape(reason)
            );
        }
        if !compensation.chain.is_empty() {
            let chain: Vec<String> = compensation
                .chain
                .iter()
                .map(|(state, closed)| {
                    if *closed {
                        format!("{} (closed scope: on deletion only)", escape(state))
                    } else {
                        escape(state)
                    }
                })
                .collect();
            let _ = write!(
                out,
                "<p class=\"compensation\">Compensation chain, in the order it runs: {}</p>",
                chain.join(" → ")
            );
        }
        for (step, error) in &compensation.failures {
            let _ = write!(
                out,
                "<p class=\"compensation error\">The compensation of {} failed for good: {}</p>",
                escape(step),
                escape(error)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use fsm_core::{Compensation, Mark, Stay, Timestamp};

    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn timeline() -> Timeline {
        Timeline {
            start: t("2026-01-01T00:00:00Z"),
            end: t("2026-01-01T00:10:00Z"),
            now: t("2026-01-01T00:10:00Z"),
            truncated: false,
            stays: vec![
                Stay {
                    state: "Pending".into(),
                    seq: 1,
                    from: t("2026-01-01T00:00:00Z"),
                    until: t("2026-01-01T00:05:00Z"),
                    current: false,
                },
                Stay {
                    state: "<Failed>".into(),
                    seq: 2,
                    from: t("2026-01-01T00:05:00Z"),
                    until: t("2026-01-01T00:10:00Z"),
                    current: true,
                },
            ],
            marks: vec![
                Mark {
                    at: t("2026-01-01T00:05:00Z"),
                    kind: MarkKind::Error,
                    state: Some("Pending".into()),
                    text: "retries exhausted".into(),
                },
                Mark {
                    at: t("2026-01-01T00:05:00Z"),
                    kind: MarkKind::Error,
                    state: Some("Pending".into()),
                    text: "again".into(),
                },
                Mark {
                    at: t("2026-01-01T00:06:00Z"),
                    kind: MarkKind::Refused,
                    state: None,
                    text: "command #1 retry: refused".into(),
                },
            ],
            compensation: Some(Compensation {
                from: Some(t("2026-01-01T00:05:00Z")),
                until: Some(t("2026-01-01T00:05:30Z")),
                running: false,
                reason: Some("retries exhausted".into()),
                chain: vec![("Pending".into(), false)],
                failures: vec![],
            }),
        }
    }

    #[test]
    fn each_state_has_a_row_with_its_bars_and_marks_are_kept_apart() {
        let svg = svg(
            &timeline(),
            &MachineGraph {
                machine: "M".into(),
                states: vec![],
                edges: vec![],
            },
        );
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches("<g class=\"stay\"").count(), 2);
        assert!(svg.contains("data-state=\"&lt;Failed&gt;\""));
        assert!(svg.contains(">commands</text>"));
        assert!(svg.contains(">compensation</text>"));
        assert_eq!(svg.matches("<g class=\"mark error\"").count(), 2);
        assert!(svg.contains("<g class=\"mark refused\">"));
        // The two marks at the same time are drawn apart.
        let xs: Vec<&str> = svg
            .lines()
            .filter(|l| l.starts_with("<g class=\"mark error\""))
            .map(|l| {
                l.split("<path d=\"M")
                    .nth(1)
                    .unwrap()
                    .split(',')
                    .next()
                    .unwrap()
            })
            .collect();
        assert_ne!(xs[0], xs[1]);
        assert!(svg.contains("5m00s"));
    }

    #[test]
    fn the_details_list_the_marks_and_the_chain() {
        let html = details(&timeline());
        assert!(
            html.contains(
                "<li class=\"refused\"><time>+6m00s</time> command #1 retry: refused</li>"
            )
        );
        assert!(html.contains("Compensation ran at +5m00s: retries exhausted"));
        assert!(html.contains("Compensation chain, in the order it runs: Pending"));
    }
}
