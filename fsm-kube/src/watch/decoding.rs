//! The watch that survives objects that do not decode as the resource
//! type, and the [`DecodeReporter`] that reports them (described in the
//! [module](super)).

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use fsm_core::Authority;
use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::conditions::UNDECODABLE_REASON;
use crate::leader::Leadership;
use crate::options::ReconcilerOptions;

/// The most bytes of the decoding error a condition, an event or a log
/// line carries (cut on a character boundary, `...` appended).
pub const MESSAGE_LIMIT: usize = 512;

/// Reports the objects that do not decode as the resource type: one log
/// line, the `Degraded` condition and one Warning event each, once per
/// object, generation and error (see the [module](super)).
///
/// Clones share what they have reported.
///
/// # Guarantees
/// - The report is a status merge patch of the conditions alone, made
///   without the typed object and carrying the object's
///   `resourceVersion`; it is written only when the object does not
///   already say the same, so that a report never wakes another one.
/// - The event is published when the condition was written (or, with
///   conditions off, the first time this reporter sees the error): once
///   per error, across restarts of the operator.
/// - Nothing is written while a [`leadership`](Self::leadership) given to
///   it has lapsed.
#[derive(Clone)]
pub struct DecodeReporter {
    client: Client,
    field_manager: String,
    recorder: Option<Recorder>,
    conditions: bool,
    quote_values: bool,
    leadership: Option<Leadership>,
    told: Arc<ToldObjects>,
}

/// The objects a reporter has told, by UID: one entry per object that
/// does not decode.
#[derive(Debug, Default)]
struct ToldObjects(Mutex<HashMap<String, Told>>);

impl ToldObjects {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Told>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets object `uid` (it decoded, or is gone): a later failure is
    /// reported again.
    fn forget(&self, uid: &str) {
        let mut told = self.lock();
        if !told.is_empty() {
            told.remove(uid);
        }
    }

    /// Records that object `uid` fails with `message`; `false` when it was
    /// told so already.
    fn first_time(&self, uid: &str, generation: Option<i64>, message: &str) -> bool {
        let told = Told {
            generation,
            message: message.to_owned(),
        };
        self.lock().insert(uid.to_owned(), told.clone()) != Some(told)
    }
}

/// What an object was last told: its generation and the message.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Told {
    generation: Option<i64>,
    message: String,
}

impl Debug for DecodeReporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodeReporter")
            .field("field_manager", &self.field_manager)
            .field("events", &self.recorder.is_some())
            .field("conditions", &self.conditions)
            .field("quote_values", &self.quote_values)
            .field("leadership", &self.leadership)
            .finish_non_exhaustive()
    }
}

impl DecodeReporter {
    /// A reporter with the defaults of [`ReconcilerOptions`] (field
    /// manager and event reporter `operator-fsm`, events and conditions
    /// on), withholding the values serde quotes.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let reporter = fsm_kube::watch::DecodeReporter::new(client);
    /// # drop(reporter); }
    /// ```
    #[must_use]
    pub fn new(client: Client) -> Self {
        Self::from_options(client, &ReconcilerOptions::default())
    }

    /// A reporter writing as a reconciler with `options` does: its field
    /// manager, event reporter, and whether it publishes events and
    /// maintains conditions.
    #[must_use]
    pub fn from_options(client: Client, options: &ReconcilerOptions) -> Self {
        let recorder = options
            .events
            .then(|| Recorder::new(client.clone(), Reporter::from(options.reporter.clone())));
        Self::with_recorder(client, options, recorder)
    }

    pub(crate) fn with_recorder(
        client: Client,
        options: &ReconcilerOptions,
        recorder: Option<Recorder>,
    ) -> Self {
        DecodeReporter {
            client,
            field_manager: options.field_manager.clone(),
            recorder,
            conditions: options.conditions,
            quote_values: false,
            leadership: None,
            told: Arc::default(),
        }
    }

    /// Whether the report may quote the value serde names
    /// (`invalid type: string "three", expected u32`). Off by default:
    /// events and logs reach people who may not read the object.
    #[must_use]
    pub fn quote_values(mut self, quote: bool) -> Self {
        self.quote_values = quote;
        self
    }

    /// Writes nothing (condition, event) once `leadership` lapses; the
    /// replica that holds the Lease reports.
    #[must_use]
    pub fn leadership(mut self, leadership: Leadership) -> Self {
        self.leadership = Some(leadership);
        self
    }

    fn forget(&self, uid: &str) {
        self.told.forget(uid);
    }

    /// Reports `object`, which failed to decode with `error` (already
    /// rendered, redacted and bounded).
    async fn report(self, object: DynamicObject, resource: ApiResource, error: String) {
        let uid = object.uid().unwrap_or_else(|| key_of(&object));
        let generation = object.metadata.generation;
        if !self.told.first_time(&uid, generation, &error) {
            tracing::debug!(object = %key_of(&object), "still does not decode; reported already");
            return;
        }
        tracing::warn!(
            kind = %resource.kind,
            object = %key_of(&object),
            resource_version = object.resource_version().unwrap_or_default(),
            error = %error,
            "the object does not decode as the resource type; it is not reconciled until it is fixed"
        );
        if let Some(leadership) = &self.leadership
            && leadership.check().is_err()
        {
            return;
        }
        let message = condition_message(&resource.kind, &error);
        let publish = if self.conditions {
            match self.write_condition(&object, &resource, &message).await {
                Ok(wrote) => wrote,
                Err(kube::Error::Api(status)) if status.is_conflict() => {
                    // A newer version is on its way through the watch: it
                    // is reported then.
                    self.forget(&uid);
                    false
                }
                Err(error) => {
                    tracing::warn!(object = %key_of(&object), %error, "the report of an object that does not decode could not be written");
                    true
                }
            }
        } else {
            true
        };
        if publish && let Some(recorder) = &self.recorder {
            let event = Event {
                type_: EventType::Warning,
                reason: UNDECODABLE_REASON.to_owned(),
                note: Some(message),
                action: "Decode".to_owned(),
                secondary: None,
            };
            if let Err(error) = recorder
                .publish(&event, &object.object_ref(&resource))
                .await
            {
                tracing::warn!(%error, reason = UNDECODABLE_REASON, "event could not be published");
            }
        }
    }

    /// Writes the `Degraded` condition unless the object says so already.
    async fn write_condition(
        &self,
        object: &DynamicObject,
        resource: &ApiResource,
        message: &str,
    ) -> Result<bool, kube::Error> {
        let current: Vec<Condition> = object
            .data
            .get("status")
            .and_then(|s| s.get("conditions"))
            .and_then(|c| serde_json::from_value(c.clone()).ok())
            .unwrap_or_default();
        let wanted = crate::conditions::undecodable(
            message,
            object.metadata.generation,
            &current,
            jiff::Timestamp::now(),
        );
        if crate::conditions::same(&current, &wanted) {
            return Ok(false);
        }
        let api: Api<DynamicObject> = match object.namespace() {
            Some(ns) => Api::namespaced_with(self.client.clone(), &ns, resource),
            None => Api::all_with(self.client.clone(), resource),
        };
        let patch = json!({
            "metadata": { "resourceVersion": object.resource_version() },
            "status": { "conditions": wanted },
        });
        let params = PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        };
        api.patch_status(&object.name_any(), &params, &Patch::Merge(&patch))
            .await?;
        Ok(true)
    }
}

/// `namespace/name`, or `name` for a cluster-scoped object.
fn key_of(object: &DynamicObject) -> String {
    match object.namespace() {
        Some(ns) => format!("{ns}/{}", object.name_any()),
        None => object.name_any(),
    }
}

/// The condition's (and event's) message for an object of `kind` failing
/// with `error`.
fn condition_message(kind: &str, error: &str) -> String {
    format!(
        "the object does not decode as a {kind}: {error}; it is not reconciled until it is fixed"
    )
}

impl DecodeReporter {
    /// A `Controller` for the objects `api` and `config` select, like
    /// `Controller::new(api, config)`, that keeps going when an object does
    /// not decode as `K`: the object is left out and reported by this
    /// reporter (see the [module](super)).
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use futures::StreamExt;
    /// use fsm_kube::{FsmReconciler, StatusStore};
    /// use kube::runtime::watcher;
    ///
    /// # async fn run<F>(client: kube::Client, ctx: F::Context)
    /// # where F: fsm_core::Fsm, F::Resource: fsm_kube::KubeResource {
    /// let fsm = FsmReconciler::<F>::new(client.clone(), StatusStore::new());
    /// let api = kube::Api::<F::Resource>::all(client);
    /// fsm.decode_reporter()
    ///     .controller(api, watcher::Config::default())
    ///     .run(fsm.reconcile(), fsm.error_policy(), Arc::new(ctx))
    ///     .for_each(|_| async {})
    ///     .await;
    /// # }
    /// ```
    pub fn controller<K>(self, api: Api<K>, config: watcher::Config) -> Controller<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        build(api, config, self, false)
    }

    /// As [`controller`](Self::controller), with a cache that keeps each
    /// object without its `managedFields` (see [`lean_controller`](super::lean_controller)).
    pub fn lean_controller<K>(self, api: Api<K>, config: watcher::Config) -> Controller<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        build(api, config, self, true)
    }
}

fn build<K>(
    api: Api<K>,
    config: watcher::Config,
    reporter: DecodeReporter,
    lean: bool,
) -> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let objects = decoded_events(api, config, reporter, lean, reader.clone())
        .reflect(writer)
        .applied_objects();
    Controller::for_stream(objects, reader)
}

/// The watch events of `api`'s objects decoded as `K`, those that do not
/// decode left out (and reported), a cached copy of one that stopped
/// decoding removed from `cache`.
fn decoded_events<K>(
    api: Api<K>,
    config: watcher::Config,
    reporter: DecodeReporter,
    lean: bool,
    cache: Store<K>,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let resource = ApiResource::erase::<K>(&());
    let namespace = api.namespace().map(str::to_owned);
    let client = api.into_client();
    let dynamic: Api<DynamicObject> = match &namespace {
        Some(ns) => Api::namespaced_with(client, ns, &resource),
        None => Api::all_with(client, &resource),
    };
    watcher(dynamic, config).filter_map(move |event| {
        let decoded = match event {
            Err(error) => Some(Err(error)),
            Ok(event) => decode_event(event, &resource, &reporter, lean, &cache).map(Ok),
        };
        std::future::ready(decoded)
    })
}

fn decode_event<K>(
    event: watcher::Event<DynamicObject>,
    resource: &ApiResource,
    reporter: &DecodeReporter,
    lean: bool,
    cache: &Store<K>,
) -> Option<watcher::Event<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    use watcher::Event as E;
    match event {
        E::Init => Some(E::Init),
        E::InitDone => Some(E::InitDone),
        E::Apply(object) => match decode_or_report(object, resource, reporter, lean) {
            Ok(decoded) => Some(E::Apply(decoded)),
            // A copy from before: no reconcile may act on a spec the
            // object no longer has.
            Err(reference) => cached(cache, &reference).map(E::Delete),
        },
        // A relist rebuilds the cache from these: one left out is gone.
        E::InitApply(object) => decode_or_report(object, resource, reporter, lean)
            .ok()
            .map(E::InitApply),
        E::Delete(mut object) => {
            let reference = Reference::of(&object);
            reporter.forget(&reference.uid);
            if lean {
                object.metadata.managed_fields = None;
            }
            match decode::<K>(object) {
                Ok(decoded) => Some(E::Delete(decoded)),
                Err(_) => cached(cache, &reference).map(E::Delete),
            }
        }
    }
}

/// Who an object is, enough to find its cached copy and report it.
struct Reference {
    name: String,
    namespace: Option<String>,
    uid: String,
}

impl Reference {
    fn of(object: &DynamicObject) -> Self {
        Reference {
            name: object.name_any(),
            namespace: object.namespace(),
            uid: object.uid().unwrap_or_else(|| key_of(object)),
        }
    }
}

fn cached<K>(cache: &Store<K>, reference: &Reference) -> Option<K>
where
    K: Resource<DynamicType = ()> + Clone,
{
    let key = ObjectRef::<K>::new(&reference.name);
    let key = match &reference.namespace {
        Some(ns) => key.within(ns),
        None => key,
    };
    cache.get(&key).map(|object| (*object).clone())
}

/// `object` decoded as `K`; when it does not decode, the report is
/// spawned and the object's reference returned.
fn decode_or_report<K>(
    mut object: DynamicObject,
    resource: &ApiResource,
    reporter: &DecodeReporter,
    lean: bool,
) -> Result<K, Reference>
where
    K: DeserializeOwned,
{
    if lean {
        object.metadata.managed_fields = None;
    }
    let reference = Reference::of(&object);
    // The report needs the object's metadata and current conditions, not
    // its spec: keep those only.
    let kept = DynamicObject {
        types: object.types.clone(),
        metadata: object.metadata.clone(),
        data: json!({ "status": { "conditions": object.data.get("status").and_then(|s| s.get("conditions")).cloned() } }),
    };
    match decode::<K>(object) {
        Ok(decoded) => {
            reporter.forget(&reference.uid);
            Ok(decoded)
        }
        Err(error) => {
            let error = describe(&error, reporter.quote_values);
            tokio::spawn(reporter.clone().report(kept, resource.clone(), error));
            Err(reference)
        }
    }
}

/// Decodes `object` as `K`, naming the path of the field that fails.
fn decode<K: DeserializeOwned>(
    object: DynamicObject,
) -> Result<K, serde_path_to_error::Error<serde_json::Error>> {
    let DynamicObject {
        types,
        metadata,
        data,
    } = object;
    let mut fields = match data {
        Value::Object(fields) => fields,
        _ => serde_json::Map::new(),
    };
    if let Some(types) = types {
        fields.insert("apiVersion".to_owned(), Value::String(types.api_version));
        fields.insert("kind".to_owned(), Value::String(types.kind));
    }
    // Metadata came from JSON as ObjectMeta, so it goes back to JSON.
    if let Ok(metadata) = serde_json::to_value(metadata) {
        fields.insert("metadata".to_owned(), metadata);
    }
    serde_path_to_error::deserialize(Value::Object(fields))
}

/// The path and serde's message, the value withheld unless `quote_values`,
/// at most [`MESSAGE_LIMIT`] bytes.
fn describe(error: &serde_path_to_error::Error<serde_json::Error>, quote_values: bool) -> String {
    let message = error.inner().to_string();
    let message = if quote_values {
        message
    } else {
        withhold_values(&message)
    };
    truncate(format!("{}: {message}", error.path()), MESSAGE_LIMIT)
}

/// serde's message without the value it quotes: the standard messages
/// keep their shape (`invalid type: string, expected u32`); any other (a
/// type's own `Deserialize`) is withheld whole, as it may say anything.
fn withhold_values(message: &str) -> String {
    const WITHHELD: &str =
        "the value does not fit the type (the message is withheld: it may quote the value)";
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            let Some(at) = rest.rfind(", expected ") else {
                return WITHHELD.to_owned();
            };
            let unexpected = &rest[..at];
            // `string "three"`, `integer `3``, `map`: the kind before the value.
            let kind = unexpected
                .find([' ', '`', '"', '\''])
                .map_or(unexpected, |end| &unexpected[..end]);
            return format!("{prefix}{kind}{}", &rest[at..]);
        }
    }
    if message.starts_with("unknown variant ") {
        return match message.rfind(", expected ") {
            Some(at) => format!("unknown variant{}", &message[at..]),
            None => "unknown variant".to_owned(),
        };
    }
    // These name fields and lengths, not values.
    for shape in [
        "missing field `",
        "unknown field `",
        "duplicate field `",
        "invalid length ",
    ] {
        if message.starts_with(shape) {
            return message.to_owned();
        }
    }
    WITHHELD.to_owned()
}

/// `text` cut to at most `limit` bytes on a character boundary, `...`
/// appended when cut.
fn truncate(mut text: String, limit: usize) -> String {
    if text.len() > limit {
        let mut cut = limit.saturating_sub(3);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Spec {
        size: u32,
        mode: Mode,
        #[serde(default)]
        ports: Vec<u16>,
    }

    #[derive(Debug, serde::Deserialize)]
    enum Mode {
        Fast,
    }

    fn error_of(value: Value) -> serde_path_to_error::Error<serde_json::Error> {
        serde_path_to_error::deserialize::<_, Spec>(value).unwrap_err()
    }

    #[test]
    fn the_path_and_serdes_message_name_the_field_and_the_value_is_withheld() {
        let error = error_of(json!({"size": "hunter2", "mode": "Fast"}));
        assert_eq!(
            describe(&error, true),
            r#"size: invalid type: string "hunter2", expected u32"#
        );
        assert_eq!(
            describe(&error, false),
            "size: invalid type: string, expected u32"
        );
        let error = error_of(json!({"size": 1, "mode": "Fast", "ports": [80, 70000]}));
        assert_eq!(
            describe(&error, false),
            "ports[1]: invalid value: integer, expected u16"
        );
        assert!(describe(&error, true).contains("70000"));
        let error = error_of(json!({"size": 1, "mode": "secret-mode"}));
        let withheld = describe(&error, false);
        assert!(!withheld.contains("secret-mode"), "{withheld}");
        assert!(
            withheld.starts_with("mode: unknown variant, expected"),
            "{withheld}"
        );
        let error = error_of(json!({"mode": "Fast"}));
        assert_eq!(describe(&error, false), ".: missing field `size`");
    }

    #[test]
    fn messages_of_other_shapes_are_withheld_whole() {
        assert_eq!(
            withhold_values("the key sk-123 is not valid"),
            "the value does not fit the type (the message is withheld: it may quote the value)"
        );
        assert_eq!(
            withhold_values("invalid type: string \"a, expected b\", expected u32"),
            "invalid type: string, expected u32"
        );
        assert_eq!(
            withhold_values("invalid type: garbage"),
            "the value does not fit the type (the message is withheld: it may quote the value)"
        );
    }

    #[test]
    fn reports_are_bounded() {
        let long = json!({"size": "é".repeat(4000), "mode": "Fast"});
        let text = describe(&error_of(long), true);
        assert!(text.len() <= MESSAGE_LIMIT, "{}", text.len());
        assert!(text.ends_with("..."));
        assert!(condition_message("Knob", &text).len() < MESSAGE_LIMIT + 200);
    }

    #[test]
    fn an_object_decodes_with_its_metadata_and_type() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "7"},
            "data": {"k": "v"}
        }))
        .unwrap();
        let map: ConfigMap = decode(object).unwrap();
        assert_eq!(map.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(map.data.unwrap()["k"], "v");
        let bad: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a"}, "data": {"k": 3}
        }))
        .unwrap();
        let error = decode::<ConfigMap>(bad).unwrap_err();
        assert_eq!(error.path().to_string(), "data.k");
    }

    #[test]
    fn an_object_is_told_once_per_generation_and_error() {
        let told = ToldObjects::default();
        assert!(told.first_time("u", Some(1), "e"));
        assert!(!told.first_time("u", Some(1), "e"), "the same error again");
        assert!(told.first_time("u", Some(2), "e"), "a new generation");
        assert!(told.first_time("u", Some(2), "f"), "another error");
        told.forget("u");
        assert!(
            told.first_time("u", Some(2), "f"),
            "fixed, then broken again"
        );
    }
}
