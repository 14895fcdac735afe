//! `heaplive`: the command-line side of the heaplive profiler.
//!
//! It runs programs under the preload library (`run`), asks running processes
//! for a dump (`dump`), and reads the folded files the library writes (`top`,
//! `diff`, `merge`, `flamegraph`). It never links the library itself: it only
//! knows the library's contract (file format, environment variables, status
//! files), written down in `run.rs` and `dump.rs`.
//!
//! Errors are one line on stderr starting `heaplive:`, naming the file or pid;
//! exit status 1 for errors, 2 for usage errors. Nothing here may panic on
//! bad input.

mod args;
mod dump;
mod flame;
mod folded;
mod report;
mod run;
mod units;

use std::ffi::OsString;
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

const HELP: &str = "\
heaplive: which call stacks hold the memory that is live right now?

Usage: heaplive COMMAND [OPTIONS] ...

Commands:
  run         run a program under the profiler (LD_PRELOAD=libheaplive.so)
  dump        ask running processes for a dump now, print the file names
  top         the stacks (or functions) holding the most live bytes
  diff        what grew and what shrank between two dumps
  merge       sum several folded files into one (to stdout)
  flamegraph  render folded files as an interactive SVG flame graph

Run 'heaplive COMMAND --help' for the options of one command.

Examples:
  heaplive run -- ./server --port 8080     # dumps on SIGUSR2 and at exit
  heaplive dump 4242                       # prints heaplive.server.4242.1.folded
  heaplive dump --children $(cat /run/php/php8.2-fpm.pid)
  heaplive top heaplive.server.4242.1.folded
  heaplive diff heaplive.server.4242.1.folded heaplive.server.4242.2.folded
  heaplive flamegraph heaplive.server.4242.2.folded -o live.svg

Folded files are plain text, one stack a line: frames root first joined by
';', a space, the live bytes. flamegraph.pl, inferno and speedscope read them.
";

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let sub = argv
        .first()
        .and_then(|a| a.to_str())
        .unwrap_or("")
        .to_string();
    let rest = argv.get(1..).unwrap_or(&[]).to_vec();
    let result = match sub.as_str() {
        "" if argv.is_empty() => {
            eprint!("{HELP}");
            Err(Fail::Usage("no command given".into()))
        }
        "-h" | "--help" | "help" => {
            // `heaplive help top` works like `heaplive top --help`.
            match rest.first().and_then(|a| a.to_str()) {
                Some(cmd) => dispatch(cmd, vec![OsString::from("--help")]),
                None => {
                    print!("{HELP}");
                    Ok(())
                }
            }
        }
        "-V" | "--version" => {
            println!("heaplive {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        cmd => dispatch(cmd, rest),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail::Usage(msg)) => {
            eprintln!("heaplive: {msg}");
            match sub.as_str() {
                "run" | "dump" | "top" | "diff" | "merge" | "flamegraph" => {
                    eprintln!("Try 'heaplive {sub} --help'.")
                }
                _ => eprintln!("Try 'heaplive --help'."),
            }
            ExitCode::from(2)
        }
        Err(Fail::Error(msg)) => {
            eprintln!("heaplive: {msg}");
            ExitCode::from(1)
        }
        Err(Fail::Reported) => ExitCode::from(1),
        Err(Fail::Exit(code)) => ExitCode::from(code),
    }
}

fn dispatch(cmd: &str, rest: Vec<OsString>) -> Res<()> {
    match cmd {
        "run" => run::main(rest),
        "dump" => dump::main(rest),
        "top" => report::top_main(rest),
        "diff" => report::diff_main(rest),
        "merge" => report::merge_main(rest),
        "flamegraph" | "flame" => flame::main(rest),
        other => usage(format!("unknown command '{other}'")),
    }
}
