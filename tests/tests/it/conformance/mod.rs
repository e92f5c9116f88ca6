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

pub mod apply_versions;
pub mod auth;
pub mod autoscalers;
pub mod bodies;
pub mod builtin;
pub mod claims;
pub mod crd_arrays;
pub mod crd_definitions;
pub mod cron_jobs;
pub mod custom;
pub mod defaults;
pub mod deletion;
pub mod disruption_budgets;
pub mod events;
pub mod gaps;
pub mod immutability;
pub mod json_patches;
pub mod kinds;
pub mod limits;
pub mod lists;
pub mod metadata_checks;
pub mod openapi;
pub mod patches;
pub mod pod_defaults;
pub mod protobuf;
pub mod replicated;
pub mod scale;
pub mod typed_secrets;
pub mod update_causes;
pub mod validation;
pub mod volumes;
pub mod watch;
pub mod webhooks;
pub mod workload_status;
pub mod writes;

use integration_tests::{Fallible, Scene, run_differential};

/// Differences of the embedded server from the real one that this suite
/// still finds, each recorded with `Scene::record_known` where it shows: a
/// difference there is printed as `KNOWN DIFFERENCE` instead of failing, so
/// the rest of the scenario still guards everything else, and a run where
/// both servers agree there says to unmark it. All but the one named
/// `VERSION_…` are fidelity differences to fix in the embedded server.
pub mod known {
    /// Not a fidelity difference: 1.20's duplicate cause.
    pub const VERSION_FINALIZER_CAUSE_TWICE: &str = "VERSION DIFFERENCE: adding a finalizer \
        to a custom resource being deleted is 422 Invalid with the cause listed twice on 1.20 \
        (its custom resource validation checks metadata twice); the embedded server lists \
        it once";
    /// Not a fidelity difference: 1.20's bug.
    pub const VERSION_EVENT_UPDATE_UNCHECKED: &str = "VERSION DIFFERENCE: an update through \
        events.k8s.io may change only metadata and series (422 'field is immutable', a changed \
        series validated); 1.20 accepts anything there because its check compares the new \
        Event with itself (pkg/registry/core/event/strategy.go, oldEvent := obj), fixed since";
    /// Not a fidelity difference: 1.20 stores Ingresses as `extensions`.
    pub const VERSION_INGRESS_INVALID_GROUP: &str = "VERSION DIFFERENCE: 1.20 names an invalid \
        Ingress 'Ingress.extensions' (details.group 'extensions', the group its storage \
        decodes to); later versions, as the embedded server, 'Ingress.networking.k8s.io'";
    /// Not a fidelity difference: 1.20 predates server-side field validation.
    pub const VERSION_FIELD_VALIDATION: &str = "VERSION DIFFERENCE: fieldValidation=Strict \
        refuses unknown fields with 400 BadRequest ('strict decoding error: unknown field \
        \"spec.x\"') since 1.25, as the embedded server does; 1.20 ignores the parameter and \
        drops the fields";
    /// Not a fidelity difference: 1.20's bug.
    pub const VERSION_APPLY_PORT_WITHOUT_PROTOCOL: &str = "VERSION DIFFERENCE: a server-side \
        apply of a Service port without protocol is 500 on 1.20 ('failed to create typed patch \
        object: .spec.ports: element 0: associative list with keys has an element that omits \
        key field \"protocol\"'); later versions default the key to TCP, as the embedded \
        server does";
    /// Not a fidelity difference but a version one (1.20's bug), marked so
    /// that the scenario can observe it.
    pub const VERSION_CRD_EMPTY_DEFAULT: &str = "VERSION DIFFERENCE: 1.20 refuses \
        default: \"\" for a string with 422 ('in body must be of type string: \"null\"'), \
        later versions accept it, as the embedded server does";
}

/// Scenarios the embedded server does not pass yet, and why.
pub const EMBEDDED_GAPS: &[(&str, &str)] = &[(
    "managed_fields_bookkeeping",
    "issue 5: managedFields (the real fieldsV1 has a \".\" entry for each map set)",
)];

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
                check(stringify!($name), self::$module::$name).await;
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
    protobuf::protobuf_bodies,
    protobuf::protobuf_and_json_bodies_agree,
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
    builtin::quantities_dry_run_apply_and_immutable_job_template,
    watch::watch_event_sequence,
    watch::watch_with_label_selector,
    watch::runtime_watcher_sequence,
    watch::named_get_with_watch_is_a_get,
    lists::consistent_lists,
    metadata_checks::metadata_causes_order_and_repeats,
    replicated::daemon_sets_and_replica_sets,
    autoscalers::autoscalers_of_autoscaling_v1,
    replicated::generation_follows_deployment_annotations,
    update_causes::updates_list_immutable_and_field_causes,
    update_causes::updates_list_field_causes_as_often_as_checked,
    apply_versions::apply_of_ports_without_protocol,
    pod_defaults::resource_field_refs_get_a_divisor,
    pod_defaults::pod_updates_change_images_deadlines_and_tolerations,
    crd_arrays::custom_resource_array_problems,
    typed_secrets::secret_types_require_their_keys,
    typed_secrets::cron_job_templates_are_job_specs,
    disruption_budgets::disruption_budgets_of_policy_v1beta1,
    claims::claims_are_validated_and_immutable,
    claims::network_policies_are_validated,
    json_patches::json_patch_failures,
    workload_status::workload_status_is_validated,
    workload_status::load_balancer_status_is_validated,
    lists::read_refusals,
    lists::a_list_at_version_zero_is_not_paged,
    lists::integer_label_selectors,
    lists::field_selector_values_and_escapes,
    lists::label_selector_refusals,
    lists::builtin_tables_and_table_watch,
    custom::crd_registration_and_discovery,
    custom::custom_resource_crud,
    custom::generation_and_status_subresource,
    custom::generation_without_status_subresource,
    custom::finalizers_hold_deletion,
    custom::invalid_crds_are_refused,
    custom::discovery_through_kube,
    custom::crd_schema_defaults,
    gaps::server_side_apply,
    gaps::json_patch,
    gaps::strategic_merge_patch,
    gaps::garbage_collection_background,
    gaps::garbage_collection_foreground_and_orphan,
    gaps::schema_pruning_and_validation,
    gaps::managed_fields_bookkeeping,
    deletion::delete_options_as_query_parameters,
    deletion::dry_run_delete_of_a_held_object,
    deletion::delete_collection_answers_the_list_it_read,
    deletion::cascade_as_query_parameter,
    deletion::dangling_owner_reference_is_collected,
    deletion::owner_references_and_finalizers_are_validated,
    deletion::builtin_kinds_are_decoded_against_their_types,
    limits::configmap_and_secret_data_limit,
    limits::request_body_limit,
    limits::objects_too_large_for_etcd,
    events::events_are_one_storage_with_two_apis,
    events::event_validation,
    openapi::openapi_v2_definitions,
    openapi::field_validation_of_unknown_fields,
    events::rbac_objects_and_service_accounts,
    events::printer_column_priority,
    writes::write_options_are_validated,
    writes::create_rules,
    writes::names_and_metadata_rules,
    writes::uid_is_a_precondition_and_immutable,
    writes::client_written_managed_fields,
    writes::lease_writes,
    writes::create_in_terminating_namespace,
    writes::crd_pattern_and_format,
    writes::kubectl_server_side_apply_after_client_side,
    writes::apply_conflict_messages,
    auth::auth_service_account_token_and_token_review,
    auth::auth_subject_access_review_evaluates_rbac,
    auth::auth_local_subject_access_review,
    auth::auth_review_resources_in_discovery,
    patches::strategic_merge_patch_order_and_directives,
    patches::server_side_apply_list_keys,
    bodies::yaml_bodies_and_the_type_from_the_url,
    bodies::legacy_watch_paths,
    bodies::unknown_paths_and_the_root,
    validation::invalid_workloads_are_refused,
    validation::invalid_services_are_refused,
    validation::invalid_ingresses_and_data_keys_are_refused,
    validation::updates_are_validated,
    crd_definitions::invalid_crd_definitions_are_refused,
    crd_definitions::crd_updates_keep_group_scope_and_stored_versions,
    crd_definitions::crd_structural_defaults_and_property_counts,
    crd_definitions::crd_versions_prune_and_default_by_their_own_schemas,
    crd_definitions::custom_resource_metadata_must_decode,
    kinds::kinds_claims_volumes_and_classes,
    kinds::kinds_daemon_sets_replica_sets_and_revisions,
    kinds::kinds_cron_jobs,
    kinds::kinds_default_service_account,
    kinds::kinds_self_subject_reviews,
    scale::scale_of_workloads,
    scale::scale_of_custom_resources,
    defaults::deployment_defaults,
    defaults::statefulset_defaults,
    defaults::job_defaults,
    defaults::service_defaults,
    defaults::pod_defaults,
    defaults::network_policy_defaults,
    immutability::deployment_selector_is_immutable,
    immutability::job_spec_is_immutable,
    immutability::statefulset_spec_is_frozen,
    immutability::service_cluster_ip_is_immutable,
    immutability::immutable_configmaps_and_secrets,
    volumes::volumes_bind_claims,
    webhooks::conversion_webhook_between_versions,
    webhooks::conversion_webhook_failures,
    webhooks::validating_webhook_denies_writes,
    webhooks::validating_webhook_failure_policy_and_object_selector,
    webhooks::mutating_webhook_patches_writes,
    webhooks::conversion_webhook_after_the_storage_version_changes,
    webhooks::validating_webhook_equivalent_versions,
    webhooks::invalid_webhook_configurations_are_refused,
    webhooks::invalid_conversion_settings_are_refused,
    cron_jobs::cron_jobs_start_their_jobs,
    cron_jobs::cron_job_schedules_are_validated,
}
