//! What the exported functions do around the real call: the hot paths
//! (inlined into every export) and the slow paths (kept out of line).
//!
//! Hot path of an allocation (`count_alloc`, `fast_alloc`): the guard
//! check and one subtract-and-branch, decided before the real call so that
//! the export ends in a jump to it. Hot path of a free (`fast_free`): the
//! shadow bitmap test, then a jump to the real free.

use crate::hot::config;
use crate::hot::guard::{self, Busy};
use crate::hot::live::{self, Entry};
use crate::hot::php;
use crate::hot::poison;
use crate::hot::sampler;
use crate::hot::shadow;
use crate::hot::stacks;
use crate::hot::sys::ErrnoGuard;
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The common case of an allocation of `size` bytes, decided before the
/// real call so that the export can end in a plain jump to it: true when
/// nothing is to be done around the call (no poisoning, and the allocation
/// does not take this thread's countdown to zero), with the allocation
/// already counted. False: nothing was counted; the export then makes the
/// real call and runs `on_alloc` (and poisoning) after it, as for any
/// allocation. One difference with counting after the call: an allocation
/// that fails on this path still counts toward the next sample (failures
/// are rare, and only move the next sample a little earlier).
#[inline(always)]
pub fn fast_alloc(size: usize) -> bool {
    !poison::alloc_on() && count_alloc(size)
}

/// malloc's common case: `fast_alloc` without the poison test (malloc
/// jumps through `real::MALLOC_JUMP`, which poisons when asked).
#[inline(always)]
pub fn count_alloc(size: usize) -> bool {
    let t = guard::state();
    // SAFETY: this thread's own state.
    unsafe {
        if (*t).busy != 0 {
            return true;
        }
        let left = (*t).bytes_until_sample.wrapping_sub(size as i64);
        // `<= 0`: as in `on_alloc`.
        if left <= 0 {
            return false;
        }
        (*t).bytes_until_sample = left;
    }
    true
}

/// free's common case: `p` holds no sample (free then jumps through
/// `real::FREE_JUMP`, which poisons when asked).
#[inline(always)]
pub fn fast_free(p: *mut c_void) -> bool {
    !shadow::test(p as usize)
}

/// Counts an allocation of `size` bytes at `p` (non-null) toward this
/// thread's next sample.
#[inline(always)]
pub fn on_alloc(p: *mut c_void, size: usize) {
    // `<= 0`: a thread's state starts at zero, and its first allocation
    // may be malloc(0) (exact mode records those too).
    if counted_down(size).is_some_and(|left| left <= 0) {
        alloc_slow(p, size, size, live::MALLOC);
    }
}

/// This thread's countdown to its next sample, less `bytes` (kept); None
/// inside the library (busy), where nothing is counted.
#[inline(always)]
fn counted_down(bytes: usize) -> Option<i64> {
    let t = guard::state();
    // SAFETY: this thread's own state.
    unsafe {
        if (*t).busy != 0 {
            return None;
        }
        let left = (*t).bytes_until_sample.wrapping_sub(bytes as i64);
        (*t).bytes_until_sample = left;
        Some(left)
    }
}

/// `on_alloc` for a ZendMM block of `size` requested bytes (PHP mode): the
/// same countdown, so malloc and ZendMM bytes of a thread form one sampling
/// process. A ZendMM block counts as the block ZendMM gives (its size class
/// or whole pages: what memory_get_usage() counts), for sampling and weight
/// alike, so its `Entry::size` is that block size.
#[inline(always)]
pub fn on_zend_alloc(p: *mut c_void, size: usize) {
    let b = php::zend_block_size(size);
    zend_exposure(p, b, b);
}

/// emalloc's common case, decided before the real call: true when the
/// block of `block` bytes does not take the countdown below zero, with the
/// block counted; nothing is then to be done after the call. False: nothing
/// was counted; the handler makes the call and runs `on_zend_alloc` after
/// it.
///
/// Unlike `count_alloc`, no guard test: heaplive makes no emalloc of its
/// own while ZendMM handlers are installed (it allocates from its own heap
/// or through the real malloc), and one that it made would only count
/// toward the countdown; the slow path still tests the guard before
/// sampling.
#[inline(always)]
pub fn count_zend_alloc(block: usize) -> bool {
    // Sampled below zero (`< 0`), as in `zend_exposure`.
    guard::countdown_take(block)
}

/// Counts `exposure` bytes toward the next sample for the ZendMM block
/// `p` of `block` bytes.
#[inline(always)]
fn zend_exposure(p: *mut c_void, block: usize, exposure: usize) {
    if counted_down(exposure).is_some_and(|left| left < 0) {
        alloc_slow(p, block, exposure, live::ZEND_MM);
    }
}

/// erealloc (PHP mode), after the real call resized the block `p` of
/// `old_block` bytes into `q` of `new_block` bytes.
///
/// Sampling stays exact without treating every erealloc as a new
/// allocation (PHP grows strings by erealloc, mostly in place): by
/// memorylessness, "the old block was sampled, or the countdown crosses
/// zero within the growth" has probability 1 - exp(-new/R), the same as a
/// fresh allocation of the new size. So a sampled block stays sampled (with
/// its stack, re-weighted), an unsampled one counts only its growth, and a
/// shrunk sampled block stays with probability p(new)/p(old).
///
/// The sample is looked up after the real call, not taken out before as
/// for realloc: a ZendMM heap belongs to one thread, and a block's address
/// that another thread's mmap gets meanwhile holds a malloc sample, which
/// `untrack_kind` leaves alone.
#[inline(always)]
pub fn on_zend_realloc(p: *mut c_void, old_block: usize, q: *mut c_void, new_block: usize) {
    if p == q && old_block == new_block {
        // In place, same block: nothing changes.
        return;
    }
    if !p.is_null()
        && php::maybe_zend_sample(p as usize)
        && shadow::test(p as usize)
        && zend_realloc_sampled(p as usize, q as usize, new_block)
    {
        return;
    }
    if new_block > old_block {
        zend_exposure(q, new_block, new_block - old_block);
    }
}

/// The sampled block `p` became `q` of `new_block` bytes. False if `p` held
/// no ZendMM sample after all.
#[cold]
#[inline(never)]
fn zend_realloc_sampled(p: usize, q: usize, new_block: usize) -> bool {
    if guard::busy() {
        return false;
    }
    let _busy = Busy::enter();
    let _errno = ErrnoGuard::save();
    let Some((e, _)) = live::untrack_kind(p, live::ZEND_MM) else {
        return false;
    };
    php::forget_zend_sample(p);
    let interval = config::get().interval;
    unaccount(&e, interval);
    // SAFETY: this thread's own state; nothing else holds a reference.
    let t = unsafe { &mut *guard::state() };
    if new_block < e.size() && interval > 1 {
        let keep = sampler::sample_probability(new_block as u64, interval)
            / sampler::sample_probability(e.size() as u64, interval);
        if sampler::uniform(&mut t.rng) > keep {
            return true;
        }
    }
    let e = e.moved(q, new_block);
    keep_sample(e, interval, amounts(&e, interval));
    true
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
fn alloc_slow(p: *mut c_void, size: usize, exposure: usize, kind: u32) {
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
    if !ACTIVE.load(Relaxed) {
        // Dormant (HEAPLIVE_START=0, heaplive_stop): forward only. The
        // next look comes after a gap drawn as for a sample, so sampling
        // resumes at once, memorylessly, when started (exact mode: at the
        // next allocation).
        if t.sampler_ready == 0 {
            sampler::seed_thread(t, cfg.seed);
        }
        t.bytes_until_sample = sampler::next_gap(&mut t.rng, cfg.interval);
        // The dumper thread serves the dump signal, and with it `heaplive
        // start PID`: it must run while dormant too (when there is a dump
        // signal: `trigger::thread_wanted`).
        crate::hot::trigger::ensure_dumper_if_wanted();
        return;
    }
    if t.sampler_ready == 0 {
        // The thread's first allocation: draw the first gap and count this
        // allocation against it.
        sampler::seed_thread(t, cfg.seed);
        t.bytes_until_sample =
            sampler::next_gap(&mut t.rng, cfg.interval).saturating_sub(exposure as i64);
        if t.bytes_until_sample >= 0 {
            return;
        }
    }
    t.bytes_until_sample = sampler::next_gap(&mut t.rng, cfg.interval);
    t.samples_taken = t.samples_taken.wrapping_add(1);
    record(p as usize, size, cfg.interval, kind);
    if !crate::hot::trigger::dumper_running() {
        // No thread of ours to prune the shadow bitmap (HEAPLIVE_SIGNAL=none
        // and nothing else that needs one): the sampling threads do it, at
        // most once a second (see `shadow::prune_if_due` for why that is
        // safe here and cheap).
        shadow::prune_if_due();
    }
}

/// Takes a sample. Out of line: `alloc_slow` runs at every thread's first
/// allocation and stays small, in the start-up code's window (src/layout.ld);
/// the stack capture, with the unwinder inlined, is here.
#[inline(never)]
fn record(addr: usize, size: usize, interval: u64, kind: u32) {
    // Before the stack is captured: a dump signal that waited for the
    // thread is snapshotted without this sample (`trigger`).
    crate::hot::trigger::ensure_dumper_if_wanted();
    let mut buf = [0usize; stacks::MAX_FRAMES];
    let n = stacks::capture(&mut buf);
    let n = php::splice(&mut buf, n, kind == live::ZEND_MM);
    let id = stacks::intern(&buf[..n]);
    let e = Entry::new(addr, size, id, kind);
    // The allocation view counts each sample once, when it is taken (a
    // realloc's new block is a new allocation; a sample put back after a
    // failed realloc is not).
    let a = amounts(&e, interval);
    stacks::account_alloc(id, a.0, a.1, a.2);
    keep_sample(e, interval, a);
    crate::hot::timeline::at_sample();
}

/// This thread's stamp (never 0): a hash of the thread, its countdown
/// and its count of samples. Every allocation the thread makes changes
/// the countdown (by its size) or, when sampled, the count; so a sample
/// freed with the stamp it was taken with was freed before the thread's
/// next allocation: heaptrack's "temporary allocation" (the temporary
/// view). `malloc(0)` in sampled mode moves neither and goes unseen; two
/// different states share a stamp with probability 2^-32.
pub fn thread_stamp() -> u32 {
    let t = guard::state();
    // SAFETY: this thread's own state.
    let (left, taken) = unsafe { ((*t).bytes_until_sample, (*t).samples_taken) };
    let mut x = (t as u64) ^ (left as u64).rotate_left(17) ^ (taken as u64) << 40;
    // splitmix64's finalizer.
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((x ^ (x >> 31)) >> 32).max(1) as u32
}

/// Puts a sample in the live table, the shadow bitmap and its stack's
/// totals (and, for ZendMM, the request's list); `a` is its `amounts`.
fn keep_sample(e: Entry, interval: u64, a: (i64, i64, i64)) {
    let (addr, kind) = (e.addr, e.kind());
    match live::insert(e, thread_stamp) {
        Err(live::Refused::NoMemory) => return out_of_memory(),
        // The sample is skipped while a fork is being prepared.
        Err(live::Refused::Forking) => return,
        Ok(Some(stale)) => {
            if stale.kind() == live::ZEND_MM {
                php::forget_zend_sample(addr);
            }
            unaccount(&stale, interval)
        }
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
    account_amounts(&e, a);
    if kind == live::ZEND_MM && !php::note_zend_sample(addr) {
        // Nothing would drop it at request end: drop it now.
        if let Some((e, _)) = live::untrack(addr) {
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
        if let Some((e, life)) = live::untrack_kind(addr, live::ZEND_MM) {
            unaccount_freed(&e, life, interval);
        }
    });
}

/// Whether allocations are sampled: `HEAPLIVE_START` (default on), then
/// `heaplive_start()`/`heaplive_stop()` and `heaplive start/stop PID`.
/// Stopping keeps the samples taken: they leave as their blocks are freed.
static ACTIVE: AtomicBool = AtomicBool::new(true);
/// A change of `ACTIVE` made by a signal, for the dumper to log.
static CHANGED_BY_SIGNAL: AtomicBool = AtomicBool::new(false);

/// Starts (`on`) or stops sampling; returns whether it was on.
/// Async-signal-safe: atomic stores only.
pub fn set_active(on: bool, from_signal: bool) -> bool {
    let was = ACTIVE.swap(on, Relaxed);
    if from_signal && was != on {
        CHANGED_BY_SIGNAL.store(true, Relaxed);
    }
    was
}

/// Whether sampling is on.
pub fn active() -> bool {
    ACTIVE.load(Relaxed)
}

/// Whether a signal started or stopped sampling since the last call.
pub fn take_signal_change() -> bool {
    CHANGED_BY_SIGNAL.swap(false, Relaxed)
}

/// Set when heaplive could not map memory for its own tables (a lowered
/// RLIMIT_AS, say): sampling stops, samples already taken stay, the
/// program runs on.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// `heaplive detach`: no more samples; those taken stay.
pub fn stop_sampling() {
    STOPPED.store(true, Relaxed);
}

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

/// A sample's bytes, milli-blocks and variance term (units of
/// `sampler::variance_units`).
fn amounts(e: &Entry, interval: u64) -> (i64, i64, i64) {
    sampler::amounts(e.size() as u64, interval)
}

fn account(e: &Entry, interval: u64) {
    account_amounts(e, amounts(e, interval));
}

fn account_amounts(e: &Entry, (b, m, v): (i64, i64, i64)) {
    if let Some((live_b, live_m)) = stacks::account(e.stack(), b, m, v) {
        crate::hot::peak::grew(b);
        if e.kind() == live::ZEND_MM {
            php::request_grew(b);
        }
        if crate::hot::leak_check::after_growth(e.stack(), live_b, live_m) {
            // A leak warning is due: heaplive's thread writes it (symbolized,
            // rate-limited), so it starts now if nothing else started it.
            // No lock of ours is held here.
            crate::hot::trigger::ensure_dumper();
        }
    }
}

/// A sample freed on this thread after `life`: out of its stack's live
/// totals and, with the temporary view, into its lifetime class, and into
/// `TEMPORARY` when this thread allocated nothing since the sample (a
/// realloc's old block too: as in the allocation view, its new block is a
/// new allocation). The amounts are computed once for all.
fn unaccount_freed(e: &Entry, life: live::Life, interval: u64) {
    let a = amounts(e, interval);
    if let Some(class) = live::lifetime_class(life.age) {
        stacks::account_freed(e.stack(), class, a.0, a.1, a.2);
        if life.stamp != 0 && life.stamp == thread_stamp() {
            stacks::account_freed(e.stack(), live::TEMPORARY, a.0, a.1, a.2);
        }
    }
    unaccount_amounts(e, a);
}

fn unaccount(e: &Entry, interval: u64) {
    unaccount_amounts(e, amounts(e, interval));
}

fn unaccount_amounts(e: &Entry, (b, m, v): (i64, i64, i64)) {
    if stacks::slot(e.stack()).is_some() {
        crate::hot::peak::shrinking(b);
        if e.kind() == live::ZEND_MM {
            php::request_shrinking(b);
        }
    }
    stacks::account(e.stack(), -b, -m, -v);
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
    let (e, life) = live::untrack(p as usize)?;
    if e.kind() == live::ZEND_MM {
        php::forget_zend_sample(p as usize);
    }
    unaccount_freed(&e, life, config::get().interval);
    Some(e)
}

/// The real realloc failed and `p` is still allocated: put its sample back.
#[cold]
#[inline(never)]
pub fn retrack(e: Entry) {
    let _busy = Busy::enter();
    let _errno = ErrnoGuard::save();
    if live::insert(e, thread_stamp).is_ok() && shadow::set(e.addr) {
        account(&e, config::get().interval);
    } else {
        live::remove(e.addr);
    }
}

#[cfg(test)]
#[path = "api_tests.rs"]
mod tests;
