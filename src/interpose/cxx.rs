//! The C++ operators new and delete.
//!
//! Each `operator new` is a trampoline that *jumps* to the real one, leaving
//! no frame of ours on the stack: the real `new` runs the new_handler loop
//! and throws std::bad_alloc exactly as it always does, and the exception
//! never crosses Rust code (built with panic=abort, Rust frames cannot be
//! unwound through). The real `new` allocates through malloc (libstdc++
//! calls malloc/aligned_alloc through the PLT), where our hook counts it
//! once; stack capture skips the real `new`'s frame (`real::in_real_new`),
//! so the leaf is still the function that called operator new.
//!
//! When no libstdc++ is loaded at all (a program with its own C++ runtime
//! that calls our exports), the jump goes to a fallback served by malloc.

use crate::hot::guard::ThreadState;
use crate::hot::real::{self, Sym};
use crate::interpose::alloc::{aligned_alloc, free, malloc};
use core::ffi::c_void;

type Ptr = *mut c_void;

macro_rules! cxx_jump {
    // The common case: the real function is known, jump to it.
    ($(#[$doc:meta])* $name:ident, $sym:ident, $fallback:path) => {
        cxx_jump!(@emit [] [] $(#[$doc])* $name, $sym, $fallback);
    };
    // Aligned new: first notes the requested size (size + 1, in this
    // thread's `aligned_new_size`, initial-exec TLS: rax and rcx are free
    // scratch registers here, the arguments are in rdi, rsi, rdx), for the
    // aligned_alloc that libstdc++ calls with the size rounded up; then as
    // above.
    (@noted $(#[$doc:meta])* $name:ident, $sym:ident, $fallback:path) => {
        cxx_jump!(@emit
            [
                "mov rax, qword ptr [rip + heaplive_thread_state@GOTTPOFF]",
                "lea rcx, [rdi + 1]",
                "mov qword ptr fs:[rax + {hint}], rcx",
            ]
            [hint = const core::mem::offset_of!(ThreadState, aligned_new_size),]
            $(#[$doc])* $name, $sym, $fallback);
    };
    // The trampoline: the instructions `$note` first (with their operands
    // `$operands`), then the jump.
    (@emit [$($note:literal,)*] [$($operands:tt)*] $(#[$doc:meta])* $name:ident, $sym:ident, $fallback:path) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The contract of the C++ operator it stands for.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        #[unsafe(naked)]
        #[allow(non_snake_case)] // the mangled C++ names
        pub unsafe extern "C" fn $name() {
            core::arch::naked_asm!(
                $($note,)*
                "mov rax, qword ptr [rip + {slots} + {off}]",
                "test rax, rax",
                "jz 2f",
                "jmp rax",
                "2:",
                cxx_jump!(@resolve),
                $($operands)*
                slots = sym real::SLOTS,
                off = const Sym::$sym as usize * 8,
                sym = const Sym::$sym as usize,
                fallback = sym $fallback,
                target = sym cxx_target,
            )
        }
    };
    // Keep the (up to three) arguments across `cxx_target(sym, fallback,
    // first argument)`; three pushes also align the stack for the call.
    (@resolve) => {
        "push rdi\n push rsi\n push rdx\n mov rdx, rdi\n mov edi, {sym}\n lea rsi, [rip + {fallback}]\n call {target}\n pop rdx\n pop rsi\n pop rdi\n jmp rax"
    };
}

/// The address a trampoline jumps to: the real operator, or the fallback
/// when no libstdc++ is loaded.
extern "C" fn cxx_target(sym: usize, fallback: usize, size: usize) -> usize {
    let s = real::Sym::from_index(sym).unwrap_or(Sym::New);
    if matches!(
        s,
        Sym::NewAligned | Sym::NewArrAligned | Sym::NewAlignedNothrow | Sym::NewArrAlignedNothrow
    ) {
        // SAFETY: this thread's own state.
        unsafe { (*crate::hot::guard::state()).aligned_new_size = size as u64 + 1 };
    }
    match real::cxx_fn(s) {
        0 => fallback,
        a => a,
    }
}

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
        crate::hot::log::line(format_args!(
            "heaplive: operator new({size}) failed and no libstdc++ is loaded to throw std::bad_alloc; aborting"
        ));
        // SAFETY: abort has no preconditions; without libstdc++ there is no
        // std::bad_alloc to throw.
        unsafe { libc::abort() };
    }
    p
}

extern "C" fn fallback_new(size: usize) -> Ptr {
    new_without_libstdcxx(size, None, false)
}
extern "C" fn fallback_new_aligned(size: usize, al: usize) -> Ptr {
    new_without_libstdcxx(size, Some(al), false)
}
extern "C" fn fallback_new_nothrow(size: usize, _nt: *const u8) -> Ptr {
    new_without_libstdcxx(size, None, true)
}
extern "C" fn fallback_new_aligned_nothrow(size: usize, al: usize, _nt: *const u8) -> Ptr {
    new_without_libstdcxx(size, Some(al), true)
}

cxx_jump!(/// _Znwm // operator new(size_t)
    _Znwm, New, fallback_new);
cxx_jump!(/// _Znam // operator new[](size_t)
    _Znam, NewArr, fallback_new);
cxx_jump!(/// _ZnwmRKSt9nothrow_t // operator new(size_t, const std::nothrow_t&)
    _ZnwmRKSt9nothrow_t, NewNothrow, fallback_new_nothrow);
cxx_jump!(/// _ZnamRKSt9nothrow_t // operator new[](size_t, const std::nothrow_t&)
    _ZnamRKSt9nothrow_t, NewArrNothrow, fallback_new_nothrow);
cxx_jump!(@noted /// _ZnwmSt11align_val_t // operator new(size_t, std::align_val_t)
    _ZnwmSt11align_val_t, NewAligned, fallback_new_aligned);
cxx_jump!(@noted /// _ZnamSt11align_val_t // operator new[](size_t, std::align_val_t)
    _ZnamSt11align_val_t, NewArrAligned, fallback_new_aligned);
cxx_jump!(@noted /// _ZnwmSt11align_val_tRKSt9nothrow_t // operator new(size_t, std::align_val_t, const std::nothrow_t&)
    _ZnwmSt11align_val_tRKSt9nothrow_t, NewAlignedNothrow, fallback_new_aligned_nothrow);
cxx_jump!(@noted /// _ZnamSt11align_val_tRKSt9nothrow_t // operator new[](size_t, std::align_val_t, const std::nothrow_t&)
    _ZnamSt11align_val_tRKSt9nothrow_t, NewArrAlignedNothrow, fallback_new_aligned_nothrow);

// Deletes jump to the real ones too: they end in `free`, whose hook forgets
// the sample. With no libstdc++ loaded, they are our `free`.

extern "C" fn delete_fallback(p: Ptr) {
    // SAFETY: our own export; operator delete has free's contract here.
    unsafe { free(p) }
}

cxx_jump!(/// _ZdlPv // operator delete(void*)
    _ZdlPv, Delete, delete_fallback);
cxx_jump!(/// _ZdaPv // operator delete[](void*)
    _ZdaPv, DeleteArr, delete_fallback);
cxx_jump!(/// _ZdlPvRKSt9nothrow_t // operator delete(void*, const std::nothrow_t&)
    _ZdlPvRKSt9nothrow_t, DeleteNothrow, delete_fallback);
cxx_jump!(/// _ZdaPvRKSt9nothrow_t // operator delete[](void*, const std::nothrow_t&)
    _ZdaPvRKSt9nothrow_t, DeleteArrNothrow, delete_fallback);
cxx_jump!(/// _ZdlPvm // operator delete(void*, size_t)
    _ZdlPvm, DeleteSized, delete_fallback);
cxx_jump!(/// _ZdaPvm // operator delete[](void*, size_t)
    _ZdaPvm, DeleteArrSized, delete_fallback);
cxx_jump!(/// _ZdlPvSt11align_val_t // operator delete(void*, std::align_val_t)
    _ZdlPvSt11align_val_t, DeleteAligned, delete_fallback);
cxx_jump!(/// _ZdaPvSt11align_val_t // operator delete[](void*, std::align_val_t)
    _ZdaPvSt11align_val_t, DeleteArrAligned, delete_fallback);
cxx_jump!(/// _ZdlPvSt11align_val_tRKSt9nothrow_t // operator delete(void*, std::align_val_t, const std::nothrow_t&)
    _ZdlPvSt11align_val_tRKSt9nothrow_t, DeleteAlignedNothrow, delete_fallback);
cxx_jump!(/// _ZdaPvSt11align_val_tRKSt9nothrow_t // operator delete[](void*, std::align_val_t, const std::nothrow_t&)
    _ZdaPvSt11align_val_tRKSt9nothrow_t, DeleteArrAlignedNothrow, delete_fallback);
cxx_jump!(/// _ZdlPvmSt11align_val_t // operator delete(void*, size_t, std::align_val_t)
    _ZdlPvmSt11align_val_t, DeleteSizedAligned, delete_fallback);
cxx_jump!(/// _ZdaPvmSt11align_val_t // operator delete[](void*, size_t, std::align_val_t)
    _ZdaPvmSt11align_val_t, DeleteArrSizedAligned, delete_fallback);
