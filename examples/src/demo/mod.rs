//! The main demo: the five example operators at work, on the embedded API
//! server (or a real cluster), with live progress and a summary.
//!
//! `cargo run -p examples --bin demo` starts the embedded API server, a
//! simulated kube-controller-manager ([`operator_fsm::testkit::simulation`]) and the cloud
//! API of the `database` example, installs the CRDs, creates seven objects
//! ([`scenario`]), runs the five operators, follows every object until it
//! rests, changes some of them (the second act, with the shop's long life:
//! [`shop_story`]), follows them again, and prints each object's history
//! and the machines' diagrams. It succeeds when every object rests in the
//! state it is expected to.

pub mod observe;
pub mod render;
pub mod scenario;
pub mod shop_story;

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use operator_fsm::ReconcilerOptions;
use operator_fsm::cli::{CrdArgs, Operator, StoreKind};
use operator_fsm::core::Fsm;
use operator_fsm::testkit::simulation::Simulation;
use operator_fsm::testkit::{ApiServer, HttpServer, ServeError};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::database::cloud::{CloudConfig, CloudService, Ledger};
use crate::database::{self, DbContext, DbState};
use crate::integration::{self, IntegrationContext, IntegrationPhase};
use crate::mutable_jar::{self, JarContext, JarState};
use crate::shop::{self, ShopContext, ShopState};
use crate::support::{human, install_crd};
use crate::webpage::{self, PageState};
use observe::{Kind, ObjectView, observe};
use render::Progress;
use shop_story::{ShopStory, StoryError};

/// How the demo runs.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Give up after this long.
    pub timeout: Duration,
    /// Run against the cluster of this kubeconfig instead of the embedded
    /// API server.
    pub kubeconfig: Option<PathBuf>,
    /// Serve the embedded API server over HTTP for `kubectl`, and keep it
    /// up after the summary until Ctrl-C.
    pub serve: bool,
    /// The namespace of the demo's objects.
    pub namespace: String,
    /// With `kubeconfig`: simulate the Job and Deployment controllers there
    /// too (for an API server that runs none, such as `fsm-apiserver`; never
    /// on a real cluster, whose controllers it would contradict).
    pub simulate: bool,
    /// Redraw the progress table in place (a terminal) instead of printing
    /// a line per change.
    pub live: bool,
    /// How often to look at the objects.
    pub refresh: Duration,
    /// Serve the web view of the five machines and their objects on this
    /// address while the demo runs (and, with `serve`, until Ctrl-C).
    pub view: Option<std::net::SocketAddr>,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            timeout: Duration::from_secs(120),
            kubeconfig: None,
            serve: false,
            simulate: false,
            namespace: "fsm-demo".to_owned(),
            live: false,
            refresh: Duration::from_millis(250),
            view: None,
        }
    }
}

/// Why the demo could not run.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The kubeconfig could not be read.
    #[error("cannot use the kubeconfig")]
    Kubeconfig(#[source] KubeconfigError),
    /// The Kubernetes API failed during setup or while following objects.
    #[error("the Kubernetes API failed")]
    Kube(#[from] kube::Error),
    /// The embedded API server could not listen.
    #[error("cannot serve the embedded API server")]
    Serve(#[from] ServeError),
    /// A definition to install could not be built.
    #[error("cannot build a custom resource definition")]
    Crd(#[source] operator_fsm::cli::Error),
    /// The cloud API could not start, or output failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// What the demo saw.
#[derive(Clone, Debug)]
pub struct DemoReport {
    /// Every object at the end.
    pub views: Vec<ObjectView>,
    /// The cloud API's ledger at the end.
    pub ledger: Ledger,
    /// How long it ran.
    pub elapsed: Duration,
    /// Whether the shop's story ([`shop_story`]) was told to its end.
    pub story_told: bool,
}

impl DemoReport {
    /// Whether every object rests in its expected state, and the shop got
    /// there through its whole story.
    pub fn success(&self) -> bool {
        self.story_told && self.views.iter().all(ObjectView::at_rest_as_expected)
    }
}

/// Aborts the tasks it holds when dropped.
struct Tasks(Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// The web view's task; stopped when dropped.
struct ViewTask(tokio::task::JoinHandle<()>);

impl Drop for ViewTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Serves the web view of the demo's five machines on `addr`, and says
/// where.
async fn serve_view(
    client: &Client,
    addr: std::net::SocketAddr,
    namespace: &str,
    out: &mut impl Write,
) -> Result<ViewTask, DemoError> {
    use operator_fsm::records::Watched;
    use operator_fsm::view::web::WebView;

    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let view = WebView::new(
        client.clone(),
        vec![
            Watched::of::<JarState>(StoreKind::Status),
            Watched::of::<IntegrationPhase>(StoreKind::Status),
            Watched::of::<DbState>(StoreKind::Secret),
            Watched::of::<PageState>(StoreKind::Status),
            Watched::of::<ShopState>(StoreKind::Status),
        ],
        Some(namespace.to_owned()),
    );
    writeln!(out, "Web view: http://{bound}/")?;
    out.flush()?;
    Ok(ViewTask(tokio::spawn(async move {
        if let Err(error) = view.serve(listener).await {
            tracing::error!(%error, "the web view stopped");
        }
    })))
}

/// Where the operators run; the simulation stops when it is dropped.
struct Cluster {
    client: Client,
    /// The embedded server, when there is no kubeconfig.
    _server: Option<ApiServer>,
    http: Option<HttpServer>,
    simulation: Option<Simulation>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(simulation) = &self.simulation {
            simulation.stop();
        }
    }
}

async fn connect(options: &DemoOptions, out: &mut impl Write) -> Result<Cluster, DemoError> {
    if let Some(path) = &options.kubeconfig {
        let kubeconfig = Kubeconfig::read_from(path).map_err(DemoError::Kubeconfig)?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(DemoError::Kubeconfig)?;
        writeln!(
            out,
            "Using the cluster of {} ({}).",
            path.display(),
            config.cluster_url
        )?;
        let client = Client::try_from(config)?;
        let simulation = if options.simulate {
            writeln!(
                out,
                "Simulating Job and Deployment controllers there (--simulate)."
            )?;
            Some(Simulation::through(
                client.clone(),
                Some(&options.namespace),
                scenario::simulation_config(),
            ))
        } else {
            writeln!(
                out,
                "Jobs and Deployments must really run there (--simulate fakes them on an API server without controllers)."
            )?;
            None
        };
        return Ok(Cluster {
            client,
            _server: None,
            http: None,
            simulation,
        });
    }
    let server = ApiServer::new();
    let client = server.client();
    writeln!(
        out,
        "Embedded API server started in-process, with simulated Job and Deployment controllers."
    )?;
    let http = if options.serve {
        let http = server.serve_http().await?;
        writeln!(
            out,
            "Serving it on {}; try:  kubectl --kubeconfig {} get keycloaks,integrations,databases,webpages,shops -A",
            http.url(),
            http.kubeconfig().display()
        )?;
        Some(http)
    } else {
        None
    };
    let simulation = server.simulate(scenario::simulation_config());
    Ok(Cluster {
        client,
        _server: Some(server),
        http,
        simulation: Some(simulation),
    })
}

/// The store each demo operator keeps its records in: the store its
/// runner ([`start_operators`]) builds.
pub const STORES: [(Kind, StoreKind); 5] = [
    (Kind::Keycloak, StoreKind::Status),
    (Kind::Integration, StoreKind::Status),
    (Kind::Database, StoreKind::Secret),
    (Kind::WebPage, StoreKind::Status),
    (Kind::Shop, StoreKind::Status),
];

/// The definitions the demo installs: for each kind, exactly what its
/// operator's `crd` command prints (with `--printer-columns` where the
/// records are in the status, as printer columns can only read the
/// object), so that `kubectl fsm get|describe|diagram|watch` find the
/// published machine on them and `kubectl get` shows each object's state.
///
/// # Errors
/// [`DemoError::Crd`]: a definition could not be built (not expected).
pub fn crds() -> Result<Vec<CustomResourceDefinition>, DemoError> {
    STORES
        .iter()
        .map(|&(kind, store)| {
            let args = CrdArgs {
                printer_columns: store == StoreKind::Status,
                ..CrdArgs::default()
            };
            let name = format!("{}-operator", kind.name());
            match kind {
                Kind::Keycloak => Operator::<JarState>::new(name, store).crd_definition(&args),
                Kind::Integration => {
                    Operator::<IntegrationPhase>::new(name, store).crd_definition(&args)
                }
                Kind::Database => Operator::<DbState>::new(name, store).crd_definition(&args),
                Kind::WebPage => Operator::<PageState>::new(name, store).crd_definition(&args),
                Kind::Shop => Operator::<ShopState>::new(name, store).crd_definition(&args),
            }
            .map_err(DemoError::Crd)
        })
        .collect()
}

fn reconciler_options() -> ReconcilerOptions {
    ReconcilerOptions::default()
        .poll_interval(Duration::from_secs(2))
        .error_requeue(Duration::from_millis(300))
}

/// Starts the five operators, for the demo's namespace only: on a shared
/// cluster, objects elsewhere are none of the demo's business.
fn start_operators(
    client: &Client,
    namespace: &str,
    cloud_url: &str,
    shops: ShopContext,
) -> Vec<JoinHandle<()>> {
    let scope = || Some(namespace.to_owned());
    vec![
        tokio::spawn(mutable_jar::run_in(
            client.clone(),
            scope(),
            JarContext::new(client.clone()),
            reconciler_options(),
        )),
        tokio::spawn(integration::run_in(
            client.clone(),
            scope(),
            IntegrationContext::new(client.clone()),
            reconciler_options(),
        )),
        tokio::spawn(database::run_in(
            client.clone(),
            scope(),
            DbContext::new(client.clone(), cloud_url),
            reconciler_options(),
        )),
        tokio::spawn(webpage::run_machine_in(
            client.clone(),
            scope(),
            webpage::runtime(client.clone()).pending_requeue(Duration::from_secs(2)),
            reconciler_options(),
        )),
        tokio::spawn(shop::run_in(
            client.clone(),
            scope(),
            shops,
            reconciler_options(),
        )),
    ]
}

/// Whether every object rests, in its expected state or not.
fn settled(views: &[ObjectView]) -> bool {
    views.iter().all(|view| {
        let Some(record) = &view.record else {
            return false;
        };
        let machine = match view.tracked.kind {
            observe::Kind::Keycloak => JarState::machine(),
            observe::Kind::Integration => IntegrationPhase::machine(),
            observe::Kind::Database => DbState::machine(),
            observe::Kind::WebPage => PageState::machine(),
            observe::Kind::Shop => ShopState::machine(),
        };
        let resting = machine
            .state(&record.state)
            .is_some_and(|s| s.is_resting() || s.is_ready());
        resting && !record.is_unwinding() && record.next_attempt_at.is_none()
    })
}

fn report_success(views: &[ObjectView]) -> bool {
    views.iter().all(ObjectView::at_rest_as_expected)
}

/// The shop's story while it is told: its lines, and its task.
struct StoryRun {
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
    task: Option<JoinHandle<Result<(), StoryError>>>,
    /// How it ended, once it did.
    outcome: Option<Result<(), String>>,
}

impl StoryRun {
    /// Starts telling `story`.
    fn start(story: impl FnOnce(tokio::sync::mpsc::UnboundedSender<String>) -> ShopStory) -> Self {
        let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
        let story = story(tx);
        StoryRun {
            lines,
            task: Some(tokio::spawn(story.tell())),
            outcome: None,
        }
    }

    /// Writes the lines told since the last call; whether the story is
    /// over.
    async fn drain(
        &mut self,
        out: &mut impl Write,
        progress: &mut Progress,
    ) -> Result<bool, DemoError> {
        let mut lines = Vec::new();
        while let Ok(line) = self.lines.try_recv() {
            lines.push(line);
        }
        if !lines.is_empty() {
            progress.detach();
            for line in lines {
                writeln!(out, "Shop: {line}")?;
            }
        }
        if self.task.as_ref().is_some_and(JoinHandle::is_finished)
            && let Some(task) = self.task.take()
        {
            self.outcome = Some(match task.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(operator_fsm::core::text::display_chain(&e, ": ")),
                Err(e) => Err(e.to_string()),
            });
            // The last lines came before the task ended.
            while let Ok(line) = self.lines.try_recv() {
                progress.detach();
                writeln!(out, "Shop: {line}")?;
            }
        }
        Ok(self.outcome.is_some())
    }
}

impl Drop for StoryRun {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// What following the objects needs.
struct FollowArgs<'a> {
    client: &'a Client,
    namespace: &'a str,
    tracked: &'a [observe::Tracked],
    refresh: Duration,
    started: Instant,
    deadline: Instant,
}

impl FollowArgs<'_> {
    /// Shows progress until every object rests, each object of
    /// `baseline` (index, transitions) has moved since, and `story` (the
    /// shop's, in the second act) is over, or the deadline.
    async fn until_settled(
        &self,
        out: &mut impl Write,
        progress: &mut Progress,
        baseline: &[(usize, u64)],
        mut story: Option<&mut StoryRun>,
    ) -> Result<Vec<ObjectView>, DemoError> {
        loop {
            let told = match story.as_deref_mut() {
                Some(story) => story.drain(out, progress).await?,
                None => true,
            };
            let views = observe(self.client, self.namespace, self.tracked).await?;
            progress.update(out, &views, self.started.elapsed(), jiff::Timestamp::now())?;
            let moved = baseline.iter().all(|&(i, transitions)| {
                views[i]
                    .record
                    .as_ref()
                    .is_some_and(|r| r.transitions > transitions)
            });
            if (told && moved && settled(&views)) || Instant::now() >= self.deadline {
                return Ok(views);
            }
            tokio::time::sleep(self.refresh).await;
        }
    }
}

/// Runs the demo, writing progress and the summary to `out`.
///
/// # Errors
/// [`DemoError`] when the demo could not set up or follow its objects;
/// objects that end in an unexpected state are not an error (see
/// [`DemoReport::success`]).
pub async fn run(options: &DemoOptions, out: &mut impl Write) -> Result<DemoReport, DemoError> {
    let started = Instant::now();
    let cluster = connect(options, out).await?;
    let client = cluster.client.clone();
    for crd in crds()? {
        install_crd(&client, &crd).await?;
    }
    let cloud = CloudService::start(CloudConfig::default()).await?;
    writeln!(
        out,
        "Cloud database API (non-idempotent, fails ~20% of calls) on {}.",
        cloud.url()
    )?;
    let shops = ShopContext::new(client.clone());
    shops.migrations.break_version(shop_story::BROKEN_VERSION);
    let migrations = shops.migrations.clone();
    let tasks = Tasks(start_operators(
        &client,
        &options.namespace,
        &cloud.url(),
        shops,
    ));
    let _view = match options.view {
        Some(addr) => Some(serve_view(&client, addr, &options.namespace, out).await?),
        None => None,
    };
    let tracked = scenario::tracked();
    scenario::create_objects(&client, &options.namespace).await?;
    writeln!(
        out,
        "Created {} objects in namespace {}; operators running.\n",
        tracked.len(),
        options.namespace
    )?;

    let mut progress = Progress::new(options.live, Duration::from_secs(5));
    let deadline = started + options.timeout;
    let follow = FollowArgs {
        client: &client,
        namespace: &options.namespace,
        tracked: &tracked,
        refresh: options.refresh,
        started,
        deadline,
    };
    let mut views = follow.until_settled(out, &mut progress, &[], None).await?;
    let mut story_told = false;

    // Act two: someone edits things behind the operators' backs.
    if report_success(&views) {
        let baseline: Vec<(usize, u64)> = scenario::CHANGED
            .iter()
            .filter_map(|(kind, name)| {
                let i = views
                    .iter()
                    .position(|v| v.tracked.kind == *kind && v.tracked.name == *name)?;
                Some((i, views[i].record.as_ref()?.transitions))
            })
            .collect();
        progress.detach();
        writeln!(out)?;
        for line in scenario::make_changes(&client, &options.namespace).await? {
            writeln!(out, "Change: {line}")?;
        }
        writeln!(out)?;
        let mut story = StoryRun::start(|lines| {
            ShopStory::new(
                client.clone(),
                &options.namespace,
                migrations.clone(),
                lines,
                deadline,
            )
        });
        views = follow
            .until_settled(out, &mut progress, &baseline, Some(&mut story))
            .await?;
        match &story.outcome {
            Some(Ok(())) => story_told = true,
            Some(Err(error)) => writeln!(out, "\nThe shop's story stopped: {error}")?,
            None => {}
        }
    }
    let elapsed = started.elapsed();
    if Instant::now() >= deadline {
        writeln!(
            out,
            "\nTimed out after {} with objects still at work.",
            human(options.timeout)
        )?;
    }
    render::summary(out, &views, elapsed)?;

    let ledger = cloud.ledger();
    writeln!(out)?;
    writeln!(
        out,
        "Cloud API ledger: {} instance(s) created, {} deleted; {} injected failures survived, {} of them creates whose answer was lost.",
        ledger.charges.len(),
        ledger.deleted.len(),
        ledger.injected_failures,
        ledger.lost_answers
    )?;
    for t in tracked.iter().filter(|t| t.kind == observe::Kind::Database) {
        writeln!(
            out,
            "    {}: paid {} time(s)",
            t.name,
            ledger.creates_for(&t.name)
        )?;
    }
    writeln!(out)?;
    for (title, diagram) in [
        ("mutable_jar::JarState", JarState::mermaid()),
        ("integration::IntegrationPhase", IntegrationPhase::mermaid()),
        ("database::DbState", DbState::mermaid()),
        ("webpage::PageState", PageState::mermaid()),
        ("shop::ShopState", ShopState::mermaid()),
    ] {
        writeln!(out, "{title}:\n```mermaid\n{}```\n", diagram)?;
    }
    let report = DemoReport {
        views,
        ledger,
        elapsed,
        story_told,
    };
    writeln!(
        out,
        "{}",
        if report.success() {
            "Demo succeeded: every object rests where expected."
        } else {
            "Demo FAILED: some objects did not rest where expected."
        }
    )?;
    if let Some(http) = &cluster.http {
        writeln!(
            out,
            "The API server stays up for kubectl: --kubeconfig {} (Ctrl-C to stop).",
            http.kubeconfig().display()
        )?;
        out.flush()?;
        tokio::signal::ctrl_c().await?;
    }
    drop(tasks);
    Ok(report)
}
