use fsm_core::prelude::*;

// The engine enters the initial state with every field's `Default`.
pub struct Ticket(u64);

#[derive(OperatorFsm, Clone, Serialize, Deserialize)]
#[fsm(resource = ())]
enum Job {
    #[fsm(initial, handler = run, next(Done))]
    Pending { request_id: Option<String>, ticket: Ticket },
    #[fsm(final)]
    Done,
    #[fsm(failed)]
    Failed,
}

impl Clone for Ticket {
    fn clone(&self) -> Self {
        Ticket(self.0)
    }
}
impl Serialize for Ticket {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}
impl<'de> Deserialize<'de> for Ticket {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        u64::deserialize(d).map(Ticket)
    }
}

async fn run(
    _cx: &mut Step<'_, Job>,
    _request_id: &Option<String>,
    _ticket: &Ticket,
) -> Result<Transition<Job>, std::convert::Infallible> {
    Ok(Transition::stay())
}

fn main() {}
