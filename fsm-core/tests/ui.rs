//! trybuild cases: every error the derive promises, with its message and
//! span (`ui/fail/*.stderr`), and machines using the whole grammar that
//! compile, validate and draw the core's diagram (`ui/pass`).
//!
//! A binary of its own, not a module of `tests/it`: trybuild compiles every
//! case with cargo in a project of its own, and
//! `TRYBUILD=overwrite cargo test -p fsm-core --test ui` rewrites their
//! expected output. The cases live here, not in fsm-macros, because they use
//! the derive as users do, through `fsm_core`; fsm-macros is a proc-macro
//! crate, and cargo resolves a proc-macro's dev-dependencies for the host,
//! so testing the derive there built fsm-core and its dependencies twice.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
