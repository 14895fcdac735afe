//! Attach mode: `heaplive attach PID` dlopen'ed this library into a process
//! that was started without it (src/cli/src/attach.rs).
//!
//! A preloaded heaplive comes before libc in the load order and finds the
//! real functions with `RTLD_NEXT`. An attached one comes after libc, is
//! not in the global scope, and glibc's `RTLD_NEXT` from an object outside
//! its loader's scope is undefined (the lookup walks the scope looking for
//! us): the real functions then come from libc's own handle
//! (`real::resolve_all`). The constructor tells the two apart (`detect`)
//! before anything resolves, and in attach mode leaves the rest of the
//! start-up to `heaplive_attach` (interpose/got.rs), which has the settings.
//!
//! Nothing here allocates.

use core::sync::atomic::{AtomicBool, AtomicU8, Ordering::*};

const UNKNOWN: u8 = 0;
const PRELOADED: u8 = 1;
const ATTACHED: u8 = 2;
static MODE: AtomicU8 = AtomicU8::new(UNKNOWN);
static DETACHED: AtomicBool = AtomicBool::new(false);

/// Was this library loaded after libc (dlopen'ed into a running process)?
#[inline]
pub fn attached() -> bool {
    MODE.load(Acquire) == ATTACHED
}

/// `heaplive_detach` ran: the slots are restored and nothing samples.
#[inline]
pub fn detached() -> bool {
    DETACHED.load(Acquire)
}

pub fn set_detached() {
    DETACHED.store(true, Release);
}

/// Is this the path of glibc's libc (`.../libc.so.6`)?
pub fn is_libc(name: *const libc::c_char) -> bool {
    if name.is_null() {
        return false;
    }
    // SAFETY: loader names are NUL-terminated.
    let n = unsafe { core::ffi::CStr::from_ptr(name) }.to_bytes();
    let base = n.rsplit(|&b| b == b'/').next().unwrap_or(n);
    base.starts_with(b"libc.so")
}

/// Decides the mode once, from the constructor, before anything resolved
/// the real functions: attached when this library comes after libc in the
/// load order.
pub fn detect() {
    if MODE.load(Acquire) != UNKNOWN {
        return;
    }
    let me = detect as *const () as usize;
    let (mut index, mut me_at, mut libc_at) = (0usize, None, None);
    crate::hot::elf::each_loaded(|info, _| {
        if is_libc(info.dlpi_name) && libc_at.is_none() {
            libc_at = Some(index);
        }
        if crate::hot::elf::load_segment_holding(info, me).is_some() {
            me_at = Some(index);
        }
        index += 1;
        false
    });
    let mode = match (me_at, libc_at) {
        (Some(me), Some(c)) if me > c => ATTACHED,
        _ => PRELOADED,
    };
    MODE.store(mode, Release);
}
