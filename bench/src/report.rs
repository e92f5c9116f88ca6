//! The results of the runs and the table the driver prints: pure code,
//! tested without a server.

use std::fmt::Write as _;
use std::time::Duration;

use crate::requests::Counts;

/// What one run of one implementation at one N measured.
#[derive(Clone, Debug, Default)]
pub struct RunResult {
    /// The implementation's label.
    pub implementation: String,
    /// The API server it ran against: `embedded` (fsm-apiserver) or `real`
    /// (kube-apiserver).
    pub server: String,
    /// Objects created.
    pub n: u64,
    /// Objects ready by the end of the run (`n` unless it timed out).
    pub ready: u64,
    /// From the first create to the last object ready.
    pub wall: Duration,
    /// Committed transitions (the workflow's phase changes of ready objects).
    pub transitions: u64,
    /// The operator's requests (the embedded server's log less the
    /// driver's, the simulation inside the server making none; on the real
    /// server, the audit log of the operator's own user).
    pub requests: Counts,
    /// Peak resident set of the operator process, KiB.
    pub peak_rss_kib: u64,
    /// User + system CPU time of the operator process.
    pub cpu: Duration,
    /// User + system CPU time of the API server over the run (serving the
    /// operator, the driver and the simulation): where the machine's other
    /// core goes.
    pub server_cpu: Duration,
    /// Records the server's log dropped before the driver read them (the
    /// counts are then too low).
    pub dropped: usize,
    /// The dependents workload only: what re-syncing every converged app
    /// cost.
    pub resync: Option<Resync>,
}

/// One re-sync of N converged apps (the dependents workload): every app
/// reconciled once more, with nothing to change.
#[derive(Clone, Debug, Default)]
pub struct Resync {
    /// The operator's requests during the re-sync.
    pub requests: Counts,
    /// The operator's CPU time over the re-sync.
    pub cpu: Duration,
    /// From the signal to the last app's last read.
    pub wall: Duration,
}

impl RunResult {
    /// Transitions per second of wall time.
    #[must_use]
    pub fn throughput(&self) -> f64 {
        per(self.transitions as f64, self.wall.as_secs_f64())
    }

    /// Writes to the custom resource (its status or its metadata): where
    /// the operators keep their state.
    #[must_use]
    pub fn state_writes(&self) -> u64 {
        self.requests
            .sum(|v, r, _| matches!(v, "create" | "update" | "patch") && r.starts_with("benchapps"))
    }
}

fn per(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { f64::NAN }
}

/// `value / base`, for the ratios to operator-fsm.
#[must_use]
pub fn ratio(value: f64, base: f64) -> f64 {
    per(value, base)
}

const VERBS: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];

/// The table of `results`, with ratios to the run labelled `baseline` at
/// the same N.
#[must_use]
pub fn table(results: &[RunResult], baseline: &str) -> String {
    let mut header = vec!["implementation", "N", "ready", "wall s", "trans/s"];
    header.extend(VERBS);
    header.extend([
        "req/trans",
        "CR writes/trans",
        "409 conflict",
        "409 exists",
        "peak RSS MiB",
        "CPU s",
        "server CPU s",
        "wall ×",
        "trans/s ×",
        "CPU ×",
        "RSS ×",
    ]);
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| (*s).to_owned()).collect()];
    for r in results {
        let base = results
            .iter()
            .find(|b| b.implementation == baseline && b.n == r.n);
        let t = r.transitions as f64;
        let mut row = vec![
            r.implementation.clone(),
            r.n.to_string(),
            r.ready.to_string(),
            format!("{:.2}", r.wall.as_secs_f64()),
            format!("{:.0}", r.throughput()),
        ];
        row.extend(VERBS.iter().map(|v| r.requests.verb(v).to_string()));
        let rss = r.peak_rss_kib as f64 / 1024.0;
        let cpu = r.cpu.as_secs_f64();
        row.extend([
            format!("{:.2}", per(r.requests.sum(|_, _, _| true) as f64, t)),
            format!("{:.2}", per(r.state_writes() as f64, t)),
            r.requests.conflicts().to_string(),
            r.requests.already_exists().to_string(),
            format!("{rss:.1}"),
            format!("{cpu:.2}"),
            format!("{:.2}", r.server_cpu.as_secs_f64()),
        ]);
        let ratios = match base {
            Some(b) => [
                ratio(r.wall.as_secs_f64(), b.wall.as_secs_f64()),
                ratio(r.throughput(), b.throughput()),
                ratio(cpu, b.cpu.as_secs_f64()),
                ratio(rss, b.peak_rss_kib as f64 / 1024.0),
            ]
            .map(|x| format!("{x:.2}")),
            None => [
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
            ],
        };
        row.extend(ratios);
        rows.push(row);
    }
    markdown(&rows)
}

/// The operator's own columns (requests per transition by verb, CPU, peak
/// RSS), which do not depend on how fast the server is, for every
/// workflow run that ran on both servers: `embedded / real` in each cell
/// (a `|` would split the Markdown cell).
#[must_use]
pub fn servers_side_by_side(results: &[RunResult]) -> String {
    let header = [
        "implementation",
        "N",
        "ready",
        "wall s",
        "get/trans",
        "list/trans",
        "watch",
        "writes/trans",
        "409 conflict",
        "409 exists",
        "CPU s",
        "peak RSS MiB",
        "server CPU s",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| (*s).to_owned()).collect()];
    for e in results
        .iter()
        .filter(|r| r.server == "embedded" && r.resync.is_none())
    {
        let Some(r) = results.iter().find(|r| {
            r.server == "real"
                && r.resync.is_none()
                && r.implementation == e.implementation
                && r.n == e.n
        }) else {
            continue;
        };
        let both = |f: &dyn Fn(&RunResult) -> String| format!("{} / {}", f(e), f(r));
        let per_trans = |count: fn(&Counts) -> u64| {
            move |x: &RunResult| {
                format!(
                    "{:.2}",
                    per(count(&x.requests) as f64, x.transitions as f64)
                )
            }
        };
        rows.push(vec![
            e.implementation.clone(),
            e.n.to_string(),
            both(&|x| x.ready.to_string()),
            both(&|x| format!("{:.1}", x.wall.as_secs_f64())),
            both(&per_trans(|c| c.verb("get"))),
            both(&per_trans(|c| c.verb("list"))),
            both(&|x| x.requests.verb("watch").to_string()),
            both(&per_trans(Counts::writes)),
            both(&|x| x.requests.conflicts().to_string()),
            both(&|x| x.requests.already_exists().to_string()),
            both(&|x| format!("{:.2}", x.cpu.as_secs_f64())),
            both(&|x| format!("{:.1}", x.peak_rss_kib as f64 / 1024.0)),
            both(&|x| format!("{:.1}", x.server_cpu.as_secs_f64())),
        ]);
    }
    markdown(&rows)
}

/// The dependents workload's table: converging N apps of 4 dependents
/// each, then re-syncing them all once.
#[must_use]
pub fn dependents_table(results: &[RunResult]) -> String {
    let header = [
        "impl",
        "N",
        "ready",
        "converge wall s",
        "writes/app",
        "requests/app",
        "converge CPU ms/app",
        "re-sync wall s",
        "re-sync get",
        "re-sync list",
        "re-sync writes",
        "re-sync CPU s",
        "CPU µs/app",
        "peak RSS MiB",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| (*s).to_owned()).collect()];
    for r in results {
        let Some(resync) = &r.resync else { continue };
        let n = r.n as f64;
        let all = r.requests.sum(|_, _, _| true);
        // The operator's CPU is measured once, after the re-sync.
        let converging = r.cpu.saturating_sub(resync.cpu);
        rows.push(vec![
            r.implementation.clone(),
            r.n.to_string(),
            r.ready.to_string(),
            format!("{:.2}", r.wall.as_secs_f64()),
            format!("{:.2}", per(r.requests.writes() as f64, n)),
            format!("{:.2}", per(all as f64, n)),
            format!("{:.2}", per(converging.as_secs_f64() * 1e3, n)),
            format!("{:.2}", resync.wall.as_secs_f64()),
            resync.requests.verb("get").to_string(),
            resync.requests.verb("list").to_string(),
            resync.requests.writes().to_string(),
            format!("{:.2}", resync.cpu.as_secs_f64()),
            format!("{:.0}", per(resync.cpu.as_secs_f64() * 1e6, n)),
            format!("{:.1}", r.peak_rss_kib as f64 / 1024.0),
        ]);
    }
    markdown(&rows)
}

/// A Markdown table, columns padded to their widest cell.
#[must_use]
pub fn markdown(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        out.push('|');
        for (c, width) in widths.iter().enumerate() {
            let cell = row.get(c).map_or("", String::as_str);
            let pad = width - cell.chars().count();
            let _ = write!(out, " {cell}{} |", " ".repeat(pad));
        }
        out.push('\n');
        if i == 0 {
            out.push('|');
            for width in &widths {
                let _ = write!(out, " {} |", "-".repeat(*width));
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, n: u64, wall_ms: u64, cpu_ms: u64) -> RunResult {
        let mut requests = Counts::default();
        for _ in 0..n * 4 {
            requests.add("patch", "benchapps", Some("status"), 200);
        }
        requests.add("patch", "benchapps", Some("status"), 409);
        requests.add("create", "configmaps", None, 409);
        RunResult {
            implementation: name.into(),
            server: "embedded".into(),
            n,
            ready: n,
            wall: Duration::from_millis(wall_ms),
            transitions: n * 4,
            requests,
            peak_rss_kib: 2048,
            cpu: Duration::from_millis(cpu_ms),
            server_cpu: Duration::from_millis(cpu_ms * 2),
            dropped: 0,
            resync: None,
        }
    }

    #[test]
    fn ratios_to_the_baseline_at_the_same_n() {
        let results = [
            run("fsm", 10, 1000, 500),
            run("hand", 10, 2000, 250),
            run("hand", 20, 2000, 250),
        ];
        assert!((results[0].throughput() - 40.0).abs() < 1e-9);
        assert_eq!(results[0].state_writes(), 41);
        let table = table(&results, "fsm");
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5, "{table}");
        assert!(lines[1].starts_with("| ---"));
        let cells =
            |line: &str| -> Vec<String> { line.split('|').map(|c| c.trim().to_owned()).collect() };
        let hand = cells(lines[3]);
        let header = cells(lines[0]);
        let col = |name: &str| header.iter().position(|h| h == name).unwrap();
        assert_eq!(hand[col("wall ×")], "2.00");
        assert_eq!(hand[col("trans/s ×")], "0.50");
        assert_eq!(hand[col("CPU ×")], "0.50");
        assert_eq!(hand[col("server CPU s")], "0.50");
        assert_eq!(hand[col("409 conflict")], "1");
        assert_eq!(hand[col("409 exists")], "1");
        assert_eq!(hand[col("CR writes/trans")], "1.02");
        assert_eq!(cells(lines[4])[col("wall ×")], "-", "no baseline at N=20");
    }

    #[test]
    fn the_dependents_table_shows_the_resync_per_app() {
        let mut converged = run("deps", 100, 3000, 900);
        let mut requests = Counts::default();
        for _ in 0..400 {
            requests.add("get", "configmaps", None, 200);
            requests.add("list", "services", None, 200);
        }
        converged.resync = Some(Resync {
            requests,
            cpu: Duration::from_millis(250),
            wall: Duration::from_millis(500),
        });
        let table = dependents_table(&[run("fsm", 100, 1000, 500), converged]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "only the dependents run: {table}");
        let cells: Vec<&str> = lines[2].split('|').map(str::trim).collect();
        // impl, N, ready, wall, writes/app (4 patches + 1 create per app, +1).
        assert_eq!(&cells[1..6], ["deps", "100", "100", "3.00", "4.02"]);
        // Converging's CPU: the run's 0.9 s less the re-sync's 0.25 s.
        assert_eq!(cells[7], "6.50");
        // re-sync: wall, gets, lists, writes, CPU, µs per app.
        assert_eq!(&cells[8..14], ["0.50", "400", "400", "0", "0.25", "2500"]);
    }

    #[test]
    fn both_servers_side_by_side_per_implementation_and_n() {
        let mut real = run("fsm", 10, 4000, 600);
        real.server = "real".into();
        real.requests.add("get", "deployments", None, 200);
        real.requests.add("get", "deployments", None, 200);
        let results = [run("fsm", 10, 1000, 500), run("hand", 10, 2000, 250), real];
        let table = servers_side_by_side(&results);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "only fsm ran on both: {table}");
        let header_cells = lines[0].matches('|').count();
        assert_eq!(lines[2].matches('|').count(), header_cells, "{table}");
        let cells: Vec<&str> = lines[2]
            .split(['|', '/'])
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        // implementation, N, ready e/r, wall e/r, get/trans e/r, …
        assert_eq!(cells[0], "fsm");
        assert_eq!(
            &cells[1..10],
            [
                "10", "10", "10", "1.0", "4.0", "0.00", "0.05", "0.00", "0.00"
            ]
        );
        assert!(lines[2].contains("0.50 / 0.60"), "CPU s: {table}");
    }

    #[test]
    fn columns_line_up() {
        let rows = vec![
            vec!["a".to_owned(), "bb".to_owned()],
            vec!["ccc".to_owned(), "d".to_owned()],
        ];
        assert_eq!(
            markdown(&rows),
            "| a   | bb |\n| --- | -- |\n| ccc | d  |\n"
        );
        assert!(ratio(1.0, 0.0).is_nan());
    }
}
