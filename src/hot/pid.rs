//! This process's pid as the library knows it: set at load, updated in fork
//! children by the fork layer. Code that finds `getpid()` different from it
//! runs in a child made without fork handlers (`_Fork`, vfork).

use core::sync::atomic::{AtomicU32, Ordering::*};

static PID: AtomicU32 = AtomicU32::new(0);

#[inline]
pub fn get() -> u32 {
    PID.load(Relaxed)
}

pub fn set(pid: u32) {
    PID.store(pid, Release);
}
