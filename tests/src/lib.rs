//! Cross-crate integration tests of operator-fsm live in `tests/tests/`.
