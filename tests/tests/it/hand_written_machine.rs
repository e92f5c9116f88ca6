//! A machine written by hand (no macro), tested the way users test theirs:
//! one handler alone, then the whole workflow driven to rest in memory, then
//! the engine's reconcile spawned on a multi-threaded runtime as a
//! controller would.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fsm_core::prelude::*;
use fsm_core::{Effect, Engine, EphemeralStore, ObjectKey, Observed, RunHandlerError};

/// A tiny external API that charges for every create, like a cloud.
#[derive(Default)]
struct Cloud {
    instances: Mutex<HashMap<String, bool>>,
    creates: Mutex<u32>,
    fail_next_seed: Mutex<bool>,
}

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error("cloud unavailable")]
    Unavailable,
    #[error("seeding rejected: {0}")]
    Rejected(String),
    #[error(transparent)]
    Checkpoint(#[from] fsm_core::CheckpointError),
}

impl Classify for AppError {
    fn class(&self) -> ErrorClass {
        match self {
            AppError::Rejected(_) => ErrorClass::Permanent,
            _ => ErrorClass::RETRYABLE,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
enum Db {
    Pending,
    Provisioning {
        request_id: String,
        instance: Option<String>,
    },
    Seeding {
        instance: String,
    },
    Ready {
        instance: String,
    },
    Failed,
}

static STATES: [StateMeta; 5] = [
    StateMeta::new("Pending")
        .initial()
        .with_handler()
        .next(&["Provisioning"]),
    StateMeta::new("Provisioning")
        .with_handler()
        .with_data()
        .with_compensation()
        .next(&["Seeding"]),
    StateMeta::new("Seeding")
        .with_handler()
        .with_data()
        .timeout(Duration::from_secs(600))
        .next(&["Ready"]),
    StateMeta::new("Ready").ready().with_handler().with_data(),
    StateMeta::new("Failed").failed(),
];
static MACHINE: Machine = Machine::new("Db", &STATES);

async fn pending(cx: &mut Step<'_, Db>) -> Result<Transition<Db>, AppError> {
    // Record the intent first: the request id lives in the next state's data.
    Ok(Transition::next(Db::Provisioning {
        request_id: format!("req-{}", cx.resource()),
        instance: None,
    }))
}

async fn provision(
    cx: &mut Step<'_, Db>,
    request_id: &String,
    instance: &Option<String>,
) -> Result<Transition<Db>, AppError> {
    let instance = match instance {
        Some(instance) => instance.clone(),
        None => {
            let created = {
                let cloud = cx.context();
                let mut instances = cloud.instances.lock().unwrap();
                if !instances.contains_key(request_id) {
                    *cloud.creates.lock().unwrap() += 1;
                    instances.insert(request_id.clone(), true);
                }
                request_id.clone()
            };
            // Keep what the create returned before anything else can fail.
            cx.checkpoint(Db::Provisioning {
                request_id: request_id.clone(),
                instance: Some(created.clone()),
            })
            .await?;
            created
        }
    };
    Ok(Transition::next(Db::Seeding { instance }))
}

async fn seed(cx: &mut Step<'_, Db>, instance: &str) -> Result<Transition<Db>, AppError> {
    if std::mem::take(&mut *cx.context().fail_next_seed.lock().unwrap()) {
        return Err(AppError::Rejected(format!("{instance} refused the schema")));
    }
    if cx.attempt() == 0 {
        return Err(AppError::Unavailable);
    }
    Ok(Transition::next(Db::Ready {
        instance: instance.to_owned(),
    }))
}

async fn deprovision(cx: &mut Step<'_, Db>, request_id: &String) -> Result<(), AppError> {
    cx.context().instances.lock().unwrap().remove(request_id);
    Ok(())
}

impl Fsm for Db {
    type Resource = u32;
    type Context = Arc<Cloud>;
    type Error = AppError;

    fn machine() -> &'static Machine {
        &MACHINE
    }
    fn state_name(&self) -> &'static str {
        match self {
            Db::Pending => "Pending",
            Db::Provisioning { .. } => "Provisioning",
            Db::Seeding { .. } => "Seeding",
            Db::Ready { .. } => "Ready",
            Db::Failed => "Failed",
        }
    }
    fn unit_state(name: &str) -> Option<Self> {
        match name {
            "Pending" => Some(Db::Pending),
            "Failed" => Some(Db::Failed),
            _ => None,
        }
    }
    fn handle<'a>(
        &'a self,
        cx: &'a mut Step<'_, Self>,
    ) -> BoxFuture<'a, Result<Transition<Self>, AppError>> {
        match self {
            Db::Pending => Box::pin(pending(cx)),
            Db::Provisioning {
                request_id,
                instance,
            } => Box::pin(provision(cx, request_id, instance)),
            Db::Seeding { instance } => Box::pin(seed(cx, instance)),
            Db::Ready { .. } | Db::Failed => Box::pin(async { Ok(Transition::stay()) }),
        }
    }
    fn compensate<'a>(&'a self, cx: &'a mut Step<'_, Self>) -> BoxFuture<'a, Result<(), AppError>> {
        match self {
            Db::Provisioning { request_id, .. } => Box::pin(deprovision(cx, request_id)),
            _ => Box::pin(async { Ok(()) }),
        }
    }
}

#[tokio::test]
async fn one_handler_alone_records_its_checkpoint() {
    let cloud = Arc::new(Cloud::default());
    let harness = Harness::<Db>::new(7, cloud.clone()).in_state(Db::Provisioning {
        request_id: "req-7".into(),
        instance: None,
    });
    let out = harness.run_handler().await.unwrap();
    assert_eq!(
        out,
        Transition::next(Db::Seeding {
            instance: "req-7".into()
        })
    );
    assert_eq!(
        harness.checkpoints(),
        [Db::Provisioning {
            request_id: "req-7".into(),
            instance: Some("req-7".into())
        }]
    );
}

#[tokio::test]
async fn the_seeding_handler_retries_then_moves_on() {
    let harness = Harness::<Db>::new(1, Arc::default()).in_state(Db::Seeding {
        instance: "i".into(),
    });
    assert!(matches!(
        harness.run_handler().await,
        Err(RunHandlerError::Handler(AppError::Unavailable))
    ));
    let retried = Harness::<Db>::new(1, Arc::default())
        .in_state(Db::Seeding {
            instance: "i".into(),
        })
        .attempt(1)
        .run_handler()
        .await
        .unwrap();
    assert_eq!(
        retried,
        Transition::next(Db::Ready {
            instance: "i".into()
        })
    );
}

#[tokio::test]
async fn the_workflow_settles_in_ready_with_one_create() {
    let cloud = Arc::new(Cloud::default());
    let settled = Harness::<Db>::new(3, cloud.clone())
        .run_until_settled()
        .await
        .unwrap();
    assert_eq!(
        settled.state,
        Db::Ready {
            instance: "req-3".into()
        }
    );
    assert_eq!(
        settled.path(),
        ["Pending", "Provisioning", "Seeding", "Ready"]
    );
    assert_eq!(*cloud.creates.lock().unwrap(), 1);
    // The first seeding attempt failed and was retried after 1 s (the
    // default policy), in virtual time.
    assert!(settled.effects.iter().any(|e| matches!(
        e,
        Effect::RetryScheduled { state, delay, .. } if state == "Seeding" && *delay == Duration::from_secs(1)
    )));
    assert!(settled.elapsed >= Duration::from_secs(1));
}

#[tokio::test]
async fn a_permanent_failure_compensates_what_was_created() {
    let cloud = Arc::new(Cloud::default());
    *cloud.fail_next_seed.lock().unwrap() = true;
    let settled = Harness::<Db>::new(4, cloud.clone())
        .run_until_settled()
        .await
        .unwrap();
    assert_eq!(settled.state, Db::Failed);
    assert_eq!(
        settled.record.last_error.as_deref(),
        Some("seeding rejected: req-4 refused the schema")
    );
    assert!(
        cloud.instances.lock().unwrap().is_empty(),
        "the instance was deprovisioned"
    );
}

#[test]
fn the_reconcile_future_is_send_and_runs_on_a_multi_threaded_runtime() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let engine = Engine::<Db>::new().unwrap();
        let store = Arc::new(EphemeralStore::new());
        let cloud = Arc::new(Cloud::default());
        let mut tasks = Vec::new();
        for n in 0..8u32 {
            let (engine, store, cloud) = (engine.clone(), store.clone(), cloud.clone());
            tasks.push(tokio::spawn(async move {
                let observed = Observed {
                    commands: Vec::new(),
                    key: ObjectKey::namespaced("default", format!("db-{n}")),
                    ..Observed::default()
                };
                let mut states = Vec::new();
                // The first reconcile enters Pending and runs its handler.
                for _ in 0..3 {
                    let report = engine
                        .reconcile(store.as_ref(), &observed, &n, &cloud)
                        .await
                        .unwrap();
                    states.push(report.state);
                }
                states
            }));
        }
        for task in tasks {
            assert_eq!(task.await.unwrap(), ["Provisioning", "Seeding", "Seeding"]);
        }
        assert_eq!(*cloud.creates.lock().unwrap(), 8);
    });
}
