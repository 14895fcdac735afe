//! `heaplive run`: start a program with the library preloaded and the
//! options turned into `HEAPLIVE_*` variables, wait for it, exit with its
//! status, and say which dump files appeared.

use crate::cli::{RunArgs, SettingArgs};
use crate::units::io_msg;
use crate::{Fail, Res, error};
use heaplive_format::{settings, template};
use std::ffi::{OsStr, OsString};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::SystemTime;

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
    // Each value was checked with the library's grammar while parsing.
    let mut vars: Vec<(&str, String)> = a
        .settings
        .given()
        .into_iter()
        .map(|(s, v)| (s.name(), v.to_string()))
        .collect();
    let RunArgs {
        settings: SettingArgs { output, .. },
        quiet,
        report,
        command,
    } = a;
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
    // The library lists every file it writes in a private file of ours
    // (HEAPLIVE_RUN_REPORT); without one (no private directory could be
    // made), the files matching the template that appeared or changed.
    let listing = !quiet || report.is_some();
    let channel = if listing { Channel::new(quiet) } else { None };
    if let Some(c) = &channel {
        vars.push((
            settings::RUN_REPORT.name(),
            c.file.to_string_lossy().into_owned(),
        ));
    }
    let before = if !listing || channel.is_some() {
        Seen::new()
    } else {
        files_before(&template, &start_dir)
    };

    let code = run_child(&command, &preload, &vars, quiet)?;

    if listing {
        let dumps = match &channel {
            Some(c) => report_channel(c, &template, &start_dir, quiet),
            None => report_files(&template, &start_dir, &before, quiet),
        };
        // A page that cannot be written (refused, disk full) is one line;
        // the program's status is still the one passed on.
        if let Some(page) = report {
            match crate::run_report::write(&page, &dumps, quiet) {
                Err(Fail::Error(msg) | Fail::Usage(msg)) => say!("heaplive: {msg}"),
                Ok(()) | Err(Fail::Reported | Fail::Exit(_)) => {}
            }
        }
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

/// `heaplive run`'s private directory (`$TMPDIR/heaplive-run.XXXXXX`,
/// mode 0700) and the empty file in it where the library appends a line
/// per file it writes; removed on drop. $TMPDIR must pass the checked walk
/// the library's own files pass (`safe_path`: no directory on the way that
/// another user owns or may write unless sticky, no symlink of theirs),
/// else /tmp is used, with one line: another user who could rename the
/// directory once made could put a link to a directory of root's in its
/// place, which `run` would read, list and remove. Everything is done in
/// checked directory descriptors (`mkdirat`, `openat` with `O_NOFOLLOW`,
/// `unlinkat`), and the file is read through the descriptor made with it.
struct Channel {
    /// The directory it is in (`$TMPDIR` or /tmp), checked.
    parent: heaplive_format::safe_path::Dir,
    /// Its name there, `heaplive-run.XXXXXX`.
    name: std::ffi::CString,
    /// The directory itself (`O_PATH`).
    dir: std::os::fd::OwnedFd,
    /// The file, as the library is told it.
    file: PathBuf,
    /// The file, opened when it was made (read at the end).
    fd: std::fs::File,
}

impl Channel {
    fn new(quiet: bool) -> Option<Channel> {
        use heaplive_format::safe_path;
        use std::os::unix::ffi::OsStrExt;
        let mut tmp = std::env::temp_dir();
        if tmp.is_relative() {
            tmp = std::env::current_dir().ok()?.join(tmp);
        }
        let first = match safe_path::open_dir(tmp.as_os_str().as_bytes()) {
            Ok(d) => Channel::make_in(d, &tmp).map_err(|e| io_msg(&e)),
            Err(r) => Err(r.to_string()),
        };
        let why = match first {
            Ok(c) => return Some(c),
            Err(why) => why,
        };
        let slash_tmp = Path::new("/tmp");
        let alt = (tmp != slash_tmp)
            .then(|| safe_path::open_dir(b"/tmp").ok())
            .flatten()
            .and_then(|d| Channel::make_in(d, slash_tmp).ok());
        if !quiet {
            match &alt {
                Some(c) => say!(
                    "heaplive: cannot make the private directory of this run in {} ({why}); made {} instead",
                    tmp.display(),
                    c.file.parent().unwrap_or(slash_tmp).display()
                ),
                None => say!(
                    "heaplive: cannot make the private directory of this run in {} ({why}); listing the files the template names instead",
                    tmp.display()
                ),
            }
        }
        alt
    }

    /// Makes `heaplive-run.XXXXXX` (a random name, mode 0700) and its empty
    /// file in `parent`, the checked directory `shown`.
    fn make_in(parent: heaplive_format::safe_path::Dir, shown: &Path) -> std::io::Result<Channel> {
        use std::ffi::CString;
        use std::io::Error;
        use std::os::fd::{FromRawFd, OwnedFd};
        use std::os::unix::ffi::OsStrExt;
        const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut made = None;
        for _ in 0..100 {
            let mut r = [0u8; 6];
            // SAFETY: a buffer of ours and its length.
            if unsafe { libc::getrandom(r.as_mut_ptr().cast(), r.len(), 0) } != r.len() as isize {
                return Err(Error::last_os_error());
            }
            let mut name = b"heaplive-run.".to_vec();
            name.extend(r.iter().map(|b| CHARS[*b as usize % CHARS.len()]));
            let name = CString::new(name).map_err(|_| Error::from_raw_os_error(libc::EINVAL))?;
            // SAFETY: a NUL-terminated name in a checked directory
            // descriptor; mkdirat never follows a link at the name.
            if unsafe { libc::mkdirat(parent.fd(), name.as_ptr(), 0o700) } == 0 {
                made = Some(name);
                break;
            }
            let e = Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(e);
            }
        }
        let name = made.ok_or_else(|| Error::from_raw_os_error(libc::EEXIST))?;
        let remove = |parent: &heaplive_format::safe_path::Dir| {
            // SAFETY: the name we made, in the same descriptor.
            unsafe { libc::unlinkat(parent.fd(), name.as_ptr(), libc::AT_REMOVEDIR) };
        };
        // SAFETY: a NUL-terminated name; O_NOFOLLOW|O_DIRECTORY: the
        // directory we made (in a checked directory nobody else may
        // rename it in).
        let dfd = unsafe {
            libc::openat(
                parent.fd(),
                name.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if dfd < 0 {
            let e = Error::last_os_error();
            remove(&parent);
            return Err(e);
        }
        // SAFETY: a descriptor of ours, owned from here on.
        let dir = unsafe { OwnedFd::from_raw_fd(dfd) };
        // SAFETY: a NUL-terminated name in the directory we made.
        let ffd = unsafe {
            libc::openat(
                dfd,
                c"files".as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600 as libc::c_uint,
            )
        };
        if ffd < 0 {
            let e = Error::last_os_error();
            remove(&parent);
            return Err(e);
        }
        // SAFETY: a descriptor of ours, owned by the File from here on.
        let fd = unsafe { std::fs::File::from_raw_fd(ffd) };
        let file = shown
            .join(std::ffi::OsStr::from_bytes(name.as_bytes()))
            .join("files");
        let c = Channel {
            parent,
            name,
            dir,
            file,
            fd,
        };
        if c.file.to_string_lossy().contains(['\n', '\t']) {
            // Dropped: removed.
            return Err(Error::from_raw_os_error(libc::EINVAL));
        }
        Ok(c)
    }

    /// What the library wrote into the file.
    fn read(&self) -> Vec<u8> {
        use std::io::{Read, Seek};
        let mut text = Vec::new();
        let mut f = &self.fd;
        let _ = f.rewind().and_then(|_| f.read_to_end(&mut text));
        text
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: NUL-terminated names in descriptors of ours.
        unsafe {
            libc::unlinkat(self.dir.as_raw_fd(), c"files".as_ptr(), 0);
            libc::unlinkat(self.parent.fd(), self.name.as_ptr(), libc::AT_REMOVEDIR);
        }
    }
}

/// The files the library listed in the channel, once each (a file written
/// twice, by one process or by a parent and its forked child, is listed
/// under the last writer), grouped by process in the order the processes
/// first wrote, leaving out files gone since (a process removed or
/// replaced them): (pid, program, files).
fn reported(text: &str) -> Vec<(u32, String, Vec<PathBuf>)> {
    let mut last: std::collections::HashMap<&str, (u32, &str)> = Default::default();
    let mut order: Vec<&str> = Vec::new();
    for l in text.lines() {
        let mut f = l.splitn(3, '\t');
        let (Some(pid), Some(prog), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if last.insert(path, (pid, prog)).is_none() {
            order.push(path);
        }
    }
    let mut out: Vec<(u32, String, Vec<PathBuf>)> = Vec::new();
    for path in order {
        let (pid, prog) = last[path];
        if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
            continue;
        }
        match out.iter_mut().find(|g| g.0 == pid) {
            Some(g) => g.2.push(PathBuf::from(path)),
            None => out.push((pid, prog.to_string(), vec![PathBuf::from(path)])),
        }
    }
    out
}

/// Lists, on stderr, the files the program and its children wrote (as
/// their libraries reported them in the channel), by process, and the
/// peak files' totals.
fn report_channel(c: &Channel, template: &str, start_dir: &Path, quiet: bool) -> Vec<PathBuf> {
    let text = c.read();
    let groups = reported(&String::from_utf8_lossy(&text));
    // The dumps (a process's folded files of live bytes), for the report.
    let dumps: Vec<PathBuf> = groups
        .iter()
        .flat_map(|g| &g.2)
        .filter(|p| is_dump(p))
        .cloned()
        .collect();
    if quiet {
        return dumps;
    }
    let n: usize = groups.iter().map(|g| g.2.len()).sum();
    if n == 0 {
        say!(
            "heaplive: no dump files were written (template {}; a process killed by a signal writes no exit dump)",
            start_dir.join(template).display()
        );
        return dumps;
    }
    let plural = |k: usize, s: &str, p: &str| format!("{k} {}", if k == 1 { s } else { p });
    let files = plural(n, "file", "files");
    match groups.as_slice() {
        [(pid, prog, _)] => say!("heaplive: {files} written by pid {pid} ({prog}):"),
        _ => say!(
            "heaplive: {files} written by {}:",
            plural(groups.len(), "process", "processes")
        ),
    }
    for (pid, prog, paths) in &groups {
        if groups.len() > 1 {
            say!(" pid {pid} ({prog}):");
        }
        for p in paths {
            say!("  {}", p.display());
        }
    }
    for p in groups.iter().flat_map(|g| &g.2) {
        let peak = p.to_string_lossy();
        if peak.ends_with(".peak.folded")
            && let Some(bytes) = crate::folded::read_regular(&peak)
        {
            let total = heaplive_format::folded::parse(&peak, &bytes).map_or(0, |s| s.total());
            say!(
                "heaplive: peak: {} live at the highest peak (above the exit total), stacks in {peak}",
                heaplive_format::units::human(total)
            );
        }
    }
    say!("heaplive: view with 'heaplive top FILE' or 'heaplive flamegraph FILE -o live.svg'");
    if !dumps.is_empty() {
        say!(
            "{}",
            crate::run_report::hint(&dumps.iter().collect::<Vec<_>>())
        );
    }
    dumps
}

/// A dump's own folded file (live bytes), not one of the views or files
/// written beside it.
fn is_dump(p: &Path) -> bool {
    p.to_string_lossy().ends_with(".folded") && !is_view(p)
}

/// A folded file written beside a dump (`NAME.alloc.folded`,
/// `NAME.temporary.folded`, ...: whatever `folded::is_dump_name` says is
/// not a dump's own name).
fn is_view(p: &Path) -> bool {
    p.file_name().is_some_and(|n| {
        let n = n.to_string_lossy();
        n.ends_with(".folded") && !crate::folded::is_dump_name(&n)
    })
}

/// What a file was when the program started: a file that is the same
/// afterwards (same inode, size and time) is not the program's.
type Seen = std::collections::HashMap<PathBuf, (u64, u64, Option<SystemTime>)>;

fn identity(m: &std::fs::Metadata) -> (u64, u64, Option<SystemTime>) {
    use std::os::unix::fs::MetadataExt;
    (m.ino(), m.len(), m.modified().ok())
}

/// The directories where the dumps of `template` (relative to
/// `start_dir`) go: the template's directory and the library's fallback
/// directories; None when the directory itself has `%` in it.
fn dump_dirs(template: &str, start_dir: &Path) -> Option<(Vec<PathBuf>, String)> {
    let path = start_dir.join(template);
    let (dir, name) = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        (Some(d), Some(n)) => (d.to_path_buf(), n.to_string()),
        _ => return None,
    };
    if dir.to_string_lossy().contains('%') {
        return None;
    }
    let mut dirs = vec![dir];
    if let Some(t) = std::env::var_os("TMPDIR").filter(|t| !t.is_empty()) {
        dirs.push(PathBuf::from(t));
    }
    dirs.push(PathBuf::from("/tmp"));
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(std::fs::canonicalize(d).unwrap_or_else(|_| d.clone())));
    Some((dirs, name))
}

/// The regular files in `dirs` whose names fit the template's name, and
/// the views next to them.
fn dump_files(dirs: &[PathBuf], name: &str) -> Seen {
    let mut out = Seen::new();
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(d) else {
            continue;
        };
        for e in entries.flatten() {
            let fname = e.file_name();
            let Some(fname) = fname.to_str() else {
                continue;
            };
            if !template::matches_dump_file(name, fname) {
                continue;
            }
            let Ok(meta) = e.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            out.insert(e.path(), identity(&meta));
            let Some(stem) = fname.strip_suffix(".folded") else {
                continue;
            };
            for view in ["alloc", "samples", "peak", "temporary"] {
                let v = d.join(format!("{stem}.{view}.folded"));
                if let Ok(m) = std::fs::symlink_metadata(&v)
                    && m.is_file()
                {
                    out.insert(v, identity(&m));
                }
            }
        }
    }
    out
}

/// The dump files there before the program starts (see `report_files`).
fn files_before(template: &str, start_dir: &Path) -> Seen {
    match dump_dirs(template, start_dir) {
        Some((dirs, name)) => dump_files(&dirs, &name),
        None => Seen::new(),
    }
}

/// Lists, on stderr, the files matching the template (and their views)
/// that appeared or changed while the program ran, in the template's
/// directory and the library's fallback directories. A file that was
/// there unchanged before is another process's, however recent.
/// Lists the dump files the run wrote (nothing when `quiet`); returns the
/// dumps.
fn report_files(template: &str, start_dir: &Path, before: &Seen, quiet: bool) -> Vec<PathBuf> {
    let Some((dirs, name)) = dump_dirs(template, start_dir) else {
        if !quiet {
            say!(
                "heaplive: dump files go to {}",
                start_dir.join(template).display()
            );
        }
        return Vec::new();
    };
    let mut found: Vec<(Option<SystemTime>, PathBuf)> = dump_files(&dirs, &name)
        .into_iter()
        .filter(|(p, id)| before.get(p) != Some(id))
        .map(|(p, id)| (id.2, p))
        .collect();
    found.sort();
    let dumps: Vec<&PathBuf> = found.iter().map(|f| &f.1).filter(|p| !is_view(p)).collect();
    if quiet {
        return dumps.into_iter().cloned().collect();
    }
    if dumps.is_empty() {
        say!(
            "heaplive: no dump files matching {} were written (a process killed by a signal writes no exit dump)",
            start_dir.join(template).display()
        );
        return Vec::new();
    }
    // Each dump, then the views written next to it (HEAPLIVE_VIEWS); the
    // peak's stacks are named on their own line.
    let mut listed = Vec::new();
    let mut peaks = Vec::new();
    for d in &dumps {
        listed.push(d.to_string_lossy().into_owned());
        let stem = d.to_string_lossy();
        let Some(stem) = stem.strip_suffix(".folded") else {
            continue;
        };
        for view in ["alloc", "samples", "temporary"] {
            let v = format!("{stem}.{view}.folded");
            if found.iter().any(|f| f.1 == Path::new(&v)) {
                listed.push(v);
            }
        }
        // The timeline beside it (not a .folded file: looked for by name).
        let t = format!("{stem}.timeline.tsv");
        if Path::new(&t).is_file() {
            listed.push(t);
        }
        let peak = format!("{stem}.peak.folded");
        if found.iter().any(|f| f.1 == Path::new(&peak)) {
            peaks.push(peak);
        }
    }
    let (n, nd) = (listed.len(), dumps.len());
    let plural = |k: usize| if k == 1 { "" } else { "s" };
    if n == nd {
        say!("heaplive: {n} dump file{} written:", plural(n));
    } else {
        say!(
            "heaplive: {n} files written ({nd} dump{} and {} view{}):",
            plural(nd),
            n - nd,
            plural(n - nd)
        );
    }
    for p in &listed {
        say!("  {p}");
    }
    for peak in &peaks {
        if let Some(bytes) = crate::folded::read_regular(peak) {
            let total = heaplive_format::folded::parse(peak, &bytes).map_or(0, |s| s.total());
            say!(
                "heaplive: peak: {} live at the highest peak (above the exit total), stacks in {peak}",
                heaplive_format::units::human(total)
            );
        }
    }
    say!("heaplive: view with 'heaplive top FILE' or 'heaplive flamegraph FILE -o live.svg'");
    say!("{}", crate::run_report::hint(&dumps));
    dumps.into_iter().cloned().collect()
}
