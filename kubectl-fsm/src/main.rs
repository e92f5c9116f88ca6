//! `kubectl-fsm`, which kubectl runs for `kubectl fsm ...`.

use std::process::ExitCode;

use clap::Parser;
use fsm_core::text::display_chain;
use kubectl_fsm::{Cli, run};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut stdout = std::io::stdout();
    match run(cli.command, &mut stdout).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", display_chain(&error, "\n  caused by: "));
            ExitCode::FAILURE
        }
    }
}
