//! fork() from a signal handler, as safe as glibc makes it.
//!
//! glibc's `fork` is async-signal-safe only in a process it believes has one
//! thread: then it takes neither the stdio list lock nor the malloc arena
//! locks, which a `malloc` interrupted by the signal may hold (glibc bug
//! 4737; its test `tst-mallocfork2`). heaplive's own thread makes every
//! sampling process two-threaded in glibc's eyes, so a program of one thread
//! that forks from a signal handler would deadlock only because of us.
//!
//! What heaplive does about it:
//! - A fork from a signal handler that interrupted heaplive itself, or
//!   another fork, on this thread (which may hold any of heaplive's locks)
//!   takes none of heaplive's locks (the prepare handler would wait for
//!   itself); heaplive is then inert in that child: no sampling, no dumps,
//!   frees pass straight through.
//! - The fork handlers wait only so long for the locks that heaplive's
//!   thread holds while it allocates (`background::fork`).
//!
//! - A program of one thread forks as glibc forks it without heaplive:
//!   glibc decides fork's path by its `__libc_single_threaded` (glibc >=
//!   2.34 on x86-64), which heaplive's thread cleared. When heaplive's
//!   thread creation is what cleared it and the process has exactly two
//!   threads (the caller and heaplive's, `/proc/self/stat`), the fork
//!   wrapper sets it to 1 around the real fork and back to 0 in the
//!   parent; glibc then takes neither the stdio list lock nor the arena
//!   locks, which a `malloc` interrupted by the signal may hold. The child
//!   really has one thread, so it keeps 1 (until its own heaplive thread
//!   starts).
//!
//! This is safe only because heaplive's thread never enters glibc code that
//! tests the flag: its allocations come from heaplive's own heap
//! (`ownheap`), it writes with write(2), never stdio; the rtld locks it
//! meets (dl_iterate_phdr) are mutexes taken whatever the flag says. (An
//! earlier attempt, while heaplive still allocated through glibc's malloc,
//! corrupted the heap: malloc skipped its arena lock on the forking thread
//! while heaplive's thread used the same arena.)
//!
//! What the single-threaded path skips in the child: glibc does not reclaim
//! heaplive's thread's stack and descriptor there (512 KiB of address
//! space, never touched) and its thread count keeps counting it.

use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::*};

/// heaplive does nothing in this process (a child forked while its thread
/// was inside heaplive).
static INERT: AtomicBool = AtomicBool::new(false);

#[inline]
pub fn inert() -> bool {
    INERT.load(Relaxed)
}

pub fn mark_inert() {
    INERT.store(true, Relaxed);
}

/// Address of libc's own `__libc_single_threaded` (0: not found).
static FLAG: AtomicUsize = AtomicUsize::new(0);
/// heaplive's thread creation cleared the flag (it read 1 just before).
static WE_CLEARED: AtomicBool = AtomicBool::new(false);

/// Finds libc's own copy of the flag (not a copy relocated into the
/// executable: glibc's fork reads libc's). Called once from the library's
/// start-up (constructor), never later: heaplive's thread starts at a
/// sample, and a sample can be an allocation ld.so makes in the middle of
/// the program's dlopen (mapping a dependency); a dlopen/dlclose nested
/// there re-enters ld.so (its lock is recursive) while its lists are half
/// built, and ld.so then aborted the program with "Inconsistency detected
/// by ld.so: dl-sort-maps.c: 234: _dl_sort_maps_dfs: Assertion
/// `rpo_head == rpo' failed!" and exit status 127 (php-cli loading its
/// extensions, about 1 start in 100 on a loaded machine).
pub fn init() {
    if FLAG.load(Relaxed) == 0 {
        find_flag();
    }
}

fn find_flag() {
    // libc's own variable, not a copy the executable may hold through a
    // copy relocation: the next definition after this library (the
    // executable comes before it in the search order, libc after). No
    // dlopen: it allocates, and this runs at start, where a process that
    // never samples must not start glibc's malloc (`startcost` tests). A
    // lookup that would fail (a glibc before 2.32) is skipped: its message
    // allocates too.
    let name = c"__libc_single_threaded";
    if !crate::hot::real::maybe_exported(name.to_bytes_with_nul()) {
        return;
    }
    // SAFETY: a NUL-terminated name; a failure leaves a message, taken.
    unsafe {
        let p = libc::dlsym(libc::RTLD_NEXT, name.as_ptr());
        if p.is_null() {
            libc::dlerror();
        }
        FLAG.store(p as usize, Relaxed);
    }
}

fn flag() -> Option<&'static AtomicU8> {
    let a = FLAG.load(Relaxed);
    // SAFETY: libc's `char __libc_single_threaded`, mapped for the life of
    // the process; byte accesses.
    (a != 0).then(|| unsafe { &*(a as *const AtomicU8) })
}

/// Called just before heaplive creates its thread.
pub fn before_own_thread() {
    // No find_flag here (see `init`): without the flag's address the fork
    // wrapper leaves glibc's flag alone.
    if let Some(f) = flag()
        && f.load(Relaxed) != 0
    {
        WE_CLEARED.store(true, Relaxed);
    }
}

/// In the fork wrapper, before the real fork (async-signal-safe): sets the
/// flag when heaplive's thread is the only reason it is 0. True if it did
/// (the parent then calls [`after_fork_in_parent`]).
pub fn before_fork() -> bool {
    let Some(f) = flag() else { return false };
    if !WE_CLEARED.load(Relaxed) || f.load(Relaxed) != 0 || num_threads() != Some(2) {
        return false;
    }
    f.store(1, SeqCst);
    true
}

pub fn after_fork_in_parent(set: bool) {
    if set && let Some(f) = flag() {
        f.store(0, SeqCst);
    }
}

/// Threads of this process (field 20 of /proc/self/stat), read into a
/// stack buffer (`sys::read_small_file`: async-signal-safe, errno kept).
pub fn num_threads() -> Option<u32> {
    let mut buf = [0u8; 1024];
    let n = crate::hot::sys::read_small_file(c"/proc/self/stat", &mut buf)?;
    if n == 0 {
        return None;
    }
    parse_num_threads(&buf[..n])
}

/// Field 20 (num_threads) of a /proc/<pid>/stat line; the command name
/// (field 2, in parentheses) may hold spaces and parentheses.
fn parse_num_threads(stat: &[u8]) -> Option<u32> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    // After ") ": field 3 is the first; field 20 is the 18th.
    let field = stat[close + 1..]
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty())
        .nth(17)?;
    let mut v = 0u32;
    for &d in field {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((d - b'0') as u32)?;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inert_is_sticky() {
        assert!(!inert());
        mark_inert();
        assert!(inert());
        INERT.store(false, Relaxed);
    }

    #[test]
    fn thread_count_from_stat() {
        let line = b"4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 7 0 123 456";
        assert_eq!(parse_num_threads(line), Some(7));
        assert_eq!(parse_num_threads(b"1 (x) S 1"), None);
        let me = num_threads().expect("readable");
        let t = std::thread::spawn(num_threads);
        let with_one_more = t.join().unwrap().unwrap();
        assert!(me >= 1 && with_one_more >= 2);
    }
}
