use fsm_core::prelude::*;

#[derive(OperatorFsm)]
#[fsm(resource = ())]
union Job {
    a: u32,
    b: f32,
}

fn main() {}
