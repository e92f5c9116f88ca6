//! Differential conformance: each scenario runs on the embedded API server
//! (`fsm_testkit::ApiServer`) and, when `FSM_REAL_APISERVER_KUBECONFIG`
//! names a kubeconfig (see `scripts/real-apiserver/`), on a real
//! kube-apiserver 1.20 too; what both observed must be equal after
//! normalising uids, timestamps, resourceVersions and managedFields.
//!
//! Every scenario also asserts what Kubernetes promises, so it tests the
//! embedded server even when no real one is at hand.
//!
//! Scenarios the embedded server is known not to pass yet are listed in
//! [`EMBEDDED_GAPS`] with the issue that will close them: they still run,
//! print `KNOWN GAP`, and must pass on the real server.
//!
//! The real server is Kubernetes 1.20 while the embedded one serves the 1.34
//! API; where the two versions behave differently the scenario says so and
//! observes only what both versions share.

mod conformance {
    pub mod builtin;
    pub mod custom;
    pub mod gaps;
    pub mod watch;
}

use integration_tests::{Fallible, Scene, run_differential};

/// Fidelity differences of the embedded server found by this suite, each
/// recorded with `Scene::record_known` where it shows: a difference there is
/// printed as `KNOWN DIFFERENCE` instead of failing, so the rest of the
/// scenario still guards everything else. Each is a bug of the embedded
/// server to fix (not a version difference: the real behaviour is the same
/// in 1.20 and in current Kubernetes), after which its mark goes.
pub mod known {
    /// DELETE answers for kinds without `ReturnDeletedObject`.
    pub const DELETE_ANSWER: &str = "a DELETE that removes a ConfigMap or a custom resource \
        at once answers a Status {status: Success, details: {name, group, kind: <resource>, \
        uid}}; the embedded server answers with the deleted object";
    /// `details: {}` in a 404 for an unknown path.
    pub const STATUS_EMPTY_DETAILS: &str = "the 404 Status for an unknown resource carries \
        details: {}; the embedded server omits details";
    /// A status subresource that the CRD does not have.
    pub const NO_STATUS_SUBRESOURCE: &str = "a /status request to a custom resource whose CRD \
        has no status subresource answers 404 naming the object (details {name, group, \
        kind}, message '<plural>.<group> \"g\" not found'); the embedded server answers the \
        generic 'the server could not find the requested resource'";
    /// Adding a finalizer to an object being deleted.
    pub const FINALIZER_ADD_MESSAGE: &str = "adding a finalizer to an object being deleted is \
        422 Invalid with 'found new finalizers []string{\"example.com/more\"}' (Go syntax); \
        1.20 also lists the cause twice for custom resources (a 1.20 quirk), and the message \
        names the kind with its group (Widget.<group>); the embedded server writes \
        [\"example.com/more\"] once, after the bare kind";
    /// The code of a DELETE held by finalizers.
    pub const FINALIZER_DELETE_CODE: &str = "DELETE of an object held by finalizers answers \
        200 with the object (202 only when orphanDependents=false); the embedded server \
        answers 202";
    /// Label value syntax.
    pub const LABEL_VALUE_VALIDATION: &str = "label values are validated (at most 63 \
        characters of [A-Za-z0-9_.-], alphanumeric at both ends): 422 Invalid; the embedded \
        server stores any value";
    /// Generation of custom resources without a status subresource.
    pub const CR_GENERATION_WITHOUT_STATUS: &str = "without a status subresource, any change \
        outside metadata (status included) increments generation; the embedded server does \
        not count status changes";
    /// The message of an unsupported field selector.
    pub const FIELD_SELECTOR_MESSAGE: &str = "an unsupported field selector is refused with \
        '\"data.k\" is not a known field selector: only \"metadata.name\", \
        \"metadata.namespace\"'; the embedded server says 'field label not supported: data.k'";
    /// remainingItemCount with selectors.
    pub const REMAINING_WITH_SELECTOR: &str = "remainingItemCount is omitted when the list has \
        a label or field selector (it cannot be known); the embedded server sends it";
    /// The object of a DELETED event for an object leaving a watch's selector.
    pub const SELECTOR_WATCH_DELETED: &str = "when an object stops matching a watch's \
        selector, the DELETED event carries its previous state (the last one that matched); \
        the embedded server sends the new state";
    /// Delete preconditions.
    pub const PRECONDITION_MESSAGES: &str = "a failed delete precondition is reported as \
        'the UID in the precondition (…) does not match the UID in record (…). The object \
        might have been deleted and then recreated' (or 'the ResourceVersion in the \
        precondition (…) does not match the ResourceVersion in record (…). The object might \
        have been modified') with details.kind the Kind (ConfigMap); the embedded server uses \
        the storage layer's 'Precondition failed: …' and the resource name";
    /// Namespace deletion.
    pub const NAMESPACE_TERMINATING: &str = "deleting a namespace answers it in phase \
        Terminating and refuses new content with 403 Forbidden until the namespace \
        controller has emptied it";
    /// Items of built-in lists.
    pub const LIST_ITEM_TYPE_META: &str = "items of a built-in list (and of a deletecollection \
        answer) carry no apiVersion/kind; the embedded server adds them";
    /// Empty maps.
    pub const EMPTY_MAP_OMITTED: &str = "an empty map of a built-in kind (data: {}, labels: {}) \
        is dropped (Go's omitempty); the embedded server keeps it";
    /// The continue field of custom resource lists.
    pub const CR_LIST_CONTINUE: &str = "a custom resource list carries metadata.continue: \"\" \
        on its last page; the embedded server omits it";
    /// The causes of an invalid CRD.
    pub const CRD_VALIDATION_DETAILS: &str = "an invalid CustomResourceDefinition's Status \
        names the kind with its group (CustomResourceDefinition.apiextensions.k8s.io, as for \
        every kind outside the core group: Widget.<group> too), and a CRD without exactly one \
        storage version also gets a status.storedVersions cause; the embedded server writes \
        the bare kind and one cause. (1.20 prints the invalid versions as a Go struct dump: \
        that wording is version-specific)";
    /// Defaults in a CRD's schema.
    pub const CRD_DEFAULT_VALIDATION: &str = "a CRD whose schema has default: null for a \
        string that is not nullable is refused with 422 Invalid ('spec.validation.\
        openAPIV3Schema.properties[spec].properties[seed].default: Invalid value: \"null\": \
        in body must be of type string'), and with nullable: true it is accepted but the \
        default: null is dropped (Go cannot tell it from no default); the embedded server \
        accepts the first and keeps the null. The examples' Database CRD has exactly the \
        first and cannot be installed on a real cluster";
    /// Discovery of a CRD's resources.
    pub const DISCOVERY_DETAILS: &str = "a CRD's APIResourceList lists the verbs as delete, \
        deletecollection, get, list, patch, create, update, watch and carries \
        storageVersionHash; the embedded server sorts the verbs and has no storageVersionHash";
}

/// Scenarios the embedded server does not pass yet, and why.
pub const EMBEDDED_GAPS: &[(&str, &str)] = &[
    ("server_side_apply", "issue 5: server-side apply"),
    ("json_patch", "issue 5: JSON patch"),
    ("strategic_merge_patch", "issue 5: strategic merge patch"),
    (
        "garbage_collection_background",
        "issue 5: garbage collection",
    ),
    (
        "garbage_collection_foreground_and_orphan",
        "issue 5: garbage collection",
    ),
    (
        "schema_pruning_and_validation",
        "issue 5: pruning and schema validation",
    ),
    (
        "managed_fields_bookkeeping",
        "issue 5: server-side apply (managedFields)",
    ),
];

/// Runs the scenario `name` differentially, gated by [`EMBEDDED_GAPS`].
async fn check(name: &str, scenario: impl AsyncFn(&mut Scene) -> Fallible) {
    let gap = EMBEDDED_GAPS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, why)| *why);
    if let Err(e) = run_differential(name, gap, scenario).await {
        panic!("{e}");
    }
}

macro_rules! scenarios {
    ($($module:ident :: $name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                check(stringify!($name), conformance::$module::$name).await;
            }
        )*

        /// Every gap names a scenario that exists.
        #[test]
        fn gaps_name_existing_scenarios() {
            let all = [$(stringify!($name)),*];
            for (gap, _) in EMBEDDED_GAPS {
                assert!(all.contains(gap), "EMBEDDED_GAPS names an unknown scenario {gap}");
            }
        }
    };
}

scenarios! {
    builtin::configmap_lifecycle,
    builtin::error_statuses,
    builtin::empty_maps_are_dropped,
    builtin::generate_name,
    builtin::label_and_field_selectors,
    builtin::pagination,
    builtin::conflicts_and_preconditions,
    builtin::delete_collection,
    builtin::namespace_lifecycle,
    builtin::deployment_generation_and_status,
    watch::watch_event_sequence,
    watch::watch_with_label_selector,
    watch::runtime_watcher_sequence,
    custom::crd_registration_and_discovery,
    custom::custom_resource_crud,
    custom::generation_and_status_subresource,
    custom::generation_without_status_subresource,
    custom::finalizers_hold_deletion,
    custom::invalid_crds_are_refused,
    custom::discovery_through_kube,
    custom::crd_schema_defaults_are_validated,
    gaps::server_side_apply,
    gaps::json_patch,
    gaps::strategic_merge_patch,
    gaps::garbage_collection_background,
    gaps::garbage_collection_foreground_and_orphan,
    gaps::schema_pruning_and_validation,
    gaps::managed_fields_bookkeeping,
}
