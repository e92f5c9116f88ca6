//! The handlers and compensations of [`DbState`].

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};

use operator_fsm::prelude::*;

use super::cloud::CreateInstance;
use super::crd::{ENGINES, SIZES, connection_secret, connection_secret_name};
use super::{DbError, DbState};

type Result<T> = std::result::Result<T, DbError>;

/// `Pending`: refuse a spec the cloud cannot serve, before paying anything.
pub(super) async fn validate(cx: &mut Step<'_, DbState>) -> Result<Transition<DbState>> {
    let spec = &cx.resource().spec;
    if !ENGINES.contains(&spec.engine.as_str()) {
        return Ok(Transition::fail(format!(
            "unknown engine {:?}; the cloud offers {ENGINES:?}",
            spec.engine
        )));
    }
    if !SIZES.contains(&spec.size.as_str()) {
        return Ok(Transition::fail(format!(
            "unknown size {:?}; the cloud offers {SIZES:?}",
            spec.size
        )));
    }
    Ok(Transition::next(DbState::Provisioning { request_id: None }))
}

/// A request id unique to this object and moment.
fn new_request_id(cx: &Step<'_, DbState>) -> String {
    let uid = cx
        .resource()
        .uid()
        .unwrap_or_else(|| cx.resource().name_any());
    format!("req-{uid}-{}", cx.now().as_millisecond())
}

/// `Provisioning`: the create-pending pattern.
///
/// 1. No request id yet: make one and checkpoint it, so that it survives
///    whatever happens next.
/// 2. Ask the API what that request created: after a lost answer or a
///    crash, the instance is there and is taken as is.
/// 3. Make sure this replica still holds the Lease, right before paying.
/// 4. Only then create, with that id, also sent as the create's
///    idempotency key.
///
/// Steps 1 and 2 handle crashes and lost answers on any API. They cannot
/// stop a second process that passes step 2 at the same time (a leader
/// paused past its Lease, then resumed). Step 3 stops most of those (the
/// runtime also checks before the handler and after the checkpoint), but
/// not a pause between the check and the request; only the key closes it,
/// where the API honours it, by answering the later create with the
/// earlier one's instance.
pub(super) async fn provision(
    cx: &mut Step<'_, DbState>,
    request_id: &Option<String>,
) -> Result<Transition<DbState>> {
    let request_id = match request_id {
        Some(id) => id.clone(),
        None => {
            let id = new_request_id(cx);
            cx.checkpoint(DbState::Provisioning {
                request_id: Some(id.clone()),
            })
            .await?;
            id
        }
    };
    let cloud = &cx.context().cloud;
    let existing = cloud.find_by_request(&request_id).await?;
    let instance = match existing.into_iter().next() {
        Some(instance) => {
            tracing::info!(%request_id, instance = %instance.id, "found the instance an earlier attempt created");
            instance
        }
        None => {
            cx.ensure_authority()?;
            let database = cx.resource();
            cloud
                .create(&CreateInstance {
                    request_id,
                    name: database.name_any(),
                    engine: database.spec.engine.clone(),
                    size: database.spec.size.clone(),
                })
                .await?
        }
    };
    Ok(Transition::next(DbState::WaitingReady {
        instance_id: instance.id,
    }))
}

/// Compensation of `Provisioning`: delete whatever the request created.
pub(super) async fn release_request(
    cx: &mut Step<'_, DbState>,
    request_id: &Option<String>,
) -> Result<()> {
    let Some(request_id) = request_id else {
        return Ok(());
    };
    let cloud = &cx.context().cloud;
    for instance in cloud.find_by_request(request_id).await? {
        cloud.delete(&instance.id).await?;
    }
    Ok(())
}

/// `WaitingReady`: poll the instance until it is available.
pub(super) async fn wait_ready(
    cx: &mut Step<'_, DbState>,
    instance_id: &str,
) -> Result<Transition<DbState>> {
    match cx.context().cloud.get(instance_id).await? {
        None => Err(DbError::InstanceGone(instance_id.to_owned())),
        Some(instance) if instance.status == "available" => {
            Ok(Transition::next(DbState::Seeding {
                instance_id: instance_id.to_owned(),
            }))
        }
        Some(_) => Ok(Transition::wait(cx.context().poll)),
    }
}

/// Compensation of `WaitingReady`: delete the instance.
pub(super) async fn delete_instance(cx: &mut Step<'_, DbState>, instance_id: &str) -> Result<()> {
    Ok(cx.context().cloud.delete(instance_id).await?)
}

/// `Seeding`: run the seed SQL, then have credentials issued. SQL the API
/// rejects is a permanent error: the workflow fails and is compensated.
pub(super) async fn seed(
    cx: &mut Step<'_, DbState>,
    instance_id: &str,
) -> Result<Transition<DbState>> {
    let cloud = &cx.context().cloud;
    let sql = &cx.resource().spec.seed;
    if !sql.trim().is_empty() {
        cloud.seed(instance_id, sql).await?;
    }
    issue_credentials(cx, instance_id).await
}

/// The credentials are issued at the end of `Seeding` and carried by the
/// `sensitive` state `Credentials`, so that a retry of the publication uses
/// the same password.
async fn issue_credentials(
    cx: &mut Step<'_, DbState>,
    instance_id: &str,
) -> Result<Transition<DbState>> {
    let credentials = cx.context().cloud.credentials(instance_id).await?;
    Ok(Transition::next(DbState::Credentials {
        instance_id: instance_id.to_owned(),
        username: credentials.username,
        password: credentials.password,
    }))
}

/// `Credentials`: write (or overwrite) the connection Secret.
pub(super) async fn publish_credentials(
    cx: &mut Step<'_, DbState>,
    instance_id: &str,
    username: &str,
    password: &str,
) -> Result<Transition<DbState>> {
    let database = cx.resource();
    let ctx = cx.context();
    let namespace = database.namespace().ok_or(DbError::NotNamespaced)?;
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    let secret = connection_secret(
        database,
        ctx.cloud.base_url(),
        instance_id,
        username,
        password,
    );
    let name = connection_secret_name(database);
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_already_exists() => {
            // Ours from an attempt whose answer was lost: brought up to
            // date. Anybody else's is left alone: the credentials of a
            // live database must not land in (and outlive the Database
            // in) a Secret this Database does not own.
            let existing = secrets.get(&name).await?;
            let uid = database.uid().unwrap_or_default();
            let ours = existing
                .owner_references()
                .iter()
                .any(|o| o.uid == uid && o.controller == Some(true));
            if !ours {
                return Err(DbError::SecretNotOurs(format!("{namespace}/{name}")));
            }
            let patch = serde_json::json!({ "stringData": secret.string_data });
            secrets
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Err(e) => return Err(e.into()),
    }
    Ok(Transition::next(DbState::Ready {
        instance_id: instance_id.to_owned(),
    }))
}

/// `Ready`: provision again if the instance disappeared.
///
/// A cloud API that cannot answer right now is not a reason to leave
/// `Ready`: were it a handler error, an outage longer than the retries
/// would fail the workflow and compensate, deleting a healthy database. The
/// handler looks again after the poll interval instead.
pub(super) async fn check_instance(
    cx: &mut Step<'_, DbState>,
    instance_id: &str,
) -> Result<Transition<DbState>> {
    Ok(match cx.context().cloud.get(instance_id).await {
        Ok(Some(_)) => Transition::stay(),
        Ok(None) => {
            tracing::warn!(instance = %instance_id, "the instance disappeared; provisioning again");
            Transition::next(DbState::Pending)
        }
        Err(e) if e.is_retryable() => {
            tracing::warn!(instance = %instance_id, error = %e, "cannot check the instance; looking again later");
            Transition::stay()
        }
        Err(e) => return Err(e.into()),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::Client;
    use operator_fsm::core::{Harness, RunHandlerError};

    use super::*;
    use crate::database::cloud::{CloudConfig, CloudService};
    use crate::database::{Database, DatabaseSpec, DbContext};
    use crate::testing::{NS, create, server};

    const GOOD_SEED: &str = "CREATE TABLE items (id int); INSERT INTO items VALUES (1);";

    async fn database(client: &Client, name: &str, seed: &str) -> Database {
        let spec = DatabaseSpec {
            engine: "postgres".into(),
            size: "small".into(),
            seed: seed.into(),
        };
        create(client, Database::new(name, spec)).await
    }

    async fn cloud(failure_rate: f64, ready_after: Option<Duration>) -> CloudService {
        CloudService::start(CloudConfig {
            seed: 3,
            failure_rate,
            ready_after,
            idempotency_keys: false,
        })
        .await
        .unwrap()
    }

    fn ctx(client: &Client, cloud: &CloudService) -> DbContext {
        DbContext {
            poll: Duration::from_secs(10),
            ..DbContext::new(client.clone(), cloud.url())
        }
    }

    #[tokio::test]
    async fn a_replica_that_lost_its_lease_stops_before_paying() {
        let (_server, client) = server().await;
        let cloud = cloud(0.0, None).await;
        let db = database(&client, "inventory", GOOD_SEED).await;
        let lapsed = std::sync::Arc::new(operator_fsm::leader::Leadership::never("replica-0"));
        // With the request id already checkpointed: the check before the
        // create stops it.
        let resumed = Harness::<DbState>::new(db.clone(), ctx(&client, &cloud))
            .authority(lapsed.clone())
            .in_state(DbState::Provisioning {
                request_id: Some("req-1".into()),
            });
        let error = resumed.run_handler().await.unwrap_err();
        assert!(
            matches!(error, RunHandlerError::Handler(DbError::NotLeading(_))),
            "{error:?}"
        );
        // Without one: the checkpoint refuses, before anything is written.
        let fresh = Harness::<DbState>::new(db, ctx(&client, &cloud))
            .authority(lapsed)
            .in_state(DbState::Provisioning { request_id: None });
        let error = fresh.run_handler().await.unwrap_err();
        assert!(
            matches!(
                error,
                RunHandlerError::Handler(DbError::Checkpoint(
                    operator_fsm::core::CheckpointError::AuthorityLost(_)
                ))
            ),
            "{error:?}"
        );
        assert!(fresh.checkpoints().is_empty());
        assert!(cloud.ledger().charges.is_empty(), "nothing was paid for");
    }

    #[tokio::test]
    async fn the_request_id_is_checkpointed_before_the_create() {
        let (_server, client) = server().await;
        let cloud = cloud(0.0, None).await;
        let db = database(&client, "inventory", GOOD_SEED).await;
        let harness = Harness::<DbState>::new(db, ctx(&client, &cloud))
            .in_state(DbState::Provisioning { request_id: None });
        let out = harness.run_handler().await.unwrap();

        let checkpoints = harness.checkpoints();
        let [
            DbState::Provisioning {
                request_id: Some(request_id),
            },
        ] = checkpoints.as_slice()
        else {
            panic!("one checkpoint with a request id expected, got {checkpoints:?}");
        };
        let ledger = cloud.ledger();
        assert_eq!(ledger.charges.len(), 1);
        assert_eq!(&ledger.charges[0].request_id, request_id);
        assert_eq!(
            out,
            Transition::next(DbState::WaitingReady {
                instance_id: ledger.charges[0].instance_id.clone()
            })
        );
    }

    #[tokio::test]
    async fn a_retry_finds_the_instance_of_a_lost_answer_instead_of_paying_again() {
        let (_server, client) = server().await;
        let cloud = cloud(0.0, None).await;
        let db = database(&client, "inventory", GOOD_SEED).await;
        // An earlier attempt created the instance, then lost the answer.
        let earlier = ctx(&client, &cloud)
            .cloud
            .create(&CreateInstance {
                request_id: "req-1".into(),
                name: "inventory".into(),
                engine: "postgres".into(),
                size: "small".into(),
            })
            .await
            .unwrap();

        let out = Harness::<DbState>::new(db, ctx(&client, &cloud))
            .in_state(DbState::Provisioning {
                request_id: Some("req-1".into()),
            })
            .attempt(1)
            .run_handler()
            .await
            .unwrap();
        assert_eq!(
            out,
            Transition::next(DbState::WaitingReady {
                instance_id: earlier.id
            })
        );
        assert_eq!(cloud.ledger().creates_for("inventory"), 1);
    }

    /// A leader paused past its Lease and resumed runs `Provisioning` with
    /// the same checkpointed request id as the new leader, at the same time:
    /// both may find nothing and both create. The key makes the second
    /// create answer with the first one's instance.
    #[tokio::test]
    async fn two_processes_provisioning_at_once_pay_once_when_the_cloud_honours_keys() {
        let (_server, client) = server().await;
        let cloud = CloudService::start(CloudConfig {
            seed: 3,
            failure_rate: 0.0,
            ready_after: None,
            idempotency_keys: true,
        })
        .await
        .unwrap();
        let db = database(&client, "inventory", GOOD_SEED).await;
        let process = || {
            Harness::<DbState>::new(db.clone(), ctx(&client, &cloud))
                .in_state(DbState::Provisioning {
                    request_id: Some("req-1".into()),
                })
                .attempt(1)
        };
        let (zombie, leader) = (process(), process());
        let (a, b) = tokio::join!(zombie.run_handler(), leader.run_handler());
        let ledger = cloud.ledger();
        assert_eq!(ledger.creates_for("inventory"), 1, "{ledger:?}");
        let expected = Transition::next(DbState::WaitingReady {
            instance_id: ledger.charges[0].instance_id.clone(),
        });
        assert_eq!(a.unwrap(), expected);
        assert_eq!(b.unwrap(), expected);
        assert_eq!(cloud.instances().len(), 1);
    }

    #[tokio::test]
    async fn a_flaky_api_still_provisions_each_database_once() {
        let (_server, client) = server().await;
        let cloud = cloud(0.35, Some(Duration::ZERO)).await;
        let db = database(&client, "inventory", GOOD_SEED).await;
        let settled = Harness::<DbState>::new(db, ctx(&client, &cloud))
            .run_until_settled()
            .await
            .unwrap();
        let DbState::Ready { instance_id } = &settled.state else {
            panic!("expected Ready, got {:?}", settled.state);
        };
        let ledger = cloud.ledger();
        assert!(
            ledger.injected_failures > 0,
            "the API never failed: {ledger:?}"
        );
        // With this seed a create succeeds but its answer is lost: the retry
        // must find the instance, not pay again.
        assert_eq!(ledger.lost_answers, 1, "{ledger:?}");
        assert_eq!(ledger.creates_for("inventory"), 1, "{ledger:?}");
        assert_eq!(&ledger.charges[0].instance_id, instance_id);

        let secrets: Api<Secret> = Api::namespaced(client, NS);
        let secret = secrets.get("inventory-connection").await.unwrap();
        let data = secret.data.or(secret.string_data.map(|d| {
            d.into_iter()
                .map(|(k, v)| (k, k8s_openapi::ByteString(v.into_bytes())))
                .collect()
        }));
        let data = data.unwrap();
        assert_eq!(data["instance"].0, instance_id.as_bytes());
        assert!(!data["password"].0.is_empty());
    }

    #[tokio::test]
    async fn an_instance_never_ready_times_out_and_is_deleted() {
        let (_server, client) = server().await;
        let cloud = cloud(0.0, None).await;
        let db = database(&client, "inventory", GOOD_SEED).await;
        let settled = Harness::<DbState>::new(db, ctx(&client, &cloud))
            .run_until_settled()
            .await
            .unwrap();
        assert_eq!(settled.state, DbState::Failed);
        assert_eq!(
            settled.path(),
            ["Pending", "Provisioning", "WaitingReady", "Failed"]
        );
        assert!(settled.elapsed >= Duration::from_secs(120));
        let ledger = cloud.ledger();
        assert_eq!(ledger.charges.len(), 1);
        assert_eq!(ledger.deleted, [ledger.charges[0].instance_id.clone()]);
        assert!(cloud.instances().is_empty());
    }

    #[tokio::test]
    async fn a_rejected_seed_fails_and_the_compensation_deletes_the_instance() {
        let (_server, client) = server().await;
        let cloud = cloud(0.0, Some(Duration::ZERO)).await;
        let db = database(
            &client,
            "analytics",
            "CREATE TABLE t (id int); INSRT INTO t VALUES (1)",
        )
        .await;
        let settled = Harness::<DbState>::new(db, ctx(&client, &cloud))
            .run_until_settled()
            .await
            .unwrap();
        assert_eq!(settled.state, DbState::Failed);
        assert_eq!(
            settled.path(),
            [
                "Pending",
                "Provisioning",
                "WaitingReady",
                "Seeding",
                "Failed"
            ]
        );
        let error = settled.record.last_error.clone().unwrap_or_default();
        assert!(error.contains("INSRT"), "{error}");
        let ledger = cloud.ledger();
        assert_eq!(ledger.creates_for("analytics"), 1);
        assert_eq!(ledger.deleted.len(), 1);
        assert!(cloud.instances().is_empty());
    }

    #[tokio::test]
    async fn a_spec_the_cloud_cannot_serve_fails_before_paying() {
        let (_server, client) = server().await;
        let cloud = cloud(0.0, None).await;
        let mut db = database(&client, "inventory", GOOD_SEED).await;
        db.spec.size = "huge".into();
        let out = Harness::<DbState>::new(db, ctx(&client, &cloud))
            .run_handler()
            .await
            .unwrap();
        assert!(
            matches!(out, Transition::Fail(ref reason) if reason.contains("huge")),
            "{out:?}"
        );
        assert!(cloud.ledger().charges.is_empty());
    }

    #[tokio::test]
    async fn an_unreachable_api_does_not_take_a_ready_database_down() {
        let (_server, client) = server().await;
        let db = database(&client, "inventory", GOOD_SEED).await;
        let mut gone = ctx(&client, &cloud(0.0, None).await);
        // Nothing listens there any more.
        gone.cloud = crate::database::CloudClient::new("http://127.0.0.1:1");
        let out = Harness::<DbState>::new(db, gone)
            .in_state(DbState::Ready {
                instance_id: "db-1".into(),
            })
            .run_handler()
            .await
            .unwrap();
        assert_eq!(out, Transition::stay());
    }

    #[test]
    fn the_password_state_is_sensitive() {
        use operator_fsm::core::Fsm;
        let machine = DbState::machine();
        assert!(machine.state("Credentials").unwrap().is_sensitive());
        assert!(!machine.state("Ready").unwrap().is_sensitive());
    }
}
