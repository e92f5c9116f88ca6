use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = ())]
enum Job {
    #[fsm(initial, converge = desired, next(Done))]
    Pending { replicas: u32 },
    #[fsm(final)]
    Done,
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

// An `async fn` taking the step by unique reference and the fields.
async fn desired(cx: &mut Step<'_, Job>, replicas: &u32) -> Result<Ready, std::convert::Infallible> {
    std::future::ready(()).await;
    let _ = (cx.attempt(), replicas);
    Ok(Ready)
}

fn main() {}
