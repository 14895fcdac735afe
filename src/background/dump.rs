//! Building and writing a dump: snapshot the live table, group samples by
//! stack, symbolize each distinct address once (cached across dumps), write
//! the files and the summary line.
//!
//! Every dump runs with the thread's guard set, under one dump lock
//! (`Rank::Dump`) that is never taken on an allocation path.

pub use crate::background::dump_files::*;
pub use crate::background::dump_steps::write_view;
use crate::background::output;
use crate::background::profile::{Frame, Location, Profile, Sample};
use crate::hot::lock::{Rank, SpinLock};
use crate::hot::{config, live, log, names, ownheap, stacks, sys};
use crate::symbolize::{SymConfig, Symbolizer};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};

/// Set by the exit handler before the exit dump: from then on no signal or
/// periodic dump is written (an explicit `heaplive_dump(path)` still is).
pub static FINISHING: AtomicBool = AtomicBool::new(false);

/// The `why` of a PHP request's peak dump (`background::php`).
pub const REQUEST_PEAK: &str = "request peak";

/// Monotonic time the profile started (for pprof's duration).
pub static STARTED_NS: AtomicU64 = AtomicU64::new(0);

pub struct DumpState {
    symbolizer: Option<Symbolizer>,
    /// Files written by this process (`%n` of the next is this + 1).
    pub seq: u32,
    /// Dumps written by this process, explicit paths included (the status
    /// file's count, which `heaplive dump` waits on), and the rest of it.
    pub dumps: u32,
    pub(super) status: output::StatusNote,
    sums: Vec<live::StackSum>,
    /// The size classes' buffers, kept as `sums`.
    sizes: Option<live::Sizes>,
    /// Snapshots taken for dump signals that arrived while a dump was
    /// being built (`dumper::poll_signals`), oldest first, written next.
    pub queued: std::collections::VecDeque<Snapshot>,
    /// A fork's child (that has not exec'd): a php-fpm worker, a prefork
    /// server's worker. Its exit with nothing live writes no dump.
    pub forked: bool,
}

impl DumpState {
    const fn new() -> Self {
        DumpState {
            symbolizer: None,
            seq: 0,
            dumps: 0,
            status: output::StatusNote::EMPTY,
            sums: Vec::new(),
            sizes: None,
            queued: std::collections::VecDeque::new(),
            forked: false,
        }
    }
}

pub static DUMP: SpinLock<DumpState> = SpinLock::new(Rank::Dump, DumpState::new());

pub struct Written {
    pub path: PathBuf,
    pub total: u64,
    /// The exit dump's peak file (`NAME.peak.folded`), when written.
    pub peak: Option<PathBuf>,
    /// The exit dump was not written: nothing was live but runtime pools
    /// (`path` is the name it would have had).
    pub skipped: bool,
}

/// The poll for signals that arrive while a dump is built: the dump's
/// steps get it once (`DumpState::polling`) and call it between their long
/// parts, so that a signal's snapshot is taken when the signal comes, not
/// after the dump (`dumper::poll_signals`; the snapshots wait in the queue
/// and are written next).
pub struct Poll<'q>(&'q mut std::collections::VecDeque<Snapshot>);

impl Poll<'_> {
    /// Takes the pending signals (at most every few milliseconds).
    pub fn due(&mut self) {
        crate::background::dumper::poll_signals(self.0)
    }

    /// The same without the rate limit: the last thing before a dump
    /// counts as written.
    pub fn now(&mut self) {
        crate::background::dumper::poll_signals_now(self.0)
    }
}

impl DumpState {
    /// Runs `f` with the state and the poll for pending signals, which
    /// queues their snapshots in `queued`.
    pub fn polling<R>(&mut self, f: impl FnOnce(&mut DumpState, &mut Poll) -> R) -> R {
        let mut queue = std::mem::take(&mut self.queued);
        let r = f(self, &mut Poll(&mut queue));
        queue.append(&mut self.queued);
        self.queued = queue;
        r
    }
}

pub fn symbolizer_of(st: &mut DumpState) -> &mut Symbolizer {
    symbolizer_of_parts(&mut st.symbolizer)
}

fn symbolizer_of_parts(symbolizer: &mut Option<Symbolizer>) -> &mut Symbolizer {
    symbolizer.get_or_insert_with(|| {
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

/// The live samples at one moment, summed per stack before anything else
/// of a dump happens (symbolizing, writing), so a dump shows the heap as it
/// was when it was asked for.
pub struct Snapshot {
    /// Per stack id.
    pub stacks: Vec<live::StackSum>,
    /// When the copy began (monotonic).
    pub at_ns: u64,
    /// How long the copy took.
    pub took_ns: u64,
    /// False when heaplive could not get memory for the whole copy.
    pub complete: bool,
    /// The live samples by stack and size class, when the dump writes a
    /// samples file (its size rows).
    pub sizes: Option<live::Sizes>,
}

impl Snapshot {
    pub const fn new() -> Snapshot {
        Snapshot {
            stacks: Vec::new(),
            at_ns: 0,
            took_ns: 0,
            complete: false,
            sizes: None,
        }
    }

    /// Sums the live table now (the buffer is kept for the next time).
    pub fn take(&mut self) {
        let t0 = sys::now_nanos();
        self.at_ns = t0;
        let cfg = config::get();
        // The samples file's size rows.
        if samples_file_wanted() {
            self.sizes.get_or_insert_with(live::Sizes::default);
        } else {
            self.sizes = None;
        }
        self.complete =
            live::sum_by_stack(&mut self.stacks, cfg.interval, self.sizes.as_mut()).is_some();
        if !self.complete {
            self.stacks.clear();
        }
        self.took_ns = sys::now_nanos().saturating_sub(t0);
    }

    /// After a dump: gives the buffer back unless it is small (a program
    /// with very many stacks).
    pub fn release(&mut self) {
        if self.stacks.capacity() > KEEP_SNAPSHOT_STACKS {
            self.stacks = Vec::new();
        }
        if let Some(z) = &mut self.sizes {
            z.release(KEEP_SNAPSHOT_STACKS);
        }
    }
}

/// Whether dumps write a samples file: sampled mode with the `samples`
/// view, or the `sizes` or `temporary` view (exact mode too: their size
/// and lifetime rows).
pub(super) fn samples_file_wanted() -> bool {
    let cfg = config::get();
    cfg.views.samples && cfg.interval > 1 || cfg.views.sizes || cfg.views.temporary
}

/// Per stack: what a profile's sample carries.
#[derive(Clone, Copy, Default)]
struct Vals {
    bytes: f64,
    blocks: f64,
    alloc_bytes: u64,
    alloc_blocks: u64,
    samples: u64,
    /// Estimated variances of `bytes` and `alloc_bytes` (bytes squared).
    variance: f64,
    alloc_variance: f64,
    /// The temporary view: bytes freed per lifetime class
    /// (`live::FREED_1MS`.. `live::TEMPORARY`), and variances.
    freed: [u64; 4],
    freed_blocks: [u64; 4],
    freed_variance: [f64; 4],
}

/// What a dump shows: the stacks live now (with their allocation view), or
/// the stacks at the peak.
#[derive(Clone, Copy)]
pub enum Which<'a> {
    /// The snapshot's sums, per stack id.
    Live(&'a [live::StackSum]),
    Peak,
    /// Amounts per stack (bytes, milli-blocks, variance units) copied
    /// elsewhere: the stacks at a PHP request's peak.
    Stacks(&'a [(stacks::StackId, i64, i64, i64)]),
}

/// Builds the profile of what is live now (and allocated since start), or
/// of the peak. Also returns the estimated variance of the live total
/// (bytes squared; 0 in exact mode): the sum over live samples of
/// `w^2 (1 - p)`, `w = s/p` the weight of a sample of `s` bytes.
pub(super) fn build_profile(
    st: &mut DumpState,
    which: Which,
    sizes: Option<&live::Sizes>,
    poll: &mut Poll,
) -> std::io::Result<(Profile, f64)> {
    let cfg = config::get();
    let mut per_stack: HashMap<stacks::StackId, Vals> = HashMap::new();
    let want = match which {
        Which::Live(sums) => sums.iter().filter(|s| s.samples > 0).count(),
        Which::Peak => 0,
        Which::Stacks(v) => v.len(),
    };
    if per_stack.try_reserve(want.min(1 << 20)).is_err() {
        return Err(no_memory());
    }
    let mut variance = 0.0;
    let live_peak_follows = matches!(which, Which::Live(_)) && cfg.views.peak;
    match which {
        Which::Live(sums) => {
            for (id, s) in sums.iter().enumerate().filter(|(_, s)| s.samples > 0) {
                let a = per_stack.entry(id as stacks::StackId).or_default();
                a.bytes = s.bytes;
                a.blocks = s.blocks;
                a.samples = s.samples;
                a.variance = s.variance;
                variance += s.variance;
            }
            // The stacks that only allocated (nothing live) matter only to
            // the files that show allocations: without them, a dump does
            // not symbolize every stack ever sampled (at a php-cli exit,
            // with nothing live, that was most of the dump's time: libc's
            // compressed DWARF read for frames no file shows).
            let alloc_wanted = cfg.views.alloc || cfg.pprof || cfg.views.temporary;
            for id in (1..stacks::count()).filter(|_| alloc_wanted) {
                if let Some(s) = stacks::slot(id) {
                    if cfg.views.temporary {
                        let freed = s.freed.each_ref().map(|f| f.bytes.load(Relaxed));
                        if freed.iter().any(|&b| b > 0) {
                            let a = per_stack.entry(id).or_default();
                            a.freed = freed;
                            a.freed_blocks = s
                                .freed
                                .each_ref()
                                .map(|f| (f.milliblocks.load(Relaxed) + 500) / 1000);
                            a.freed_variance = s.freed.each_ref().map(|f| {
                                crate::hot::sampler::variance_of_units(
                                    f.variance.load(Relaxed) as f64,
                                    cfg.interval,
                                )
                            });
                        }
                    }
                    let b = s.alloc_bytes.load(Relaxed);
                    if b > 0 {
                        let a = per_stack.entry(id).or_default();
                        a.alloc_bytes = b;
                        a.alloc_blocks = (s.alloc_milliblocks.load(Relaxed) + 500) / 1000;
                        a.alloc_variance = crate::hot::sampler::variance_of_units(
                            s.alloc_variance.load(Relaxed) as f64,
                            cfg.interval,
                        );
                    }
                }
            }
        }
        Which::Peak | Which::Stacks(_) => {
            // A stack's amounts at a moment (bytes, milli-blocks, variance
            // units): the peak's frozen copy, or the ones given.
            let mut put = |id: stacks::StackId, b: i64, m: i64, v: i64| {
                if b > 0 {
                    let a = per_stack.entry(id).or_default();
                    a.bytes = b as f64;
                    a.blocks = m.max(0) as f64 / 1000.0;
                    a.variance = crate::hot::sampler::variance_of_units(v as f64, cfg.interval);
                    variance += a.variance;
                }
            };
            if let Which::Stacks(v) = which {
                for &(id, b, m, v) in v {
                    put(id, b, m, v);
                }
            } else {
                for id in 1..stacks::count() {
                    if let Some(s) = stacks::slot(id) {
                        let (b, m, v) = s.peak();
                        put(id, b, m, v);
                    }
                }
            }
        }
    }

    crate::symbolize::modules::refresh();
    let mut poll = || poll.due();
    poll();
    let sym = symbolizer_of_parts(&mut st.symbolizer);
    let mut loc_of: HashMap<usize, usize> = HashMap::new();
    let mut locations: Vec<Location> = Vec::new();
    let mut samples = Vec::with_capacity(per_stack.len());
    let mut ids: Vec<_> = per_stack.into_iter().collect();
    ids.sort_by_key(|(id, _)| *id);
    // Every address first, module by module, so that one module's debug
    // information is held at a time (and only its units that these
    // addresses fall in); the loop below then finds each answer cached.
    let mut wanted = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (id, _) in &ids {
        for &ip in stacks::frames(*id) {
            if !names::is_pseudo(ip) && seen.insert(ip) {
                wanted.push((ip as u64).saturating_sub(1));
            }
        }
    }
    if live_peak_follows {
        // The peak view that follows (at exit) has stacks of an earlier
        // time: their addresses too, so that a module's debug information
        // (libc's compressed DWARF) is read once for both files.
        for id in 1..stacks::count() {
            if stacks::slot(id).is_some_and(|s| s.peak_bytes.load(Relaxed) > 0) {
                for &ip in stacks::frames(id) {
                    if !names::is_pseudo(ip) && seen.insert(ip) {
                        wanted.push((ip as u64).saturating_sub(1));
                    }
                }
            }
        }
    }
    drop(seen);
    sym.prefetch(&wanted, &mut poll);
    drop(wanted);
    // Each stack's size classes (the samples file's size rows), smallest
    // first.
    let mut sizes_of: HashMap<stacks::StackId, Vec<(u64, u64, f64)>> = HashMap::new();
    if let Some(z) = sizes.filter(|z| z.complete) {
        for (&key, &(n, bytes)) in &z.by_stack {
            let (id, class) = live::Sizes::unkey(key);
            sizes_of
                .entry(id)
                .or_default()
                .push((live::Sizes::class_low(class), n, bytes));
        }
    }
    for (id, v) in ids {
        // The kernel refused memory and the dump lives on its reserve
        // (`hot::ownheap`): give up before it runs out.
        if ownheap::reserve_low() {
            return Err(no_memory());
        }
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
                            }]
                            .into(),
                        });
                        return locations.len() - 1;
                    }
                    // Return addresses point after the call.
                    let addr = (ip as u64).saturating_sub(1);
                    let (mapping, frames) = sym.lookup_polling(addr, &mut poll);
                    locations.push(Location {
                        address: addr,
                        mapping,
                        frames,
                    });
                    locations.len() - 1
                })
            })
            .collect();
        poll();
        samples.push(Sample {
            locations: locs,
            bytes: v.bytes.round() as u64,
            blocks: v.blocks.round() as u64,
            alloc_bytes: v.alloc_bytes,
            alloc_blocks: v.alloc_blocks,
            samples: v.samples,
            variance: v.variance,
            alloc_variance: v.alloc_variance,
            freed: v.freed,
            freed_blocks: v.freed_blocks,
            freed_variance: v.freed_variance,
            sizes: sizes_of
                .remove(&id)
                .map(|mut c| {
                    c.sort_by_key(|c| c.0);
                    c
                })
                .unwrap_or_default(),
        });
    }
    let started = STARTED_NS.load(Relaxed);
    let mut mappings = sym.mappings();
    sym.release_debug_info();
    main_mapping_first(&mut mappings, &mut locations);
    let mut profile = Profile {
        mappings,
        locations,
        samples,
        sample_interval: cfg.interval,
        time_nanos: sys::wall_nanos(),
        duration_nanos: sys::now_nanos().saturating_sub(started) as i64,
        lines: cfg.lines,
    };
    crate::background::runtime_pools::mark(&mut profile);
    Ok((profile, variance))
}

/// heaplive's own heap could not grow (`hot::ownheap`).
pub(super) fn no_memory() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::OutOfMemory,
        "heaplive's own memory could not grow (the kernel refused a mapping)",
    )
}

/// pprof takes the first mapping for the main binary (`File:` in its
/// reports): move the executable's mapping first, renumbering locations.
fn main_mapping_first(
    mappings: &mut Vec<crate::background::profile::Mapping>,
    locations: &mut [Location],
) {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
        return;
    };
    let exe = exe.display().to_string();
    let Some(i) = mappings.iter().position(|m| m.path == exe) else {
        return;
    };
    if i == 0 {
        return;
    }
    let m = mappings.remove(i);
    mappings.insert(0, m);
    for l in locations {
        l.mapping = l.mapping.map(|j| match j {
            j if j == i => 0,
            j if j < i => j + 1,
            j => j,
        });
    }
}

/// Snapshots now and writes the next dump. `path`: an explicit file
/// (heaplive_dump), else the next name of the template. The caller must
/// hold the guard.
pub fn dump_locked(st: &mut DumpState, path: Option<&Path>, why: &str) -> std::io::Result<Written> {
    let mut snap = Snapshot {
        stacks: std::mem::take(&mut st.sums),
        at_ns: 0,
        took_ns: 0,
        complete: false,
        sizes: st.sizes.take(),
    };
    snap.take();
    let r = write_locked(st, &snap, path, why);
    snap.release();
    st.sums = snap.stacks;
    st.sizes = snap.sizes;
    r
}

/// The largest snapshot buffer kept between dumps (stacks; 32 bytes each).
const KEEP_SNAPSHOT_STACKS: usize = 16 << 10;

/// Writes the snapshots queued while earlier dumps were built
/// (`dumper::poll_signals`) that were taken before `before_ns`, oldest
/// first, failures reported in one line each. Nothing once the exit dump
/// began.
pub fn write_queued(st: &mut DumpState, before_ns: u64) {
    if !FINISHING.load(SeqCst) {
        // A signal that waited for heaplive's thread comes before any.
        crate::background::dumper::write_early(st);
    }
    while st.queued.front().is_some_and(|q| q.at_ns < before_ns) {
        let Some(q) = st.queued.pop_front() else {
            break;
        };
        if FINISHING.load(SeqCst) {
            continue;
        }
        let _ = report(write_locked(st, &q, None, "signal"), "signal");
    }
}

/// Writes the next dump of `snap`, as `dump_locked`.
pub fn write_locked(
    st: &mut DumpState,
    snap: &Snapshot,
    path: Option<&Path>,
    why: &str,
) -> std::io::Result<Written> {
    let r = write_view(st, Which::Live(&snap.stacks), snap, path, why, &|_, _| {
        String::new()
    });
    st.status.note_failure(&r, why, st.dumps);
    r
}

/// Enters heaplive's guard and takes the dump lock for a dump of `why` to
/// `path` (the guard is released after the lock). Refused in a child
/// forked while heaplive's state was mid-change (see `hot::forking`:
/// nothing trustworthy to write; EAGAIN), and once the exit dump began,
/// except for an explicit path or the exit dump itself (ESHUTDOWN).
fn enter_dump(
    path: Option<&Path>,
    why: &str,
) -> std::io::Result<(
    crate::hot::guard::Busy,
    crate::hot::lock::Locked<'static, DumpState>,
)> {
    if crate::hot::forking::inert() {
        return Err(std::io::Error::from_raw_os_error(libc::EAGAIN));
    }
    let busy = crate::hot::guard::Busy::enter();
    let st = DUMP.lock();
    if FINISHING.load(SeqCst) && path.is_none() && why != "exit" {
        return Err(std::io::Error::from_raw_os_error(libc::ESHUTDOWN));
    }
    Ok((busy, st))
}

/// Takes the dump lock and dumps, reporting failures in one line.
pub fn dump(path: Option<&Path>, why: &str) -> std::io::Result<Written> {
    let (_busy, mut st) = enter_dump(path, why)?;
    // The kernel refused heaplive memory before: try once more, else give
    // up before asking for more (the program runs on).
    write_queued(&mut st, u64::MAX);
    let r = if ownheap::retry_memory() {
        dump_locked(&mut st, path, why)
    } else {
        Err(no_memory())
    };
    let r = report(r, why);
    write_queued(&mut st, u64::MAX);
    r
}

/// Writes `snap` (taken before the dump lock, which a dump in progress may
/// hold for a while), reporting failures in one line.
pub fn dump_snapshot(snap: &Snapshot, path: Option<&Path>, why: &str) -> std::io::Result<Written> {
    let (_busy, mut st) = enter_dump(path, why)?;
    write_queued(&mut st, snap.at_ns);
    let r = report(write_locked(&mut st, snap, path, why), why);
    write_queued(&mut st, u64::MAX);
    r
}

/// Reports a failed dump in one line.
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

/// In a forked child: files count from 1 again, the parent's queue goes.
pub fn reset_after_fork(st: &mut DumpState) {
    (st.seq, st.dumps, st.status) = (0, 0, output::StatusNote::EMPTY);
    st.forked = true;
    // The parent's: its dumps, not the child's.
    st.queued.clear();
    crate::background::dumper::forget_early();
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

/// Resident bytes of heaplive's tables (live samples, stacks, shadow
/// bitmap, unwind cache) and of its own heap (`sys::resident`), for the
/// dump's log line: heaplive's share of the process's RSS. Exact mode
/// keeps an entry per live block: tens of MiB for a few million blocks,
/// which the line must not hide.
pub(super) fn own_resident() -> (usize, usize) {
    let mut pages = Vec::new();
    if pages.try_reserve_exact(4096).is_err() {
        return (0, 0);
    }
    pages.resize(4096, 0u8);
    sys::resident(&mut pages)
}
