//! `hot::api`'s unit tests: the boundary driven as the exports drive it,
//! with fake pointers (addresses no allocator gave: the tables only record
//! them) and this thread's own sampler state.

use super::*;
use crate::hot::guard;

/// A stack of fake return addresses, interned for these tests.
fn fake_stack(tag: usize) -> stacks::StackId {
    stacks::intern(&[
        0x7100_0000_0000 + tag * 0x100,
        0x7100_0000_0040,
        0x7100_0000_0080,
    ])
}

fn live_bytes(id: stacks::StackId) -> i64 {
    stacks::slot(id).expect("interned").live_bytes.load(Relaxed)
}

/// This thread's countdown to its next sample.
fn countdown() -> i64 {
    // SAFETY: this thread's own state.
    unsafe { (*guard::state()).bytes_until_sample }
}

/// Sets this thread's countdown to its next sample.
fn set_countdown(bytes: i64) {
    // SAFETY: this thread's own state.
    unsafe { (*guard::state()).bytes_until_sample = bytes };
}

/// A sample of `size` bytes kept at the fake address `p`, on a stack of
/// its own (`tag`), with the shadow tests' lock held: the lock, the stack,
/// and the stack's live bytes before the sample.
fn sample_at(
    tag: usize,
    p: usize,
    size: usize,
) -> (std::sync::MutexGuard<'static, ()>, stacks::StackId, i64) {
    let serial = crate::hot::shadow::tests::SERIAL
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let id = fake_stack(tag);
    let before = live_bytes(id);
    keep(
        Entry::new(p, size, id, live::MALLOC),
        config::get().interval,
    );
    (serial, id, before)
}

/// The malloc fast path counts down this thread's bytes and says "slow
/// path" for the allocation that would reach zero, without counting it;
/// inside the library (busy) nothing is counted.
#[test]
fn count_alloc_counts_down_to_the_sample() {
    set_countdown(100);
    assert!(count_alloc(40));
    assert_eq!(countdown(), 60);
    assert!(
        !count_alloc(60),
        "the allocation that reaches zero is sampled"
    );
    assert_eq!(countdown(), 60, "not counted");
    {
        let _busy = Busy::enter();
        assert!(count_alloc(1 << 40), "the library's own allocations pass");
    }
    assert_eq!(countdown(), 60);
}

/// Before the resolver has run (as in this test process) an allocation
/// that reaches its sample records nothing and looks again at the next one.
#[test]
fn nothing_is_recorded_before_the_real_functions_are_known() {
    assert!(!crate::hot::real::resolved());
    let p = 0x7200_0000_0010usize as *mut c_void;
    set_countdown(10);
    on_alloc(p, 64);
    assert_eq!(countdown(), 0);
    assert!(fast_free(p), "no sample: free takes its fast path");
}

/// A sample kept at a fake address: free's filter sends that address (and
/// only it) to the slow path, which takes the sample out of the live table
/// and its stack's total; afterwards the address is unsampled again.
#[test]
fn a_sampled_block_is_filtered_and_forgotten_at_free() {
    let p = 0x7300_0000_0040usize;
    let (_serial, id, before) = sample_at(1, p, 4096);
    let interval = config::get().interval;
    assert!(
        !fast_free(p as *mut c_void),
        "a sampled address takes the slow path"
    );
    assert!(fast_free((p + 16) as *mut c_void), "its neighbour does not");
    let e = Entry::new(p, 4096, id, live::MALLOC);
    let (bytes, _, _) = amounts(&e, interval);
    assert!(bytes > 0);
    assert_eq!(live_bytes(id) - before, bytes);
    on_free(p as *mut c_void);
    assert_eq!(live_bytes(id), before);
    assert!(fast_free(p as *mut c_void));
    assert!(live::remove(p).is_none());
}

/// realloc's two halves: the sample is taken out before the real call and,
/// when the real realloc fails, put back as it was.
#[test]
fn a_failed_realloc_puts_the_sample_back() {
    let p = 0x7400_0000_0080usize;
    let (_serial, id, before) = sample_at(2, p, 100);
    let during = live_bytes(id);
    let e = untrack_for_realloc(p as *mut c_void).expect("the sample");
    assert_eq!((e.addr, e.size(), e.stack()), (p, 100, id));
    assert_eq!(live_bytes(id), before);
    assert!(
        untrack_for_realloc(p as *mut c_void).is_none(),
        "taken once"
    );
    retrack(e);
    assert_eq!(live_bytes(id), during);
    assert!(!fast_free(p as *mut c_void));
    on_free(p as *mut c_void);
    assert_eq!(live_bytes(id), before);
}

/// Inside the library (a signal handler's free while this thread holds a
/// lock of ours, say) a sampled block's free leaves the sample: its bit
/// stays set, and a later free takes it out.
#[test]
fn a_free_inside_the_library_leaves_the_sample_for_later() {
    let p = 0x7500_0000_00c0usize;
    let (_serial, id, before) = sample_at(3, p, 32);
    {
        let _busy = Busy::enter();
        on_free(p as *mut c_void);
    }
    assert!(!fast_free(p as *mut c_void));
    assert!(live_bytes(id) > before);
    on_free(p as *mut c_void);
    assert_eq!(live_bytes(id), before);
}

/// Sampling on and off: the switch the C API and `heaplive start/stop`
/// use, and the note a signal's change leaves for heaplive's thread.
#[test]
fn set_active_reports_the_previous_state_and_signal_changes() {
    let was = set_active(true, false);
    assert!(active());
    let _ = take_signal_change();
    assert!(set_active(true, true), "already on");
    assert!(!take_signal_change(), "no change, nothing to report");
    assert!(set_active(false, true));
    assert!(take_signal_change());
    assert!(!take_signal_change(), "reported once");
    set_active(was, false);
}

/// `keep_sample` with the sample's own amounts, as `record` calls it.
fn keep(e: Entry, interval: u64) {
    keep_sample(e, interval, amounts(&e, interval));
}

/// The temporary view's stamp: unchanged while the thread allocates
/// nothing, moved by any allocation it counts (sampled or not), not by
/// the library's own, and not the same on another thread.
#[test]
fn thread_stamp_moves_with_each_allocation_of_the_thread() {
    let t = guard::state();
    set_countdown(1000);
    let s = thread_stamp();
    assert_ne!(s, 0, "0 means not known");
    assert_eq!(thread_stamp(), s, "nothing allocated");
    assert!(count_alloc(16));
    let after_one = thread_stamp();
    assert_ne!(after_one, s, "an unsampled allocation");
    {
        let _busy = Busy::enter();
        assert!(count_alloc(1 << 20));
    }
    assert_eq!(thread_stamp(), after_one, "the library's own allocation");
    // A sample: the countdown is drawn again (in exact mode the same -1)
    // and the count moves.
    unsafe {
        (*t).bytes_until_sample = -1;
        (*t).samples_taken = 7;
    }
    let exact = thread_stamp();
    unsafe { (*t).samples_taken = 8 };
    assert_ne!(thread_stamp(), exact, "a sample in exact mode");
    unsafe { (*t).samples_taken = 7 };
    assert_eq!(thread_stamp(), exact);
    let there = std::thread::spawn(|| {
        // SAFETY: that thread's own state.
        let t = guard::state();
        unsafe {
            (*t).bytes_until_sample = -1;
            (*t).samples_taken = 7;
        }
        thread_stamp()
    })
    .join()
    .unwrap();
    assert_ne!(there, exact, "another thread in the same state");
}

/// emalloc's countdown (`count_zend_alloc`, through %fs): takes the block
/// off while it stays at zero or above, and leaves the countdown alone for
/// the block that would take it below (that one is sampled).
#[test]
fn count_zend_alloc_counts_down_to_the_sample() {
    set_countdown(100);
    assert!(count_zend_alloc(60));
    assert_eq!(countdown(), 40);
    assert!(count_zend_alloc(40), "down to zero: not yet");
    assert_eq!(countdown(), 0);
    assert!(!count_zend_alloc(8), "below zero: sampled");
    assert_eq!(countdown(), 0, "not counted");
    let there = std::thread::spawn(|| {
        set_countdown(1 << 20);
        count_zend_alloc(1 << 10)
    })
    .join()
    .unwrap();
    assert!(there);
    assert_eq!(countdown(), 0, "another thread's count");
}
