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

use core::ffi::c_int;
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

struct Order {
    /// An address inside this library.
    me: usize,
    index: usize,
    me_at: Option<usize>,
    libc_at: Option<usize>,
}

unsafe extern "C" fn visit(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut libc::c_void,
) -> c_int {
    // SAFETY: dl_iterate_phdr passes a valid info and our own `Order`.
    let (info, o) = unsafe { (&*info, &mut *data.cast::<Order>()) };
    if is_libc(info.dlpi_name) && o.libc_at.is_none() {
        o.libc_at = Some(o.index);
    }
    for i in 0..info.dlpi_phnum as usize {
        // SAFETY: dlpi_phdr has dlpi_phnum entries.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type == libc::PT_LOAD {
            let start = info.dlpi_addr as usize + ph.p_vaddr as usize;
            if o.me >= start && o.me < start + ph.p_memsz as usize {
                o.me_at = Some(o.index);
            }
        }
    }
    o.index += 1;
    0
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
    let mut o = Order {
        me: detect as *const () as usize,
        index: 0,
        me_at: None,
        libc_at: None,
    };
    // SAFETY: the callback only reads what the loader passes.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut o as *mut Order).cast()) };
    let mode = match (o.me_at, o.libc_at) {
        (Some(me), Some(c)) if me > c => ATTACHED,
        _ => PRELOADED,
    };
    MODE.store(mode, Release);
}
