//! End-to-end benchmarks of operator-fsm against a hand-written kube-rs
//! operator and a kopf operator, side by side in one run.
//!
//! Every implementation runs the same five-step workflow for each
//! [`workload::BenchApp`] (create a ConfigMap, create a Deployment, wait
//! until it is ready, patch an annotation, rest in a ready state) as its own
//! process, over HTTP, against the standalone `fsm-apiserver`. The driver
//! (`cargo run -p bench --release`) starts the server (which simulates the
//! Deployments' rollouts itself) and each operator in turn, creates N objects, waits until all
//! are ready and prints a table; see `docs/benchmarks.md`. With
//! `--server real` it does the same against a real kube-apiserver 1.20
//! ([`real_server`]), counting the operator's requests from the audit log
//! ([`audit`]).

pub mod audit;
pub mod counting;
pub mod real_server;
pub mod report;
pub mod requests;
pub mod workload;
