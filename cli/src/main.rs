//! `redlease`: distributed locks on Redis from the shell. `run` holds a lock while a
//! command runs, `elect` runs one while leading an election and `leader` shows who
//! leads, `status` shows locks, `ls` lists them, `top` watches them live, `unlock --force` deletes one. docs/cli.md has the
//! details: options, exit codes, what happens on a lost lease and on signals.

#![forbid(unsafe_code)]
#![warn(rust_2018_idioms)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::print_stdout, clippy::print_stderr)
)]

mod args;
mod child;
mod connect;
mod deadline;
mod exit;
mod leader;
mod locks;
mod names;
mod progress;
mod run;
mod signals;
mod status;
mod top;
mod unlock;

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;

use crate::args::{Cli, Command};
use crate::exit::{Failure, say};

fn main() -> ExitCode {
    // Started again by `run` as the exec shim of its command (see `child`).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|first| first == child::SHIM) {
        return ExitCode::from(child::shim(&args[1..]));
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return ExitCode::from(argument_error(&err)),
    };
    let result = match cli.command {
        None => {
            Err(Failure::usage("no command given: run, elect, leader, status, ls, top or unlock (see redlease --help)"))
        }
        Some(Command::Run(args)) => run::run(args),
        Some(Command::Status(args)) => status::status(&args),
        Some(Command::Ls(args)) => status::list(&args),
        Some(Command::Top(args)) => top::top(&args),
        Some(Command::Elect(args)) => run::run(args.into_run()),
        Some(Command::Leader(args)) => leader::leader(&args),
        Some(Command::Unlock(args)) => unlock::unlock(&args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            say(failure.message());
            ExitCode::from(failure.code)
        }
    }
}

/// Help and version go to stdout with code 0; any other argument error is one line on
/// stderr with [`exit::USAGE`].
fn argument_error(err: &clap::Error) -> u8 {
    if matches!(err.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = err.print();
        return exit::OK;
    }
    let text = err.render().to_string();
    let mut lines = text.lines().skip_while(|l| l.trim().is_empty());
    let first = lines.next().unwrap_or("bad arguments");
    let mut message = first.strip_prefix("error: ").unwrap_or(first).trim_end().to_owned();
    if message.ends_with(':') {
        // "the following required arguments were not provided:" and an indented list.
        let items: Vec<&str> = lines.take_while(|l| l.starts_with(' ')).map(str::trim).collect();
        message = format!("{message} {}", items.join(", "));
    }
    let command = std::env::args()
        .nth(1)
        .filter(|a| ["run", "elect", "leader", "status", "ls", "top", "unlock"].contains(&a.as_str()))
        .map_or_else(|| "redlease --help".to_owned(), |c| format!("redlease {c} --help"));
    say(&format!("{message} (see {command})"));
    exit::USAGE
}
