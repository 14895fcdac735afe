//! `heaplive attach PID` and `heaplive detach PID`: load libheaplive.so
//! into a process started without it, and make it inert again.
//!
//! Attach: checks first (nothing in the target is touched until every
//! check passed), then one thread of the target is stopped and made to
//! call `dlopen(".../libheaplive.so", RTLD_NOW)` and then the library's
//! `heaplive_attach(settings)` (ptrace.rs says how, and how threads in
//! system calls resume), which reads the settings and redirects every
//! module's allocation slots (src/background/attach.rs). Detach calls
//! `heaplive_detach()` the same way. README, "Attaching to a running
//! process", says what is and is not seen.

use crate::cli::{AttachArgs, DetachArgs};
use crate::ptrace::{DATA, Stopped, in_syscall};
use crate::{Fail, Res, error};
use heaplive_format::settings;
use object::{Object, ObjectSymbol};
use std::path::Path;
use std::time::{Duration, Instant};

/// One line of /proc/PID/maps.
struct Map {
    start: u64,
    end: u64,
    offset: u64,
    path: String,
}

fn maps(pid: i32) -> Res<Vec<Map>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| Fail::Error(format!("cannot read /proc/{pid}/maps: {e}")))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (range, _perms, off) = (f.next()?, f.next()?, f.next()?);
            let (_dev, _inode) = (f.next()?, f.next()?);
            let path = f.collect::<Vec<_>>().join(" ");
            let (s, e) = range.split_once('-')?;
            Some(Map {
                start: u64::from_str_radix(s, 16).ok()?,
                end: u64::from_str_radix(e, 16).ok()?,
                offset: u64::from_str_radix(off, 16).ok()?,
                path,
            })
        })
        .collect())
}

fn base_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn is_libc(p: &str) -> bool {
    let b = base_name(p);
    b.starts_with("libc.so") || (b.starts_with("libc-2.") && b.ends_with(".so"))
}

fn is_heaplive(p: &str) -> bool {
    base_name(p).starts_with("libheaplive")
}

/// Where a module's file starts in the target (its mapping at offset 0).
fn base_of(maps: &[Map], pred: impl Fn(&str) -> bool) -> Option<(u64, String)> {
    maps.iter()
        .filter(|m| m.offset == 0 && pred(&m.path))
        .map(|m| (m.start, m.path.clone()))
        .min_by_key(|m| m.0)
}

/// The address of a dynamic symbol of the file at `path` (as the target
/// sees it, through /proc/PID/root), given the file's load base.
fn symbol(pid: i32, path: &str, base: u64, name: &str) -> Res<u64> {
    let rooted = format!("/proc/{pid}/root{path}");
    let data = std::fs::read(&rooted)
        .or_else(|_| std::fs::read(path))
        .map_err(|e| Fail::Error(format!("cannot read {path}: {e}")))?;
    let file = object::File::parse(&*data)
        .map_err(|e| Fail::Error(format!("{path}: not an ELF file I can read: {e}")))?;
    file.dynamic_symbols()
        .find(|s| s.name() == Ok(name) && s.is_definition())
        .map(|s| base + s.address())
        .ok_or_else(|| Fail::Error(format!("{path} has no symbol {name}")))
}

fn status_field(pid: i32, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
}

/// Bit 19 of the effective capabilities: CAP_SYS_PTRACE.
fn has_cap_sys_ptrace() -> bool {
    status_field(std::process::id() as i32, "CapEff:")
        .and_then(|v| u64::from_str_radix(&v, 16).ok())
        .is_some_and(|c| c & (1 << 19) != 0)
}

/// Every reason not to touch the target, checked before touching it.
fn check(pid: i32, lib: &Path) -> Res<Vec<Map>> {
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return error(format!("no process {pid}"));
    }
    let me = std::process::id() as i32;
    if pid == me {
        return error("cannot attach to myself");
    }
    let cap = has_cap_sys_ptrace();
    // Another user's process.
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    if let Some(uids) = status_field(pid, "Uid:") {
        let theirs: Vec<u32> = uids
            .split_whitespace()
            .filter_map(|u| u.parse().ok())
            .collect();
        if !cap && theirs.iter().any(|&u| u != uid) {
            return error(format!(
                "process {pid} belongs to user {} and I run as user {uid} without CAP_SYS_PTRACE: run heaplive attach as that user or as root",
                theirs.first().copied().unwrap_or(0)
            ));
        }
    }
    match std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
    {
        Some(3) => {
            return error(
                "ptrace is disabled on this machine (kernel.yama.ptrace_scope=3, until reboot): attach is impossible",
            );
        }
        Some(2) if !cap => {
            return error(
                "kernel.yama.ptrace_scope=2 lets only root (CAP_SYS_PTRACE) attach: run heaplive attach as root",
            );
        }
        Some(1) if !cap => {
            return error(
                "kernel.yama.ptrace_scope=1 lets a process attach only to its own descendants: run heaplive attach as root, or allow it with 'sysctl kernel.yama.ptrace_scope=0'",
            );
        }
        _ => {}
    }
    if let Some(t) = status_field(pid, "TracerPid:")
        && t != "0"
    {
        return error(format!(
            "process {pid} is already traced by process {t} (a debugger, strace?): detach that first"
        ));
    }
    // x86-64 only: the ELF header of the executable.
    let exe = format!("/proc/{pid}/exe");
    let head = std::fs::File::open(&exe)
        .and_then(|f| {
            let mut b = [0u8; 20];
            std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, 0).map(|_| b)
        })
        .map_err(|e| {
            Fail::Error(if e.kind() == std::io::ErrorKind::PermissionDenied {
                // /proc/PID/exe is readable exactly when ptrace's access
                // check passes (PTRACE_MODE_READ): the kernel said no.
                format!(
                    "the kernel does not let me trace process {pid} (reading {exe}: permission denied): it has capabilities I lack, is not dumpable (setuid, prctl PR_SET_DUMPABLE) or a security module forbids it; run heaplive attach as root with CAP_SYS_PTRACE"
                )
            } else {
                format!("cannot read {exe}: {e}")
            })
        })?;
    if &head[..4] != b"\x7fELF" || head[4] != 2 || u16::from_le_bytes([head[18], head[19]]) != 62 {
        return error(format!(
            "process {pid} is not an x86-64 program: attach supports x86-64 only"
        ));
    }
    let maps = maps(pid)?;
    if let Some(m) = maps.iter().find(|m| is_heaplive(&m.path)) {
        return error(format!(
            "process {pid} already has {} loaded (started under heaplive, or attached before; a detached library stays loaded and cannot be attached again): use 'heaplive dump {pid}'",
            m.path
        ));
    }
    if !maps.iter().any(|m| is_libc(&m.path)) {
        return error(format!(
            "process {pid} has no glibc libc.so.6 mapped (statically linked, or another C library): its allocations cannot be redirected"
        ));
    }
    const OWN_ALLOCATORS: [&str; 6] = [
        "libjemalloc",
        "libtcmalloc",
        "libmimalloc",
        "libhoard",
        "libscudo",
        "libsnmalloc",
    ];
    if let Some(m) = maps.iter().find(|m| {
        OWN_ALLOCATORS
            .iter()
            .any(|a| base_name(&m.path).starts_with(a))
    }) {
        return error(format!(
            "process {pid} uses its own allocator ({} is mapped; see 'grep -E \"jemalloc|tcmalloc|mimalloc\" /proc/{pid}/maps'): heaplive sees only allocations that go through glibc's malloc",
            m.path
        ));
    }
    // An allocator linked into the executable: it defines malloc itself.
    let exe_path = std::fs::read_link(&exe).unwrap_or_default();
    if let Ok(data) = std::fs::read(&exe)
        && let Ok(file) = object::File::parse(&*data)
    {
        let defines = |name: &str| {
            file.dynamic_symbols()
                .chain(file.symbols())
                .any(|s| s.name() == Ok(name) && s.is_definition())
        };
        if let Some(n) = ["malloc", "je_malloc", "tc_malloc", "mi_malloc"]
            .into_iter()
            .find(|n| defines(n))
        {
            return error(format!(
                "{} defines {n} itself (check with 'nm -D {} | grep -w {n}'): its allocations do not go through glibc's malloc and would not be seen",
                exe_path.display(),
                exe_path.display()
            ));
        }
    }
    if lib.to_string_lossy().contains('\n') {
        return error("the library's path holds a newline");
    }
    memory_headroom(pid, lib)?;
    Ok(maps)
}

/// What heaplive maps in the target besides its library's segments: its
/// heap, the live and stack tables as they grow, a dump's symbolizer
/// (about 5 MiB at attach; a dump of a large program maps tens more).
const OWN_MAPPINGS: u64 = 32 << 20;

/// A soft limit of /proc/PID/limits (`None`: unlimited or unreadable).
fn soft_limit(pid: i32, name: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let rest = text.lines().find_map(|l| l.strip_prefix(name))?;
    rest.split_whitespace().next()?.parse().ok()
}

/// A process at its memory limit (RLIMIT_AS or RLIMIT_DATA a little above
/// what it uses): heaplive's library and tables would take what its own
/// allocations need next, or fail to load halfway. Refused before the
/// target is touched.
fn memory_headroom(pid: i32, lib: &Path) -> Res<()> {
    let span = std::fs::read(lib)
        .ok()
        .and_then(|d| {
            let f = object::File::parse(&*d).ok()?;
            use object::ObjectSegment;
            let (lo, hi) = f.segments().fold((u64::MAX, 0), |(lo, hi), s| {
                (lo.min(s.address()), hi.max(s.address() + s.size()))
            });
            hi.checked_sub(lo)
        })
        .unwrap_or(0);
    let kib = |key: &str| {
        status_field(pid, key)
            .and_then(|v| v.trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|k| k << 10)
    };
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    for (limit, name, used, need) in [
        (
            "Max address space",
            "RLIMIT_AS",
            kib("VmSize:"),
            span + OWN_MAPPINGS,
        ),
        ("Max data size", "RLIMIT_DATA", kib("VmData:"), OWN_MAPPINGS),
    ] {
        let (Some(max), Some(used)) = (soft_limit(pid, limit), used) else {
            continue;
        };
        if max.saturating_sub(used) < need {
            return error(format!(
                "process {pid} is near its memory limit ({name} {:.1} MiB, {:.1} MiB in use): heaplive needs about {:.0} MiB more for its library and tables, which the program's own allocations would then lack; not attached (raise the limit, e.g. 'prlimit --pid {pid} --{}=unlimited')",
                mib(max),
                mib(used),
                mib(need),
                if name == "RLIMIT_AS" { "as" } else { "data" },
            ));
        }
    }
    Ok(())
}

/// x86-64 system call numbers where a thread waits for something outside
/// the process, holding no lock of libc's: the best threads to borrow.
const WAITING: [u64; 18] = [
    0,   // read
    7,   // poll
    23,  // select
    34,  // pause
    35,  // nanosleep
    43,  // accept
    45,  // recvfrom
    47,  // recvmsg
    61,  // wait4
    128, // rt_sigtimedwait
    130, // rt_sigsuspend
    230, // clock_nanosleep
    232, // epoll_wait
    247, // waitid
    270, // pselect6
    271, // ppoll
    281, // epoll_pwait
    288, // accept4
];

/// The syscall a thread is blocked in, from /proc (no stop needed).
fn blocked_in(pid: i32, tid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall")).ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn threads(pid: i32) -> Vec<i32> {
    let mut t: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    t.sort();
    t
}

/// Is SIGSEGV blocked or ignored for the thread? Our return trap is a
/// SIGSEGV, and the kernel resets the action of a blocked or ignored
/// fault signal to the default when it forces one: such a thread is not
/// borrowed.
fn segv_masked(pid: i32, tid: i32) -> bool {
    let bit = 1u64 << (libc::SIGSEGV - 1);
    let text =
        std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap_or_default();
    text.lines().any(|l| {
        ["SigBlk:", "SigIgn:"].iter().any(|k| {
            l.strip_prefix(k)
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
                .is_some_and(|m| m & bit != 0)
        })
    })
}

/// Stops one thread that is safe to borrow: blocked in a waiting system
/// call, or running code outside libc and the loader (where it holds none
/// of the locks dlopen and malloc take). Threads are tried in turn, a few
/// hundred rounds at most.
fn borrow_thread(pid: i32, maps: &[Map]) -> Res<Stopped> {
    let in_libc_or_ld = |ip: u64| {
        maps.iter().any(|m| {
            ip >= m.start
                && ip < m.end
                && (is_libc(&m.path) || base_name(&m.path).starts_with("ld-linux"))
        })
    };
    let mut last = String::from("no thread found");
    // Whether a thread was ever a candidate (not blocking SIGSEGV): when
    // none was, trying again cannot help.
    let mut candidate = false;
    for round in 0..400 {
        let mut ts = threads(pid);
        if ts.is_empty() {
            return error(format!("no process {pid}"));
        }
        // Threads waiting in a system call first.
        ts.sort_by_key(|&t| !blocked_in(pid, t).is_some_and(|n| WAITING.contains(&n)));
        for tid in ts {
            if segv_masked(pid, tid) {
                continue;
            }
            candidate = true;
            let s = match Stopped::stop(pid, tid) {
                Ok(s) => s,
                Err(e) => {
                    last = e;
                    if round == 0 && last.contains("PTRACE_SEIZE") {
                        return Err(Fail::Error(format!("cannot trace process {pid}: {last}")));
                    }
                    continue;
                }
            };
            let ok = match in_syscall(&s.regs) {
                Some(nr) => WAITING.contains(&nr),
                None => !in_libc_or_ld(s.regs.rip),
            };
            if ok {
                return Ok(s);
            }
            last = format!("thread {tid} was busy inside libc");
            s.release().map_err(Fail::Error)?;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    if !candidate {
        return error(format!(
            "every thread of process {pid} blocks or ignores SIGSEGV (see SigBlk and SigIgn in /proc/{pid}/task/*/status), which attach needs to get the thread back: this process cannot be attached; start it under heaplive run instead"
        ));
    }
    error(format!(
        "no thread of process {pid} could be borrowed safely in 400 tries ({last}); try again when it is less busy, or start it under heaplive run"
    ))
}

/// The settings text for heaplive_attach: lines `HEAPLIVE_NAME=value`.
fn settings_text(a: &AttachArgs) -> String {
    let mut out = String::new();
    for (s, v) in a.settings.given() {
        out.push_str(&format!("{}={}\n", s.name(), v));
    }
    out
}

/// Attaches to one process; returns the line to print.
fn attach_one(pid: i32, a: &AttachArgs, lib: &Path) -> Res<String> {
    let maps = check(pid, lib)?;
    let (libc_base, libc_path) =
        base_of(&maps, is_libc).ok_or_else(|| Fail::Error("no libc".into()))?;
    let dlopen = symbol(pid, &libc_path, libc_base, "dlopen")?;
    let dlerror = symbol(pid, &libc_path, libc_base, "dlerror")?;
    let mut text = settings_text(a);
    // Relative output templates resolve against our directory, not the target's.
    if let Some(o) = &a.settings.output
        && !o.starts_with('/')
        && let Ok(cwd) = std::env::current_dir()
    {
        text = text.replace(
            &format!("{}={o}\n", settings::OUTPUT.name()),
            &format!("{}={}/{o}\n", settings::OUTPUT.name(), cwd.display()),
        );
    }
    let mut path = lib.as_os_str().as_encoded_bytes().to_vec();
    path.push(0);
    let mut text = text.into_bytes();
    text.push(0);

    // heaplive_attach's offset in the library, found before any thread
    // is stopped (reading and parsing the 15 MB file took tens of ms).
    let lib_str = lib.to_string_lossy();
    let attach_off = symbol(pid, &lib_str, 0, "heaplive_attach")?;

    let t0 = Instant::now();
    let s = borrow_thread(pid, &maps)?;
    let tid = s.tid;
    let t_call = Instant::now();
    let handle = s.call(dlopen, [DATA, libc::RTLD_NOW as u64, 0], &path);
    let t_dlopen = t_call.elapsed();
    let handle = match handle {
        Ok(0) => {
            let why = s
                .call(dlerror, [0, 0, 0], &[])
                .map(|p| {
                    if p == 0 {
                        String::new()
                    } else {
                        s.read_cstr(p)
                    }
                })
                .unwrap_or_default();
            s.release().map_err(Fail::Error)?;
            return error(format!(
                "process {pid}: dlopen({}) failed in the target: {why}",
                lib.display()
            ));
        }
        Ok(h) => h,
        Err(e) => return error(format!("process {pid}: {e}")),
    };
    let _ = handle;
    // The library is mapped now: its entry point is its base plus the
    // offset (the file dlopen'ed is the one read above, by its path).
    let after = maps_or_empty(pid);
    let t_call = Instant::now();
    // (check() refused a target with any libheaplive mapped: this one is
    // the one just loaded.)
    let result = match base_of(&after, is_heaplive) {
        Some((base, _)) => s
            .call(base + attach_off, [DATA, 0, 0], &text)
            .map_err(Fail::Error),
        None => error("libheaplive.so not found in the maps after dlopen"),
    };
    let t_attach = t_call.elapsed();
    let held = s.release().map_err(Fail::Error)?;
    let total = t0.elapsed();
    let n = result? as i32;
    if n < 0 {
        return error(format!(
            "process {pid}: heaplive_attach refused ({n}): the library was there already"
        ));
    }
    Ok(format!(
        "heaplive: attached to process {pid}: {n} allocation slots redirected; thread {tid} was stopped for {:.1} ms (dlopen {:.1} ms, heaplive_attach {:.1} ms; {:.1} ms in all); dumps: 'heaplive dump {pid}', undo: 'heaplive detach {pid}'",
        held.as_secs_f64() * 1e3,
        t_dlopen.as_secs_f64() * 1e3,
        t_attach.as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e3
    ))
}

fn maps_or_empty(pid: i32) -> Vec<Map> {
    maps(pid).unwrap_or_default()
}

pub fn main(a: AttachArgs) -> Res<()> {
    let lib = crate::run::find_library()?;
    let lib = std::fs::canonicalize(&lib).unwrap_or(lib);
    let pids = if a.children {
        let kids = crate::dump::children_of(a.pid);
        if kids.is_empty() {
            return error(format!("process {} has no children", a.pid));
        }
        kids
    } else {
        vec![a.pid]
    };
    let mut failed = false;
    for pid in &pids {
        match attach_one(*pid, &a, &lib) {
            Ok(line) => say!("{line}"),
            Err(Fail::Error(e)) => {
                say!("heaplive: {e}");
                failed = true;
            }
            Err(e) => return Err(e),
        }
    }
    if a.children {
        say!(
            "heaplive: children that process {} forks from now on are not attached (they are copies of it, which is not): run 'heaplive attach --children {}' again for them",
            a.pid,
            a.pid
        );
    }
    if failed { Err(Fail::Reported) } else { Ok(()) }
}

pub fn detach_main(a: DetachArgs) -> Res<()> {
    let pid = a.pid;
    let maps = maps(pid)?;
    let Some((base, path)) = base_of(&maps, is_heaplive) else {
        return error(format!(
            "process {pid} has no libheaplive.so loaded: nothing to detach"
        ));
    };
    let f = symbol(pid, &path, base, "heaplive_detach")?;
    let t0 = Instant::now();
    let s = borrow_thread(pid, &maps)?;
    let tid = s.tid;
    let r = s.call(f, [0, 0, 0], &[]);
    let held = s.release().map_err(Fail::Error)?;
    let n = r.map_err(Fail::Error)? as i32;
    if n < 0 {
        return error(format!(
            "process {pid} was not attached by 'heaplive attach' (started under the preload, or detached already): nothing to detach"
        ));
    }
    say!(
        "heaplive: detached from process {pid}: {n} slots restored, sampling stopped, the library stays loaded but inert; thread {tid} was stopped for {:.1} ms ({:.1} ms in all)",
        held.as_secs_f64() * 1e3,
        t0.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}
