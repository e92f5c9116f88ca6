//! An embedded, in-memory Kubernetes API server for testing operators.
//!
//! Not implemented yet: tracked by its own issue.
