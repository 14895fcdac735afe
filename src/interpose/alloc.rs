//! Every exported allocation symbol, each a few lines: the real call, and
//! around it the boundary's calls (`hot::api`: `on_alloc`, `on_free`, ...).
//!
//! Exports carry `#[cfg_attr(not(test), unsafe(no_mangle))]` so that unit
//! tests do not interpose the test runner's own malloc.

use crate::hot::guard::Busy;
use crate::hot::poison;
use crate::hot::real::{self, Sym, call, is_boot};
use crate::hot::track::{
    count_alloc, fast_alloc, fast_free, on_alloc, on_free, retrack, untrack_for_realloc,
};
use core::ffi::{c_int, c_void};
use core::sync::atomic::Ordering::Relaxed;

type Ptr = *mut c_void;

/// `malloc`.
///
/// The common case is [`count_alloc`] and a jump to the real malloc
/// (`real::MALLOC_JUMP`): no frame of ours, nothing after the call.
///
/// # Safety
/// The contract of C's `malloc` (malloc(3)).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn malloc(size: usize) -> Ptr {
    if count_alloc(size) {
        let a = real::MALLOC_JUMP.load(Relaxed);
        return call!(a, fn(usize) -> Ptr, size);
    }
    malloc_slow(size)
}

/// `malloc` around the real call, when the countdown crosses zero.
#[cold]
#[inline(never)]
fn malloc_slow(size: usize) -> Ptr {
    let p = real::malloc(size);
    if !p.is_null() {
        poison::on_alloc(p, size);
        on_alloc(p, size);
    }
    p
}

/// `free`.
///
/// The common case is [`fast_free`] (the shadow bitmap test) and a jump to
/// the real free (`real::FREE_JUMP`).
///
/// # Safety
/// The contract of C's `free` (malloc(3)).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn free(p: Ptr) {
    if is_boot(p) {
        return;
    }
    if fast_free(p) {
        let a = real::FREE_JUMP.load(Relaxed);
        return call!(a, fn(Ptr) -> (), p);
    }
    // SAFETY: the caller's block, as free(3) requires.
    unsafe { free_slow(p) }
}

/// `free` of a block that may hold a sample.
///
/// # Safety
/// As free(3); `p` is not a bootstrap block.
#[cold]
#[inline(never)]
unsafe fn free_slow(p: Ptr) {
    // The sample leaves before the real free: after it, another thread may
    // get the same address from malloc and sample it.
    on_free(p);
    // SAFETY: the caller's block, as free(3) requires.
    unsafe {
        poison::on_free(p);
        real::free(p)
    }
}

/// `calloc`.
///
/// # Safety
/// The contract of C's `calloc` (malloc(3)).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> Ptr {
    if let Some(total) = n.checked_mul(size)
        && fast_alloc(total)
    {
        let a = real::addr(Sym::Calloc);
        if a != 0 {
            return call!(a, fn(usize, usize) -> Ptr, n, size);
        }
    }
    calloc_slow(n, size)
}

#[cold]
#[inline(never)]
fn calloc_slow(n: usize, size: usize) -> Ptr {
    let p = real::calloc(n, size);
    if !p.is_null() {
        // The real calloc refuses overflowing products, so this one fits.
        on_alloc(p, n.wrapping_mul(size));
    }
    p
}

/// `realloc`.
///
/// # Safety
/// The contract of C's `realloc` (malloc(3)).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn realloc(p: Ptr, size: usize) -> Ptr {
    if p.is_null() || is_boot(p) {
        // SAFETY: null or a bootstrap block.
        let q = unsafe { real::realloc(p, size) };
        if !q.is_null() {
            if p.is_null() {
                poison::on_alloc(q, size);
            }
            on_alloc(q, size);
        }
        return q;
    }
    let old = untrack_for_realloc(p);
    // SAFETY: the caller's live block.
    let old_len = unsafe { poison::old_len(p) };
    // SAFETY: the caller's block, as realloc(3) requires.
    let q = unsafe { real::realloc(p, size) };
    if q.is_null() {
        // realloc(p, 0) freed p; any other failure left p as it was.
        if size != 0
            && let Some(e) = old
        {
            retrack(e);
        }
        return q;
    }
    // SAFETY: q is the resized block of `size` bytes.
    unsafe { poison::on_grown(q, old_len, size) };
    on_alloc(q, size);
    q
}

/// `reallocarray`.
///
/// # Safety
/// The contract of C's `reallocarray` (malloc(3)).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn reallocarray(p: Ptr, n: usize, size: usize) -> Ptr {
    let total = n.checked_mul(size);
    let a = real::c_fn(Sym::Reallocarray);
    if a == 0 || is_boot(p) {
        return match total {
            // SAFETY: same contract as ours.
            Some(t) => unsafe { realloc(p, t) },
            None => {
                crate::hot::sys::set_errno(libc::ENOMEM);
                core::ptr::null_mut()
            }
        };
    }
    let old = if p.is_null() {
        None
    } else {
        untrack_for_realloc(p)
    };
    // SAFETY: null or the caller's live block.
    let old_len = unsafe { poison::old_len(p) };
    let q = {
        // glibc's reallocarray calls realloc through the PLT: don't count
        // it twice.
        let _busy = Busy::enter();
        call!(a, fn(Ptr, usize, usize) -> Ptr, p, n, size)
    };
    if q.is_null() {
        if total != Some(0)
            && let Some(e) = old
        {
            retrack(e);
        }
        return q;
    }
    let total = total.unwrap_or(0);
    // SAFETY: q is the resized block of `total` bytes.
    unsafe { poison::on_grown(q, old_len, total) };
    on_alloc(q, total);
    q
}

/// `posix_memalign`.
///
/// # Safety
/// The contract of C's `posix_memalign` (malloc(3)).
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
        let p = unsafe { *out };
        poison::on_alloc(p, size);
        on_alloc(p, size);
    }
    r
}

macro_rules! aligned_export {
    ($name:ident, $slow:ident, $sym:ident, ($($arg:ident),*), $size:expr, $boot_align:expr) => {
        /// # Safety
        /// The contract of the C function of the same name.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name($($arg: usize),*) -> Ptr {
            // Evaluated once: for aligned_alloc it takes the note of an
            // aligned operator new.
            let counted: usize = $size;
            if fast_alloc(counted) {
                let a = real::addr(Sym::$sym);
                if a != 0 {
                    return call!(a, fn($(aligned_export!(@usize $arg)),*) -> Ptr, $($arg),*);
                }
            }
            $slow($($arg,)* counted)
        }

        // The export around the real call; `counted` is the size the
        // profile counts.
        #[cold]
        #[inline(never)]
        fn $slow($($arg: usize,)* counted: usize) -> Ptr {
            let p = match real::c_fn(Sym::$sym) {
                0 => real::boot_alloc(counted, $boot_align),
                a => call!(a, fn($(aligned_export!(@usize $arg)),*) -> Ptr, $($arg),*),
            };
            if !p.is_null() {
                poison::on_alloc(p, counted);
                on_alloc(p, counted);
            }
            p
        }
    };
    (@usize $arg:ident) => { usize };
}

/// The size an aligned operator new asked for, when this aligned_alloc is
/// its rounded-up call; clears the note either way.
#[inline(always)]
fn requested_size(size: usize, align: usize) -> usize {
    let t = crate::hot::guard::state();
    // SAFETY: this thread's own state.
    let hint = unsafe { core::mem::replace(&mut (*t).aligned_new_size, 0) };
    match hint.checked_sub(1) {
        Some(asked) if (asked as usize) <= size && size - (asked as usize) < align.max(1) => {
            asked as usize
        }
        _ => size,
    }
}

aligned_export!(
    aligned_alloc,
    aligned_alloc_slow,
    AlignedAlloc,
    (align, size),
    requested_size(size, align),
    align.next_power_of_two()
);
aligned_export!(
    memalign,
    memalign_slow,
    Memalign,
    (align, size),
    size,
    align.next_power_of_two()
);
aligned_export!(valloc, valloc_slow, Valloc, (size), size, 4096);
aligned_export!(pvalloc, pvalloc_slow, Pvalloc, (size), size, 4096);

/// `malloc_usable_size`.
///
/// # Safety
/// The contract of C's `malloc_usable_size` (malloc(3)).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn malloc_usable_size(p: Ptr) -> usize {
    // SAFETY: the caller's block, as malloc_usable_size(3) requires.
    unsafe { real::malloc_usable_size(p) }
}
