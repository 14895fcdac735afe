//! Writing one dump, as a pipeline of named steps: where it goes
//! (`Target::choose`), what it holds (`gather`: resident memory, then the
//! profile, symbolized), the files (`write_files`: the live view and the
//! views beside it, pprof), what goes beside them (`write_beside`: the
//! timeline's mark, the maps file) and the summary line (`summary`). The
//! poll for pending signals is handed to each step once, by `write_view`.

use super::dump::*;
use crate::background::output;
use crate::background::profile::Profile;
use crate::hot::{config, log, ownheap, sys};
use std::path::{Path, PathBuf};

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
    let t0 = sys::now_nanos();
    st.polling(|st, poll| {
        let live_view = matches!(which, Which::Live(_));
        let target = Target::choose(st, path, why);
        if live_view && !snap.complete {
            return Err(no_memory());
        }
        let got = gather(st, which, snap, live_view, poll)?;
        if let Some(skipped) = skip_empty_exit(st, &target, &got, why, live_view, poll)? {
            return Ok(skipped);
        }
        let files = write_files(st, &target, &got.profile, why, live_view, poll)?;
        poll.now();
        // An explicit path is the caller's: it does not use up a `%n` number.
        if !target.explicit {
            st.seq = target.n;
        }
        let ms = (sys::now_nanos() - t0) as f64 / 1e6;
        write_beside(
            &target,
            &files.written,
            got.smaps.as_deref(),
            why,
            live_view,
        );
        summary(got, &files, snap, why, live_view, note, ms);
        st.dumps = (st.dumps + 1).max(if target.explicit { 0 } else { target.n });
        st.status.written(&files.written, st.dumps);
        Ok(Written {
            path: files.written,
            total: files.total,
            peak: files.peak.map(|(p, _)| p),
            skipped: false,
        })
    })
}

/// Where a dump goes: the file (`path`, an explicit file, or the next
/// name of the template), its number, and where it goes when its own
/// place is refused (`$TMPDIR`).
struct Target {
    path: PathBuf,
    n: u32,
    explicit: bool,
    /// A PHP request's peak dump, told apart by its name,
    /// `NAME.request.folded` (its samples and maps files follow it), so
    /// that `heaplive top --endpoints DIR` reads those alone.
    request: bool,
}

impl Target {
    fn choose(st: &DumpState, path: Option<&Path>, why: &str) -> Target {
        let mut t = Target {
            path: PathBuf::new(),
            n: st.seq + 1,
            explicit: path.is_some(),
            request: why == REQUEST_PEAK,
        };
        t.path = match path {
            Some(p) => p.to_path_buf(),
            None => {
                // The same pid may have dumped before an exec (php-fpm's
                // master re-executes itself on reload): never overwrite its
                // files.
                if config::get().output_template().contains("%n") {
                    while t.n < st.seq + 10_000 && (t.name(t.n).exists() || t.alt(t.n).exists()) {
                        t.n += 1;
                    }
                }
                t.name(t.n)
            }
        };
        t
    }

    /// The template's name of dump `n`.
    fn name(&self, n: u32) -> PathBuf {
        let cfg = config::get();
        let file = output::expand(cfg.output_template(), sys::getpid(), cfg.exe.as_str(), n);
        self.in_dir(cfg.start_dir.as_str(), file)
    }

    /// Where dump `n` goes when its own place is refused (`$TMPDIR`).
    fn alt(&self, n: u32) -> PathBuf {
        let cfg = config::get();
        let file = output::fallback_name(cfg.output_template(), sys::getpid(), cfg.exe.as_str(), n);
        self.in_dir(cfg.tmpdir.as_str(), file)
    }

    fn in_dir(&self, dir: &str, file: impl AsRef<Path>) -> PathBuf {
        let p = Path::new(dir).join(file);
        if self.request {
            view_path(&p, "request")
        } else {
            p
        }
    }
}

/// What a dump holds: the resident memory by kind (and the smaps text
/// behind it) read at the snapshot, the profile and its variance, and the
/// runtimes' pools among its bytes (held for the process's life) with
/// what the summary line says of them.
struct Gathered {
    rss: String,
    smaps: Option<String>,
    profile: Profile,
    variance: f64,
    pool_bytes: u64,
    pools_text: String,
}

/// Reads the resident memory, then builds and symbolizes the profile.
fn gather(
    st: &mut DumpState,
    which: Which,
    snap: &Snapshot,
    live_view: bool,
    poll: &mut Poll,
) -> std::io::Result<Gathered> {
    // Where the resident memory is, by kind (ZendMM in PHP mode; in PHP
    // mode also in NAME.maps.txt beside the dump): read now, at the
    // snapshot, not after symbolizing (which can take a second, long
    // enough for a request to end).
    let (rss, smaps) = crate::background::rss::describe();
    let sizes = snap.sizes.as_ref().filter(|_| live_view);
    let (profile, variance) = build_profile(st, which, sizes, poll)?;
    if ownheap::reserve_low() {
        return Err(no_memory());
    }
    poll.due();
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
    Ok(Gathered {
        rss,
        smaps,
        profile,
        variance,
        pool_bytes,
        pools_text,
    })
}

/// A worker's (a fork's child's) exit dump with nothing of the program's
/// live: no file that would be empty (a pool's workers exit by the
/// thousand: pm.max_requests, pm=ondemand), one line. The peak file,
/// when the peak was above what is live now, still goes where the dump
/// would. None: the dump is to be written.
fn skip_empty_exit(
    st: &mut DumpState,
    target: &Target,
    got: &Gathered,
    why: &str,
    live_view: bool,
    poll: &mut Poll,
) -> std::io::Result<Option<Written>> {
    let cfg = config::get();
    let total = got.profile.total_bytes();
    if !(live_view
        && why == "exit"
        && !target.explicit
        && st.forked
        && !cfg.dump_empty
        && total <= got.pool_bytes)
    {
        return Ok(None);
    }
    let peak = if cfg.folded {
        write_exit_peak(st, &target.path, total, poll)?
    } else {
        None
    };
    log::line(format_args!(
        "heaplive[{}]: exit dump skipped: nothing live{} (HEAPLIVE_DUMP_EMPTY=1 writes it)",
        sys::getpid(),
        got.pools_text
    ));
    Ok(Some(Written {
        path: target.path.clone(),
        total,
        peak: peak.map(|(p, _)| p),
        skipped: true,
    }))
}

/// The files a dump wrote: the first (the live view, or the pprof file
/// alone), the others for the summary line (" and PATH" each), the exit
/// peak's file and profile, and the total.
struct Files {
    written: PathBuf,
    also: String,
    peak: Option<(PathBuf, Profile)>,
    total: u64,
}

/// Writes the dump's files: the live view (folded) and the views beside
/// it, then the pprof file, as the settings ask.
fn write_files(
    st: &mut DumpState,
    target: &Target,
    profile: &Profile,
    why: &str,
    live_view: bool,
    poll: &mut Poll,
) -> std::io::Result<Files> {
    let cfg = config::get();
    let total = profile.total_bytes();
    let mut written: Option<PathBuf> = None;
    let mut also = String::new();
    let mut peak: Option<(PathBuf, Profile)> = None;
    if cfg.folded || target.explicit && !cfg.pprof {
        let mut fill =
            |w: &mut dyn std::io::Write| crate::background::folded::write_folded(profile, w);
        let live_file = if target.explicit {
            output::write_explicit(&target.path, &mut fill)?
        } else {
            output::write_with_fallback_as(
                &target.path,
                alt_name(&target.alt(target.n)),
                &mut fill,
            )?
        };
        poll.due();
        // The other views, named after the live file (where it went).
        peak = write_views(
            st, target, &live_file, profile, why, live_view, &mut also, poll,
        )?;
        written = Some(live_file);
    }
    if cfg.pprof {
        poll.due();
        let pb = output::pprof_name(&target.path);
        let mut fill = |w: &mut dyn std::io::Write| {
            crate::background::pprof::write_pprof(profile, &mut WriteRef(w))
        };
        let p = if target.explicit {
            output::write_explicit(&pb, &mut fill)?
        } else {
            let alt = output::pprof_name(&target.alt(target.n));
            output::write_with_fallback_as(&pb, alt_name(&alt), &mut fill)?
        };
        if written.is_some() {
            also += &format!(" and {}", p.display());
        } else {
            written = Some(p);
        }
    }
    if live_view && why == "exit" && written.is_some() && peak.is_none() && !cfg.folded {
        // pprof only: the peak file still goes beside the dump's name.
        peak = write_exit_peak(st, &target.path, total, poll)?;
    }
    Ok(Files {
        written: written.unwrap_or_else(|| target.path.clone()),
        also,
        peak,
        total,
    })
}

/// The views beside the live file `live_file` (alloc, temporary, the exit
/// peak, variances, app frames, samples), each added to `also`; the exit
/// peak's file and profile when written.
#[allow(clippy::too_many_arguments)]
fn write_views(
    st: &mut DumpState,
    target: &Target,
    live_file: &Path,
    profile: &Profile,
    why: &str,
    live_view: bool,
    also: &mut String,
    poll: &mut Poll,
) -> std::io::Result<Option<(PathBuf, Profile)>> {
    let cfg = config::get();
    let total = profile.total_bytes();
    let mut peak = None;
    if cfg.views.alloc && live_view {
        let p = output::write_with_fallback(&view_path(live_file, "alloc"), &mut |w| {
            crate::background::folded::write_folded_by(profile, |s| s.alloc_bytes, w)
        })?;
        *also += &format!(" and {}", p.display());
    }
    if cfg.views.temporary && live_view {
        let p = output::write_with_fallback(&view_path(live_file, "temporary"), &mut |w| {
            crate::background::folded::write_folded_by(
                profile,
                |s| s.freed[crate::hot::live::TEMPORARY],
                w,
            )
        })?;
        *also += &format!(" and {}", p.display());
    }
    // At exit, when the peak was above the live total now: the stacks at
    // the peak (`NAME.peak.folded`), before the samples file that carries
    // their variances.
    if live_view && why == "exit" {
        peak = write_exit_peak(st, live_file, total, poll)?;
    }
    if cfg.views.variance && cfg.interval > 1 {
        // The error bars of each file written: its variance per stack (the
        // samples file carries them too).
        write_variance(live_file, "variance", profile, |s| s.variance)?;
        if live_view && cfg.views.alloc {
            write_variance(live_file, "alloc.variance", profile, |s| s.alloc_variance)?;
        }
        if live_view && cfg.views.temporary {
            write_variance(live_file, "temporary.variance", profile, |s| {
                s.freed_variance[crate::hot::live::TEMPORARY]
            })?;
        }
        if let Some((_, pp)) = &peak {
            write_variance(live_file, "peak.variance", pp, |s| s.variance)?;
        }
    }
    if cfg.views.app {
        // The executable's frames of every file of the dump (`top --app`).
        let mut of = vec![profile];
        of.extend(peak.as_ref().map(|(_, pp)| pp));
        write_app_frames(live_file, &of, target.explicit);
    }
    if samples_file_wanted() {
        let peak_profile = peak.as_ref().map(|(_, pp)| pp);
        output::write_with_fallback(&view_path(live_file, "samples"), &mut |w| {
            samples_file(
                profile,
                live_view,
                live_view && cfg.views.alloc,
                peak_profile,
            )
            .write(w)
        })?;
    }
    Ok(peak)
}

/// What goes beside a written dump: the timeline's mark and, beside live
/// dumps and a request's peak dump, the maps file.
fn write_beside(target: &Target, written: &Path, smaps: Option<&str>, why: &str, live_view: bool) {
    let cfg = config::get();
    crate::background::timeline::at_dump(written, target.n, why, smaps, target.explicit);
    // Beside live dumps only: a peak view's stacks are of an earlier time.
    // And beside a request's peak dump: the memory when it was written,
    // just after the request (what ZendMM kept of it, opcache, malloc).
    if let Some(smaps) =
        smaps.filter(|_| (live_view || target.request) && crate::background::rss::wanted())
    {
        write_maps(
            written,
            smaps,
            why,
            sys::getpid(),
            cfg.exe.as_str(),
            target.n,
            target.explicit,
        );
    }
}

/// The dump's summary line (`ms`: the time the dump took). heaplive's
/// memory is read after the profile (every stack's frames and names) is
/// given back; what stays is the symbolizer's answers and the tables.
fn summary(
    got: Gathered,
    files: &Files,
    snap: &Snapshot,
    why: &str,
    live_view: bool,
    note: &dyn Fn(u64, &Profile) -> String,
    ms: f64,
) {
    let cfg = config::get();
    let total = files.total;
    let note = note(total, &got.profile);
    let samples: u64 = snap.stacks.iter().map(|s| s.samples).sum();
    let stacks = got.profile.samples.len() as u64;
    drop(got.profile);
    ownheap::give_back_free_pages();
    let own = ownheap::usage();
    let (tables, heap) = own_resident();
    log::line(format_args!(
        "heaplive[{}]: {} dump {}{}: {}{} live{}{} in {} samples over {} stacks; {} (heaplive {}: tables {}, heap {}, {} in use); snapshot {:.2} ms, took {:.1} ms",
        sys::getpid(),
        why,
        files.written.display(),
        files.also,
        note,
        log::human_bytes(total as f64),
        if cfg.interval > 1 && live_view {
            format!(
                " (estimate{}; a stack with no sample holds under {})",
                error_text(total as f64, got.variance),
                log::human_bytes(heaplive_format::stats::unseen_bound(cfg.interval as f64))
            )
        } else if cfg.interval > 1 {
            " (estimate)".to_string()
        } else {
            " (exact)".to_string()
        },
        got.pools_text,
        log::Grouped(samples),
        log::Grouped(stacks),
        got.rss,
        log::human_bytes((tables + heap) as f64),
        log::human_bytes(tables as f64),
        log::human_bytes(heap as f64),
        log::human_bytes(own.in_use as f64),
        snap.took_ns as f64 / 1e6,
        ms
    ));
    crate::symbolize::hint_no_symbols(cfg.exe.as_str());
}
