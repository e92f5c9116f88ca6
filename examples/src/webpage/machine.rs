//! The WebPage as a state machine: converge the page's dependents in a
//! state, then run a smoke test once per version of the page.

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use operator_fsm::dependents::{
    Dependent, DependentsError, DesiredSet, SetError, StepDependents, converge_state,
};
use operator_fsm::prelude::*;

use super::{WebPage, desired};
use crate::support::digest;

/// Where one page stands.
///
/// `Deploying` converges the four dependents of [`desired`] and moves on
/// once all are ready. `Verifying` runs a smoke test (a Job fetching the
/// page through its Service) for this version of the HTML: a one-off
/// step, not something the page keeps, so it is a state of the workflow
/// rather than a dependent of the page. `Serving` keeps the dependents
/// converged (drift, `exposed` flipping) and starts over when the HTML
/// changes; a dependent it cannot converge there (another field manager's
/// conflict) leaves it serving and `Degraded`, not failed. Deleting the page tears the dependents down in reverse
/// order.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = WebPage, context = (), error = PageError, cleanup = take_down)]
#[fsm(retry(max_attempts = 3, initial = "200ms", factor = 2.0, max = "5s"))]
pub enum PageState {
    /// Converging the dependents.
    #[fsm(initial, handler = deploy, next(Verifying))]
    Deploying,
    /// The smoke test of this version of the page runs.
    #[fsm(handler = verify, next(Serving, Deploying))]
    Verifying {
        /// The digest of the HTML under test.
        digest: String,
    },
    /// Served and verified; kept converged.
    #[fsm(ready, handler = serve, next(Deploying))]
    Serving {
        /// The digest of the HTML served.
        digest: String,
    },
    /// The smoke test failed.
    #[fsm(failed)]
    Failed,
}

/// Why a step of [`PageState`] failed.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// Converging or tearing down could not run, or a dependent failed.
    #[error(transparent)]
    Dependents(#[from] DependentsError),
    /// The desired set is malformed; permanent.
    #[error(transparent)]
    Set(#[from] SetError),
    /// Dependents are still being deleted; tried again without spending an
    /// attempt.
    #[error("dependents are still being deleted: {0}")]
    TearingDown(String),
}

impl Classify for PageError {
    fn class(&self) -> ErrorClass {
        match self {
            PageError::Dependents(e) => e.class(),
            PageError::Set(_) => ErrorClass::Permanent,
            PageError::TearingDown(_) => ErrorClass::RETRY_WITHOUT_ATTEMPT,
        }
    }
}

type Result<T> = std::result::Result<T, PageError>;

/// The digest of the page's HTML (10 hex digits), which names its smoke
/// test.
pub fn html_digest(page: &WebPage) -> String {
    digest(&page.spec.html)[..10].to_owned()
}

async fn deploy(cx: &mut Step<'_, PageState>) -> Result<Transition<PageState>> {
    let page = cx.resource();
    let set = desired(page)?;
    let next = PageState::Verifying {
        digest: html_digest(page),
    };
    Ok(converge_state(cx, &set, next).await?)
}

async fn verify(cx: &mut Step<'_, PageState>, digest: &str) -> Result<Transition<PageState>> {
    if html_digest(cx.resource()) != digest {
        return Ok(Transition::next(PageState::Deploying));
    }
    let test = smoke_test(cx.resource(), digest)?;
    let next = PageState::Serving {
        digest: digest.to_owned(),
    };
    // A failed test is a failed step: retried, then `Failed`.
    Ok(converge_state(cx, &test, next).await?)
}

async fn serve(cx: &mut Step<'_, PageState>, digest: &str) -> Result<Transition<PageState>> {
    if html_digest(cx.resource()) != digest {
        return Ok(Transition::next(PageState::Deploying));
    }
    let convergence = cx.converge(&desired(cx.resource())?).await?;
    if convergence.is_failed() {
        // A served page does not fail over what a person or another
        // controller does to its dependents (a field taken with
        // `kubectl apply --server-side --force-conflicts`): it stays,
        // shows `Degraded` with what is wrong, and tries again on its
        // backoff until the dependents converge.
        return Ok(Transition::degraded(convergence.summary()));
    }
    Ok(Transition::stay())
}

async fn take_down(cx: &mut Step<'_, PageState>, _: &PageState) -> Result<()> {
    let teardown = cx.teardown(&desired(cx.resource())?).await?;
    if teardown.is_done() {
        Ok(())
    } else {
        Err(PageError::TearingDown(teardown.summary()))
    }
}

/// The image of the smoke test's Job, which runs it with `--fail
/// http://PAGE/`.
pub const SMOKE_TEST_IMAGE: &str = "curlimages/curl:8.10.1";

/// The smoke test of version `digest` of `page`: one Job, named after the
/// digest, so each version is tested once; the next version's test
/// replaces it (same key, another name: the old one is pruned).
fn smoke_test(page: &WebPage, digest: &str) -> Result<DesiredSet> {
    let name = page.name_any();
    let job = Job {
        metadata: ObjectMeta {
            name: Some(format!("{name}-smoke-{digest}")),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    restart_policy: Some("Never".to_owned()),
                    containers: vec![Container {
                        name: "fetch".to_owned(),
                        image: Some(SMOKE_TEST_IMAGE.to_owned()),
                        args: Some(vec!["--fail".to_owned(), format!("http://{name}/")]),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        status: None,
    };
    Ok(DesiredSet::builder()
        .dependent(Dependent::new("smoke-test", &job))
        .build()?)
}
