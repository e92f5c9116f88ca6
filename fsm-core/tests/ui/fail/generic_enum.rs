use fsm_core::prelude::*;

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = ())]
enum Job<T> {
    #[fsm(initial, handler = run, next(Done))]
    Pending,
    #[fsm(final)]
    Done(T),
    #[fsm(failed)]
    Failed,
}

fn main() {}
