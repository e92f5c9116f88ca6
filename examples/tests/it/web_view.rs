//! The web view in a real browser: headless Chromium (Debian's `chromium`)
//! loads the page the demo serves under `--serve`, follows objects through
//! their transitions by the live updates alone, shows the counts and rows
//! the API holds, and renders something (a screenshot that is not blank).
//!
//! Chromium is driven through the DevTools protocol over
//! `--remote-debugging-pipe`, its two pipes being FIFOs (no WebSocket
//! client, no unsafe code). This test needs `chromium` on `PATH`
//! (`apt-get install chromium`; .ci/run installs it); without it, it
//! fails, it never skips.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use examples::integration::Integration;
use examples::mutable_jar::Keycloak;
use kube::api::Api;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// The DevTools protocol over Chromium's pipes: one message per call, NUL
/// terminated, answers matched by id; events are skipped.
struct Browser {
    child: Child,
    to: std::fs::File,
    from: mpsc::Receiver<Value>,
    next_id: u64,
    session: Option<String>,
}

impl Browser {
    fn launch(dir: &Path) -> Browser {
        let to_path = dir.join("cdp-in");
        let from_path = dir.join("cdp-out");
        for fifo in [&to_path, &from_path] {
            let _ = std::fs::remove_file(fifo);
            let made = Command::new("mkfifo").arg(fifo).status().unwrap();
            assert!(made.success(), "mkfifo {}", fifo.display());
        }
        let chromium = which("chromium").unwrap_or_else(|| {
            panic!(
                "chromium was not found on PATH. The web view's browser test needs it: \
                 install it with `apt-get install -y chromium` (.ci/run does). It fails rather than skips."
            )
        });
        // The shell opens the FIFOs as Chromium's fds 3 (commands) and 4
        // (answers), which --remote-debugging-pipe uses.
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "exec '{}' --headless --no-sandbox --disable-gpu --hide-scrollbars \
                 --no-first-run --window-size=1400,1500 --user-data-dir='{}' \
                 --remote-debugging-pipe about:blank 3<'{}' 4>'{}'",
                chromium.display(),
                dir.join("profile").display(),
                to_path.display(),
                from_path.display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Opening a FIFO blocks until its other end is open: the shell
        // opens fd 3 for reading first, then fd 4 for writing.
        let to = std::fs::OpenOptions::new()
            .write(true)
            .open(&to_path)
            .unwrap();
        let from = std::fs::File::open(&from_path).unwrap();
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(from);
            loop {
                let mut message = Vec::new();
                match reader.read_until(0, &mut message) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        message.pop();
                        if let Ok(value) = serde_json::from_slice::<Value>(&message)
                            && sender.send(value).is_err()
                        {
                            return;
                        }
                    }
                }
            }
        });
        Browser {
            child,
            to,
            from: receiver,
            next_id: 1,
            session: None,
        }
    }

    /// Calls `method` (in the page's session once attached); its result.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = &self.session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let answer = self
                .from
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no answer to {method}: {e}"));
            if answer["id"] == json!(id) {
                assert!(answer.get("error").is_none(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
    }

    /// Opens `url` in a new page and attaches to it.
    fn open(&mut self, url: &str) {
        let target = self.call("Target.createTarget", json!({"url": url}));
        let attached = self.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        self.session = Some(attached["sessionId"].as_str().unwrap().to_owned());
    }

    /// The value of the JavaScript `expression` in the page (awaited when
    /// a promise).
    fn eval(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(
            result.get("exceptionDetails").is_none(),
            "{expression}: {result}"
        );
        result["result"]["value"].clone()
    }

    /// Evaluates `expression` until `accept` takes its value (bounded).
    fn eventually(
        &mut self,
        what: &str,
        expression: &str,
        accept: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let value = self.eval(expression);
            if accept(&value) {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {value}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The demo under `--serve`, with its stdout read line by line.
struct Demo {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Demo {
    fn start() -> Demo {
        let mut child = Command::new(env!("CARGO_BIN_EXE_demo"))
            .args(["--serve", "--plain", "--view-addr", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        Demo { child, lines }
    }

    /// Reads lines until one contains `needle`; that line.
    fn line_with(&self, needle: &str) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(180))
                .unwrap_or_else(|_| panic!("the demo never printed {needle:?}"));
            if line.contains(needle) {
                return line;
            }
        }
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The PNG's width and height, after checking its signature and header.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&png[12..16], b"IHDR", "no IHDR first");
    let word = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    (word(16), word(20))
}

/// Standard base64, as the protocol sends binary data.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let clean: Vec<u8> = text.bytes().filter(|&c| c != b'=' && c != b'\n').collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= u32::from(value(c)) << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

/// The states of the objects of `api` as the API holds them, counted.
async fn api_counts<K>(api: &Api<K>) -> BTreeMap<String, u64>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let mut counts = BTreeMap::new();
    for object in api.list(&Default::default()).await.unwrap() {
        let value = serde_json::to_value(&object).unwrap();
        if let Some(state) = value["status"]["fsm"]["state"].as_str() {
            *counts.entry(state.to_owned()).or_insert(0) += 1;
        }
    }
    counts
}

/// The counts the page's diagram of `kind` shows, without the zeros.
const COUNTS: &str = "(kind) => Object.fromEntries([...document.querySelectorAll(
  `section.machine[data-kind=\"${kind}\"] svg text.count`)]
  .map(t => [t.dataset.state, Number(t.textContent)]).filter(([, n]) => n > 0))";

#[test]
fn the_page_follows_the_demo_live_and_matches_the_api() {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("web-view-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let demo = Demo::start();
    let url = demo
        .line_with("Web view: ")
        .trim_start_matches("Web view: ")
        .trim()
        .to_owned();
    let settled = demo.line_with("The API server stays up");
    let kubeconfig = settled
        .split("--kubeconfig ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();

    // Once the demo has settled, the page opens; the test then repeats
    // the demo's second act (drift on sso's Deployment), and the page
    // follows sso through its repair by the live updates alone.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = runtime.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
            &Default::default(),
        )
        .await
        .unwrap();
        Client::try_from(config).unwrap()
    });
    let mut browser = Browser::launch(&dir);
    browser.open(&url);
    browser.eventually(
        "the page to load and go live",
        "document.getElementById('live')?.className ?? null",
        |v| v == "on",
    );
    browser.eval("window.loadedOnce = true");
    let kinds =
        browser.eval("[...document.querySelectorAll('section.machine')].map(s => s.dataset.kind)");
    assert_eq!(
        kinds,
        json!(["Keycloak", "Integration", "Database", "WebPage", "Shop"])
    );
    assert_eq!(
        browser.eval("document.querySelectorAll('#activity li').length"),
        json!(0)
    );
    runtime
        .block_on(examples::demo::scenario::make_changes(&client, "fsm-demo"))
        .unwrap();
    let followed = browser.eventually(
        "sso seen through two transitions, back in Done",
        "[...document.querySelectorAll('#activity li[data-name=\"sso\"]')].reverse().map(li => li.dataset.state)",
        |v| v.as_array().is_some_and(|states| states.len() >= 2 && states.last() == Some(&json!("Done"))),
    );
    let states = followed.as_array().unwrap();
    assert_ne!(states[0], json!("Done"), "{followed}");
    assert!(states.windows(2).all(|w| w[0] != w[1]), "{followed}");
    assert_eq!(
        browser.eval("window.loadedOnce === true"),
        json!(true),
        "the page reloaded"
    );
    let sso_row = browser.eval("document.querySelector('tr[data-key=\"Keycloak/fsm-demo/sso\"] td.state')?.textContent ?? null");
    assert_eq!(sso_row, json!("Done"));

    // The page shows what the API holds.
    let keycloaks: Api<Keycloak> = Api::namespaced(client.clone(), "fsm-demo");
    let integrations: Api<Integration> = Api::namespaced(client.clone(), "fsm-demo");
    for (kind, expected) in [
        ("Keycloak", runtime.block_on(api_counts(&keycloaks))),
        ("Integration", runtime.block_on(api_counts(&integrations))),
    ] {
        assert!(!expected.is_empty(), "{kind}: no records in the API");
        let expected = serde_json::to_value(&expected).unwrap();
        browser.eventually(
            &format!("the {kind} counts of the API ({expected})"),
            &format!("({COUNTS})('{kind}')"),
            |shown| *shown == expected,
        );
    }
    let first = runtime
        .block_on(integrations.list(&Default::default()))
        .unwrap()
        .items
        .into_iter()
        .next()
        .unwrap();
    let record = serde_json::to_value(&first).unwrap()["status"]["fsm"].clone();
    let row = browser.eval(&format!(
        "(() => {{ const tr = document.querySelector('tr[data-key=\"Integration/fsm-demo/{}\"]');
           return tr && [...tr.children].map(td => td.textContent); }})()",
        first.name_any()
    ));
    assert_eq!(row[0], json!(first.name_any()), "{row}");
    assert_eq!(row[1], json!("fsm-demo"));
    assert_eq!(
        row[2].as_str().unwrap().split(' ').next(),
        record["state"].as_str(),
        "{row} vs {record}"
    );
    assert_eq!(
        row[3],
        json!(record["attempt"].as_u64().unwrap_or(0).to_string())
    );

    // Filtering by state keeps only that state's rows.
    let state = record["state"].as_str().unwrap();
    let filtered = browser.eval(&format!(
        "(() => {{ const s = document.querySelector('section.machine[data-kind=\"Integration\"]');
           const select = s.querySelector('select.state-filter');
           select.value = '{state}'; select.dispatchEvent(new Event('input'));
           const states = [...s.querySelectorAll('tbody tr')].map(tr => tr.dataset.state);
           select.value = ''; select.dispatchEvent(new Event('input'));
           return states; }})()"
    ));
    let filtered = filtered.as_array().unwrap();
    assert!(
        !filtered.is_empty() && filtered.iter().all(|s| s == state),
        "{filtered:?}"
    );

    // A screenshot with something on it: a valid PNG whose pixels, decoded
    // by the browser itself, are not all alike.
    let shot = browser.call(
        "Page.captureScreenshot",
        json!({"format": "png", "captureBeyondViewport": true}),
    );
    let data = shot["data"].as_str().unwrap().to_owned();
    let png = base64_decode(&data);
    let (width, height) = png_size(&png);
    assert!(width >= 800 && height >= 600, "{width}x{height}");
    let path = dir.join("web-view.png");
    std::fs::write(&path, &png).unwrap();
    let colors = browser.eval(&format!(
        "new Promise(done => {{
           const image = new Image();
           image.onload = () => {{
             const canvas = document.createElement('canvas');
             canvas.width = image.width; canvas.height = image.height;
             const context = canvas.getContext('2d');
             context.drawImage(image, 0, 0);
             const pixels = context.getImageData(0, 0, image.width, image.height).data;
             const colors = new Set();
             for (let i = 0; i < pixels.length; i += 4 * 97) colors.add(pixels[i] << 16 | pixels[i + 1] << 8 | pixels[i + 2]);
             done(colors.size);
           }};
           image.src = 'data:image/png;base64,{data}';
         }})"
    ));
    assert!(
        colors.as_u64().unwrap() > 8,
        "a blank screenshot: {colors} colors ({})",
        path.display()
    );
    let mut saved = Vec::new();
    std::fs::File::open(&path)
        .unwrap()
        .read_to_end(&mut saved)
        .unwrap();
    assert_eq!(saved, png);
    publish(&path);

    // The activity says its order and links each line to its object.
    let heading =
        browser.eval("document.querySelector('#activity').previousElementSibling.textContent");
    assert!(
        heading.as_str().unwrap().contains("newest first"),
        "{heading}"
    );
    let link = browser.eval(
        "document.querySelector('#activity li[data-name=\"sso\"] a')?.getAttribute('href') ?? null",
    );
    assert_eq!(link, json!("objects/Keycloak/fsm-demo/sso"));

    // Every diagram fits its section, and in the browser's own font every
    // state's name fits its box and every label its place.
    let unfit = browser.eval(FIT);
    assert_eq!(unfit, json!([]), "text that does not fit its place");

    // The long-lived shop's page: its timeline, with a bar per stay and
    // the commands people sent.
    let page = format!(
        "{}/objects/Shop/fsm-demo/{}",
        url.trim_end_matches('/'),
        examples::demo::shop_story::SHOP
    );
    browser.call("Page.navigate", json!({"url": page}));
    let stays = browser.eventually(
        "the shop's timeline",
        "document.querySelectorAll('svg.fsm-timeline g.stay').length",
        |n| n.as_u64().is_some_and(|n| n >= 4),
    );
    let commands = browser.eval("document.querySelectorAll('svg.fsm-timeline g.mark.command, svg.fsm-timeline g.mark.refused').length");
    assert!(
        commands.as_u64().unwrap() >= 3,
        "{commands} commands, {stays} stays"
    );
    let listed =
        browser.eval("[...document.querySelectorAll('ol.marks li')].map(li => li.textContent)");
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|line| line.as_str().unwrap().contains("command")),
        "{listed}"
    );
    let unfit = browser.eval(FIT);
    assert_eq!(unfit, json!([]), "text that does not fit its place");
    let shot = browser.call(
        "Page.captureScreenshot",
        json!({"format": "png", "captureBeyondViewport": true}),
    );
    let png = base64_decode(shot["data"].as_str().unwrap());
    let (width, height) = png_size(&png);
    assert!(width >= 800 && height >= 600, "{width}x{height}");
    let path = dir.join("web-view-timeline.png");
    std::fs::write(&path, &png).unwrap();
    publish(&path);
}

/// What does not fit in the page, in the browser's own fonts: a diagram
/// wider than its place, a state's name wider than its box, a label wider
/// than the place kept for it, a timeline wider than its section.
const FIT: &str = "(() => {
  const problems = [];
  const inside = (a, b) => a.x >= b.x - 1 && a.y >= b.y - 1 &&
    a.x + a.width <= b.x + b.width + 1 && a.y + a.height <= b.y + b.height + 1;
  document.querySelectorAll('.diagram, .chart').forEach(d => {
    if (d.scrollWidth > d.clientWidth + 1) problems.push('scrolls: ' + d.innerHTML.slice(0, 80));
  });
  document.querySelectorAll('svg.fsm-diagram g.state').forEach(g => {
    const box = g.querySelector('rect.box').getBBox();
    g.querySelectorAll('text').forEach(t => {
      if (!inside(t.getBBox(), box)) problems.push('name out of its box: ' + t.textContent);
    });
  });
  document.querySelectorAll('svg.fsm-diagram g.edge').forEach(g => {
    const place = g.querySelector('rect.label-box');
    const text = g.querySelector('text.label');
    if (place && text && !inside(text.getBBox(), place.getBBox()))
      problems.push('label out of its place: ' + text.textContent);
  });
  return problems;
})()";

/// Copies a screenshot to `$FSM_SCREENSHOT_DIR` when set (the docs'
/// pictures: `FSM_SCREENSHOT_DIR=docs/images`).
fn publish(path: &Path) {
    if let Some(dir) = std::env::var_os("FSM_SCREENSHOT_DIR") {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
        let name = path.file_name().unwrap();
        std::fs::copy(path, dir.join(name)).unwrap();
    }
}
