//! The web view (`fsm_kube::view::web`) against hostile requests, on the
//! embedded server or the real kube-apiserver: names that would change an
//! API request, `Host` headers of other sites (DNS rebinding), the
//! security headers, the cap on event streams, and object pages read once
//! for every viewer.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fsm_kube::cli::StoreKind;
use fsm_kube::records::Watched;
use fsm_kube::view::web::{ViewLimits, WebView};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::http::{Answer, get_with, parse_head};
use crate::common::*;

/// `GET path` with `Host: host`.
async fn get(addr: SocketAddr, path: &str, host: &str) -> Answer {
    get_with(addr, path, &[("Host", host)]).await
}

/// Opens `/events` and reads the answer's head; the stream stays open
/// while the returned connection lives.
async fn open_events(addr: SocketAddr) -> (u16, BTreeMap<String, String>, TcpStream) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /events HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n")
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    tokio::time::timeout(Duration::from_secs(10), async {
        while !head.ends_with(b"\r\n\r\n") {
            let n = stream.read(&mut byte).await.unwrap();
            assert_eq!(n, 1, "the connection closed before the head");
            head.push(byte[0]);
        }
    })
    .await
    .expect("the head of /events within 10 s");
    let (status, headers) = parse_head(&String::from_utf8_lossy(&head));
    (status, headers, stream)
}

/// Serves `view` on a loopback port until the task is aborted.
async fn serve(view: WebView) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        view.serve(listener).await.unwrap();
    });
    (addr, task)
}

fn view(env: &Env) -> WebView {
    WebView::new(
        env.client.clone(),
        vec![Watched::of::<WidgetState>(StoreKind::Status)],
        Some(env.ns.clone()),
    )
}

/// The view's row of widget `name` is there: the watches have started.
async fn wait_for_row(addr: SocketAddr, name: &str) {
    eventually("the view's row", || async {
        let answer = get(addr, "/api/objects", "localhost").await;
        answer
            .body
            .contains(&format!("\"name\":\"{name}\""))
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_would_change_the_api_request_are_refused_quickly() {
    let env = env().await;
    create_widget(&env, "x", WidgetSpec::colored("red")).await;
    let (addr, task) = serve(view(&env)).await;
    let ns = &env.ns;
    // The object itself is shown: what follows is refused for its name.
    let page = get(addr, &format!("/objects/Widget/{ns}/x"), "localhost").await;
    assert_eq!(page.status, 200, "{}", page.body);
    for path in [
        format!("/objects/Widget/{ns}/x%3Fwatch=true"),
        format!("/objects/Widget/{ns}/x%3Fwatch=true&timeoutSeconds=40"),
        format!("/objects/Widget/{ns}/x%3FresourceVersion=0"),
        format!("/objects/Widget/{ns}/x%2Fstatus"),
        format!("/objects/Widget/{ns}/x%23frag"),
        format!("/objects/Widget/{ns}/X"),
        format!("/objects/Widget/{ns}/.."),
        format!("/objects/Widget/{ns}/x%20y"),
        format!("/objects/Widget/{ns}%3Fwatch=true/x"),
        format!("/objects/Widget/{ns}%2Fwidgets/x"),
        "/objects/Widget/a%2Fb/x".to_owned(),
    ] {
        let started = Instant::now();
        let answer = get(addr, &path, "localhost").await;
        assert_eq!(answer.status, 400, "{path}: {}", answer.body);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{path} took {:?}",
            started.elapsed()
        );
    }
    // Nothing of another namespace through a view of one.
    let other = get(addr, "/objects/Widget/default/x", "localhost").await;
    assert_eq!(other.status, 404, "{}", other.body);
    if let Some(server) = env.embedded() {
        let odd = server
            .request_log()
            .records()
            .into_iter()
            .filter(|r| r.name.as_deref().is_some_and(|n| n != "x") && r.resource == "widgets")
            .map(|r| r.path)
            .collect::<Vec<_>>();
        assert!(odd.is_empty(), "requests for other names: {odd:?}");
    }
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_of_other_sites_are_refused() {
    let env = env().await;
    let (addr, task) = serve(view(&env)).await;
    let port = addr.port();
    for host in [
        "localhost".to_owned(),
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ] {
        let answer = get(addr, "/api/objects", &host).await;
        assert_eq!(answer.status, 200, "{host}: {}", answer.body);
    }
    for host in [
        format!("attacker.example.com:{port}"),
        "attacker.example.com".to_owned(),
        "localhost.attacker.example.com".to_owned(),
        "view.example.io".to_owned(),
    ] {
        for path in ["/", "/api/objects", "/events"] {
            let answer = get(addr, path, &host).await;
            assert_eq!(answer.status, 403, "{host} {path}: {}", answer.body);
            assert_eq!(answer.headers["x-frame-options"], "DENY");
        }
    }
    task.abort();

    // A name allowed for a Service or an Ingress.
    let (addr, task) = serve(view(&env).allow_hosts(["View.Example.IO".to_owned()])).await;
    let allowed = get(addr, "/api/objects", "view.example.io:443").await;
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    let other = get(addr, "/api/objects", "attacker.example.com").await;
    assert_eq!(other.status, 403);
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_carries_the_security_headers() {
    let env = env().await;
    create_widget(&env, "w", WidgetSpec::colored("red")).await;
    let (addr, task) = serve(view(&env)).await;
    wait_for_row(addr, "w").await;
    let ns = &env.ns;
    let index = get(addr, "/", "localhost").await;
    assert_eq!(index.status, 200);
    // Nothing inline: the policy forbids it.
    assert!(!index.body.contains("<script>"), "{}", index.body);
    assert!(!index.body.contains("<style>"), "{}", index.body);
    assert!(index.body.contains("<script src=\"assets/view.js\">"));
    for (path, status, data) in [
        ("/".to_owned(), 200, false),
        ("/api/objects".to_owned(), 200, true),
        (format!("/objects/Widget/{ns}/w"), 200, false),
        (format!("/objects/Widget/{ns}/missing"), 404, false),
        (format!("/objects/Widget/{ns}/x%3Fwatch=true"), 400, false),
        ("/assets/view.js".to_owned(), 200, false),
        ("/assets/view.css".to_owned(), 200, false),
        ("/nowhere".to_owned(), 404, false),
    ] {
        let answer = get(addr, &path, "localhost").await;
        assert_eq!(answer.status, status, "{path}: {}", answer.body);
        let h = &answer.headers;
        let csp = h
            .get("content-security-policy")
            .unwrap_or_else(|| panic!("{path}: no CSP in {h:?}"));
        assert!(csp.contains("default-src 'none'"), "{path}: {csp}");
        assert!(csp.contains("script-src 'self'"), "{path}: {csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(!csp.contains("unsafe-inline"), "{path}: {csp}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["referrer-policy"], "no-referrer", "{path}");
        assert_eq!(h["cache-control"], "no-store", "{path}");
        if data {
            assert!(h["content-type"].starts_with("application/json"), "{path}");
        }
    }
    let script = get(addr, "/assets/view.js", "localhost").await;
    assert!(script.headers["content-type"].starts_with("text/javascript"));
    assert!(script.body.contains("EventSource"), "{}", script.body);
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_over_the_cap_are_refused_and_their_slots_come_back() {
    let env = env().await;
    let limited = view(&env).limits(ViewLimits {
        max_streams: 2,
        ..ViewLimits::default()
    });
    let (addr, task) = serve(limited.clone()).await;
    let (first, _, a) = open_events(addr).await;
    let (second, _, b) = open_events(addr).await;
    assert_eq!((first, second), (200, 200));
    let (over, headers, _c) = open_events(addr).await;
    assert_eq!(over, 503, "{headers:?}");
    assert_eq!(headers["retry-after"], "5");
    assert_eq!(headers["connection"], "close");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    // Pages and data are still served.
    assert_eq!(get(addr, "/api/objects", "localhost").await.status, 200);
    assert_eq!(limited.viewers(), 2);

    // The browsers go away: their slots are freed.
    drop((a, b));
    let started = Instant::now();
    eventually("the streams' slots freed", || async {
        (limited.viewers() == 0).then_some(())
    })
    .await;
    let freed = started.elapsed();
    let (again, _, _d) = open_events(addr).await;
    assert_eq!(again, 200, "a stream after the others closed");
    eprintln!("stream slots freed {freed:?} after the browsers left");
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewers_share_the_reads_of_an_objects_page() {
    let env = env().await;
    create_widget(&env, "w", WidgetSpec::colored("red")).await;
    let (addr, task) = serve(view(&env)).await;
    wait_for_row(addr, "w").await;
    let views = 10;
    let log = env.embedded().map(|server| server.request_log());
    let since = log.map(|log| log.total());
    let path = format!("/objects/Widget/{}/w", env.ns);
    let pages = futures::future::join_all((0..views).map(|_| get(addr, &path, "localhost"))).await;
    for page in &pages {
        assert_eq!(page.status, 200, "{}", page.body);
        assert!(page.body.contains("<h1>"), "{}", page.body);
    }
    for _ in 0..views {
        assert_eq!(get(addr, &path, "localhost").await.status, 200);
    }
    if let (Some(log), Some(since)) = (log, since) {
        let (_, records) = log.records_since(since);
        let reads: Vec<String> = records
            .iter()
            .filter(|r| r.verb != "watch")
            .map(|r| format!("{} {}", r.verb, r.path))
            .collect();
        eprintln!(
            "{} page views: {} API requests: {reads:#?}",
            2 * views,
            reads.len()
        );
        // One read of the page (the object, the Events), at most once more
        // should the cache have expired or a watch event arrived meanwhile.
        assert!(
            reads.len() <= 4,
            "{} page views cost {} requests: {reads:#?}",
            2 * views,
            reads.len()
        );
    }
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_say_nothing_are_closed_and_streams_stay_open() {
    let env = env().await;
    let limited = view(&env).limits(ViewLimits {
        idle_timeout: Duration::from_millis(600),
        ..ViewLimits::default()
    });
    let (addr, task) = serve(limited.clone()).await;
    // A client that connects and never sends a request is let go.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let started = Instant::now();
    let mut buffer = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(10), silent.read(&mut buffer))
        .await
        .expect("the silent connection closed within 10 s");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    eprintln!("a silent connection closed after {:?}", started.elapsed());
    // An event stream outlives the idle timeout: its keep-alives count.
    let (status, _, mut stream) = open_events(addr).await;
    assert_eq!(status, 200);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(limited.viewers(), 1, "the stream was closed while idle");
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer))
        .await
        .expect("a keep-alive within 5 s")
        .unwrap();
    assert!(n > 0, "the stream was closed");
    task.abort();
}
