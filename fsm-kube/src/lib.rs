//! kube-rs integration of operator-fsm.
//!
//! Not implemented yet: the reconciler adaptor and the Kubernetes stores are
//! tracked by their own issue. Nothing here pretends to work.
