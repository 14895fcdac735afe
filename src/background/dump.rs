//! Building and writing a dump: snapshot the live table, group samples by
//! stack, symbolize each distinct address once (cached across dumps), write
//! the files and the summary line.
//!
//! Every dump runs with the thread's guard set, under one dump lock
//! (`Rank::Dump`) that is never taken on an allocation path.

pub use crate::background::dump_files::*;
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
    status: output::StatusNote,
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
fn samples_file_wanted() -> bool {
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
        Which::Peak => {
            for id in 1..stacks::count() {
                if let Some(s) = stacks::slot(id) {
                    let (b, m, v) = s.peak();
                    if b > 0 {
                        let a = per_stack.entry(id).or_default();
                        a.bytes = b as f64;
                        a.blocks = m.max(0) as f64 / 1000.0;
                        a.variance = crate::hot::sampler::variance_of_units(v as f64, cfg.interval);
                        variance += a.variance;
                    }
                }
            }
        }
        Which::Stacks(v) => {
            for &(id, b, m, var) in v {
                if b > 0 {
                    let a = per_stack.entry(id).or_default();
                    a.bytes = b as f64;
                    a.blocks = m.max(0) as f64 / 1000.0;
                    a.variance = crate::hot::sampler::variance_of_units(var as f64, cfg.interval);
                    variance += a.variance;
                }
            }
        }
    }

    crate::symbolize::modules::refresh();
    let queued = &mut st.queued;
    let mut poll = || crate::background::dumper::poll_signals(queued);
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
fn no_memory() -> std::io::Error {
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

/// Writes the next dump of `which` (`snap`: the live snapshot it comes
/// from, for its completeness and timing). `note` makes the text put
/// after the path in the summary line, from the total and the profile.
pub fn write_view(
    st: &mut DumpState,
    which: Which,
    snap: &Snapshot,
    path: Option<&Path>,
    why: &str,
    note: &dyn Fn(u64, &Profile) -> String,
) -> std::io::Result<Written> {
    // Memory the kernel cannot refuse the dump midway (`hot::ownheap`).
    let Some(_reserve) = ownheap::Reserve::take() else {
        return Err(no_memory());
    };
    let live_view = matches!(which, Which::Live(_));
    let t0 = sys::now_nanos();
    let cfg = config::get();
    let pid = sys::getpid();
    let mut n = st.seq + 1;
    let template = cfg.output_template();
    // A PHP request's peak dump is told apart by its name,
    // `NAME.request.folded` (its samples and maps files follow it), so
    // that `heaplive top --endpoints DIR` reads those alone.
    let request = why == REQUEST_PEAK;
    let name_for = |n: u32| {
        let p = Path::new(cfg.start_dir.as_str()).join(output::expand(
            template,
            pid,
            cfg.exe.as_str(),
            n,
        ));
        if request { view_path(&p, "request") } else { p }
    };
    // Where dump `n` goes when its own place is refused (`$TMPDIR`).
    let alt_for = |n: u32| {
        let a = Path::new(cfg.tmpdir.as_str()).join(output::fallback_name(
            template,
            pid,
            cfg.exe.as_str(),
            n,
        ));
        if request { view_path(&a, "request") } else { a }
    };
    let target = match path {
        Some(p) => p.to_path_buf(),
        None => {
            // The same pid may have dumped before an exec (php-fpm's master
            // re-executes itself on reload): never overwrite its files.
            if template.contains("%n") {
                while n < st.seq + 10_000 && (name_for(n).exists() || alt_for(n).exists()) {
                    n += 1;
                }
            }
            name_for(n)
        }
    };
    if live_view && !snap.complete {
        return Err(no_memory());
    }
    // Where the resident memory is, by kind (ZendMM in PHP mode; in PHP
    // mode also in NAME.maps.txt beside the dump): read now, at the
    // snapshot, not after symbolizing (which can take a second, long
    // enough for a request to end).
    let (rss, smaps) = crate::background::rss::describe();
    let (profile, variance) = build_profile(st, which, snap.sizes.as_ref().filter(|_| live_view))?;
    if ownheap::reserve_low() {
        return Err(no_memory());
    }
    crate::background::dumper::poll_signals(&mut st.queued);
    let total = profile.total_bytes();
    let (pool_bytes, pools) = crate::background::runtime_pools::held(&profile);
    let pools_text = if pool_bytes > 0 {
        format!(
            "; runtime pools {} apart ({}: held for the process's life, not a leak)",
            log::human_bytes(pool_bytes as f64),
            pools.join(", ")
        )
    } else {
        String::new()
    };
    if live_view
        && why == "exit"
        && path.is_none()
        && st.forked
        && !cfg.dump_empty
        && total <= pool_bytes
    {
        // A worker (a fork's child) with nothing of the program's live: no
        // file that would be empty (a pool's workers exit by the thousand:
        // pm.max_requests, pm=ondemand). The peak file, when the peak was
        // above what is live now, still goes where the dump would.
        let peak = if cfg.folded {
            write_exit_peak(st, &target, total)?
        } else {
            None
        };
        log::line(format_args!(
            "heaplive[{}]: exit dump skipped: nothing live{} (HEAPLIVE_DUMP_EMPTY=1 writes it)",
            pid, pools_text
        ));
        return Ok(Written {
            path: target,
            total,
            peak: peak.map(|(p, _)| p),
            skipped: true,
        });
    }
    let note = note(total, &profile);
    let mut written: Option<PathBuf> = None;
    let mut also = String::new();
    let mut peak: Option<(PathBuf, Profile)> = None;
    if cfg.folded || path.is_some() && !cfg.pprof {
        let mut fill =
            |w: &mut dyn std::io::Write| crate::background::folded::write_folded(&profile, w);
        written = Some(match path {
            Some(_) => output::write_explicit(&target, &mut fill)?,
            None => output::write_with_fallback_as(&target, alt_name(&alt_for(n)), &mut fill)?,
        });
        crate::background::dumper::poll_signals(&mut st.queued);
        // The other views, named after the live file (where it went).
        let live_file = written.clone().unwrap_or_else(|| target.clone());
        if cfg.views.alloc && live_view {
            let p = output::write_with_fallback(&view_path(&live_file, "alloc"), &mut |w| {
                crate::background::folded::write_folded_by(&profile, |s| s.alloc_bytes, w)
            })?;
            also += &format!(" and {}", p.display());
        }
        if cfg.views.temporary && live_view {
            let p = output::write_with_fallback(&view_path(&live_file, "temporary"), &mut |w| {
                crate::background::folded::write_folded_by(
                    &profile,
                    |s| s.freed[crate::hot::live::TEMPORARY],
                    w,
                )
            })?;
            also += &format!(" and {}", p.display());
        }
        // At exit, when the peak was above the live total now: the stacks
        // at the peak (`NAME.peak.folded`), before the samples file that
        // carries their variances.
        if live_view && why == "exit" {
            peak = write_exit_peak(st, &live_file, total)?;
        }
        if cfg.views.variance && cfg.interval > 1 {
            // The error bars of each file written: its variance per stack
            // (the samples file carries them too).
            write_variance(&live_file, "variance", &profile, |s| s.variance)?;
            if live_view && cfg.views.alloc {
                write_variance(&live_file, "alloc.variance", &profile, |s| s.alloc_variance)?;
            }
            if live_view && cfg.views.temporary {
                write_variance(&live_file, "temporary.variance", &profile, |s| {
                    s.freed_variance[crate::hot::live::TEMPORARY]
                })?;
            }
            if let Some((_, pp)) = &peak {
                write_variance(&live_file, "peak.variance", pp, |s| s.variance)?;
            }
        }
        if cfg.views.app {
            // The executable's frames of every file of the dump (`top --app`).
            let mut of = vec![&profile];
            of.extend(peak.as_ref().map(|(_, pp)| pp));
            write_app_frames(&live_file, &of, path.is_some());
        }
        if samples_file_wanted() {
            let peak_profile = peak.as_ref().map(|(_, pp)| pp);
            output::write_with_fallback(&view_path(&live_file, "samples"), &mut |w| {
                samples_file(
                    &profile,
                    live_view,
                    live_view && cfg.views.alloc,
                    peak_profile,
                )
                .write(w)
            })?;
        }
    }
    if cfg.pprof {
        crate::background::dumper::poll_signals(&mut st.queued);
        let pb = output::pprof_name(&target);
        let mut fill = |w: &mut dyn std::io::Write| {
            crate::background::pprof::write_pprof(&profile, &mut WriteRef(w))
        };
        let p = match path {
            Some(_) => output::write_explicit(&pb, &mut fill)?,
            None => output::write_with_fallback_as(
                &pb,
                alt_name(&output::pprof_name(&alt_for(n))),
                &mut fill,
            )?,
        };
        if written.is_some() {
            also += &format!(" and {}", p.display());
        } else {
            written = Some(p);
        }
    }
    if live_view && why == "exit" && written.is_some() && peak.is_none() && !cfg.folded {
        // pprof only: the peak file still goes beside the dump's name.
        peak = write_exit_peak(st, &target, total)?;
    }
    let written = written.unwrap_or(target);
    crate::background::dumper::poll_signals_now(&mut st.queued);
    // An explicit path is the caller's: it does not use up a `%n` number.
    if path.is_none() {
        st.seq = n;
    }
    let ms = (sys::now_nanos() - t0) as f64 / 1e6;
    let samples: u64 = snap.stacks.iter().map(|s| s.samples).sum();
    crate::background::timeline::at_dump(&written, n, why, smaps.as_deref(), path.is_some());
    // Beside live dumps only: a peak view's stacks are of an earlier time.
    // And beside a request's peak dump: the memory when it was written,
    // just after the request (what ZendMM kept of it, opcache, malloc).
    if let Some(smaps) =
        smaps.filter(|_| (live_view || request) && crate::background::rss::wanted())
    {
        write_maps(
            &written,
            &smaps,
            why,
            pid,
            cfg.exe.as_str(),
            n,
            path.is_some(),
        );
    }
    // heaplive's memory after the dump: the profile (every stack's frames
    // and names) is given back first; what stays is the symbolizer's
    // answers and the tables.
    let stacks = profile.samples.len() as u64;
    drop(profile);
    ownheap::give_back_free_pages();
    let own = ownheap::usage();
    let (tables, heap) = own_resident();
    log::line(format_args!(
        "heaplive[{}]: {} dump {}{}: {}{} live{}{} in {} samples over {} stacks; {} (heaplive {}: tables {}, heap {}, {} in use); snapshot {:.2} ms, took {:.1} ms",
        pid,
        why,
        written.display(),
        also,
        note,
        log::human_bytes(total as f64),
        if cfg.interval > 1 && live_view {
            format!(
                " (estimate{}; a stack with no sample holds under {})",
                error_text(total as f64, variance),
                log::human_bytes(heaplive_format::stats::unseen_bound(cfg.interval as f64))
            )
        } else if cfg.interval > 1 {
            " (estimate)".to_string()
        } else {
            " (exact)".to_string()
        },
        pools_text,
        log::Grouped(samples),
        log::Grouped(stacks),
        rss,
        log::human_bytes((tables + heap) as f64),
        log::human_bytes(tables as f64),
        log::human_bytes(heap as f64),
        log::human_bytes(own.in_use as f64),
        snap.took_ns as f64 / 1e6,
        ms
    ));
    crate::symbolize::hint_no_symbols(cfg.exe.as_str());
    st.dumps = (st.dumps + 1).max(if path.is_none() { n } else { 0 });
    st.status.written(&written, st.dumps);
    Ok(Written {
        path: written,
        total,
        peak: peak.map(|(p, _)| p),
        skipped: false,
    })
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
    write_queued(&mut st, snap.at_ns);
    let r = report(write_locked(&mut st, snap, path, why), why);
    write_queued(&mut st, u64::MAX);
    r
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
fn own_resident() -> (usize, usize) {
    let mut pages = Vec::new();
    if pages.try_reserve_exact(4096).is_err() {
        return (0, 0);
    }
    pages.resize(4096, 0u8);
    sys::resident(&mut pages)
}
