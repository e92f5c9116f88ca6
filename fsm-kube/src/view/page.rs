//! The HTML of the web view: the page of the machines and the page of an
//! object, their style ([`STYLE`], served as [`STYLE_PATH`]) and script
//! ([`SCRIPT`], served as [`SCRIPT_PATH`]). Nothing is fetched from
//! elsewhere, and nothing is inline, so that the view's
//! Content-Security-Policy can forbid inline script and style. Pure.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use fsm_core::text::human_duration;
use fsm_core::{StateRecord, Timeline, Timestamp};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::DynamicObject;

use crate::records::Watched;
use crate::records::object::{conditions, last_seen};
use crate::records::rows::KindRow;

use super::timeline;

/// Where the pages load their style from.
pub(super) const STYLE_PATH: &str = "/assets/view.css";

/// Where the page of the machines loads its script from.
pub(super) const SCRIPT_PATH: &str = "/assets/view.js";

/// The pages' style.
pub(super) const STYLE: &str = r#"
body { font-family: system-ui, sans-serif; margin: 0; color: #1d2330; background: #fafbfc; }
header { background: #1d2330; color: #fff; padding: 10px 20px; display: flex; gap: 16px; align-items: baseline; }
header h1 { font-size: 18px; margin: 0; }
header a { color: #fff; }
#live { font-size: 12px; padding: 2px 8px; border-radius: 10px; background: #777; }
#live.on { background: #2a7a3a; }
main { padding: 0 20px 20px; }
section { background: #fff; border: 1px solid #dde2ea; border-radius: 8px; margin: 16px 0; padding: 12px 16px; }
h2 { font-size: 16px; margin: 4px 0 8px; }
h2 small { color: #667; font-weight: normal; }
.machine-body { display: flex; flex-wrap: wrap; gap: 8px 24px; align-items: flex-start; }
.diagram { flex: 0 1 auto; max-width: 100%; overflow-x: auto; }
.diagram svg, .chart svg { display: block; max-width: 100%; height: auto; }
.objects-panel { flex: 1 1 520px; min-width: 0; overflow-x: auto; }
.chart { margin: 4px 0 8px; }
p.legend { font-size: 12px; color: #556; display: flex; flex-wrap: wrap; gap: 4px 14px; }
p.legend .error, ol.marks li.error, ol.marks li.exhausted { color: #b3261e; }
p.legend .timeout, ol.marks li.timeout { color: #b86e00; }
p.legend .command, p.legend .refused, ol.marks li.command, ol.marks li.refused { color: #2f5fa8; }
p.legend .compensation, p.compensation { color: #a35f00; }
p.compensation { font-size: 13px; }
p.compensation.error { color: #b3261e; }
ol.marks { font-size: 13px; padding-left: 20px; }
ol.marks time { color: #667; display: inline-block; min-width: 64px; }
#activity a { color: inherit; }
#activity time { color: #667; margin-right: 6px; }
.controls { margin: 8px 0; display: flex; gap: 8px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #eef0f4; }
th { color: #556; font-weight: 600; }
td.state { font-weight: 600; }
tr.failed td.state { color: #b3261e; }
tr.compensating td.state { color: #c77800; }
td.error { color: #b3261e; max-width: 22em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
#activity { font-size: 13px; max-height: 220px; overflow-y: auto; }
ol.timeline { list-style: none; padding-left: 0; border-left: 3px solid #c9d3e3; margin-left: 8px; }
ol.timeline li { padding: 4px 12px; position: relative; }
ol.timeline li::before { content: ""; position: absolute; left: -8px; top: 9px; width: 10px; height: 10px; border-radius: 50%; background: #456; }
dl { display: grid; grid-template-columns: max-content auto; gap: 4px 16px; font-size: 14px; }
dt { color: #556; }
code { font-size: 12px; }
"#;

/// The script of the page of the machines.
pub(super) const SCRIPT: &str = r#"
(() => {
  const rows = new Map();
  const esc = s => String(s ?? '').replace(/[&<>"']/g,
    c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
  const key = r => r.kind + '/' + (r.namespace ?? '-') + '/' + r.name;
  const span = ms => {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + 's';
    const m = Math.floor(s / 60);
    if (m < 60) return m + 'm' + String(s % 60).padStart(2, '0') + 's';
    const h = Math.floor(m / 60);
    if (h < 24) return h + 'h' + String(m % 60).padStart(2, '0') + 'm';
    return Math.floor(h / 24) + 'd' + String(h % 24).padStart(2, '0') + 'h';
  };
  const inState = r => r.enteredAt ? span(Date.now() - Date.parse(r.enteredAt)) : '-';
  const next = r => {
    if (!r.nextAttemptAt) return '-';
    const wait = Date.parse(r.nextAttemptAt) - Date.now();
    return wait > 0 ? 'in ' + span(wait) : 'due';
  };
  const failed = new Map();
  document.querySelectorAll('section.machine').forEach(s =>
    failed.set(s.dataset.kind, new Set(JSON.parse(s.dataset.failed))));
  const line = r => {
    const classes = [];
    if (r.compensating) classes.push('compensating');
    if (failed.get(r.kind)?.has(r.state)) classes.push('failed');
    const href = 'objects/' + encodeURIComponent(r.kind) + '/' +
      encodeURIComponent(r.namespace ?? '-') + '/' + encodeURIComponent(r.name);
    const state = r.state ? r.state + (r.compensating ? ' (compensating)' : '') : '<none>';
    return '<tr class="' + classes.join(' ') + '" data-key="' + esc(key(r)) + '" data-state="' +
      esc(r.state ?? '') + '">' +
      '<td class="name"><a href="' + esc(href) + '">' + esc(r.name) + '</a></td>' +
      '<td class="namespace">' + esc(r.namespace ?? '') + '</td>' +
      '<td class="state">' + esc(state) + '</td>' +
      '<td class="attempt">' + esc(r.attempt) + '</td>' +
      '<td class="in-state">' + esc(inState(r)) + '</td>' +
      '<td class="next">' + esc(next(r)) + '</td>' +
      '<td class="error" title="' + esc(r.problem ?? r.lastError ?? '') + '">' +
      esc(r.problem ?? r.lastError ?? '') + '</td></tr>';
  };
  const render = kind => {
    const section = document.querySelector('section.machine[data-kind="' + CSS.escape(kind) + '"]');
    if (!section) return;
    const wanted = section.querySelector('select.state-filter').value;
    const search = section.querySelector('input.search').value.trim().toLowerCase();
    const counts = {};
    const shown = [];
    for (const r of rows.values()) {
      if (r.kind !== kind) continue;
      if (r.state) counts[r.state] = (counts[r.state] ?? 0) + 1;
      if (wanted && r.state !== wanted) continue;
      if (search && !(r.name + ' ' + (r.namespace ?? '')).toLowerCase().includes(search)) continue;
      shown.push(r);
    }
    shown.sort((a, b) => key(a) < key(b) ? -1 : 1);
    section.querySelector('tbody').innerHTML = shown.map(line).join('');
    section.querySelectorAll('svg text.count').forEach(t => {
      t.textContent = counts[t.dataset.state] ?? 0;
    });
    section.querySelector('.total').textContent = shown.length;
  };
  const renderAll = () => failed.forEach((_, kind) => render(kind));
  const activity = (u, before) => {
    const after = u.row?.state ?? '(deleted)';
    if (before?.state === after) return;
    const li = document.createElement('li');
    li.dataset.kind = u.kind;
    li.dataset.name = u.name;
    li.dataset.state = after;
    const time = document.createElement('time');
    time.textContent = new Date().toLocaleTimeString();
    const what = u.kind + ' ' + (u.namespace ? u.namespace + '/' : '') + u.name;
    let object;
    if (u.row) {
      object = document.createElement('a');
      object.href = 'objects/' + encodeURIComponent(u.kind) + '/' +
        encodeURIComponent(u.namespace ?? '-') + '/' + encodeURIComponent(u.name);
    } else {
      object = document.createElement('span');
    }
    object.textContent = what;
    li.append(time, object, ': ' + (before?.state ?? '(new)') + ' \u2192 ' + after);
    const list = document.getElementById('activity');
    list.prepend(li);
    while (list.children.length > 200) list.lastChild.remove();
  };
  const live = document.getElementById('live');
  const events = new EventSource('events');
  events.addEventListener('snapshot', e => {
    rows.clear();
    for (const r of JSON.parse(e.data)) rows.set(key(r), r);
    renderAll();
    live.textContent = 'live';
    live.className = 'on';
  });
  events.addEventListener('update', e => {
    const u = JSON.parse(e.data);
    const k = key(u);
    const before = rows.get(k);
    if (u.row) rows.set(k, {kind: u.kind, ...u.row}); else rows.delete(k);
    activity(u, before);
    render(u.kind);
  });
  events.onerror = () => { live.textContent = 'reconnecting'; live.className = ''; };
  document.querySelectorAll('select.state-filter, input.search').forEach(input =>
    input.addEventListener('input', () => render(input.closest('section').dataset.kind)));
  setInterval(() => {
    document.querySelectorAll('tbody tr').forEach(tr => {
      const r = rows.get(tr.dataset.key);
      if (!r) return;
      tr.querySelector('.in-state').textContent = inState(r);
      tr.querySelector('.next').textContent = next(r);
    });
  }, 1000);
})();
"#;

/// `text` with HTML's special characters escaped.
pub use fsm_core::text::escape_markup as escape;

/// The head of a page `root` (relative: the view may be served under a
/// path prefix) below the view's root.
fn head(title: &str, root: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>{}</title><link rel=\"stylesheet\" href=\"{root}{}\"></head>\n<body>\n",
        escape(title),
        STYLE_PATH.trim_start_matches('/')
    )
}

/// The page of the machines: per resource its diagram with the number of
/// objects in each state and the table of its objects (filterable by
/// state, searchable), both kept live by the page's script from
/// `/events`; then the activity (state changes as they arrive).
pub fn index(watched: &[Watched], rows: &[KindRow]) -> String {
    let mut out = head("operator-fsm", "");
    out.push_str(
        "<header><h1>operator-fsm</h1><span id=\"live\">connecting</span></header>\n<main>\n",
    );
    for w in watched {
        let kind = &w.resource.kind;
        let graph = &w.machine.graph;
        let mut counts = BTreeMap::new();
        for r in rows.iter().filter(|r| &r.kind == kind) {
            if let Some(state) = &r.row.state {
                *counts.entry(state.clone()).or_insert(0) += 1;
            }
        }
        let failed: Vec<&str> = graph
            .states
            .iter()
            .filter(|s| s.failed)
            .map(|s| s.name.as_str())
            .collect();
        let failed = serde_json::to_string(&failed).unwrap_or_else(|_| "[]".to_owned());
        let _ = write!(
            out,
            "<section class=\"machine\" data-kind=\"{k}\" data-failed=\"{f}\">\
             <h2>{k} <small>{m}, records in the {s:?} store, <span class=\"total\">{n}</span> shown</small></h2>\n\
             <div class=\"machine-body\"><div class=\"diagram\">{svg}</div>\n\
             <div class=\"objects-panel\"><div class=\"controls\"><select class=\"state-filter\" aria-label=\"state\"><option value=\"\">every state</option>",
            k = escape(kind),
            f = escape(&failed),
            m = escape(&graph.machine),
            s = w.machine.store,
            n = counts.values().sum::<usize>(),
            svg = graph.svg(Some(&counts)),
        );
        for state in &graph.states {
            let _ = write!(out, "<option>{}</option>", escape(&state.name));
        }
        out.push_str(
            "</select><input type=\"search\" class=\"search\" placeholder=\"search by name\" aria-label=\"search\"></div>\n\
             <table class=\"objects\"><thead><tr><th>Name</th><th>Namespace</th><th>State</th>\
             <th>Attempt</th><th>In state</th><th>Next retry</th><th>Last error</th></tr></thead>\
             <tbody></tbody></table></div></div>\n</section>\n",
        );
    }
    out.push_str(
        "<section><h2>Activity <small>state changes seen while this page is open, newest first; \
         each links to its object</small></h2><ol id=\"activity\"></ol></section>\n</main>\n",
    );
    let _ = write!(
        out,
        "<script src=\"{}\"></script>\n</body></html>\n",
        SCRIPT_PATH.trim_start_matches('/')
    );
    out
}

fn ago(now: Timestamp, at: Timestamp) -> String {
    format!(
        "{} ago",
        human_duration(now.duration_since(at).unsigned_abs())
    )
}

/// An object's page as of `now`: its record (state, data unless
/// sensitive, attempt, error), the diagram with its state, its history as
/// a timeline, the compensation trail, its conditions and its `events`.
/// `record` is the decoded record, or why there is none; `events` the
/// events, or why they could not be read.
pub fn object(
    watched: &Watched,
    object: &DynamicObject,
    record: Result<&StateRecord, String>,
    events: Result<&[Event], &str>,
    now: Timestamp,
) -> String {
    let kind = &watched.resource.kind;
    let name = object.name_any();
    let place = object
        .namespace()
        .map_or_else(|| name.clone(), |ns| format!("{ns}/{name}"));
    let mut out = head(&format!("{kind} {place}"), "../../../");
    let _ = writeln!(
        out,
        "<header><h1>{} {}</h1><a href=\"../../../\">all objects</a></header>\n<main>",
        escape(kind),
        escape(&place)
    );
    match record {
        Err(why) => {
            let _ = writeln!(
                out,
                "<section><h2>Record</h2><p class=\"problem\">{}</p></section>",
                escape(&why)
            );
        }
        Ok(record) => {
            out.push_str("<section><h2>Record</h2><dl>");
            let data = record
                .data
                .as_ref()
                .map(|d| format!(" <code>{}</code>", escape(&d.to_string())))
                .unwrap_or_default();
            let _ = write!(
                out,
                "<dt>State</dt><dd class=\"state\">{}{data}</dd>\
                 <dt>Entered</dt><dd>{} ({})</dd><dt>Attempt</dt><dd>{}</dd>",
                escape(&record.state),
                record.entered_at,
                ago(now, record.entered_at),
                record.attempt
            );
            if let Some(next) = record.next_attempt_at {
                let _ = write!(out, "<dt>Next retry</dt><dd>{next}</dd>");
            }
            if let Some(error) = &record.last_error {
                let _ = write!(
                    out,
                    "<dt>Last error</dt><dd class=\"error\">{}</dd>",
                    escape(error)
                );
            }
            let _ = writeln!(
                out,
                "<dt>Transitions</dt><dd>{}</dd></dl>\n<div class=\"diagram\">{}</div></section>",
                record.transitions,
                watched
                    .machine
                    .graph
                    .svg(Some(&BTreeMap::from([(record.state.clone(), 1)])))
            );
            let timeline = Timeline::of(record, now);
            let _ = writeln!(
                out,
                "<section class=\"timeline\"><h2>Timeline</h2><div class=\"chart\">{}</div>{}</section>",
                timeline::svg(&timeline, &watched.machine.graph),
                timeline::details(&timeline)
            );
            out.push_str("<section><h2>History</h2><ol class=\"timeline\" id=\"history\">");
            for entry in &record.history {
                let from = entry
                    .from
                    .as_deref()
                    .map(|f| format!("{} → ", escape(f)))
                    .unwrap_or_default();
                let reason = entry
                    .reason
                    .as_deref()
                    .map(|r| format!(" <em>({})</em>", escape(r)))
                    .unwrap_or_default();
                let _ = write!(
                    out,
                    "<li data-to=\"{to}\"><time>{at}</time> #{seq} {from}<b>{to}</b>{reason}</li>",
                    to = escape(&entry.to),
                    at = entry.at,
                    seq = entry.seq,
                );
            }
            out.push_str("</ol></section>\n<section><h2>Compensation</h2>");
            match &record.compensation {
                None => out.push_str("<p>none</p>"),
                Some(unwind) => {
                    let progress = match unwind.finished_at {
                        Some(at) => format!("finished at {at}"),
                        None => format!("running since {}", unwind.started_at),
                    };
                    let _ = write!(
                        out,
                        "<p>{}: {}</p><ul>",
                        escape(&progress),
                        escape(&unwind.reason)
                    );
                    for failure in &unwind.failures {
                        let _ = write!(
                            out,
                            "<li class=\"error\">{} failed: {}</li>",
                            escape(&failure.step),
                            escape(&failure.error)
                        );
                    }
                    out.push_str("</ul>");
                }
            }
            if !record.trail.is_empty() {
                out.push_str(
                    "<p>Trail (compensated in reverse order; a failure undoes the open \
                     scope, deletion everything):</p><ol>",
                );
                for entry in &record.trail {
                    let scope = if entry.closed { "closed" } else { "open" };
                    let _ = write!(
                        out,
                        "<li>{} entered {} ({scope})</li>",
                        escape(&entry.state),
                        entry.entered_at
                    );
                }
                out.push_str("</ol>");
            }
            out.push_str("</section>\n");
        }
    }
    out.push_str("<section><h2>Conditions</h2><table><thead><tr><th>Type</th><th>Status</th><th>Reason</th><th>Message</th></tr></thead><tbody>");
    for c in conditions(object) {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&c.type_),
            escape(&c.status),
            escape(&c.reason),
            escape(&c.message)
        );
    }
    out.push_str("</tbody></table></section>\n<section><h2>Recent events</h2>");
    let events = match events {
        Ok(events) => events,
        Err(why) => {
            let _ = write!(out, "<p class=\"problem\">{}</p>", escape(why));
            &[]
        }
    };
    out.push_str("<table><thead><tr><th>Type</th><th>Reason</th><th>When</th><th>Count</th><th>Note</th></tr></thead><tbody>");
    for event in events {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(event.type_.as_deref().unwrap_or("Normal")),
            escape(event.reason.as_deref().unwrap_or_default()),
            last_seen(event).map_or_else(String::new, |at| ago(now, at)),
            event.series.as_ref().map_or(1, |s| s.count),
            escape(event.note.as_deref().unwrap_or_default())
        );
    }
    out.push_str("</tbody></table></section>\n</main></body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use fsm_core::{Machine, StateMeta};
    use serde_json::json;

    use super::*;
    use crate::records::rows::Row;
    use crate::records::{PublishedMachine, ResourceInfo, record_view};
    use crate::store::StoreKind;

    static STATES: [StateMeta; 3] = [
        StateMeta::new("Pending")
            .initial()
            .with_handler()
            .next(&["Done"]),
        StateMeta::new("Done").final_state().ready(),
        StateMeta::new("Failed").failed(),
    ];

    fn watched() -> Watched {
        Watched {
            resource: ResourceInfo {
                group: "example.io".into(),
                version: "v1".into(),
                kind: "Job".into(),
                plural: "jobs".into(),
                namespaced: true,
            },
            machine: PublishedMachine {
                store: StoreKind::Status,
                graph: Machine::new("JobState", &STATES).graph(),
            },
        }
    }

    #[test]
    fn the_index_has_a_diagram_with_counts_filters_and_no_remote_resources() {
        let row = Row::without_record("<j1>", Some("ns"), "x".into());
        let rows = [KindRow {
            kind: "Job".into(),
            row: Row {
                state: Some("Done".into()),
                ..row
            },
        }];
        let html = index(&[watched()], &rows);
        assert!(html.contains(r#"<section class="machine" data-kind="Job""#));
        assert!(
            html.contains(r#"data-failed="[&quot;Failed&quot;]""#),
            "{html}"
        );
        assert!(html.contains(r#"<text class="count" data-state="Done""#));
        assert!(html.contains("<option>Pending</option>"));
        assert!(html.contains("newest first"), "{html}");
        assert!(SCRIPT.contains("object = document.createElement('a')"));
        // The script is the view's own, loaded relative to the page (the
        // view may be under a path prefix), never inline.
        assert!(html.contains(r#"<script src="assets/view.js"></script>"#));
        assert!(html.contains(r#"<link rel="stylesheet" href="assets/view.css">"#));
        assert!(!html.contains("<script>") && !html.contains("<style>"));
        assert!(SCRIPT.contains("new EventSource('events')"));
        for remote in ["http://", "https://", "//cdn"] {
            let outside = html.replace("http://www.w3.org/2000/svg", "");
            assert!(!outside.contains(remote), "{remote}");
        }
    }

    #[test]
    fn the_object_page_shows_history_and_never_sensitive_data() {
        let mut record = StateRecord {
            schema_version: 1,
            machine_version: 1,
            state: "Pending".into(),
            data: Some(json!(record_view::REDACTED)),
            entered_at: "2026-01-01T00:00:00Z".parse().unwrap(),
            attempt: 1,
            failures_without_attempt: 0,
            next_attempt_at: None,
            last_error: Some("<refused>".into()),
            observed_generation: None,
            transitions: 1,
            history: vec![fsm_core::HistoryEntry {
                seq: 1,
                from: None,
                to: "Pending".into(),
                at: "2026-01-01T00:00:00Z".parse().unwrap(),
                reason: None,
            }],
            trail: vec![],
            compensation: None,
            spec_snapshot: None,
            command_seq: 0,
            paused: None,
            commands: Vec::new(),
            degraded: None,
        };
        let object = DynamicObject {
            types: None,
            metadata: kube::api::ObjectMeta {
                name: Some("j1".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            data: json!({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Pending", "message": "m"}]}}),
        };
        let now = "2026-01-01T00:01:00Z".parse().unwrap();
        let html = super::object(&watched(), &object, Ok(&record), Ok(&[]), now);
        assert!(html.contains("<title>Job ns/j1</title>"));
        assert!(html.contains(r#"<li data-to="Pending">"#));
        assert!(html.contains("<h2>Timeline</h2>"), "{html}");
        assert!(html.contains(r#"<svg xmlns="http://www.w3.org/2000/svg" class="fsm-timeline""#));
        assert!(
            html.contains("1 failed attempt so far in Pending, the last: &lt;refused&gt;"),
            "{html}"
        );
        assert!(html.contains("&lt;refused&gt;"));
        assert!(html.contains("<td>Ready</td><td>False</td>"));
        assert!(html.contains("&lt;redacted: sensitive state&gt;"));
        record.data = None;
        let html = super::object(
            &watched(),
            &object,
            Err("no record yet".into()),
            Err("cannot list the events: forbidden"),
            now,
        );
        assert!(html.contains("no record yet"));
        assert!(html.contains("cannot list the events: forbidden"));
    }
}
