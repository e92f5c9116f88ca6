//! One differential scenario on one server, and the runner that plays a
//! scenario on both servers and compares what each observed.
//!
//! A scenario is an `async fn(&mut Scene) -> Fallible`: it talks to the
//! server through [`Scene::client`] (typed `kube::Api`s) or the raw-request
//! helpers (exact status codes and bodies), asserts what Kubernetes
//! promises, and [`Scene::record`]s what it saw. Each run gets a namespace
//! and a CRD group of its own (both carry a random token that
//! [`crate::normalize`] hides), so runs on one real cluster do not collide.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::{FutureExt, StreamExt, TryStreamExt};
use http::{Method, Request};
use kube::api::{Api, WatchEvent, WatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::cluster::{Backend, TestCluster};
use crate::observe::Observations;

/// The error type of scenarios: any error, with its message.
pub type Fallible<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// How long one scenario may take on one server.
pub const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

/// An HTTP answer: the status code and the JSON body (`null` if empty,
/// a string if not JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reply {
    /// The HTTP status code.
    pub code: u16,
    /// The body.
    pub body: Value,
}

impl Reply {
    /// The `Status` reason of an error answer (empty if none).
    #[must_use]
    pub fn reason(&self) -> &str {
        self.body["reason"].as_str().unwrap_or_default()
    }

    /// The body's `metadata.resourceVersion` (empty if none).
    #[must_use]
    pub fn rv(&self) -> String {
        self.body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Fails unless the code is `code`, showing the body.
    ///
    /// # Errors
    /// A message with the code and body.
    pub fn expect(self, code: u16) -> Fallible<Self> {
        if self.code == code {
            Ok(self)
        } else {
            Err(format!("expected HTTP {code}, got {}: {}", self.code, self.body).into())
        }
    }
}

/// A scenario's workspace on one server.
pub struct Scene {
    cluster: TestCluster,
    client: kube::Client,
    /// The namespace made for this run.
    pub ns: String,
    /// The random token in this run's names.
    pub token: String,
    obs: Observations,
    crds: Vec<String>,
    /// Paths of cluster-scoped objects to delete at close.
    cluster_scoped: Vec<String>,
    /// The embedded server's simulated controllers, when started.
    simulation: Option<fsm_testkit::simulation::Simulation>,
}

impl Scene {
    /// Opens a scene for `scenario` on `cluster`: creates its namespace.
    ///
    /// # Errors
    /// When the namespace cannot be created.
    pub async fn open(cluster: TestCluster, scenario: &str) -> Fallible<Self> {
        let token = random_token();
        let mut ns = format!("c-{}", scenario.replace('_', "-"));
        ns.truncate(63 - token.len() - 1);
        let ns = format!("{}-{token}", ns.trim_end_matches('-'));
        let scene = Self {
            client: cluster.client(),
            cluster,
            ns: ns.clone(),
            obs: Observations::new(token.clone()),
            token,
            crds: Vec::new(),
            cluster_scoped: Vec::new(),
            simulation: None,
        };
        scene
            .post(
                "/api/v1/namespaces",
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )
            .await?
            .expect(201)?;
        Ok(scene)
    }

    /// Deletes what the scene created (its CRDs, the cluster-scoped objects
    /// given to [`Scene::delete_at_close`], its namespace) without waiting
    /// for the deletion to finish, and returns the observations.
    pub async fn close(self) -> Observations {
        if let Some(simulation) = &self.simulation {
            simulation.stop();
        }
        for path in &self.cluster_scoped {
            let _ = self
                .merge(path, json!({"metadata": {"finalizers": null}}))
                .await;
            let _ = self.delete(path).await;
        }
        for crd in &self.crds {
            let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}");
            let _ = self.delete(&path).await;
        }
        let _ = self
            .delete(&format!("/api/v1/namespaces/{}", self.ns))
            .await;
        self.obs
    }

    /// Binds claims to PersistentVolumes as the real server's
    /// kube-controller-manager does (its `persistentvolume-binder`, see
    /// `scripts/real-apiserver/start`): on the embedded server, starts
    /// `fsm_testkit`'s simulation until the scene closes; on the real
    /// server, does nothing, its controller binds for real. The
    /// simulation also rolls out workloads and finishes Jobs, which the
    /// real server here does not: call it only in scenarios without them.
    pub fn simulate_claim_binding(&mut self) {
        self.simulate_controllers();
    }

    /// Runs CronJobs as the real server's kube-controller-manager does (its
    /// `cronjob` controller, see `scripts/real-apiserver/start`): on the
    /// embedded server, starts `fsm_testkit`'s simulation until the scene
    /// closes; on the real server, does nothing. The simulation also runs
    /// the Jobs it creates, which the real server here does not: give the
    /// template the label `fsm-testkit.io/job-outcome: hang` to compare
    /// them.
    pub fn simulate_cron_jobs(&mut self) {
        self.simulate_controllers();
    }

    /// Starts the embedded server's simulation once.
    fn simulate_controllers(&mut self) {
        if self.simulation.is_none()
            && let Some(server) = self.cluster.embedded_server()
        {
            self.simulation = Some(server.simulate(Default::default()));
        }
    }

    /// Deletes the cluster-scoped object at `path` when the scene closes,
    /// its finalizers taken off first (the real server here runs no
    /// protection controllers), even after a failure: names of one run
    /// carry its token, but a shared real server should not keep them.
    pub fn delete_at_close(&mut self, path: impl Into<String>) {
        self.cluster_scoped.push(path.into());
    }

    /// Which server this scene runs on.
    #[must_use]
    pub fn backend(&self) -> Backend {
        self.cluster.backend()
    }

    /// The client.
    #[must_use]
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The CRD group of this run: `<token>.conformance.fsm.test`.
    #[must_use]
    pub fn group(&self) -> String {
        format!("{}.conformance.fsm.test", self.token)
    }

    /// `/api/v1/namespaces/<ns>/<resource>`.
    #[must_use]
    pub fn core(&self, resource: &str) -> String {
        format!("/api/v1/namespaces/{}/{resource}", self.ns)
    }

    /// The namespace's `default` ServiceAccount once it has its token
    /// Secret (waiting up to 30 s): a controller makes both shortly after
    /// the namespace, and until then the real server's admission refuses
    /// a Pod (500 `ServerTimeout`, "retry after the token is
    /// automatically created").
    ///
    /// # Errors
    /// Transport errors, or no token within 30 s.
    pub async fn default_service_account(&self) -> Fallible<Value> {
        let path = format!("{}/default", self.core("serviceaccounts"));
        eventually("the default ServiceAccount's token", 30, async || {
            let reply = self.get(&path).await?;
            let referenced = reply.body["secrets"]
                .as_array()
                .is_some_and(|a| !a.is_empty());
            Ok((reply.code == 200 && referenced).then_some(reply.body))
        })
        .await
    }

    /// `/apis/<group>/<version>/namespaces/<ns>/<resource>` for this run's
    /// CRD group.
    #[must_use]
    pub fn custom(&self, version: &str, resource: &str) -> String {
        format!(
            "/apis/{}/{version}/namespaces/{}/{resource}",
            self.group(),
            self.ns
        )
    }

    /// Records `value` (normalised) under `label`.
    pub fn record(&mut self, label: impl Into<String>, value: impl Serialize) {
        self.obs.record(label, value);
    }

    /// Records `value` where the embedded server is known to differ from
    /// the real one (`difference` says how): reported, not failed.
    pub fn record_known(
        &mut self,
        label: impl Into<String>,
        value: impl Serialize,
        difference: &'static str,
    ) {
        self.obs.record_known(label, value, difference);
    }

    /// A typed `Api` in this scene's namespace.
    #[must_use]
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client(), &self.ns)
    }

    /// Sends a request; any HTTP status is an answer, not an error.
    ///
    /// # Errors
    /// Transport errors only.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Option<Value>,
    ) -> Fallible<Reply> {
        self.send(method, path, "application/json", content_type, body)
            .await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        accept: &str,
        content_type: Option<&str>,
        body: Option<Value>,
    ) -> Fallible<Reply> {
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header("accept", accept);
        if let Some(ct) = content_type {
            builder = builder.header("content-type", ct);
        }
        let bytes = match body {
            Some(Value::String(s)) => s.into_bytes(),
            Some(v) => serde_json::to_vec(&v)?,
            None => Vec::new(),
        };
        let response = self
            .client
            .send(builder.body(kube::client::Body::from(bytes))?)
            .await?;
        let code = response.status().as_u16();
        let bytes = response.into_body().collect_bytes().await?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::from(String::from_utf8_lossy(&bytes).into_owned()))
        };
        Ok(Reply { code, body })
    }

    /// Sends `body` as it is (a protobuf body, say) with `accept` and
    /// `content_type`; answers the code, the `Content-Type` and the bytes.
    ///
    /// # Errors
    /// Transport errors only.
    pub async fn send_bytes(
        &self,
        method: Method,
        path: &str,
        accept: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Fallible<(u16, String, Vec<u8>)> {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("accept", accept)
            .header("content-type", content_type)
            .body(kube::client::Body::from(body))?;
        let response = self.client.send(request).await?;
        let code = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let bytes = response.into_body().collect_bytes().await?;
        Ok((code, content_type, bytes.to_vec()))
    }

    /// GET `path` as a `meta.k8s.io/v1` Table (what `kubectl get` asks for).
    ///
    /// # Errors
    /// Transport errors.
    pub async fn get_table(&self, path: &str) -> Fallible<Reply> {
        self.send(
            Method::GET,
            path,
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            None,
            None,
        )
        .await
    }

    /// GET `path` once: with a client that does not repeat a request the
    /// server answers 429, 503 or 504 (kube's default client repeats those
    /// up to 15 times, honouring `Retry-After`).
    ///
    /// # Errors
    /// Transport errors, or a kubeconfig that does not load.
    pub async fn get_once(&self, path: &str) -> Fallible<Reply> {
        let client = match self.cluster.kubeconfig() {
            Some(file) => {
                let kubeconfig = kube::config::Kubeconfig::read_from(file)?;
                let mut config =
                    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
                config.default_retry = false;
                kube::Client::try_from(config)?
            }
            None => self.client(),
        };
        let request = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header("accept", "application/json")
            .body(kube::client::Body::empty())?;
        let response = client.send(request).await?;
        let code = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = response.into_body().collect_bytes().await?;
        let mut body: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::from(String::from_utf8_lossy(&bytes).into_owned()));
        if let (Some(retry_after), Some(o)) = (retry_after, body.as_object_mut()) {
            o.insert("<Retry-After header>".into(), Value::from(retry_after));
        }
        Ok(Reply { code, body })
    }

    /// GET `path`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn get(&self, path: &str) -> Fallible<Reply> {
        self.request(Method::GET, path, None, None).await
    }

    /// POST `body` as JSON to `path`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn post(&self, path: &str, body: Value) -> Fallible<Reply> {
        self.request(Method::POST, path, Some("application/json"), Some(body))
            .await
    }

    /// PUT `body` as JSON to `path`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn put(&self, path: &str, body: Value) -> Fallible<Reply> {
        self.request(Method::PUT, path, Some("application/json"), Some(body))
            .await
    }

    /// PATCH `path` with `body` of `content_type` (a JSON value or, for
    /// YAML, a string).
    ///
    /// # Errors
    /// Transport errors.
    pub async fn patch(&self, path: &str, content_type: &str, body: Value) -> Fallible<Reply> {
        self.request(Method::PATCH, path, Some(content_type), Some(body))
            .await
    }

    /// A merge patch (`application/merge-patch+json`).
    ///
    /// # Errors
    /// Transport errors.
    pub async fn merge(&self, path: &str, body: Value) -> Fallible<Reply> {
        self.patch(path, "application/merge-patch+json", body).await
    }

    /// DELETE `path`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn delete(&self, path: &str) -> Fallible<Reply> {
        self.request(Method::DELETE, path, None, None).await
    }

    /// DELETE `path` with `DeleteOptions`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn delete_with(&self, path: &str, options: Value) -> Fallible<Reply> {
        self.request(
            Method::DELETE,
            path,
            Some("application/json"),
            Some(options),
        )
        .await
    }

    /// Creates a CRD (its `spec.group` is set to [`Scene::group`]), waits
    /// until it is `Established` and its resource answers a list, and
    /// remembers it for cleanup. Returns the CRD as last read.
    ///
    /// # Errors
    /// When creation fails or the CRD is not served within 30 s.
    pub async fn install_crd(&mut self, mut crd: Value) -> Fallible<Value> {
        let group = self.group();
        let plural = crd["spec"]["names"]["plural"]
            .as_str()
            .ok_or("CRD without spec.names.plural")?
            .to_owned();
        let name = format!("{plural}.{group}");
        crd["spec"]["group"] = Value::from(group.clone());
        crd["metadata"]["name"] = Value::from(name.clone());
        crd["apiVersion"] = Value::from("apiextensions.k8s.io/v1");
        crd["kind"] = Value::from("CustomResourceDefinition");
        self.post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            crd.clone(),
        )
        .await?
        .expect(201)?;
        self.crds.push(name.clone());
        let version = crd["spec"]["versions"][0]["name"]
            .as_str()
            .unwrap_or("v1")
            .to_owned();
        let namespaced = crd["spec"]["scope"] == "Namespaced";
        let list_path = if namespaced {
            self.custom(&version, &plural)
        } else {
            format!("/apis/{group}/{version}/{plural}")
        };
        let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
        eventually("the CRD to be established and served", 30, async || {
            let crd = self.get(&path).await?.expect(200)?.body;
            let established = crd["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Established" && c["status"] == "True");
            if established && self.get(&list_path).await?.code == 200 {
                Ok(Some(crd))
            } else {
                Ok(None)
            }
        })
        .await
    }

    /// Watches `api` from `resource_version` until `count` events arrived
    /// (or `secs` seconds passed), returning them as JSON
    /// (`{"type": …, "object": …}`), bookmarks excluded.
    ///
    /// # Errors
    /// When the watch fails.
    pub async fn watch_events<K>(
        &self,
        api: &Api<K>,
        resource_version: &str,
        count: usize,
        secs: u32,
        during: impl Future<Output = Fallible>,
    ) -> Fallible<Vec<Value>>
    where
        K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug + 'static,
    {
        let params = WatchParams::default().timeout(secs);
        let stream = api.watch(&params, resource_version).await?;
        let collect = stream
            .try_filter(|e| std::future::ready(!matches!(e, WatchEvent::Bookmark(_))))
            .take(count)
            .map(|e| Ok::<_, Box<dyn std::error::Error + Send + Sync>>(serde_json::to_value(e?)?))
            .try_collect::<Vec<Value>>();
        // The changes are made while the watch is open.
        let (events, done) = tokio::join!(collect, during);
        done?;
        let events = events?;
        if events.len() < count {
            return Err(format!(
                "the watch ended after {} of {count} events: {events:?}",
                events.len()
            )
            .into());
        }
        Ok(events)
    }
}

/// Polls `check` every 100 ms until it gives `Some`, for at most `secs`.
///
/// # Errors
/// `check`'s error, or a timeout naming `what`.
pub async fn eventually<T>(
    what: &str,
    secs: u64,
    check: impl AsyncFn() -> Fallible<Option<T>>,
) -> Fallible<T> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("timed out after {secs}s waiting for {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A random lowercase token (10 letters): names of one run never collide
/// with another's on a shared real cluster.
fn random_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    let mut n = hasher.finish();
    (0..10)
        .map(|_| {
            let c = char::from(b'a' + (n % 26) as u8);
            n /= 26;
            c
        })
        .collect()
}

/// Plays one scenario on one server, bounded in time: what it observed
/// (up to where it stopped) and how it ended.
async fn play(
    cluster: TestCluster,
    name: &str,
    scenario: &impl AsyncFn(&mut Scene) -> Fallible,
) -> (Observations, Fallible) {
    let backend = cluster.backend();
    let mut scene = match Scene::open(cluster, name).await {
        Ok(scene) => scene,
        Err(e) => {
            return (
                Observations::default(),
                Err(format!("on the {backend} server: opening: {e}").into()),
            );
        }
    };
    // A failed assertion is an outcome of this server, not the end of the
    // test: the other server still runs, and a known gap stays one.
    let run = AssertUnwindSafe(scenario(&mut scene)).catch_unwind();
    let outcome = match tokio::time::timeout(SCENARIO_TIMEOUT, run).await {
        Ok(Ok(result)) => result,
        Ok(Err(panic)) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            Err(format!("assertion failed: {message}").into())
        }
        Err(_) => Err(format!("timed out after {SCENARIO_TIMEOUT:?}").into()),
    };
    let obs = scene.close().await;
    (
        obs,
        outcome.map_err(|e| format!("on the {backend} server: {e}").into()),
    )
}

/// Runs `scenario` on a fresh embedded server and, when
/// [`crate::REAL_APISERVER_ENV`] is set, on the real server, then compares
/// what both observed.
///
/// Observations recorded with [`Scene::record_known`] may differ: each
/// such difference is printed as `KNOWN DIFFERENCE`.
///
/// `embedded_gap` names an issue for a scenario whose feature the embedded
/// server does not have yet: its failure on the embedded server (or a
/// difference from the real one) is printed as `KNOWN GAP` instead of
/// failing; the real server must still pass it. When such a scenario
/// passes and matches, a note asks for it to be taken off the gap list.
///
/// # Errors
/// The scenario failed on the real server (its own assertions: the
/// scenario is wrong), on the embedded server (outside a gap), or the
/// servers observed different things outside known differences.
pub async fn run_differential(
    name: &str,
    embedded_gap: Option<&str>,
    scenario: impl AsyncFn(&mut Scene) -> Fallible,
) -> Fallible {
    let (embedded, embedded_outcome) = play(TestCluster::embedded(), name, &scenario).await;
    let mut problems = Vec::new();
    if let Err(e) = embedded_outcome {
        problems.push(e.to_string());
    }
    if let Some(cluster) = TestCluster::real().await? {
        let (real, real_outcome) = play(cluster, name, &scenario).await;
        if let Err(e) = real_outcome {
            // The real server is the judge: a scenario it fails is wrong.
            return Err(format!("{name}: {e}\n(embedded: {problems:?})").into());
        }
        let comparison = embedded.compare(&real, ("embedded", "real kube-apiserver"));
        for known in &comparison.known {
            eprintln!("KNOWN DIFFERENCE {name}: {known}");
        }
        for agreed in &comparison.agreed_known {
            eprintln!("{name}: both servers agree at {agreed}: unmark it");
        }
        // The first unexpected difference explains the others.
        problems.extend(comparison.unexpected.into_iter().take(1));
    }
    match (problems.is_empty(), embedded_gap) {
        (true, Some(issue)) => {
            eprintln!(
                "{name}: passes on the embedded server although listed as a gap ({issue}): take it off the list"
            );
            Ok(())
        }
        (false, Some(issue)) => {
            eprintln!("KNOWN GAP ({issue}) {name}: {}", problems.join("\n"));
            Ok(())
        }
        (true, None) => Ok(()),
        (false, None) => Err(format!("{name}: {}", problems.join("\n")).into()),
    }
}
