//! Dumps and their triggers: the dumper thread (signal requests through an
//! eventfd, periodic dumps, leak warnings, bitmap pruning), the exit dump,
//! and `heaplive_dump()`.
//!
//! Every dump runs with the thread's guard set, under one dump lock that is
//! never taken on an allocation path; it snapshots the live table, groups
//! samples by stack, symbolizes each distinct address once (cached across
//! dumps) and writes the files.

use crate::hot::lock::SpinLock;
use crate::background::profile::{Location, Profile, Sample};
use crate::symbolize::{SymConfig, Symbolizer};
use crate::hot::config;
use crate::hot::live;
use crate::hot::log;
use crate::background::output;
use crate::hot::sampler;
use crate::hot::stacks;
use crate::hot::sys;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};

pub struct DumpState {
    symbolizer: Option<Symbolizer>,
    /// Files written by this process (`%n` of the next is this + 1).
    pub seq: u32,
    entries: Vec<live::Entry>,
}

pub static DUMP: SpinLock<DumpState> = SpinLock::new(DumpState {
    symbolizer: None,
    seq: 0,
    entries: Vec::new(),
});

/// The eventfd the signal handler writes to.
pub static EVENT_FD: sys::OwnFd = sys::OwnFd::new();
/// The pid whose dumper thread is running.
static DUMPER_PID: AtomicU32 = AtomicU32::new(0);
/// How often the dumper prunes the shadow bitmap (empty leaves, stale page
/// summaries).
const PRUNE_EVERY_NS: u64 = 1_000_000_000;
/// Monotonic time the profile started (for pprof's duration).
static STARTED_NS: AtomicU64 = AtomicU64::new(0);

pub struct Written {
    pub path: PathBuf,
    pub total: u64,
}

pub fn symbolizer_of(st: &mut DumpState) -> &mut Symbolizer {
    st.symbolizer.get_or_insert_with(|| {
        let cfg = config::get();
        // HEAPLIVE_DEBUG_DIRS first, then the distribution's directory.
        let mut dirs: Vec<PathBuf> = cfg
            .debug_dirs
            .as_str()
            .split(':')
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect();
        dirs.push(PathBuf::from("/usr/lib/debug"));
        Symbolizer::new(SymConfig {
            debug_dirs: dirs,
            demangle: cfg.demangle,
        })
    })
}

/// Builds the profile of what is live now.
fn build_profile(st: &mut DumpState) -> Profile {
    let cfg = config::get();
    let mut entries = std::mem::take(&mut st.entries);
    live::snapshot(&mut entries);
    let mut per_stack: HashMap<stacks::StackId, (f64, f64)> = HashMap::new();
    for e in &entries {
        let a = per_stack.entry(e.stack).or_insert((0.0, 0.0));
        a.0 += e.weight;
        a.1 += sampler::weight_blocks(e.size as u64, cfg.interval);
    }
    st.entries = entries;

    crate::symbolize::modules::refresh();
    let sym = symbolizer_of(st);
    let mut loc_of: HashMap<usize, usize> = HashMap::new();
    let mut locations: Vec<Location> = Vec::new();
    let mut samples = Vec::with_capacity(per_stack.len());
    let mut ids: Vec<_> = per_stack.into_iter().collect();
    ids.sort_by_key(|(id, _)| *id);
    for (id, (bytes, blocks)) in ids {
        let locs = stacks::frames(id)
            .iter()
            .map(|&ip| {
                *loc_of.entry(ip).or_insert_with(|| {
                    // Return addresses point after the call.
                    let addr = (ip as u64).saturating_sub(1);
                    let (mapping, frames) = sym.lookup(addr);
                    locations.push(Location {
                        address: addr,
                        mapping,
                        frames,
                    });
                    locations.len() - 1
                })
            })
            .collect();
        samples.push(Sample {
            locations: locs,
            bytes: bytes.round() as u64,
            blocks: blocks.round() as u64,
        });
    }
    let started = STARTED_NS.load(Relaxed);
    let mappings = sym.mappings();
    sym.release_debug_info();
    Profile {
        mappings,
        locations,
        samples,
        sample_interval: cfg.interval,
        time_nanos: sys::wall_nanos(),
        duration_nanos: sys::now_nanos().saturating_sub(started) as i64,
        lines: cfg.lines,
    }
}

fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    Some(pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64)
}

/// Writes the next dump. `path`: an explicit file (heaplive_dump), else the
/// next name of the template. The caller must hold the guard.
pub fn dump_locked(st: &mut DumpState, path: Option<&Path>, why: &str) -> std::io::Result<Written> {
    let t0 = sys::now_nanos();
    let cfg = config::get();
    let pid = sys::getpid();
    let mut n = st.seq + 1;
    let template = cfg.output_template();
    let name_for = |n: u32| {
        Path::new(cfg.start_dir.as_str()).join(output::expand(template, pid, cfg.exe.as_str(), n))
    };
    let target = match path {
        Some(p) => p.to_path_buf(),
        None => {
            // The same pid may have dumped before an exec (php-fpm's master
            // re-executes itself on reload): never overwrite its files.
            if template.contains("%n") {
                while n < st.seq + 10_000
                    && (name_for(n).exists() || fallback_of(&name_for(n)).exists())
                {
                    n += 1;
                }
            }
            name_for(n)
        }
    };
    let profile = build_profile(st);
    let total = profile.total_bytes();
    let mut written: Option<PathBuf> = None;
    let mut also = String::new();
    if cfg.folded || path.is_some() && !cfg.pprof {
        written = Some(output::write_with_fallback(&target, &mut |w| {
            crate::background::folded::write_folded(&profile, w)
        })?);
    }
    if cfg.pprof {
        let pb = output::pprof_name(&target);
        let p = output::write_with_fallback(&pb, &mut |w| {
            crate::background::pprof::write_pprof(&profile, &mut WriteRef(w))
        })?;
        if written.is_some() {
            also = format!(" and {}", p.display());
        } else {
            written = Some(p);
        }
    }
    let written = written.unwrap_or(target);
    st.seq = n;
    let ms = (sys::now_nanos() - t0) as f64 / 1e6;
    let samples: usize = st.entries.len();
    let rss = rss_bytes()
        .map(|r| format!("{}", log::human_bytes(r as f64)))
        .unwrap_or_else(|| "?".into());
    log::line(format_args!(
        "heaplive[{}]: {} dump {}{}: {} live (estimate) in {} samples over {} stacks; RSS {}; took {:.1} ms",
        pid,
        why,
        written.display(),
        also,
        log::human_bytes(total as f64),
        log::Grouped(samples as u64),
        log::Grouped(profile.samples.len() as u64),
        rss,
        ms
    ));
    output::write_status(pid, n, &written, cfg.signal);
    Ok(Written {
        path: written,
        total,
    })
}

/// Where a file would go when its directory refuses us.
fn fallback_of(p: &Path) -> PathBuf {
    Path::new(config::get().tmpdir.as_str()).join(p.file_name().unwrap_or(p.as_os_str()))
}

/// `&mut dyn Write` as a sized `impl Write`.
struct WriteRef<'a>(&'a mut dyn std::io::Write);
impl std::io::Write for WriteRef<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Takes the dump lock and dumps, reporting failures in one line.
pub fn dump(path: Option<&Path>, why: &str) -> std::io::Result<Written> {
    let _busy = crate::hot::guard::Busy::enter();
    let mut st = DUMP.lock();
    let r = dump_locked(&mut st, path, why);
    if let Err(e) = &r {
        log::line(format_args!(
            "heaplive[{}]: {} dump failed: {}",
            sys::getpid(),
            why,
            e
        ));
    }
    r
}

// ---------------------------------------------------------------------------
// The dumper thread.

/// Starts this process's dumper thread unless it runs already. Cheap when
/// it does: two loads.
#[inline]
pub fn ensure_dumper() {
    let pid = crate::background::fork::pid();
    if DUMPER_PID.load(Acquire) != pid {
        start_dumper(pid);
    }
}

#[cold]
fn start_dumper(pid: u32) {
    if DUMPER_PID.swap(pid, AcqRel) == pid {
        return;
    }
    let _busy = crate::hot::guard::Busy::enter();
    let _errno = sys::ErrnoGuard::save();
    if STARTED_NS.load(Relaxed) == 0 {
        STARTED_NS.store(sys::now_nanos(), Relaxed);
    }
    // SAFETY: eventfd has no preconditions.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        log::line(format_args!(
            "heaplive[{}]: no eventfd ({}); signal dumps are off",
            pid,
            output::errno_text(sys::errno())
        ));
    } else {
        let old = EVENT_FD.set(fd);
        if old >= 0 {
            // The parent's, inherited through fork.
            // SAFETY: no one else in this process uses it any more.
            unsafe { libc::close(old) };
        }
    }
    // The thread starts with every signal blocked, so signals meant for
    // the program never land on it.
    // SAFETY: sigset operations on local sets.
    let mut all: libc::sigset_t = unsafe { core::mem::zeroed() };
    let mut old: libc::sigset_t = unsafe { core::mem::zeroed() };
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // A raw pthread: the thread must mark itself as the library's before
    // anything runs on it (Rust's own thread start allocates).
    // SAFETY: attr is initialised before use and destroyed after.
    let err = unsafe {
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        libc::pthread_attr_setstacksize(&mut attr, 512 * 1024);
        let mut tid: libc::pthread_t = 0;
        let e = libc::pthread_create(&mut tid, &attr, dumper_start, core::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        e
    };
    // SAFETY: restores our mask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, core::ptr::null_mut()) };
    if err != 0 {
        log::line(format_args!(
            "heaplive[{}]: cannot start the dump thread ({}); signal and periodic dumps are off",
            pid,
            output::errno_text(err)
        ));
    }
}

extern "C" fn dumper_start(_: *mut libc::c_void) -> *mut libc::c_void {
    // This thread is the library's own: nothing it does is profiled.
    // SAFETY: this thread's own state.
    unsafe { (*crate::hot::guard::state()).busy = 1 };
    // SAFETY: a name for tools like top; the string is NUL-terminated.
    unsafe { libc::pthread_setname_np(libc::pthread_self(), b"heaplive\0".as_ptr().cast()) };
    dumper_main();
    core::ptr::null_mut()
}

fn dumper_main() {
    let my_pid = sys::getpid();
    let cfg = config::get();
    let every_ns = cfg.dump_every_ms.saturating_mul(1_000_000);
    let mut next_periodic = if every_ns > 0 {
        sys::now_nanos() + every_ns
    } else {
        u64::MAX
    };
    let mut next_prune = sys::now_nanos() + PRUNE_EVERY_NS;
    loop {
        if crate::background::fork::pid() != my_pid || DUMPER_PID.load(Acquire) != my_pid {
            // A forked child copied us mid-flight; the child has its own.
            return;
        }
        let fd = match EVENT_FD.get() {
            Some(fd) => fd,
            None => renew_eventfd(),
        };
        let now = sys::now_nanos();
        let wait_ms = (next_periodic.min(now + 250_000_000).saturating_sub(now) / 1_000_000) as i32;
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, if fd >= 0 { 1 } else { 0 }, wait_ms.max(1)) };
        if r > 0 && pfd.revents & libc::POLLIN != 0 {
            let mut v = 0u64;
            // Reading resets the counter: every request that arrived so far
            // is served by this one dump, and any arriving during it by at
            // most one more.
            // SAFETY: 8-byte read into v.
            unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
            let _ = dump(None, "signal");
        }
        let now = sys::now_nanos();
        if now >= next_periodic {
            let _ = dump(None, "periodic");
            next_periodic = sys::now_nanos() + every_ns;
        }
        crate::hot::leak_check::report_pending();
        if now >= next_prune {
            let _st = DUMP.lock();
            crate::hot::shadow::prune();
            next_prune = now + PRUNE_EVERY_NS;
        }
    }
}

/// The program closed our eventfd (and may have reused its number): make a
/// new one. -1 if the kernel refuses.
#[cold]
fn renew_eventfd() -> i32 {
    EVENT_FD.forget();
    // SAFETY: eventfd has no preconditions.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return -1;
    }
    EVENT_FD.set(fd);
    EVENT_FD.get().unwrap_or(-1)
}

/// Asks the dumper for a dump: async-signal-safe (getpid, fstat and one
/// write to the eventfd, errno kept).
#[inline]
pub fn request_from_signal() {
    let saved = sys::errno();
    // A child made by _Fork (no fork handlers ran) still shares its
    // parent's eventfd: a request from it would make the parent dump.
    if sys::getpid() != crate::background::fork::pid() {
        sys::set_errno(saved);
        return;
    }
    if let Some(fd) = EVENT_FD.get() {
        let one = 1u64;
        // SAFETY: 8-byte write from a local.
        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    }
    sys::set_errno(saved);
}

/// Called before an exec replaces the image: waits for a dump in progress
/// (by taking the lock) and serves a request still waiting in the eventfd.
pub fn before_exec() {
    let _busy = crate::hot::guard::Busy::enter();
    let mut st = DUMP.lock();
    let Some(fd) = EVENT_FD.get() else { return };
    if DUMPER_PID.load(Acquire) != crate::background::fork::pid() {
        return;
    }
    let mut v = 0u64;
    // SAFETY: 8-byte read into v; the eventfd is non-blocking.
    let n = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    if n == 8 && v > 0 {
        if let Err(e) = dump_locked(&mut st, None, "signal") {
            log::line(format_args!(
                "heaplive[{}]: signal dump failed: {}",
                sys::getpid(),
                e
            ));
        }
    }
}

/// The exit dump, registered with atexit by the constructor.
pub extern "C" fn at_exit() {
    let cfg = config::get();
    let _busy = crate::hot::guard::Busy::enter();
    let _errno = sys::ErrnoGuard::save();
    let written = if cfg.dump_at_exit {
        dump(None, "exit").ok()
    } else {
        None
    };
    crate::hot::leak_check::exit_summary(written.as_ref());
    output::remove_status(sys::getpid());
}

/// `int heaplive_dump(const char *path)`: dumps now, to `path` or (NULL) to
/// the next file of the template. 0, or -1 with errno.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn heaplive_dump(path: *const core::ffi::c_char) -> core::ffi::c_int {
    let _busy = crate::hot::guard::Busy::enter();
    let explicit = if path.is_null() {
        None
    } else {
        // SAFETY: the caller passes a NUL-terminated string.
        let b = unsafe { core::ffi::CStr::from_ptr(path) }.to_bytes();
        Some(PathBuf::from(
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b),
        ))
    };
    match dump(explicit.as_deref(), "requested") {
        Ok(_) => 0,
        Err(e) => {
            sys::set_errno(e.raw_os_error().unwrap_or(libc::EIO));
            -1
        }
    }
}

/// In a forked child: files count from 1 again.
pub fn reset_after_fork(st: &mut DumpState) {
    st.seq = 0;
}
