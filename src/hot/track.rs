//! What the exported functions do around the real call: the hot paths
//! (inlined into every export) and the slow paths (kept out of line).
//!
//! Hot path of an allocation: the guard check and one subtract-and-branch.
//! Hot path of a free: the shadow bitmap test.

use crate::hot::config;
use crate::hot::guard::{self, Busy};
use crate::hot::live::{self, Entry};
use crate::hot::php;
use crate::hot::sampler;
use crate::hot::shadow;
use crate::hot::stacks;
use crate::hot::sys::ErrnoGuard;
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Counts an allocation of `size` bytes at `p` (non-null) toward this
/// thread's next sample.
#[inline(always)]
pub fn on_alloc(p: *mut c_void, size: usize) {
    let t = guard::state();
    // SAFETY: this thread's own state.
    unsafe {
        if (*t).busy != 0 {
            return;
        }
        let left = (*t).bytes_until_sample.wrapping_sub(size as i64);
        (*t).bytes_until_sample = left;
        // `<= 0`: a thread's state starts at zero, and its first allocation
        // may be malloc(0) (exact mode records those too).
        if left <= 0 {
            alloc_slow(p, size, live::MALLOC);
        }
    }
}

/// `on_alloc` for a ZendMM block (PHP mode): the same countdown, so malloc
/// and ZendMM bytes of a thread form one sampling process.
#[inline(always)]
pub fn on_zend_alloc(p: *mut c_void, size: usize) {
    let t = guard::state();
    // SAFETY: this thread's own state.
    unsafe {
        if (*t).busy != 0 {
            return;
        }
        let left = (*t).bytes_until_sample.wrapping_sub(size as i64);
        (*t).bytes_until_sample = left;
        if left < 0 {
            alloc_slow(p, size, live::ZEND_MM);
        }
    }
}

/// Before the real free of `p`: forget it if it was sampled.
#[inline(always)]
pub fn on_free(p: *mut c_void) {
    if shadow::test(p as usize) {
        untrack_slow(p);
    }
}

#[cold]
#[inline(never)]
fn alloc_slow(p: *mut c_void, size: usize, kind: u32) {
    let _busy = Busy::enter();
    let _errno = ErrnoGuard::save();
    // SAFETY: this thread's own state; nothing else holds a reference.
    let t = unsafe { &mut *guard::state() };
    if !crate::hot::real::resolved() {
        t.bytes_until_sample = 0;
        return;
    }
    if STOPPED.load(Relaxed) || crate::hot::forking::inert() {
        // No memory for our tables: this thread stops sampling too.
        t.bytes_until_sample = i64::MAX;
        return;
    }
    let cfg = config::get();
    if t.sampler_ready == 0 {
        // The thread's first allocation: draw the first gap and count this
        // allocation against it.
        sampler::seed_thread(t, cfg.seed);
        t.bytes_until_sample =
            sampler::next_gap(&mut t.rng, cfg.interval).saturating_sub(size as i64);
        if t.bytes_until_sample >= 0 {
            return;
        }
    }
    t.bytes_until_sample = sampler::next_gap(&mut t.rng, cfg.interval);
    record(p as usize, size, cfg.interval, kind);
}

fn record(addr: usize, size: usize, interval: u64, kind: u32) {
    crate::hot::trigger::ensure_dumper();
    let mut buf = [0usize; stacks::MAX_FRAMES];
    let n = stacks::capture(&mut buf);
    let n = php::splice(&mut buf, n, kind == live::ZEND_MM);
    let id = stacks::intern(&buf[..n]);
    let mut weight = sampler::weight_bytes(size as u64, interval);
    if kind == live::ZEND_MM {
        // A ZendMM block counts as the bin or pages ZendMM gave it, as
        // memory_get_usage() does. Sampling went by the requested size, so
        // the block stands for block/p bytes (un-biased all the same: each
        // block's contribution is divided by its own probability).
        if let Some(b) = php::block_size(addr).filter(|_| size > 0) {
            weight *= b as f64 / size as f64;
        }
    }
    let mut e = Entry::new(addr, size, id, weight);
    e.kind = kind;
    match live::insert(e) {
        Err(live::Refused::NoMemory) => return out_of_memory(),
        // The sample is skipped while a fork is being prepared.
        Err(live::Refused::Forking) => return,
        Ok(Some(stale)) => unaccount(&stale, interval),
        Ok(None) => {}
    }
    if !shadow::set(addr) {
        live::remove(addr);
        // Addresses beyond 56 bits cannot be marked; anything else is a
        // node we could not map.
        if addr >> shadow::MAX_ADDR_BITS == 0 {
            out_of_memory();
        }
        return;
    }
    account(&e, interval);
    if kind == live::ZEND_MM && !php::note_zend_sample(addr) {
        // Nothing would drop it at request end: drop it now.
        if let Some(e) = live::untrack(addr) {
            unaccount(&e, interval);
        }
    }
}

/// At request end (PHP mode): drops every ZendMM sample of the request.
/// ZendMM reclaims those blocks without any efree.
pub fn drop_zend_samples() {
    let _busy = Busy::enter();
    let _errno = ErrnoGuard::save();
    let interval = config::get().interval;
    php::drain_zend_samples(|addr| {
        if let Some(e) = live::untrack_kind(addr, live::ZEND_MM) {
            unaccount(&e, interval);
        }
    });
}

/// Set when heaplive could not map memory for its own tables (a lowered
/// RLIMIT_AS, say): sampling stops, samples already taken stay, the
/// program runs on.
static STOPPED: AtomicBool = AtomicBool::new(false);

#[cold]
fn out_of_memory() {
    if !STOPPED.swap(true, Relaxed) {
        crate::hot::log::line(format_args!(
            "heaplive[{}]: cannot map memory for its tables ({}); sampling stopped, the program runs on",
            crate::hot::pid::get(),
            crate::hot::sys::errno_text(libc::ENOMEM)
        ));
    }
}

fn amounts(e: &Entry, interval: u64) -> (i64, i64) {
    let blocks = sampler::weight_blocks(e.size as u64, interval);
    (e.weight.round() as i64, (blocks * 1000.0).round() as i64)
}

fn account(e: &Entry, interval: u64) {
    let (b, m) = amounts(e, interval);
    if let Some((live_b, live_m)) = stacks::account(e.stack, b, m) {
        crate::hot::leak_check::after_growth(e.stack, live_b, live_m);
    }
}

fn unaccount(e: &Entry, interval: u64) {
    let (b, m) = amounts(e, interval);
    stacks::account(e.stack, -b, -m);
}

/// realloc's first half: takes `p`'s sample out (if any) before the real
/// call, since after it the address may belong to someone else.
#[inline(always)]
pub fn untrack_for_realloc(p: *mut c_void) -> Option<Entry> {
    if shadow::test(p as usize) {
        untrack_slow(p)
    } else {
        None
    }
}

/// Takes a sampled block's sample out of the table and its stack's totals.
#[cold]
#[inline(never)]
fn untrack_slow(p: *mut c_void) -> Option<Entry> {
    // On a thread inside the library (a signal handler that frees while
    // this thread holds a shard lock, for instance) the sample stays: its
    // bit is still set, so the next free or sampled malloc at this address
    // replaces it. Taking the lock here could deadlock.
    if guard::busy() || crate::hot::forking::inert() {
        return None;
    }
    let _busy = Busy::enter();
    let _errno = ErrnoGuard::save();
    let e = live::untrack(p as usize)?;
    unaccount(&e, config::get().interval);
    Some(e)
}

/// The real realloc failed and `p` is still allocated: put its sample back.
#[cold]
#[inline(never)]
pub fn retrack(e: Entry) {
    let _busy = Busy::enter();
    let _errno = ErrnoGuard::save();
    if live::insert(e).is_ok() && shadow::set(e.addr) {
        account(&e, config::get().interval);
    } else {
        live::remove(e.addr);
    }
}
