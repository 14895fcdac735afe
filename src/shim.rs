//! Every exported allocation symbol, each a few lines: the real call, and
//! around it `hooks::on_alloc` / `hooks::on_free`.
//!
//! Exports carry `#[cfg_attr(not(test), unsafe(no_mangle))]` so that unit
//! tests do not interpose the test runner's own malloc.

use crate::guard::{self, Busy};
use crate::hooks::{on_alloc, on_free, retrack, untrack_for_realloc};
use crate::real::{self, Sym, call, is_boot};
use core::ffi::{c_int, c_void};

type Ptr = *mut c_void;

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn malloc(size: usize) -> Ptr {
    let p = real::malloc(size);
    if !p.is_null() {
        on_alloc(p, size);
    }
    p
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn free(p: Ptr) {
    if is_boot(p) {
        return;
    }
    // The sample leaves before the real free: after it, another thread may
    // get the same address from malloc and sample it.
    on_free(p);
    real::free(p)
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> Ptr {
    let p = real::calloc(n, size);
    if !p.is_null() {
        // The real calloc refuses overflowing products, so this one fits.
        on_alloc(p, n.wrapping_mul(size));
    }
    p
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn realloc(p: Ptr, size: usize) -> Ptr {
    if p.is_null() || is_boot(p) {
        let q = real::realloc(p, size);
        if !q.is_null() {
            on_alloc(q, size);
        }
        return q;
    }
    let old = untrack_for_realloc(p);
    let q = real::realloc(p, size);
    if q.is_null() {
        // realloc(p, 0) freed p; any other failure left p as it was.
        if size != 0 {
            if let Some(e) = old {
                retrack(e);
            }
        }
        return q;
    }
    on_alloc(q, size);
    q
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn reallocarray(p: Ptr, n: usize, size: usize) -> Ptr {
    let total = n.checked_mul(size);
    let a = real::c_fn(Sym::Reallocarray);
    if a == 0 || is_boot(p) {
        return match total {
            // SAFETY: same contract as ours.
            Some(t) => unsafe { realloc(p, t) },
            None => {
                crate::sys::set_errno(libc::ENOMEM);
                core::ptr::null_mut()
            }
        };
    }
    let old = if p.is_null() {
        None
    } else {
        untrack_for_realloc(p)
    };
    let q = {
        // glibc's reallocarray calls realloc through the PLT: don't count
        // it twice.
        let _busy = Busy::enter();
        call!(a, fn(Ptr, usize, usize) -> Ptr, p, n, size)
    };
    if q.is_null() {
        if total != Some(0) {
            if let Some(e) = old {
                retrack(e);
            }
        }
        return q;
    }
    on_alloc(q, total.unwrap_or(0));
    q
}

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn posix_memalign(out: *mut Ptr, align: usize, size: usize) -> c_int {
    let r = match real::c_fn(Sym::PosixMemalign) {
        0 => {
            let p = real::boot_alloc(size, align.max(16).next_power_of_two());
            if p.is_null() {
                return libc::ENOMEM;
            }
            // SAFETY: the caller gives a valid out-pointer.
            unsafe { *out = p };
            return 0;
        }
        a => call!(a, fn(*mut Ptr, usize, usize) -> c_int, out, align, size),
    };
    if r == 0 {
        // SAFETY: on success the real function stored a pointer there.
        on_alloc(unsafe { *out }, size);
    }
    r
}

macro_rules! aligned_export {
    ($name:ident, $sym:ident, ($($arg:ident),*), $size:expr, $boot_align:expr) => {
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name($($arg: usize),*) -> Ptr {
            let p = match real::c_fn(Sym::$sym) {
                0 => real::boot_alloc($size, $boot_align),
                a => call!(a, fn($(aligned_export!(@usize $arg)),*) -> Ptr, $($arg),*),
            };
            if !p.is_null() {
                on_alloc(p, $size);
            }
            p
        }
    };
    (@usize $arg:ident) => { usize };
}

aligned_export!(
    aligned_alloc,
    AlignedAlloc,
    (align, size),
    size,
    align.next_power_of_two()
);
aligned_export!(
    memalign,
    Memalign,
    (align, size),
    size,
    align.next_power_of_two()
);
aligned_export!(valloc, Valloc, (size), size, 4096);
aligned_export!(pvalloc, Pvalloc, (size), size, 4096);

#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn malloc_usable_size(p: Ptr) -> usize {
    real::malloc_usable_size(p)
}

// ---------------------------------------------------------------------------
// C++ operators.
//
// A throwing `new` first asks the real *nothrow* variant with the guard set
// (its inner malloc is then not counted twice): that call always returns,
// so the guard is never left set by an exception. On NULL (no memory, no
// new_handler, or a handler that threw) the real throwing variant runs
// without the guard: it calls the new_handler and throws std::bad_alloc
// through our frame to the program's catch (hence "C-unwind"); a block it
// does obtain is counted by our malloc.

/// The object passed as `const std::nothrow_t&` (an empty struct).
static NOTHROW: u8 = 0;

#[inline(always)]
fn nothrow_arg() -> *const u8 {
    &NOTHROW
}

fn call_throwing(a: usize, size: usize, align: Option<usize>) -> Ptr {
    // SAFETY: `a` is the real operator new of this shape, which may unwind.
    unsafe {
        match align {
            None => {
                let f: unsafe extern "C-unwind" fn(usize) -> Ptr = core::mem::transmute(a);
                f(size)
            }
            Some(al) => {
                let f: unsafe extern "C-unwind" fn(usize, usize) -> Ptr = core::mem::transmute(a);
                f(size, al)
            }
        }
    }
}

fn call_nothrow(a: usize, size: usize, align: Option<usize>) -> Ptr {
    match align {
        None => call!(a, fn(usize, *const u8) -> Ptr, size, nothrow_arg()),
        Some(al) => call!(
            a,
            fn(usize, usize, *const u8) -> Ptr,
            size,
            al,
            nothrow_arg()
        ),
    }
}

/// No libstdc++ is loaded at all, yet someone called operator new (a
/// program with its own C++ runtime): serve it from malloc.
#[cold]
fn new_without_libstdcxx(size: usize, align: Option<usize>, nothrow: bool) -> Ptr {
    // SAFETY: our own exports, with their contracts.
    let p = unsafe {
        match align {
            None => malloc(size.max(1)),
            Some(al) => aligned_alloc(al, size.div_ceil(al).max(1) * al),
        }
    };
    if p.is_null() && !nothrow {
        crate::log::line(format_args!(
            "heaplive: operator new({size}) failed and no libstdc++ is loaded to throw std::bad_alloc; aborting"
        ));
        // SAFETY: abort has no preconditions; there is no way to report
        // this failure to the caller.
        unsafe { libc::abort() };
    }
    p
}

#[inline(always)]
fn new_throwing(throwing: Sym, nothrow: Sym, size: usize, align: Option<usize>) -> Ptr {
    if !guard::busy() {
        let nt = real::cxx_fn(nothrow);
        if nt != 0 {
            let p = {
                let _busy = Busy::enter();
                call_nothrow(nt, size, align)
            };
            if !p.is_null() {
                on_alloc(p, size);
                return p;
            }
        }
    }
    match real::cxx_fn(throwing) {
        0 => new_without_libstdcxx(size, align, false),
        a => call_throwing(a, size, align),
    }
}

#[inline(always)]
fn new_nothrow(nothrow: Sym, size: usize, align: Option<usize>) -> Ptr {
    match real::cxx_fn(nothrow) {
        0 => new_without_libstdcxx(size, align, true),
        a => {
            let p = {
                let _busy = Busy::enter();
                call_nothrow(a, size, align)
            };
            if !p.is_null() {
                on_alloc(p, size);
            }
            p
        }
    }
}

/// _Znwm // operator new(size_t)
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C-unwind" fn _Znwm(size: usize) -> Ptr {
    new_throwing(Sym::New, Sym::NewNothrow, size, None)
}
/// _Znam // operator new[](size_t)
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C-unwind" fn _Znam(size: usize) -> Ptr {
    new_throwing(Sym::NewArr, Sym::NewArrNothrow, size, None)
}
/// _ZnwmSt11align_val_t // operator new(size_t, std::align_val_t)
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C-unwind" fn _ZnwmSt11align_val_t(size: usize, al: usize) -> Ptr {
    new_throwing(Sym::NewAligned, Sym::NewAlignedNothrow, size, Some(al))
}
/// _ZnamSt11align_val_t // operator new[](size_t, std::align_val_t)
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C-unwind" fn _ZnamSt11align_val_t(size: usize, al: usize) -> Ptr {
    new_throwing(
        Sym::NewArrAligned,
        Sym::NewArrAlignedNothrow,
        size,
        Some(al),
    )
}
/// _ZnwmRKSt9nothrow_t // operator new(size_t, const std::nothrow_t&)
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn _ZnwmRKSt9nothrow_t(size: usize, _nt: *const u8) -> Ptr {
    new_nothrow(Sym::NewNothrow, size, None)
}
/// _ZnamRKSt9nothrow_t // operator new[](size_t, const std::nothrow_t&)
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn _ZnamRKSt9nothrow_t(size: usize, _nt: *const u8) -> Ptr {
    new_nothrow(Sym::NewArrNothrow, size, None)
}
/// _ZnwmSt11align_val_tRKSt9nothrow_t // operator new(size_t, std::align_val_t, const std::nothrow_t&)
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn _ZnwmSt11align_val_tRKSt9nothrow_t(
    size: usize,
    al: usize,
    _nt: *const u8,
) -> Ptr {
    new_nothrow(Sym::NewAlignedNothrow, size, Some(al))
}
/// _ZnamSt11align_val_tRKSt9nothrow_t // operator new[](size_t, std::align_val_t, const std::nothrow_t&)
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn _ZnamSt11align_val_tRKSt9nothrow_t(
    size: usize,
    al: usize,
    _nt: *const u8,
) -> Ptr {
    new_nothrow(Sym::NewArrAlignedNothrow, size, Some(al))
}

/// Deletes: forget the sample, then the real delete (whose free passes our
/// filter again, cheaply); plain free when no libstdc++ is loaded.
macro_rules! delete_export {
    ($(#[$doc:meta])* $name:ident, $sym:ident, ($($arg:ident: $t:ty),*)) => {
        $(#[$doc])*
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(p: Ptr $(, $arg: $t)*) {
            if is_boot(p) {
                return;
            }
            on_free(p);
            match real::cxx_fn(Sym::$sym) {
                0 => real::free(p),
                a => call!(a, fn(Ptr $(, $t)*) -> (), p $(, $arg)*),
            }
        }
    };
}

delete_export!(/// operator delete(void*)
    _ZdlPv, Delete, ());
delete_export!(/// operator delete[](void*)
    _ZdaPv, DeleteArr, ());
delete_export!(/// operator delete(void*, const std::nothrow_t&)
    _ZdlPvRKSt9nothrow_t, DeleteNothrow, (nt: *const u8));
delete_export!(/// operator delete[](void*, const std::nothrow_t&)
    _ZdaPvRKSt9nothrow_t, DeleteArrNothrow, (nt: *const u8));
delete_export!(/// operator delete(void*, size_t)
    _ZdlPvm, DeleteSized, (size: usize));
delete_export!(/// operator delete[](void*, size_t)
    _ZdaPvm, DeleteArrSized, (size: usize));
delete_export!(/// operator delete(void*, std::align_val_t)
    _ZdlPvSt11align_val_t, DeleteAligned, (al: usize));
delete_export!(/// operator delete[](void*, std::align_val_t)
    _ZdaPvSt11align_val_t, DeleteArrAligned, (al: usize));
delete_export!(/// operator delete(void*, std::align_val_t, const std::nothrow_t&)
    _ZdlPvSt11align_val_tRKSt9nothrow_t, DeleteAlignedNothrow, (al: usize, nt: *const u8));
delete_export!(/// operator delete[](void*, std::align_val_t, const std::nothrow_t&)
    _ZdaPvSt11align_val_tRKSt9nothrow_t, DeleteArrAlignedNothrow, (al: usize, nt: *const u8));
delete_export!(/// operator delete(void*, size_t, std::align_val_t)
    _ZdlPvmSt11align_val_t, DeleteSizedAligned, (size: usize, al: usize));
delete_export!(/// operator delete[](void*, size_t, std::align_val_t)
    _ZdaPvmSt11align_val_t, DeleteArrSizedAligned, (size: usize, al: usize));
