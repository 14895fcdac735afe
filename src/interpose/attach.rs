//! What `heaplive attach` and `heaplive detach` call inside the target
//! (through ptrace, src/cli/src/attach.rs), and the `dlopen` that attached
//! modules call instead of libc's (hot/attach.rs says what attach mode is).

use crate::hot::attach::{attached, detached, set_detached};
use crate::hot::guard::Busy;
use crate::hot::real::{self, Sym, call};
use crate::hot::services;
use crate::hot::sys::ErrnoGuard;
use core::ffi::{CStr, c_char, c_int, c_void};
use core::sync::atomic::{AtomicBool, Ordering::*};

static STARTED: AtomicBool = AtomicBool::new(false);

/// The entry points whose GOT slots are redirected (for `dlopen`, to
/// `heaplive_attached_dlopen`).
const NAMES: [&CStr; 31] = [
    c"malloc",
    c"free",
    c"calloc",
    c"realloc",
    c"reallocarray",
    c"posix_memalign",
    c"aligned_alloc",
    c"memalign",
    c"valloc",
    c"pvalloc",
    c"dlopen",
    c"_Znwm",
    c"_Znam",
    c"_ZnwmRKSt9nothrow_t",
    c"_ZnamRKSt9nothrow_t",
    c"_ZnwmSt11align_val_t",
    c"_ZnamSt11align_val_t",
    c"_ZnwmSt11align_val_tRKSt9nothrow_t",
    c"_ZnamSt11align_val_tRKSt9nothrow_t",
    c"_ZdlPv",
    c"_ZdaPv",
    c"_ZdlPvRKSt9nothrow_t",
    c"_ZdaPvRKSt9nothrow_t",
    c"_ZdlPvm",
    c"_ZdaPvm",
    c"_ZdlPvSt11align_val_t",
    c"_ZdaPvSt11align_val_t",
    c"_ZdlPvSt11align_val_tRKSt9nothrow_t",
    c"_ZdaPvSt11align_val_tRKSt9nothrow_t",
    c"_ZdlPvmSt11align_val_t",
    c"_ZdaPvmSt11align_val_t",
];

/// Each slot's name and our function's address. The address comes from
/// dlsym on our own handle: inside this library, `malloc as usize` would
/// be read through its GOT, and attached (after libc, not global) that
/// slot holds libc's malloc.
fn targets() -> [(&'static CStr, usize); 31] {
    let mut out = [(c"", 0usize); 31];
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: a function of this library and a valid out-pointer.
    let own = unsafe {
        if libc::dladdr(heaplive_attach as *const () as *const c_void, &mut info) == 0 {
            return out;
        }
        libc::dlopen(info.dli_fname, libc::RTLD_NOLOAD | libc::RTLD_LAZY)
    };
    if own.is_null() {
        return out;
    }
    for (i, name) in NAMES.iter().enumerate() {
        let ours = if name.to_bytes() == b"dlopen" {
            c"heaplive_attached_dlopen"
        } else {
            name
        };
        // SAFETY: a valid handle and a NUL-terminated name.
        let a = unsafe { libc::dlsym(own, ours.as_ptr()) } as usize;
        out[i] = (name, a);
    }
    // SAFETY: the reference taken above.
    unsafe { libc::dlclose(own) };
    out
}

/// The same for a preloaded heaplive that another allocator came before
/// (`hot::winner::Winner::Library`): every entry point but `dlopen`, whose
/// slots already hold heaplive's (the other allocator defines none).
pub fn preload_targets() -> [(&'static CStr, usize); 31] {
    let mut t = targets();
    for e in t.iter_mut().filter(|(n, _)| n.to_bytes() == b"dlopen") {
        e.1 = 0;
    }
    t
}

/// `int heaplive_attach(const char *settings)`: applies the settings
/// (lines `HEAPLIVE_NAME=value`), starts heaplive and redirects every
/// loaded module's allocation slots. The number of slots rewritten, or -1
/// when this library was preloaded, -2 when already attached or detached,
/// -3 when heaplive is not initialised.
///
/// # Safety
/// `settings` is NULL or a NUL-terminated string.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn heaplive_attach(settings: *const c_char) -> c_int {
    let _busy = Busy::enter();
    let _errno = ErrnoGuard::save();
    if !attached() {
        return -1;
    }
    if detached() || STARTED.swap(true, AcqRel) {
        return -2;
    }
    let Some(s) = services::get() else { return -3 };
    let text: &[u8] = if settings.is_null() {
        b""
    } else {
        // SAFETY: the caller passes a NUL-terminated string.
        unsafe { CStr::from_ptr(settings) }.to_bytes()
    };
    (s.attach_start)(text);
    (s.patch)(&targets()) as c_int
}

/// `int heaplive_detach(void)`: puts every redirected slot back, stops
/// sampling and dumping, restores the dump signal's previous action. The
/// library stays loaded: a thread may still be inside one of its functions
/// (or hold a pointer to one, from a slot read before the restore), so
/// unmapping its code could crash the program. The number of slots
/// restored, or -1 when not attached.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn heaplive_detach() -> c_int {
    let _busy = Busy::enter();
    let _errno = ErrnoGuard::save();
    if !attached() || !STARTED.load(Acquire) || detached() {
        return -1;
    }
    let Some(s) = services::get() else { return -1 };
    let n = (s.restore)();
    set_detached();
    crate::hot::track::stop_sampling();
    // heaplive's thread ends as main ends it before a credential change
    // (`stop_dumper`); it removes the status file on its way out and does
    // not come back (`ensure_dumper` starts nothing once detached). Only
    // then is the dump signal given back, so no signal in between finds
    // neither taker.
    (s.stop_dumper)();
    crate::hot::signal::uninstall();
    n as c_int
}

/// What attached modules call instead of `dlopen`: the real one, then the
/// new modules' slots are redirected too. Unlike the preloaded `dlopen`
/// (interpose/dl.rs) this one calls rather than jumps, so glibc sees
/// heaplive as the caller: a bare name is searched with the executable's
/// DT_RPATH but not its DT_RUNPATH (README, attach limits).
///
/// # Safety
/// The contract of C's `dlopen` (dlopen(3)).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn heaplive_attached_dlopen(
    file: *const c_char,
    flags: c_int,
) -> *mut c_void {
    let h = match real::c_fn(Sym::Dlopen) {
        0 => return core::ptr::null_mut(),
        a => call!(
            a,
            fn(*const c_char, c_int) -> *mut c_void,
            file,
            flags & !libc::RTLD_DEEPBIND
        ),
    };
    if !h.is_null() && !detached() && !crate::hot::guard::busy() {
        let _busy = Busy::enter();
        let _errno = ErrnoGuard::save();
        if let Some(s) = services::get() {
            (s.patch)(&targets());
            (s.modules_changed)();
        }
    }
    h
}
