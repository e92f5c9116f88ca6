//! The examples' tests that run the operator as processes of its own and
//! kill, stop or pause them: the crash and fault soaks, commands under
//! crashes and leader handovers, leader failover, the RBAC the operator
//! uses and the RBAC it runs on where it is enforced, and the operator
//! deployed from its manifests in a real cluster. One binary, apart
//! from `tests/it`: cargo runs test binaries one after another, so these
//! never share the machine with the other tests, and each test holds
//! [`soak::ONE_AT_A_TIME`] for its whole run, so they never share it with
//! each other either (their bounds and measurements assume a quiet 2-core
//! machine). A test's name is its file's module and its function: `cargo
//! test -p examples --test processes -- crash_soak::` runs one file's
//! tests.

mod command_soak;
mod crash_soak;
mod dashboard;
mod failover;
mod fault_soak;
mod in_cluster;
mod rbac;
mod rbac_enforced;
mod soak;
