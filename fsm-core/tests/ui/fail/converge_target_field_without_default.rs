use fsm_core::prelude::*;

// A `converge` state enters its `next` state with every field's `Default`.
#[derive(Clone, Serialize, Deserialize)]
pub struct Endpoint(String);

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = ())]
enum Job {
    #[fsm(initial, converge = desired, next(Serving))]
    Deploying,
    #[fsm(final)]
    Serving { replicas: u32, endpoint: Endpoint },
    #[fsm(failed)]
    Failed,
}

struct Ready;

impl Converge<Job> for Ready {
    fn converge_state<'a>(
        &'a self,
        _cx: &'a mut Step<'_, Job>,
        next: Job,
    ) -> BoxFuture<'a, Result<Transition<Job>, std::convert::Infallible>> {
        Box::pin(async move { Ok(Transition::next(next)) })
    }
}

fn desired(_cx: &Step<'_, Job>) -> Result<Ready, std::convert::Infallible> {
    Ok(Ready)
}

fn main() {}
