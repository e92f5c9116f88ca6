//! trybuild cases: every error the derive promises, with its message and
//! span (`ui/fail/*.stderr`), and machines using the whole grammar that
//! compile, validate and draw the core's diagram (`ui/pass`).

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
