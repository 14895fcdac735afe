//! `heaplive dump`: make running processes write a dump now.
//!
//! The library's side of the contract: after every dump it atomically
//! rewrites `/tmp/heaplive-<uid>/<pid>` with the lines `dumps N`,
//! `last /abs/path` and `signal N` (0: no dump signal), and, when the
//! signal is not USR2, `dumps 0` and the signal when its thread starts. So:
//! read the count, send the signal, wait until the count grows, print
//! `last`. Without a status file the signal is the process's
//! `HEAPLIVE_SIGNAL` (its initial environment in /proc/PID/environ, which
//! `clearenv()` does not erase), else SIGUSR2.

use crate::Fail;
use crate::Res;
use crate::cli::DumpArgs;
use crate::out_line;
use crate::units::io_msg;
use heaplive_format::signal::{self, Name};
use heaplive_format::status::{self, Status};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub fn main(a: DumpArgs) -> Res<()> {
    let DumpArgs {
        children,
        timeout,
        pids,
    } = a;
    let mut failed = false;
    let mut fail = |msg: String| {
        say!("heaplive: {msg}");
        failed = true;
    };

    let mut targets = Vec::new();
    for pid in pids {
        if !children {
            targets.push(pid);
            continue;
        }
        match Proc::read(pid) {
            Err(e) => fail(e),
            Ok(parent) => {
                let kids = children_of(pid);
                if kids.is_empty() {
                    fail(format!("pid {pid} ({}): no child processes", parent.comm));
                }
                targets.extend(kids);
            }
        }
    }

    // Prepare and signal every target first, then wait for all of them, so
    // a pool of workers takes one dump's time, not one per worker.
    let mut prepared = Vec::new();
    for pid in targets {
        match prepare(pid) {
            Ok(t) => prepared.push(t),
            Err(e) => fail(e),
        }
    }
    // Woken when a status directory changes: a process that writes its
    // dump and exits at once (its status file leaves with it) is read in
    // between. Watched before the signals go: a target that dumped and
    // exited before the watch began would be taken for one that exited
    // without a dump (seen under load: adversary25's
    // dump_of_a_process_that_exits_just_after_its_dump).
    let watch = Watch::new(&prepared);
    let mut pending = Vec::new();
    for t in prepared {
        match send(&t) {
            Ok(()) => pending.push(t),
            Err(e) => fail(e),
        }
    }
    let deadline = Instant::now() + Duration::from_secs_f64(timeout);
    while !pending.is_empty() {
        let mut still = Vec::new();
        for t in pending {
            // Alive first, then the status: a process that writes its dump
            // and exits between the two reads is not "exited before".
            let was_alive = alive(t.pid);
            match read_status_as(t.pid, &t.uids, t.proc.started) {
                Some(s) if s.dumps > t.before => match s.last {
                    Some(path) => {
                        if let Err(Fail::Error(e)) = out_line(&t.view.outside(&path)) {
                            fail(e)
                        }
                    }
                    None => fail(format!(
                        "pid {}: dump {} written, but its status file names no file",
                        t.pid, s.dumps
                    )),
                },
                Some(s) if s.failed > t.before_failed => fail(format!(
                    "pid {} ({}): its dump failed: {}",
                    t.pid,
                    t.proc.comm,
                    s.why
                        .as_deref()
                        .unwrap_or("no reason given (see its stderr or HEAPLIVE_LOG)")
                )),
                _ if !was_alive => {
                    let ended = std::fs::read_to_string(format!("/proc/{}/stat", t.pid))
                        .ok()
                        .and_then(|s| how_it_ended(&s, t.signal))
                        .unwrap_or_else(|| "exited".to_string());
                    fail(if watch.changed(&t) {
                        format!(
                            "pid {} ({}): wrote a dump, then {ended} before I could read which file (its status file left with it): the newest file in its output directory",
                            t.pid, t.proc.comm
                        )
                    } else {
                        format!(
                            "pid {} ({}): {ended} before writing a dump",
                            t.pid, t.proc.comm
                        )
                    })
                }
                _ if Instant::now() >= deadline => fail(format!(
                    "pid {}: no dump after {timeout} s{}",
                    t.pid,
                    if waits_for_thread(t.pid, t.signal) {
                        format!(
                            ": {} is pending and heaplive's thread is not running yet (it starts at the first sampled allocation): the dump is written then, or at exit",
                            Name(t.signal)
                        )
                    } else {
                        String::new()
                    }
                )),
                _ => still.push(t),
            }
        }
        pending = still;
        if !pending.is_empty() {
            watch.wait(Duration::from_millis(20));
        }
    }
    if failed { Err(Fail::Reported) } else { Ok(()) }
}

/// What /proc says about a process.
struct Proc {
    comm: String,
    state: char,
    ppid: i32,
    /// When it started (None if /proc/stat could not be read).
    started: Option<SystemTime>,
}

impl Proc {
    fn read(pid: i32) -> Result<Proc, String> {
        let stat = read_proc(pid, "stat", |e| {
            format!("pid {pid}: cannot read /proc/{pid}/stat: {}", io_msg(e))
        })?;
        parse_stat(&stat).ok_or_else(|| format!("pid {pid}: cannot parse /proc/{pid}/stat"))
    }
}

/// `/proc/PID/WHAT` as text: a process that is gone is "pid PID: no such
/// process", any other failure the message `other` makes of it.
fn read_proc(
    pid: i32,
    what: &str,
    other: impl FnOnce(&std::io::Error) -> String,
) -> Result<String, String> {
    match std::fs::read_to_string(format!("/proc/{pid}/{what}")) {
        Ok(s) => Ok(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("pid {pid}: no such process"))
        }
        Err(e) => Err(other(&e)),
    }
}

/// How a zombie ended, from its `/proc/PID/stat` (field 52, the status
/// `waitpid` will report; readable until its parent reaps it): "exited
/// with status 0 (a worker recycled ...)" or "was killed by SIGUSR2 ...".
/// None when the process is not a zombie or the field is not there.
fn how_it_ended(stat: &str, dump_signal: i32) -> Option<String> {
    let close = stat.rfind(')')?;
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    if !matches!(fields.first(), Some(&"Z")) {
        return None;
    }
    let code: i32 = fields.get(49)?.parse().ok()?;
    let (sig, status) = (code & 0x7f, (code >> 8) & 0xff);
    Some(if sig == 0 {
        format!(
            "exited with status {status} (it ended on its own meanwhile, like a worker that is recycled; dump one that stays)"
        )
    } else if sig == dump_signal {
        format!(
            "was killed by {} (its handler was not installed: library not initialised yet, or the handler was replaced)",
            Name(sig)
        )
    } else {
        format!("was killed by {}", Name(sig))
    })
}

/// `pid (comm) S ppid ... starttime ...`; comm may hold spaces and `)`.
fn parse_stat(stat: &str) -> Option<Proc> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let ppid = fields.get(1)?.parse().ok()?;
    // Field 22 of stat, the start time in clock ticks after boot.
    let ticks: u64 = fields.get(19)?.parse().ok()?;
    Some(Proc {
        comm,
        state,
        ppid,
        started: start_time(ticks),
    })
}

fn start_time(ticks: u64) -> Option<SystemTime> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return None;
    }
    Some(
        UNIX_EPOCH + Duration::from_secs(btime) + Duration::from_secs_f64(ticks as f64 / hz as f64),
    )
}

fn alive(pid: i32) -> bool {
    matches!(Proc::read(pid), Ok(p) if p.state != 'Z' && p.state != 'X')
}

pub fn children_of(parent: i32) -> Vec<i32> {
    let mut kids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return kids;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if let Ok(p) = Proc::read(pid)
            && p.ppid == parent
            && p.state != 'Z'
        {
            kids.push(pid);
        }
    }
    kids.sort();
    kids
}

/// The file of the newest dump of a running process, as its status file
/// names it (seen from here: `View::outside`); None without a status file
/// or a dump (`top --pool`).
pub fn latest_dump(pid: i32) -> Option<String> {
    let started = Proc::read(pid).ok()?.started;
    let s = read_status_as(pid, &uids_of(pid), started)?;
    (s.dumps > 0).then_some(())?;
    Some(View::of(pid).outside(&s.last?))
}

/// The process's status file, ignoring one older than the process: a file
/// left by an earlier process that had the same pid. Only trusted when the
/// directory `/tmp/heaplive-<uid>` (uid: one of the target's uids) is a real
/// directory of that uid with mode 0700, and the file is a regular file
/// owned by that uid or root, of at most `status::MAX_SIZE` bytes, opened
/// without following symlinks or blocking on a FIFO. Anything else is
/// ignored (with a note on stderr when something is planted there).
///
/// The uids are read before (the process may have exited since, and /proc
/// forgotten them).
fn read_status_as(pid: i32, uids: &[u32], started: Option<SystemTime>) -> Option<Status> {
    let view = View::of(pid);
    for &uid in uids {
        match read_status_of(&view, uid, started) {
            Ok(Some(s)) => return Some(s),
            Ok(None) => {}
            Err(why) => {
                // Once per run: this is polled while waiting.
                static WARNED: std::sync::atomic::AtomicBool =
                    std::sync::atomic::AtomicBool::new(false);
                if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    say!("heaplive: pid {pid}: ignoring its status file: {why}");
                }
            }
        }
    }
    None
}

/// How a process's files look from here. A process in another mount
/// namespace (a container, systemd's `PrivateTmp=`) has its own /tmp, seen
/// from here under `/proc/PID/root`; one in another pid namespace knows
/// itself by another pid (the last of `NSpid` in /proc/PID/status), which
/// names its status file and its `%p` files.
pub struct View {
    /// `/proc/PID/root` when the process's files are not ours, else None.
    root: Option<std::path::PathBuf>,
    /// The pid as the process sees it.
    nspid: u32,
}

impl View {
    pub fn of(pid: i32) -> View {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let nspid = status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .and_then(|l| l.split_whitespace().next_back())
            .and_then(|p| p.parse().ok())
            .unwrap_or(pid as u32);
        let link = |p: String| std::fs::read_link(p).ok();
        let other_mounts = link(format!("/proc/{pid}/ns/mnt"))
            .is_some_and(|m| Some(m) != link("/proc/self/ns/mnt".into()));
        let other_root =
            link(format!("/proc/{pid}/root")).is_some_and(|r| r != std::path::Path::new("/"));
        View {
            root: (other_mounts || other_root).then(|| format!("/proc/{pid}/root").into()),
            nspid,
        }
    }

    /// A path of the process's, as seen from here.
    pub fn outside(&self, path: &str) -> String {
        match &self.root {
            Some(r) => r
                .join(path.trim_start_matches('/'))
                .to_string_lossy()
                .into_owned(),
            None => path.to_string(),
        }
    }
}

fn read_status_of(
    view: &View,
    uid: u32,
    started: Option<SystemTime>,
) -> Result<Option<Status>, String> {
    use std::os::unix::fs::MetadataExt;
    if let Some(root) = &view.root {
        // The process's /tmp itself must be a directory: a symlink there
        // would lead the lookup out of its files into ours.
        match std::fs::symlink_metadata(root.join("tmp")) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(format!("{}/tmp is not a directory", root.display())),
            Err(_) => return Ok(None),
        }
    }
    let dir = std::path::PathBuf::from(view.outside(&status::dir(uid).to_string_lossy()));
    let trusted = |dir: &std::path::Path| match std::fs::symlink_metadata(dir) {
        Ok(m) => status::check_dir(
            m.is_dir(),
            m.file_type().is_symlink(),
            m.uid(),
            m.mode(),
            uid,
        )
        .map(|()| true)
        .map_err(|why| format!("{} {why}", dir.display())),
        Err(_) => Ok(false),
    };
    let primary = trusted(&dir);
    if primary == Ok(true)
        && let Some(s) = read_status_file(&dir, view, uid, started)?
    {
        return Ok(Some(s));
    }
    // The library's fallbacks when the directory is not its own (another
    // user planted something there): /tmp/heaplive-<uid>.XXXXXX.
    let parent = dir.parent().unwrap_or(std::path::Path::new("/tmp"));
    let prefix = status::fallback_prefix(uid);
    let mut alts: Vec<std::path::PathBuf> = std::fs::read_dir(parent)
        .map(|rd| {
            rd.flatten()
                .filter(|e| {
                    e.file_name()
                        .as_encoded_bytes()
                        .starts_with(prefix.as_bytes())
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    alts.sort();
    for alt in alts {
        if trusted(&alt) == Ok(true)
            && let Some(s) = read_status_file(&alt, view, uid, started)?
        {
            return Ok(Some(s));
        }
    }
    primary.map(|_| None)
}

/// The status file of the process in the trusted directory `dir`.
fn read_status_file(
    dir: &std::path::Path,
    view: &View,
    uid: u32,
    started: Option<SystemTime>,
) -> Result<Option<Status>, String> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(view.nspid.to_string());
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {}", path.display(), io_msg(&e))),
    };
    let m = f
        .metadata()
        .map_err(|e| format!("{}: {}", path.display(), io_msg(&e)))?;
    if !m.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if m.uid() != uid && m.uid() != 0 {
        return Err(format!(
            "{} belongs to uid {}, not the process's uid {uid} or root",
            path.display(),
            m.uid()
        ));
    }
    if m.len() > status::MAX_SIZE {
        return Err(format!(
            "{} is larger than {} bytes",
            path.display(),
            status::MAX_SIZE
        ));
    }
    let mut text = String::new();
    f.take(status::MAX_SIZE)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {}", path.display(), io_msg(&e)))?;
    if let (Some(started), Ok(modified)) = (started, m.modified())
        && modified + Duration::from_secs(2) < started
    {
        return Ok(None);
    }
    Ok(Some(status::decode(&text)))
}

/// The process's uids (effective first, then real, saved, filesystem),
/// from /proc/PID/status; none when it cannot be read.
fn uids_of(pid: i32) -> Vec<u32> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return Vec::new();
    };
    let Some(line) = text.lines().find_map(|l| l.strip_prefix("Uid:")) else {
        return Vec::new();
    };
    let all: Vec<u32> = line
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    let mut out = Vec::new();
    for i in [1, 0, 2, 3] {
        if let Some(&u) = all.get(i)
            && !out.contains(&u)
        {
            out.push(u);
        }
    }
    out
}

struct Target {
    pid: i32,
    proc: Proc,
    signal: i32,
    before: u64,
    before_failed: u64,
    uids: Vec<u32>,
    view: View,
}

/// An inotify watch on the status directories of the targets.
struct Watch {
    fd: Option<std::os::fd::OwnedFd>,
    /// (watch descriptor, status file name) per target.
    names: Vec<(i32, String)>,
    seen: std::cell::RefCell<Vec<(i32, String)>>,
}

impl Watch {
    fn new(targets: &[Target]) -> Watch {
        use std::os::fd::FromRawFd;
        // SAFETY: no preconditions; the descriptor is ours.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        // SAFETY: a fresh descriptor of ours.
        let fd = (raw >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) });
        let mut names = Vec::new();
        for t in targets {
            let Some(&uid) = t.uids.first() else { continue };
            let dir = t.view.outside(&status::dir(uid).to_string_lossy());
            let Ok(c) = std::ffi::CString::new(dir) else {
                continue;
            };
            // SAFETY: our descriptor and a NUL-terminated path.
            let wd = unsafe {
                libc::inotify_add_watch(raw, c.as_ptr(), libc::IN_MOVED_TO | libc::IN_CLOSE_WRITE)
            };
            if wd >= 0 {
                names.push((wd, t.view.nspid.to_string()));
            }
        }
        Watch {
            fd,
            names,
            seen: Default::default(),
        }
    }

    /// Waits up to `d` for a change (or sleeps, without a watch), and
    /// notes which status files changed.
    fn wait(&self, d: Duration) {
        use std::os::fd::AsRawFd;
        let Some(fd) = &self.fd else {
            std::thread::sleep(d);
            return;
        };
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, d.as_millis() as i32) };
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: our descriptor and a buffer of its length.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            let Ok(n) = usize::try_from(n) else { return };
            let mut at = 0;
            let head = std::mem::size_of::<libc::inotify_event>();
            while at + head <= n {
                // SAFETY: the kernel wrote a whole event here (unaligned read).
                let e: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
                let name = &buf[at + head..(at + head + e.len as usize).min(n)];
                let name = name.split(|&b| b == 0).next().unwrap_or(b"");
                self.seen
                    .borrow_mut()
                    .push((e.wd, String::from_utf8_lossy(name).into_owned()));
                at += head + e.len as usize;
            }
        }
    }

    /// Did `t`'s status file change while we waited?
    fn changed(&self, t: &Target) -> bool {
        let name = t.view.nspid.to_string();
        self.names.iter().any(|(wd, n)| {
            *n == name
                && self
                    .seen
                    .borrow()
                    .iter()
                    .any(|(w, m)| w == wd && *m == name)
        })
    }
}

fn prepare(pid: i32) -> Result<Target, String> {
    let proc = Proc::read(pid)?;
    let who = format!("pid {pid} ({})", proc.comm);
    if proc.state == 'Z' || proc.state == 'X' {
        return Err(format!("{who}: has exited (zombie)"));
    }
    let maps_path = format!("/proc/{pid}/maps");
    let maps = read_proc(pid, "maps", |e| {
        format!(
            "{who}: cannot read {maps_path}: {}{}",
            io_msg(e),
            unreadable_why(pid, e)
        )
    })?;
    if maps.is_empty() && !alive(pid) {
        return Err(format!("pid {pid}: no such process"));
    }
    if !maps.contains("libheaplive") {
        return Err(format!(
            "{who}: not running heaplive (libheaplive.so not in {maps_path})"
        ));
    }
    let uids = uids_of(pid);
    let status = read_status_as(pid, &uids, proc.started);
    let before = status.as_ref().map_or(0, |s| s.dumps);
    let before_failed = status.as_ref().map_or(0, |s| s.failed);
    // The status file's signal passes the library's policy too: the
    // directory is shared, and a fault signal is never sent.
    let signal = match status.and_then(|s| s.signal).map(signal::check) {
        Some(Ok(n)) => (n != 0).then_some(n),
        _ => signal_from_environ(pid),
    };
    let Some(signal) = signal else {
        return Err(format!(
            "{who}: has no dump signal (HEAPLIVE_SIGNAL=none); it dumps only on its interval, API calls or exit"
        ));
    };
    // A signal the process does not catch would not dump: it would kill
    // the process (USR2's default action) or be ignored.
    if catches(pid, signal) == Some(false) {
        return Err(format!(
            "{who}: does not catch {} (library not initialised yet, or the handler was replaced); not sending it",
            Name(signal)
        ));
    }
    Ok(Target {
        pid,
        proc,
        signal,
        before,
        before_failed,
        uids,
        view: View::of(pid),
    })
}

/// Why /proc/PID/maps was refused, and what to do, for the error line.
fn unreadable_why(pid: i32, e: &std::io::Error) -> String {
    if e.kind() != std::io::ErrorKind::PermissionDenied {
        return String::new();
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let theirs = uids_of(pid);
    if me == 0 {
        " (a security module, AppArmor or SELinux, forbids it even to root)".to_string()
    } else if theirs.first().is_some_and(|&u| u != me) {
        format!(
            " (it runs as uid {}: run heaplive dump as that user or as root)",
            theirs[0]
        )
    } else {
        " (it is not dumpable: a setuid or setgid program, or one that called prctl(PR_SET_DUMPABLE, 0); run heaplive dump as root)".to_string()
    }
}

/// Is `sig` pending for the whole process with no thread named heaplive
/// to take it (a signal before the first sample waits for one)?
fn waits_for_thread(pid: i32, sig: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let pending = status
        .lines()
        .find_map(|l| l.strip_prefix("ShdPnd:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|m| m & (1u64 << (sig - 1)) != 0);
    let thread = std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|d| {
        d.flatten().any(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "heaplive")
        })
    });
    pending && !thread
}

/// Whether `pid` has a handler for `sig`, from SigCgt in /proc/PID/status.
fn catches(pid: i32, sig: i32) -> Option<bool> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))?
        .trim();
    let mask = u64::from_str_radix(hex, 16).ok()?;
    (1..=64)
        .contains(&sig)
        .then(|| mask & (1u64 << (sig - 1)) != 0)
}

/// The dump signal the library of `pid` chose from `HEAPLIVE_SIGNAL` in
/// its initial environment, by the library's own rule (a refused value
/// leaves USR2); `None` when it says none.
fn signal_from_environ(pid: i32) -> Option<i32> {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return Some(libc::SIGUSR2);
    };
    let value = env
        .split(|&b| b == 0)
        .filter_map(|kv| kv.strip_prefix(b"HEAPLIVE_SIGNAL="))
        .next_back();
    match signal::effective(value) {
        0 => None,
        sig => Some(sig),
    }
}

/// `heaplive start/stop PID...`: the dump signal with a command value.
pub fn switch(a: crate::cli::SwitchArgs, on: bool) -> Res<()> {
    let value = if on {
        heaplive_format::signal::SIGVAL_START
    } else {
        heaplive_format::signal::SIGVAL_STOP
    };
    let mut failed = false;
    for pid in a.pids {
        let r = prepare(pid).and_then(|t| {
            let v = libc::sigval {
                sival_ptr: value as usize as *mut libc::c_void,
            };
            // SAFETY: sigqueue only sends a signal to another process.
            if unsafe { libc::sigqueue(t.pid, t.signal, v) } == 0 {
                Ok(t)
            } else {
                Err(cannot_send(&t))
            }
        });
        match r {
            Ok(t) => {
                let line = format!(
                    "pid {} ({}): sampling {}",
                    t.pid,
                    t.proc.comm,
                    if on { "started" } else { "stopped" }
                );
                if let Err(Fail::Error(e)) = crate::out_line(&line) {
                    say!("heaplive: {e}");
                    failed = true;
                }
            }
            Err(e) => {
                say!("heaplive: {e}");
                failed = true;
            }
        }
    }
    if failed {
        Err(crate::Fail::Reported)
    } else {
        Ok(())
    }
}

fn send(t: &Target) -> Result<(), String> {
    // SAFETY: kill only sends a signal to another process.
    if unsafe { libc::kill(t.pid, t.signal) } == 0 {
        return Ok(());
    }
    Err(cannot_send(t))
}

/// Why sending `t` its signal failed (errno, just after the call).
fn cannot_send(t: &Target) -> String {
    let e = std::io::Error::last_os_error();
    format!(
        "pid {} ({}): cannot send {}: {}",
        t.pid,
        t.proc.comm,
        Name(t.signal),
        io_msg(&e)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zombie's stat line with `exit_code` (field 52) set.
    fn zombie(exit_code: i32) -> String {
        let mut f: Vec<String> = (4..=52).map(|_| "0".to_string()).collect();
        f[52 - 4] = exit_code.to_string();
        format!("42 (php-fpm: pool www) Z {}", f.join(" "))
    }

    /// Issue 25, item 8: a worker that exited with status 0 was reported
    /// as "did SIGUSR2 kill it?".
    #[test]
    fn how_a_zombie_ended() {
        let usr2 = libc::SIGUSR2;
        let s = how_it_ended(&zombie(0), usr2).unwrap();
        assert!(s.starts_with("exited with status 0 ("), "{s}");
        assert!(!s.contains("SIGUSR2"), "{s}");
        let s = how_it_ended(&zombie(3 << 8), usr2).unwrap();
        assert!(s.starts_with("exited with status 3 ("), "{s}");
        let s = how_it_ended(&zombie(usr2), usr2).unwrap();
        assert!(s.starts_with("was killed by SIGUSR2 (its handler"), "{s}");
        assert_eq!(
            how_it_ended(&zombie(libc::SIGKILL), usr2).unwrap(),
            "was killed by SIGKILL"
        );
        let running = zombie(0).replace(") Z ", ") S ");
        assert_eq!(how_it_ended(&running, usr2), None);
    }

    #[test]
    fn stat() {
        let p = parse_stat(
            "42 (php-fpm: pool (www)) S 7 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 123456 0 0",
        )
        .unwrap();
        assert_eq!(
            (p.comm.as_str(), p.state, p.ppid),
            ("php-fpm: pool (www)", 'S', 7)
        );
    }
}
