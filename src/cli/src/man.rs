//! `heaplive man`: the one man page, heaplive(1), in roff. Every
//! subcommand with its synopsis, description, options and examples comes
//! from the clap definitions (`cli.rs`), the settings from the contract
//! crate's table, so the page says what `--help` and the library say.
//! Examples are laid out as examples (`.nf`/`.fi`: one line each, never
//! reflowed); the page cites no other page of heaplive's (there is none).

use clap::{Arg, Command};
use heaplive_format::settings;
use std::fmt::Write as _;

/// Text as roff: backslashes escaped, a line starting with `.` or `'`
/// (a request) guarded, and hyphens of options kept as hyphens.
fn esc(text: &str) -> String {
    let mut out = String::new();
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.starts_with(['.', '\'']) {
            out.push_str("\\&");
        }
        for c in line.chars() {
            match c {
                '\\' => out.push_str("\\e"),
                '-' => out.push_str("\\-"),
                c => out.push(c),
            }
        }
    }
    out
}

/// A block of text: paragraphs (blank lines between) as `.PP`, and an
/// `Examples:` or `Example:` block as a heading with its lines unfilled.
fn blocks(out: &mut String, text: &str) {
    for block in text.trim().split("\n\n") {
        let mut lines = block.lines();
        let first = lines.next().unwrap_or("").trim_end();
        if first == "Examples:" || first == "Example:" {
            let _ = writeln!(out, ".PP\n{first}\n.RS 2\n.nf");
            for l in lines {
                let _ = writeln!(out, "{}", esc(l.strip_prefix("  ").unwrap_or(l)));
            }
            out.push_str(".fi\n.RE\n");
        } else {
            let _ = writeln!(out, ".PP\n{}", esc(block.trim()));
        }
    }
}

/// An option or operand as it is written: `\fB\-\-interval\fR \fIBYTES\fR`.
fn arg_head(a: &Arg) -> String {
    let value = a
        .get_value_names()
        .map(|v| {
            v.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let takes_value = a.get_num_args().is_some_and(|n| n.takes_values());
    let mut names = Vec::new();
    if let Some(s) = a.get_short() {
        names.push(format!("\\fB\\-{s}\\fR"));
    }
    if let Some(l) = a.get_long() {
        names.push(format!("\\fB\\-\\-{}\\fR", esc(l)));
    }
    if names.is_empty() {
        return format!("\\fI{}\\fR", esc(&value));
    }
    let mut head = names.join(", ");
    if takes_value && !value.is_empty() {
        let _ = write!(head, " \\fI{}\\fR", esc(&value));
    }
    head
}

fn options(out: &mut String, cmd: &Command) {
    let args: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && a.get_id() != "version" && a.get_id() != "help")
        .collect();
    if args.is_empty() {
        return;
    }
    for a in args {
        let help = a
            .get_long_help()
            .or_else(|| a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let default: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|d| d.to_string_lossy().into_owned())
            .collect();
        let mut help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        if !default.is_empty() && !help.contains("default") {
            let _ = write!(help, " (default {})", default.join(" "));
        }
        let _ = writeln!(out, ".TP\n{}\n{}", arg_head(a), esc(&help));
    }
}

/// A subcommand's usage lines, as `--help` prints them (without
/// `Usage:`).
fn usage(sub: &Command) -> String {
    let mut c = sub.clone().bin_name(format!("heaplive {}", sub.get_name()));
    let text = c.render_usage().to_string();
    let text = text.trim();
    text.strip_prefix("Usage:")
        .unwrap_or(text)
        .trim()
        .to_string()
}

/// The synopsis of a subcommand, unfilled.
fn synopsis(out: &mut String, sub: &Command) {
    let usage = usage(sub);
    out.push_str(".PP\n.nf\n");
    for l in usage.lines() {
        let _ = writeln!(out, "{}", esc(l.trim()));
    }
    out.push_str(".fi\n");
}

/// The files the library and the command write, by name.
const FILES: &[(&str, &str)] = &[
    (
        "heaplive.EXE.PID.N.folded",
        "A dump: the live bytes per stack, folded (frames root first, ';', a space, the bytes). The name comes from HEAPLIVE_OUTPUT; relative to the directory where the process started, else $TMPDIR or /tmp.",
    ),
    (
        "NAME.alloc.folded",
        "Bytes allocated since start, per stack (HEAPLIVE_VIEWS=...,alloc).",
    ),
    (
        "NAME.peak.folded",
        "At exit, the stacks at the highest live total, when it was above the exit total.",
    ),
    (
        "NAME.samples.folded",
        "Sampled mode: per view and stack, the samples and the variance of the estimate, for the 95% intervals of heaplive top.",
    ),
    (
        "NAME.variance.folded",
        "The variance of each stack's estimate beside each view (HEAPLIVE_VIEWS=...,variance).",
    ),
    (
        "NAME.pb.gz",
        "The dump as a gzip'd pprof profile (HEAPLIVE_FORMAT=pprof or folded,pprof).",
    ),
    (
        "NAME.maps.txt",
        "PHP mode: resident memory by kind (ZendMM, opcache, malloc, stacks, files) beside the dump.",
    ),
    (
        "NAME.app.txt",
        "The names of the main executable's frames, for heaplive top --app (HEAPLIVE_VIEWS=...,app).",
    ),
    (
        "/tmp/heaplive-EUID/PID",
        "The status file of a process (dumps so far, the last file, the dump signal), read by heaplive dump; removed at exit.",
    ),
    (
        "heaplive.EUID.log",
        "heaplive's own lines when stderr would lose them, in the dump files' directory.",
    ),
    (
        "$TMPDIR/heaplive-run.XXXXXX/files",
        "heaplive run's private list of the files its processes wrote (HEAPLIVE_RUN_REPORT); in /tmp when another user owns $TMPDIR or may write it (one line says so); removed when run ends.",
    ),
];

/// The page.
pub fn page(cmd: &Command) -> String {
    // Built: the arguments' value counts are known.
    let mut cmd = cmd.clone();
    cmd.build();
    let cmd = &cmd;
    let mut out = String::new();
    let version = cmd.get_version().unwrap_or("");
    let _ = writeln!(
        out,
        ".TH heaplive 1 \"\" \"heaplive {version}\" \"User Commands\"\n.SH NAME\nheaplive \\- which call stacks hold the memory that is live right now"
    );
    out.push_str(".SH SYNOPSIS\n.nf\n");
    let subs: Vec<&Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    for s in &subs {
        for l in usage(s).lines() {
            let _ = writeln!(out, "{}", esc(l.trim()));
        }
    }
    out.push_str(".fi\n.SH DESCRIPTION\n");
    out.push_str(
        ".PP\nheaplive profiles the heap of unmodified Linux programs: the library libheaplive.so, loaded with LD_PRELOAD (heaplive run does it), samples allocations, keeps the live ones with their call stacks, and writes them as folded files on exit, on a signal, periodically or when asked. The heaplive command runs programs under it, asks running processes for dumps, and reads the files: the largest stacks, what grew between two dumps, sums, and flame graphs.\n",
    );
    if let Some(after) = cmd.get_after_help() {
        let after = after.to_string();
        // The examples go to EXAMPLES; the rest is description.
        for block in after.trim().split("\n\n") {
            if !block.starts_with("Examples:") {
                blocks(&mut out, block);
            }
        }
    }
    out.push_str(".SH COMMANDS\n");
    for s in &subs {
        let _ = writeln!(out, ".SS \"heaplive {}\"", s.get_name());
        let aliases: Vec<&str> = s.get_visible_aliases().collect();
        if !aliases.is_empty() {
            let _ = writeln!(out, ".PP\n(also: {})", esc(&aliases.join(", ")));
        }
        synopsis(&mut out, s);
        let about = s
            .get_long_about()
            .or_else(|| s.get_about())
            .map(|a| a.to_string())
            .unwrap_or_default();
        blocks(&mut out, &about);
        options(&mut out, s);
        if let Some(after) = s.get_after_help() {
            blocks(&mut out, &after.to_string());
        }
    }
    out.push_str(".SH SETTINGS\n.PP\nEvery setting is an environment variable, read once when the library loads; heaplive run's options set some of them. A bad value gives one line on stderr naming the variable, the value and the default used; an unknown HEAPLIVE_ variable gives one line naming the closest setting.\n");
    for s in settings::ALL {
        let _ = writeln!(
            out,
            ".TP\n\\fB{}\\fR (default: {})\n{}",
            esc(s.name()),
            esc(s.default),
            esc(s.doc)
        );
    }
    out.push_str(".SH FILES\n");
    for (name, what) in FILES {
        let _ = writeln!(out, ".TP\n\\fI{}\\fR\n{}", esc(name), esc(what));
    }
    out.push_str(".SH EXAMPLES\n");
    if let Some(after) = cmd.get_after_help() {
        let after = after.to_string();
        for block in after.trim().split("\n\n") {
            if block.starts_with("Examples:") {
                let lines: Vec<&str> = block.lines().skip(1).collect();
                out.push_str(".PP\n.nf\n");
                for l in lines {
                    let _ = writeln!(out, "{}", esc(l.strip_prefix("  ").unwrap_or(l)));
                }
                out.push_str(".fi\n");
            }
        }
    }
    out.push_str(
        ".SH EXIT STATUS\n.PP\n0 on success, 1 on an error (one line on stderr starting heaplive:), 2 on a usage error; heaplive run exits with its program's status (128+N when signal N killed it).\n",
    );
    out
}
