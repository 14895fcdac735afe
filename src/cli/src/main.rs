//! `heaplive`: the command-line side of the heaplive profiler.
//!
//! It runs programs under the preload library (`run`), asks running processes
//! for a dump (`dump`), and reads the folded files the library writes (`top`,
//! `diff`, `merge`, `flamegraph`). It never links the library itself: what
//! the two share (settings, signals, file names, status and folded files) is
//! the contract crate `heaplive-format`. The command line is defined in
//! `cli.rs`; each subcommand has its own file.
//!
//! Errors are one line on stderr starting `heaplive:`, naming the file or pid;
//! exit status 1 for errors, 2 for usage errors. Nothing here may panic on
//! bad input, nor on an output that is gone: `println!` and `eprintln!`
//! panic when a write fails (stderr on /dev/full, a pipe whose reader has
//! exited), so lines go out through [`say!`] (stderr: a message lost is
//! never fatal and never changes the exit status) and [`out_line`]
//! (stdout: a closed pipe ends the output quietly). The standard library
//! ignores SIGPIPE in this process (a write to a dead pipe returns EPIPE)
//! and gives the programs `run` starts the default disposition back.
#![warn(clippy::print_stdout, clippy::print_stderr)]

/// `eprintln!` that never panics: when stderr cannot be written the line
/// is lost, and nothing else changes.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

mod attach;
mod cli;
mod diff;
mod dump;
mod flame;
mod folded;
mod man;
mod merge;
mod pool;
mod ptrace;
mod report;
mod report_json;
mod run;
mod run_report;
mod table;
mod top;
mod units;

use clap::{CommandFactory, Parser};
use cli::{Cli, Command};
use std::process::ExitCode;

/// Why a subcommand failed. `Usage` exits 2 and points at `--help`.
#[derive(Debug)]
pub enum Fail {
    Usage(String),
    Error(String),
    /// Several errors already printed (e.g. one per pid); exit 1 quietly.
    Reported,
    /// Not a failure: `run` exits with its child's status.
    Exit(u8),
}

pub type Res<T> = Result<T, Fail>;

pub fn usage<T>(msg: impl Into<String>) -> Res<T> {
    Err(Fail::Usage(msg.into()))
}

pub fn error<T>(msg: impl Into<String>) -> Res<T> {
    Err(Fail::Error(msg.into()))
}

/// One line on stdout. A reader that has gone (`| head -1`) ends the
/// output quietly (`Ok`); another error is `Fail::Error` with one line.
pub fn out_line(line: &str) -> Res<()> {
    table::emit(|out| writeln!(out, "{line}"))
}

/// Whether `s` names a subcommand (or one of its aliases), as the command
/// line's definition has them.
fn is_subcommand(s: &str) -> bool {
    Cli::command()
        .get_subcommands()
        .any(|c| c.get_name() == s || c.get_all_aliases().any(|a| a == s))
}

/// A clap error as heaplive's one usage line (exit 2), or help and version
/// as they are.
fn parse_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            say!("heaplive: no command given");
            ExitCode::from(2)
        }
        _ => {
            // The message is the text before clap's first blank line.
            let text = e.render().to_string();
            let msg: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let msg = msg.join(" ");
            let msg = msg.strip_prefix("error: ").unwrap_or(&msg);
            match did_you_mean(&e) {
                Some(tip) => say!("heaplive: {msg}; did you mean {tip}?"),
                None => say!("heaplive: {msg}"),
            }
            let sub = std::env::args().nth(1).filter(|s| is_subcommand(s));
            match sub {
                Some(sub) => say!("Try 'heaplive {sub} --help'."),
                None => say!("Try 'heaplive --help'."),
            }
            ExitCode::from(2)
        }
    }
}

/// clap's suggestion for a misspelled option, subcommand or value
/// (`'--interval'`), from the error's context.
fn did_you_mean(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    [
        ContextKind::SuggestedArg,
        ContextKind::SuggestedSubcommand,
        ContextKind::SuggestedValue,
    ]
    .into_iter()
    .find_map(|k| match e.get(k)? {
        ContextValue::String(s) => Some(format!("'{s}'")),
        ContextValue::Strings(v) if !v.is_empty() => Some(
            v.iter()
                .map(|s| format!("'{s}'"))
                .collect::<Vec<_>>()
                .join(" or "),
        ),
        _ => None,
    })
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return parse_error(e),
    };
    let result = match cli.command {
        Command::Run(a) => run::main(a),
        Command::Dump(a) => dump::main(a),
        Command::Start(a) => dump::switch(a, true),
        Command::Stop(a) => dump::switch(a, false),
        Command::Attach(a) => attach::main(a),
        Command::Detach(a) => attach::detach_main(a),
        Command::Top(a) => top::main(a),
        Command::Diff(a) => diff::main(a),
        Command::Merge(a) => merge::main(a),
        Command::Flamegraph(a) => flame::main(a),
        Command::Report(a) => report::main(a),
        Command::Completions(a) => {
            // Into memory first: clap_complete panics when a write fails.
            let mut script = Vec::new();
            clap_complete::generate(a.shell, &mut Cli::command(), "heaplive", &mut script);
            let script = cli::with_pid_completion(a.shell, script);
            table::emit(|out| out.write_all(&script))
        }
        Command::Man(_) => {
            let page = man::page(&Cli::command());
            table::emit(|out| out.write_all(page.as_bytes()))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail::Usage(msg)) => {
            say!("heaplive: {msg}");
            say!("Try 'heaplive --help'.");
            ExitCode::from(2)
        }
        Err(Fail::Error(msg)) => {
            say!("heaplive: {msg}");
            ExitCode::from(1)
        }
        Err(Fail::Reported) => ExitCode::from(1),
        Err(Fail::Exit(code)) => ExitCode::from(code),
    }
}
