//! Process functions: fork (the child gets a dumper thread of its own) and
//! the exec family (a dump that was requested or is being written is
//! finished first).

use crate::hot::real::{self, Sym, call};
use crate::hot::{forking, guard, pid, services, sys, trigger};

/// `fork`: the real one, then in the child a dumper thread of its own.
///
/// # Safety
/// The contract of C's `fork` (fork(2)).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn fork() -> libc::pid_t {
    // A program of one thread forks as without heaplive (`hot::forking`).
    let single = forking::before_fork();
    let r = match real::c_fn(Sym::Fork) {
        0 => {
            sys::set_errno(libc::ENOSYS);
            -1
        }
        a => call!(a, fn() -> libc::pid_t,),
    };
    if r != 0 {
        forking::after_fork_in_parent(single);
    } else {
        let _errno = sys::ErrnoGuard::save();
        trigger::ensure_dumper();
    }
    r
}

// ---------------------------------------------------------------------------
// exec: the image is replaced (same pid) and the dumper thread with it. A
// dump that was requested, or is being written, would be lost: php-fpm's
// master re-executes itself on SIGUSR2 right after its workers exit. Each
// exec function is a trampoline that first finishes such a dump on the
// calling thread, then jumps to the real function with the arguments
// untouched (execl and friends are variadic: every argument register, %al
// and the stack are kept).

macro_rules! exec_export {
    ($name:ident, $sym:ident) => {
        /// # Safety
        /// The contract of the C function of the same name.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        #[unsafe(naked)]
        pub unsafe extern "C" fn $name() {
            core::arch::naked_asm!(
                "push rdi",
                "push rsi",
                "push rdx",
                "push rcx",
                "push r8",
                "push r9",
                "push rax",
                "mov edi, {sym}",
                "call {prepare}",
                "mov r11, rax",
                "pop rax",
                "pop r9",
                "pop r8",
                "pop rcx",
                "pop rdx",
                "pop rsi",
                "pop rdi",
                "jmp r11",
                sym = const Sym::$sym as usize,
                prepare = sym exec_prepare,
            )
        }
    };
}

exec_export!(execve, Execve);
exec_export!(execv, Execv);
exec_export!(execvp, Execvp);
exec_export!(execvpe, Execvpe);
exec_export!(execl, Execl);
exec_export!(execlp, Execlp);
exec_export!(execle, Execle);
exec_export!(fexecve, Fexecve);

/// Before an exec: serve a pending dump request, or wait for the dump in
/// progress. Returns the real function (a stub failing with ENOSYS if it
/// cannot be found).
extern "C" fn exec_prepare(sym: usize) -> usize {
    let _errno = sys::ErrnoGuard::save();
    // Not in the child of a vfork (it shares the parent's memory and thread,
    // and must do nothing but exec): there our pid is still the parent's.
    if !guard::busy()
        && sys::getpid() == pid::get()
        && let Some(s) = services::get()
    {
        (s.before_exec)();
    }
    let s = Sym::from_index(sym).unwrap_or(Sym::Execve);
    match real::c_fn(s) {
        0 => exec_unavailable as *const () as usize,
        a => a,
    }
}

extern "C" fn exec_unavailable() -> i32 {
    sys::set_errno(libc::ENOSYS);
    -1
}
