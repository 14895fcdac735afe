//! Building and writing a dump: snapshot the live table, group samples by
//! stack, symbolize each distinct address once (cached across dumps), write
//! the files and the summary line.
//!
//! Every dump runs with the thread's guard set, under one dump lock
//! (`Rank::Dump`) that is never taken on an allocation path.

use crate::background::output;
use crate::background::profile::{Frame, Location, Profile, Sample};
use crate::hot::lock::{Rank, SpinLock};
use crate::hot::{config, live, log, names, sampler, stacks, sys};
use crate::symbolize::{SymConfig, Symbolizer};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};

/// Set by the exit handler before the exit dump: from then on no signal or
/// periodic dump is written (an explicit `heaplive_dump(path)` still is).
pub static FINISHING: AtomicBool = AtomicBool::new(false);

/// Monotonic time the profile started (for pprof's duration).
pub static STARTED_NS: AtomicU64 = AtomicU64::new(0);

pub struct DumpState {
    symbolizer: Option<Symbolizer>,
    /// Files written by this process (`%n` of the next is this + 1).
    pub seq: u32,
    /// Dumps written by this process, explicit paths included (the status
    /// file's count, which `heaplive dump` waits on).
    pub dumps: u32,
    entries: Vec<live::Entry>,
}

impl DumpState {
    const fn new() -> Self {
        DumpState {
            symbolizer: None,
            seq: 0,
            dumps: 0,
            entries: Vec::new(),
        }
    }
}

pub static DUMP: SpinLock<DumpState> = SpinLock::new(
    Rank::Dump,
    DumpState {
        symbolizer: None,
        seq: 0,
        dumps: 0,
        entries: Vec::new(),
    },
);

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

/// The live samples at one moment, copied before anything else of a dump
/// happens (symbolizing, writing), so a dump shows the heap as it was when
/// it was asked for.
pub struct Snapshot {
    pub entries: Vec<live::Entry>,
    /// How long the copy took.
    pub took_ns: u64,
}

impl Snapshot {
    pub const fn new() -> Snapshot {
        Snapshot {
            entries: Vec::new(),
            took_ns: 0,
        }
    }

    /// Copies the live table now (the buffer is kept for the next time).
    pub fn take(&mut self) {
        let t0 = sys::now_nanos();
        live::snapshot(&mut self.entries);
        self.took_ns = sys::now_nanos().saturating_sub(t0);
    }
}

/// Builds the profile of the snapshot's samples.
fn build_profile(st: &mut DumpState, entries: &[live::Entry]) -> Profile {
    let cfg = config::get();
    let mut per_stack: HashMap<stacks::StackId, (f64, f64)> = HashMap::new();
    for e in entries {
        let a = per_stack.entry(e.stack).or_insert((0.0, 0.0));
        a.0 += e.weight;
        a.1 += sampler::weight_blocks(e.size as u64, cfg.interval);
    }

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
                    if names::is_pseudo(ip) {
                        // A PHP frame or a marker: its name was copied
                        // when the sample was taken.
                        let text = names::text(ip).unwrap_or(b"[unknown]");
                        locations.push(Location {
                            address: 0,
                            mapping: None,
                            frames: vec![Frame {
                                function: String::from_utf8_lossy(text).into_owned(),
                                file: None,
                                line: None,
                            }],
                        });
                        return locations.len() - 1;
                    }
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

/// Snapshots now and writes the next dump. `path`: an explicit file
/// (heaplive_dump), else the next name of the template. The caller must
/// hold the guard.
pub fn dump_locked(st: &mut DumpState, path: Option<&Path>, why: &str) -> std::io::Result<Written> {
    let mut snap = Snapshot {
        entries: std::mem::take(&mut st.entries),
        took_ns: 0,
    };
    snap.take();
    let r = write_locked(st, &snap, path, why);
    st.entries = snap.entries;
    r
}

/// Writes the next dump of `snap`, as `dump_locked`.
pub fn write_locked(
    st: &mut DumpState,
    snap: &Snapshot,
    path: Option<&Path>,
    why: &str,
) -> std::io::Result<Written> {
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
    let profile = build_profile(st, &snap.entries);
    let total = profile.total_bytes();
    let mut written: Option<PathBuf> = None;
    let mut also = String::new();
    if cfg.folded || path.is_some() && !cfg.pprof {
        let mut fill =
            |w: &mut dyn std::io::Write| crate::background::folded::write_folded(&profile, w);
        written = Some(match path {
            Some(_) => output::write_explicit(&target, &mut fill)?,
            None => output::write_with_fallback(&target, &mut fill)?,
        });
    }
    if cfg.pprof {
        let pb = output::pprof_name(&target);
        let mut fill = |w: &mut dyn std::io::Write| {
            crate::background::pprof::write_pprof(&profile, &mut WriteRef(w))
        };
        let p = match path {
            Some(_) => output::write_explicit(&pb, &mut fill)?,
            None => output::write_with_fallback(&pb, &mut fill)?,
        };
        if written.is_some() {
            also = format!(" and {}", p.display());
        } else {
            written = Some(p);
        }
    }
    let written = written.unwrap_or(target);
    // An explicit path is the caller's: it does not use up a `%n` number.
    if path.is_none() {
        st.seq = n;
    }
    let ms = (sys::now_nanos() - t0) as f64 / 1e6;
    let samples: usize = snap.entries.len();
    // Where the resident memory is, by kind (ZendMM when PHP mode hooks it).
    let rss = crate::background::rss::describe(crate::hot::php::heap() != 0);
    log::line(format_args!(
        "heaplive[{}]: {} dump {}{}: {} live (estimate) in {} samples over {} stacks; {}; snapshot {:.2} ms, took {:.1} ms",
        pid,
        why,
        written.display(),
        also,
        log::human_bytes(total as f64),
        log::Grouped(samples as u64),
        log::Grouped(profile.samples.len() as u64),
        rss,
        snap.took_ns as f64 / 1e6,
        ms
    ));
    st.dumps = (st.dumps + 1).max(if path.is_none() { n } else { 0 });
    output::write_status(pid, st.dumps, &written, cfg.signal);
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
    if crate::hot::forking::inert() {
        // A child forked while heaplive's state was mid-change (see
        // `hot::forking`): nothing trustworthy to write.
        return Err(std::io::Error::from_raw_os_error(libc::EAGAIN));
    }
    let _busy = crate::hot::guard::Busy::enter();
    let mut st = DUMP.lock();
    if FINISHING.load(SeqCst) && path.is_none() && why != "exit" {
        return Err(std::io::Error::from_raw_os_error(libc::ESHUTDOWN));
    }
    let r = dump_locked(&mut st, path, why);
    report(r, why)
}

/// Writes `snap` (taken before the dump lock, which a dump in progress may
/// hold for a while), reporting failures in one line.
pub fn dump_snapshot(snap: &Snapshot, path: Option<&Path>, why: &str) -> std::io::Result<Written> {
    if crate::hot::forking::inert() {
        // As `dump`.
        return Err(std::io::Error::from_raw_os_error(libc::EAGAIN));
    }
    let _busy = crate::hot::guard::Busy::enter();
    let mut st = DUMP.lock();
    if FINISHING.load(SeqCst) && path.is_none() && why != "exit" {
        // As `dump`: nothing after the exit dump.
        return Err(std::io::Error::from_raw_os_error(libc::ESHUTDOWN));
    }
    report(write_locked(&mut st, snap, path, why), why)
}

fn report(r: std::io::Result<Written>, why: &str) -> std::io::Result<Written> {
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

/// In a forked child: files count from 1 again.
pub fn reset_after_fork(st: &mut DumpState) {
    st.seq = 0;
    st.dumps = 0;
}

/// Held across real allocations, so a fork's prepare handler waits for it
/// only so long (see `background::fork`).
pub fn lock_for_fork() -> bool {
    DUMP.lock_raw_within(crate::background::fork::HIGH_LOCK_WAIT_NS)
}

/// # Safety
/// In a fork's child whose prepare handler did not get the lock.
pub unsafe fn reset_in_child() {
    // SAFETY: guaranteed by the caller.
    unsafe { DUMP.reset_in_child(DumpState::new()) };
}

/// # Safety
/// Fork handlers only, paired with `lock_for_fork`.
pub unsafe fn unlock_after_fork() {
    // SAFETY: guaranteed by the caller.
    unsafe { DUMP.unlock_raw() };
}
