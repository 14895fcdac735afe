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
//! What it does not (yet) do: a program of one thread whose signal handler
//! forks while `malloc` runs below it still makes glibc wait for the arena
//! lock that `malloc` holds, because heaplive's thread makes glibc take its
//! multi-threaded path. Setting glibc's `__libc_single_threaded` around the
//! fork was tried: glibc's malloc then skips its arena locks on the forking
//! thread while heaplive's thread may use the same arena, which corrupted
//! the heap (seen in glibc's `tst-mallocfork2`). It becomes safe once
//! heaplive's own allocations no longer go through glibc's malloc.

use core::sync::atomic::{AtomicBool, Ordering::*};

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
}
