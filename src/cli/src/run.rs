//! `heaplive run`: start a program with the library preloaded and the
//! options turned into `HEAPLIVE_*` variables, wait for it, exit with its
//! status, and say which dump files appeared.

use crate::cli::RunArgs;
use crate::units::io_msg;
use crate::{Fail, Res, error};
use heaplive_format::{settings, template};
use std::ffi::{OsStr, OsString};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, SystemTime};

/// The pid of the running child, for the forwarding signal handler.
static CHILD: AtomicI32 = AtomicI32::new(0);

/// A SIGTERM or SIGHUP that came when there was no child to pass it to
/// (it had exited): delivered to ourselves once the handler is gone.
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe and touches no memory of ours.
        unsafe { libc::kill(pid, sig) };
    } else {
        PENDING.store(sig, Ordering::Relaxed);
    }
}

pub fn main(a: RunArgs) -> Res<()> {
    let RunArgs {
        interval,
        every,
        output,
        signal,
        format,
        quiet,
        command,
    } = a;
    // Each value was checked with the library's grammar while parsing.
    let vars: Vec<(&str, String)> = [
        (&settings::SAMPLE_INTERVAL, interval),
        (&settings::DUMP_EVERY, every),
        (&settings::OUTPUT, output.clone()),
        (&settings::SIGNAL, signal),
        (&settings::FORMAT, format),
    ]
    .into_iter()
    .filter_map(|(s, v)| Some((s.name(), v?)))
    .collect();
    let mut vars = vars;
    // Quiet means the library's lines too (dump summaries, leak warnings),
    // unless a log file was asked for.
    if quiet && std::env::var_os(settings::LOG.name()).is_none_or(|v| v.is_empty()) {
        vars.push((settings::LOG.name(), "/dev/null".to_string()));
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
        .unwrap_or_else(|| template::DEFAULT.to_string());
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
            say!("heaplive: cannot run '{name}': {}", io_msg(&e));
            return Err(Fail::Exit(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            }));
        }
    };
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    // SAFETY: `forward` only loads and stores atomics and calls kill().
    let (old_term, old_hup) = unsafe {
        (
            libc::signal(libc::SIGTERM, forward as *const () as libc::sighandler_t),
            libc::signal(libc::SIGHUP, forward as *const () as libc::sighandler_t),
        )
    };
    if !quiet {
        say!(
            "heaplive: profiling pid {}; dump now with: heaplive dump {}",
            child.id(),
            child.id()
        );
    }
    let status = child.wait();
    CHILD.store(0, Ordering::Relaxed);
    restore();
    // Once the child is gone, SIGTERM and SIGHUP are ours again: a signal
    // that came in between is not swallowed but acted on now.
    // SAFETY: puts back the dispositions saved above; raise() delivers a
    // signal whose action is now the default one (or what it was).
    unsafe {
        libc::signal(libc::SIGTERM, old_term);
        libc::signal(libc::SIGHUP, old_hup);
        let sig = PENDING.swap(0, Ordering::Relaxed);
        if sig != 0 {
            libc::raise(sig);
        }
    }
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

/// `$HEAPLIVE_LIB`, else next to this executable, else `../lib/` (where
/// `make install` puts it: `$PREFIX/bin` and `$PREFIX/lib`), else
/// `../lib/heaplive/`.
pub fn find_library() -> Res<PathBuf> {
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
                dir.join("../lib/libheaplive.so"),
                dir.join("../lib/heaplive/libheaplive.so"),
            ];
            match candidates.iter().find(|c| c.is_file()) {
                Some(c) => c.clone(),
                None => {
                    return error(format!(
                        "cannot find libheaplive.so (looked at {}, {} and {}); set HEAPLIVE_LIB=/path/to/libheaplive.so",
                        candidates[0].display(),
                        candidates[1].display(),
                        candidates[2].display()
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
        say!("heaplive: dump files go to {}", path.display());
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
            if !template::matches_dump_file(&name, fname) {
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
        say!(
            "heaplive: no dump files matching {} were written (a process killed by a signal writes no exit dump)",
            path.display()
        );
        return;
    }
    let n = found.len();
    say!(
        "heaplive: {n} dump file{} written:",
        if n == 1 { "" } else { "s" }
    );
    for (_, p) in &found {
        say!("  {}", p.display());
        // The views written next to it (HEAPLIVE_VIEWS).
        let Some(stem) = p.to_str().and_then(|s| s.strip_suffix(".folded")) else {
            continue;
        };
        for view in ["alloc", "samples"] {
            let v = format!("{stem}.{view}.folded");
            if Path::new(&v).is_file() {
                say!("  {v}");
            }
        }
        let peak = format!("{stem}.peak.folded");
        if let Some(bytes) = crate::folded::read_regular(&peak) {
            let total = heaplive_format::folded::parse(&peak, &bytes).map_or(0, |s| s.total());
            say!(
                "heaplive: peak: {} live at the highest peak (above the exit total), stacks in {peak}",
                heaplive_format::units::human(total)
            );
        }
    }
    say!("heaplive: view with 'heaplive top FILE' or 'heaplive flamegraph FILE -o live.svg'");
}
