//! The dump's files beside the live view: the variance companions, the
//! mappings, the executable's frames (`NAME.app.txt`), the samples file,
//! the exit peak; and the small helpers the dump and its summary line
//! share (the top stack, a view's path, the error text).

use super::dump::*;
use crate::background::output;
use crate::background::profile::{Profile, Sample};
use crate::hot::{config, log, sys};
use std::path::{Path, PathBuf};

/// The stack holding the most bytes of a profile: its bytes, and its PHP
/// frames innermost first (`f (a.php:3) <- {main} (a.php:9)`, at most 4),
/// or its first native frames when it has none.
pub fn top_stack(p: &Profile) -> (u64, String) {
    let Some(top) = p.samples.iter().max_by_key(|s| s.bytes) else {
        return (0, String::new());
    };
    let name = |i: &usize| {
        p.locations
            .get(*i)
            .and_then(|l| l.frames.last().map(|f| (l, f.function.as_str())))
    };
    let php: Vec<&str> = top
        .locations
        .iter()
        .filter_map(name)
        .filter(|(l, f)| l.address == 0 && l.mapping.is_none() && !f.starts_with('['))
        .map(|(_, f)| f)
        .take(4)
        .collect();
    let frames = if php.is_empty() {
        top.locations
            .iter()
            .filter_map(name)
            .map(|(_, f)| f)
            .filter(|f| !f.starts_with('['))
            .take(3)
            .collect()
    } else {
        php
    };
    (top.bytes, frames.join(" <- "))
}

/// The file of a view next to the live file `folded`.
pub fn view_path(folded: &Path, view: &str) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let v = heaplive_format::template::view_name(folded.as_os_str().as_bytes(), view);
    PathBuf::from(std::ffi::OsStr::from_bytes(&v))
}

/// ` ± 12% (95%)`: the 95% interval of an estimate from its variance;
/// empty in exact mode.
pub fn error_text(total: f64, variance: f64) -> String {
    if config::get().interval <= 1 || total <= 0.0 {
        return String::new();
    }
    format!(" ± {:.1}% (95%)", 196.0 * variance.sqrt() / total)
}

/// Writes the variance companion `view` (`NAME.variance.folded` beside
/// `NAME.folded`, `NAME.alloc.variance.folded` beside
/// `NAME.alloc.folded`...) of `live_file`: per stack, the estimated
/// variance of its bytes, in bytes squared (stacks whose estimate is exact
/// have no line).
pub(super) fn write_variance(
    live_file: &Path,
    view: &str,
    profile: &Profile,
    value: fn(&Sample) -> f64,
) -> std::io::Result<PathBuf> {
    output::write_with_fallback(&view_path(live_file, view), &mut |w| {
        // Rounded to whole bytes squared; `as` saturates past u64.
        crate::background::folded::write_folded_by(profile, |s| value(s).round() as u64, w)
    })
}

/// Writes `NAME.maps.txt` beside the dump `written` (PHP mode): resident
/// memory by kind. A failure is one line; the dump stands.
pub(super) fn write_maps(
    written: &Path,
    smaps: &str,
    why: &str,
    pid: u32,
    exe: &str,
    n: u32,
    explicit: bool,
) {
    // heaplive_dump("/dev/stdout") and the like: no file beside it.
    if explicit && !std::fs::symlink_metadata(written).is_ok_and(|m| m.is_file()) {
        return;
    }
    let rss = crate::background::rss::maps_path(written);
    let header = if explicit {
        format!(
            "heaplive: {exe} (pid {pid}), {why} dump {}",
            written.display()
        )
    } else {
        format!("heaplive: {exe} (pid {pid}), {why} dump {n}")
    };
    let text = crate::background::rss::maps_text(smaps, &header);
    output::write_beside_dump(&rss, text.as_bytes(), explicit, pid);
}

/// Writes `NAME.app.txt` beside the dump `live_file` (the `app` view,
/// `format::app_frames`): the frames of the main executable, which the
/// folded files do not tell from a shared library's. A failure is one
/// line; the dump stands.
pub(super) fn write_app_frames(live_file: &Path, profiles: &[&Profile], explicit: bool) {
    // heaplive_dump("/dev/stdout") and the like: no file beside it.
    if explicit && !std::fs::symlink_metadata(live_file).is_ok_and(|m| m.is_file()) {
        return;
    }
    let exe = std::fs::read_link("/proc/self/exe")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    // A stripped executable's frames are addresses: each with the start
    // of its function, from the unwind tables.
    let start = |a: u64| crate::hot::unwind::function_start(a as usize).map(|s| s as u64);
    let frames = heaplive_format::app_frames::of_profiles(profiles, &exe, &start);
    let text = heaplive_format::app_frames::text(&exe, &frames);
    let path = crate::background::rss::beside(live_file, b".app.txt");
    output::write_beside_dump(&path, text.as_bytes(), explicit, sys::getpid());
}

/// The samples file (`NAME.samples.folded`, version 2: `format::samples`)
/// of a dump: per stack, the samples and variance of `profile`'s bytes (the
/// count only when `counts`: a live view), of its allocation view when
/// `alloc`, and of the peak file's stacks.
pub(super) fn samples_file(
    profile: &Profile,
    counts: bool,
    alloc: bool,
    peak: Option<&Profile>,
) -> heaplive_format::samples::Samples {
    use crate::background::folded::fold_stats;
    use heaplive_format::samples::{Samples, Size, Stat};
    let mut out = Samples {
        interval: Some(config::get().interval),
        ..Samples::default()
    };
    let live = fold_stats(
        profile,
        |s| s.bytes,
        |s| Stat {
            samples: counts.then_some(s.samples),
            variance: s.variance,
        },
    );
    out.add_all_as("live", &live);
    for s in profile.samples.iter().filter(|s| s.bytes > 0) {
        if s.sizes.is_empty() {
            continue;
        }
        let stack = heaplive_format::folded::stack_text(profile, s);
        for &(class, samples, bytes) in &s.sizes {
            out.add_size(&stack, class, Size { samples, bytes });
        }
    }
    // The lifetimes of the sampled blocks freed (the temporary view).
    for s in profile.samples.iter() {
        if s.freed.iter().chain(&s.freed_blocks).all(|&x| x == 0) {
            continue;
        }
        let stack = heaplive_format::folded::stack_text(profile, s);
        for class in 0..s.freed.len() {
            out.add_life(
                &stack,
                class,
                heaplive_format::samples::Life {
                    blocks: s.freed_blocks[class] as f64,
                    bytes: s.freed[class] as f64,
                    variance: s.freed_variance[class],
                },
            );
        }
    }
    if alloc {
        let a = fold_stats(
            profile,
            |s| s.alloc_bytes,
            |s| Stat {
                samples: None,
                variance: s.alloc_variance,
            },
        );
        out.add_all_as("alloc", &a);
    }
    if let Some(p) = peak {
        let a = fold_stats(
            p,
            |s| s.bytes,
            |s| Stat {
                samples: None,
                variance: s.variance,
            },
        );
        out.add_all_as("peak", &a);
    }
    out
}

/// In the exit dump: when the peak was above the live total now, writes
/// the stacks at the peak next to `live_file` (`NAME.peak.folded`).
/// Returns its path and profile, or None when there is no peak file to
/// write. A failure is one line; the exit dump stands.
pub(super) fn write_exit_peak(
    st: &mut DumpState,
    live_file: &Path,
    live_now: u64,
    poll: &mut Poll,
) -> std::io::Result<Option<(PathBuf, Profile)>> {
    let cfg = config::get();
    let (copied, _) = crate::hot::peak::copied();
    if !cfg.views.peak || copied <= 0 || copied as u64 <= live_now {
        return Ok(None);
    }
    let r = build_profile(st, Which::Peak, None, poll).and_then(|(profile, _)| {
        let p = output::write_with_fallback(&view_path(live_file, "peak"), &mut |w| {
            crate::background::folded::write_folded(&profile, w)
        })?;
        Ok((p, profile))
    });
    match r {
        Ok(x) => Ok(Some(x)),
        Err(e) => {
            log::line(format_args!(
                "heaplive[{}]: peak file failed: {}",
                sys::getpid(),
                e
            ));
            Ok(None)
        }
    }
}

/// The file name of a path (`write_with_fallback_as`'s fallback name).
pub(super) fn alt_name(p: &Path) -> &std::ffi::OsStr {
    p.file_name().unwrap_or(p.as_os_str())
}

/// `&mut dyn Write` as a sized `impl Write`.
pub(super) struct WriteRef<'a>(pub(super) &'a mut dyn std::io::Write);
impl std::io::Write for WriteRef<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}
