//! `heaplive run`: start a program with the library preloaded and the
//! options turned into `HEAPLIVE_*` variables, wait for it, exit with its
//! status, and say which dump files appeared.

use crate::args::{self, Args, Item};
use crate::units::{io_msg, parse_bytes, parse_interval_ms, parse_signal};
use crate::{Fail, Res, error, usage};
use std::ffi::{OsStr, OsString};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, SystemTime};

const HELP: &str = "\
Usage: heaplive run [OPTIONS] -- COMMAND [ARGS...]

Runs COMMAND with LD_PRELOAD=libheaplive.so (prepended to any LD_PRELOAD
already set), exits with its status (128+N if a signal N killed it), and lists
the dump files written. Children of COMMAND are profiled too, each into its
own files. Dump on demand with 'heaplive dump PID' (or kill -USR2 PID).

Options (each sets the variable in brackets; unset ones keep the library's
defaults, or the value already in the environment):
  --interval BYTES   mean bytes between samples, K/M/G suffixes; 1 records
                     every allocation exactly (slow)  [HEAPLIVE_SAMPLE_INTERVAL]
  --every SECS       also dump every SECS seconds: 30, 500ms, 5m, 1h
                     [HEAPLIVE_DUMP_EVERY]
  --output TEMPLATE  dump file names: %p pid, %e program name, %n dump number,
                     %% a percent sign; default heaplive.%e.%p.%n.folded in the
                     current directory (else $TMPDIR or /tmp)  [HEAPLIVE_OUTPUT]
  --signal SIG       the dump signal: USR1, USR2 (default), RTMIN+3, a number,
                     or none  [HEAPLIVE_SIGNAL]
  --format F         folded, pprof, or folded,pprof  [HEAPLIVE_FORMAT]
  -q, --quiet        no messages from heaplive itself

The library is $HEAPLIVE_LIB if set, else libheaplive.so next to the heaplive
executable, else ../lib/heaplive/libheaplive.so relative to it.

Examples:
  heaplive run -- ./server --port 8080
  heaplive run --interval 1M --every 5m -- php-fpm8.2 -F
  heaplive run --output '/var/tmp/%e.%p.%n.folded' --signal RTMIN+3 -- ./daemon
";

/// The pid of the running child, for the forwarding signal handler.
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe and touches no memory of ours.
        unsafe { libc::kill(pid, sig) };
    }
}

pub fn main(rest: Vec<OsString>) -> Res<()> {
    let mut args = Args::new(rest);
    let mut vars: Vec<(&str, String)> = Vec::new();
    let mut output: Option<String> = None;
    let mut quiet = false;
    let mut command: Vec<OsString> = Vec::new();
    while let Some(item) = args.next()? {
        match item {
            Item::DashDash => {
                command = args.rest();
                break;
            }
            Item::Pos(p) => {
                // The first word that is not an option starts the command.
                command.push(p);
                command.extend(args.rest());
                break;
            }
            Item::Opt(name, inline) => match name.as_str() {
                "-h" | "--help" => {
                    print!("{HELP}");
                    return Ok(());
                }
                "-q" | "--quiet" => {
                    args::no_value(&name, &inline)?;
                    quiet = true;
                }
                "--interval" => {
                    let v = args.value(&name, inline)?;
                    match parse_bytes(&v) {
                        Some(n) if n >= 1 => vars.push(("HEAPLIVE_SAMPLE_INTERVAL", v)),
                        _ => {
                            return usage(format!(
                                "--interval wants bytes >= 1 like 512K, 64KiB or 1M, not '{v}'"
                            ));
                        }
                    }
                }
                "--every" => {
                    let v = args.value(&name, inline)?;
                    match parse_interval_ms(&v) {
                        Some(ms) if ms > 0 => vars.push(("HEAPLIVE_DUMP_EVERY", v)),
                        _ => {
                            return usage(format!(
                                "--every wants a duration like 30, 30s, 500ms or 5m, not '{v}'"
                            ));
                        }
                    }
                }
                "--output" | "-o" => {
                    let v = args.value(&name, inline)?;
                    check_template(&v)?;
                    output = Some(v.clone());
                    vars.push(("HEAPLIVE_OUTPUT", v));
                }
                "--signal" => {
                    let v = args.value(&name, inline)?;
                    match parse_signal(&v) {
                        Ok(Some(libc::SIGKILL | libc::SIGSTOP)) => {
                            return usage(format!("--signal {v}: that signal cannot be caught"));
                        }
                        Ok(_) => vars.push(("HEAPLIVE_SIGNAL", v)),
                        Err(why) => return usage(format!("--signal: {why}")),
                    }
                }
                "--format" => {
                    let v = args.value(&name, inline)?;
                    let known = |f: &str| {
                        ["folded", "pprof"]
                            .iter()
                            .any(|k| f.trim().eq_ignore_ascii_case(k))
                    };
                    if !v.split(',').all(known) {
                        return usage(format!(
                            "--format wants folded, pprof or folded,pprof, not '{v}'"
                        ));
                    }
                    vars.push(("HEAPLIVE_FORMAT", v));
                }
                _ => return args::unknown(&name),
            },
        }
    }
    if command.is_empty() {
        return usage("run needs a command: heaplive run [OPTIONS] -- COMMAND [ARGS...]");
    }
    let lib = find_library()?;
    let preload = match std::env::var_os("LD_PRELOAD") {
        Some(old) if !old.is_empty() => {
            let mut v = lib.clone().into_os_string();
            v.push(":");
            v.push(old);
            v
        }
        _ => lib.clone().into_os_string(),
    };
    let template = output
        .or_else(|| {
            std::env::var("HEAPLIVE_OUTPUT")
                .ok()
                .filter(|t| !t.is_empty())
        })
        .unwrap_or_else(|| "heaplive.%e.%p.%n.folded".to_string());
    let start_dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let started = SystemTime::now();

    let code = run_child(&command, &preload, &vars, quiet)?;

    if !quiet {
        report_files(&template, &start_dir, started);
    }
    if code == 0 {
        Ok(())
    } else {
        Err(Fail::Exit(code))
    }
}

/// Spawns and waits. While the child runs, heaplive ignores SIGINT and
/// SIGQUIT (the terminal sends them to the child too, and heaplive must live
/// to report its files) and passes SIGTERM and SIGHUP on to the child.
fn run_child(
    command: &[OsString],
    preload: &OsStr,
    vars: &[(&str, String)],
    quiet: bool,
) -> Res<u8> {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]).env("LD_PRELOAD", preload);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    // SAFETY: signal() with SIG_IGN/SIG_DFL installs no code of ours; we
    // keep the previous dispositions to restore them in the child.
    let (old_int, old_quit) = unsafe {
        (
            libc::signal(libc::SIGINT, libc::SIG_IGN),
            libc::signal(libc::SIGQUIT, libc::SIG_IGN),
        )
    };
    // SAFETY: the closure runs in the forked child before exec and only
    // calls signal(), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGINT, old_int);
            libc::signal(libc::SIGQUIT, old_quit);
            Ok(())
        });
    }
    let restore = || {
        // SAFETY: puts back the dispositions saved above.
        unsafe {
            libc::signal(libc::SIGINT, old_int);
            libc::signal(libc::SIGQUIT, old_quit);
        }
    };
    let name = command[0].to_string_lossy();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            restore();
            eprintln!("heaplive: cannot run '{name}': {}", io_msg(&e));
            return Err(Fail::Exit(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            }));
        }
    };
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    // SAFETY: `forward` only loads an atomic and calls kill().
    unsafe {
        libc::signal(libc::SIGTERM, forward as *const () as libc::sighandler_t);
        libc::signal(libc::SIGHUP, forward as *const () as libc::sighandler_t);
    }
    if !quiet {
        eprintln!(
            "heaplive: profiling pid {}; dump now with: heaplive dump {}",
            child.id(),
            child.id()
        );
    }
    let status = child.wait();
    CHILD.store(0, Ordering::Relaxed);
    restore();
    let status = match status {
        Ok(s) => s,
        Err(e) => return error(format!("waiting for '{name}': {}", io_msg(&e))),
    };
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => (128 + sig) as u8,
        _ => 1,
    })
}

/// `$HEAPLIVE_LIB`, else next to this executable, else `../lib/heaplive/`.
fn find_library() -> Res<PathBuf> {
    let lib = match std::env::var_os("HEAPLIVE_LIB").filter(|v| !v.is_empty()) {
        Some(p) => {
            let p = PathBuf::from(p);
            if !p.is_file() {
                return error(format!("HEAPLIVE_LIB={}: no such file", p.display()));
            }
            p
        }
        None => {
            let exe = std::env::current_exe().map_err(|e| {
                Fail::Error(format!("cannot find my own executable: {}", io_msg(&e)))
            })?;
            let dir = exe.parent().unwrap_or(Path::new("/"));
            let candidates = [
                dir.join("libheaplive.so"),
                dir.join("../lib/heaplive/libheaplive.so"),
            ];
            match candidates.iter().find(|c| c.is_file()) {
                Some(c) => c.clone(),
                None => {
                    return error(format!(
                        "cannot find libheaplive.so (looked at {} and {}); set HEAPLIVE_LIB=/path/to/libheaplive.so",
                        candidates[0].display(),
                        candidates[1].display()
                    ));
                }
            }
        }
    };
    let lib = std::fs::canonicalize(&lib).unwrap_or(lib);
    let text = lib.to_string_lossy();
    if text.contains([' ', ':']) {
        return error(format!(
            "{text}: LD_PRELOAD cannot hold a path with a space or colon; copy the library elsewhere"
        ));
    }
    Ok(lib)
}

/// Rejects `%` sequences the library does not know.
fn check_template(t: &str) -> Res<()> {
    let mut chars = t.chars();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.next() {
                Some('p' | 'e' | 'n' | '%') => {}
                Some(o) => {
                    return usage(format!(
                        "--output '{t}': unknown %{o} (use %p, %e, %n or %%)"
                    ));
                }
                None => {
                    return usage(format!(
                        "--output '{t}': lone % at the end (use %% for a percent sign)"
                    ));
                }
            }
        }
    }
    if t.ends_with('/') || t.is_empty() {
        return usage(format!(
            "--output '{t}': needs a file name, not a directory"
        ));
    }
    Ok(())
}

/// One piece of a file-name template.
#[derive(Debug, PartialEq)]
enum Piece {
    Lit(String),
    /// `%p` or `%n`: one or more digits.
    Digits,
    /// `%e`: any non-empty text.
    Any,
}

fn pieces(name: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut lit = String::new();
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        let wild = match (c, c == '%') {
            (_, false) => None,
            _ => match chars.next() {
                Some('p' | 'n') => Some(Piece::Digits),
                Some('e') => Some(Piece::Any),
                Some(o) => {
                    lit.push(o);
                    None
                }
                None => None,
            },
        };
        match wild {
            Some(w) => {
                if !lit.is_empty() {
                    out.push(Piece::Lit(std::mem::take(&mut lit)));
                }
                out.push(w);
            }
            None if c != '%' => lit.push(c),
            None => {}
        }
    }
    if !lit.is_empty() {
        out.push(Piece::Lit(lit));
    }
    out
}

fn matches(p: &[Piece], s: &str) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((Piece::Lit(l), rest)) => s.strip_prefix(l.as_str()).is_some_and(|s| matches(rest, s)),
        Some((Piece::Digits, rest)) => {
            let n = s.bytes().take_while(u8::is_ascii_digit).count();
            (1..=n).any(|k| matches(rest, &s[k..]))
        }
        Some((Piece::Any, rest)) => s
            .char_indices()
            .skip(1)
            .map(|(i, _)| i)
            .chain([s.len()])
            .any(|i| i > 0 && matches(rest, &s[i..])),
    }
}

const EXTENSIONS: [&str; 5] = [".folded", ".pb.gz", ".pprof.gz", ".pprof", ".pb"];

/// Does a file name fit the template's name, allowing the extension to be
/// the pprof one when the template says `.folded` (or has none)?
fn name_matches(template_name: &str, name: &str) -> bool {
    if matches(&pieces(template_name), name) {
        return true;
    }
    let stem_t = EXTENSIONS
        .iter()
        .find_map(|e| template_name.strip_suffix(e))
        .unwrap_or(template_name);
    EXTENSIONS
        .iter()
        .filter_map(|e| name.strip_suffix(e))
        .any(|stem| matches(&pieces(stem_t), stem))
}

/// Lists, on stderr, the files matching the template that were modified
/// since the child started, in the template's directory and the library's
/// fallback directories.
fn report_files(template: &str, start_dir: &Path, started: SystemTime) {
    let path = start_dir.join(template);
    let (dir, name) = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        (Some(d), Some(n)) => (d.to_path_buf(), n.to_string()),
        _ => return,
    };
    if dir.to_string_lossy().contains('%') {
        eprintln!("heaplive: dump files go to {}", path.display());
        return;
    }
    let since = started
        .checked_sub(Duration::from_secs(1))
        .unwrap_or(started);
    let mut dirs = vec![dir];
    if let Some(t) = std::env::var_os("TMPDIR").filter(|t| !t.is_empty()) {
        dirs.push(PathBuf::from(t));
    }
    dirs.push(PathBuf::from("/tmp"));
    let mut seen = std::collections::HashSet::new();
    let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
    for d in &dirs {
        let canon = std::fs::canonicalize(d).unwrap_or_else(|_| d.clone());
        if !seen.insert(canon) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(d) else {
            continue;
        };
        for e in entries.flatten() {
            let fname = e.file_name();
            let Some(fname) = fname.to_str() else {
                continue;
            };
            if !name_matches(&name, fname) {
                continue;
            }
            let Ok(meta) = e.metadata() else { continue };
            match meta.modified() {
                Ok(m) if meta.is_file() && m >= since => found.push((m, e.path())),
                _ => {}
            }
        }
    }
    found.sort();
    if found.is_empty() {
        eprintln!(
            "heaplive: no dump files matching {} were written (a process killed by a signal writes no exit dump)",
            path.display()
        );
        return;
    }
    let n = found.len();
    eprintln!(
        "heaplive: {n} dump file{} written:",
        if n == 1 { "" } else { "s" }
    );
    for (_, p) in &found {
        eprintln!("  {}", p.display());
    }
    eprintln!("heaplive: view with 'heaplive top FILE' or 'heaplive flamegraph FILE -o live.svg'");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_matching() {
        let t = "heaplive.%e.%p.%n.folded";
        assert!(name_matches(t, "heaplive.php-fpm8.2.4242.3.folded"));
        assert!(name_matches(t, "heaplive.sh.1.1.pb.gz"));
        assert!(!name_matches(t, "heaplive.sh.x.1.folded"));
        assert!(!name_matches(t, "heaplive.sh.1.1.folded.tmp"));
        assert!(!name_matches(t, "other.sh.1.1.folded"));
        assert!(name_matches("out%%.%p", "out%.12"));
        assert!(name_matches("dump-%p", "dump-12.pb.gz"));
        assert!(check_template("a.%q").is_err());
        assert!(check_template("a.%").is_err());
        assert!(check_template("/tmp/%e-%%-%p.%n").is_ok());
    }
}
