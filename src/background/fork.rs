//! fork: the child keeps profiling with the samples it inherited (they are
//! really live there, copy-on-write), under its own pid, dump numbers,
//! eventfd and dumper thread.
//!
//! pthread_atfork handlers keep every lock consistent across fork(): prepare
//! takes them all (the leak reporter's lock, then the dump lock: the order
//! every other path uses), parent
//! and child release them. `_Fork`, vfork and posix_spawn run no handlers:
//! vfork and posix_spawn children only exec; a `_Fork` child that finds a
//! lock held by a thread that does not exist in it notices when it has
//! spun for a while (the pid changed) and resets the locks.

use crate::hot::guard::Busy;
use crate::hot::real::{self, Sym, call};
use crate::background::dumper as dump;
use crate::hot::live;
use crate::hot::stacks;
use crate::hot::sys;
use core::sync::atomic::{AtomicU32, Ordering::*};

static PID: AtomicU32 = AtomicU32::new(0);

/// This process's pid as the library knows it (updated in fork children).
#[inline]
pub fn pid() -> u32 {
    PID.load(Relaxed)
}

extern "C" fn prepare() {
    let _busy = Busy::enter();
    crate::hot::leak_check::lock_reporting_for_fork();
    dump::DUMP.lock_raw();
    crate::symbolize::modules::lock_for_fork();
    crate::hot::leak_check::lock_for_fork();
    stacks::lock_for_fork();
    live::lock_all_for_fork();
}

extern "C" fn parent() {
    // SAFETY: paired with prepare on this thread.
    unsafe { unlock_all() };
}

extern "C" fn child() {
    // SAFETY: the child has only this thread, which took the locks.
    unsafe { unlock_all() };
    become_child();
}

/// # Safety
/// After `prepare` on this thread, or in a child whose other threads are gone.
unsafe fn unlock_all() {
    // SAFETY: guaranteed by the caller.
    unsafe {
        live::unlock_all_after_fork();
        stacks::unlock_after_fork();
        crate::hot::leak_check::unlock_after_fork();
        crate::symbolize::modules::unlock_after_fork();
        dump::DUMP.unlock_raw();
        crate::hot::leak_check::unlock_reporting_after_fork();
    }
}

/// A new process: new pid, dump numbers from 1. The dumper thread is started
/// by our fork() wrapper or at the first sample, never here (an atfork
/// handler may not create threads).
fn become_child() {
    let pid = sys::getpid();
    PID.store(pid, Release);
    // Parent and child would otherwise draw the same sampling gaps.
    crate::hot::sampler::reseed_after_fork(pid);
    dump::reset_after_fork(&mut dump::DUMP.lock());
    crate::hot::shadow::reset_after_fork();
}

/// Called by a spin lock that has waited long: if the pid changed behind
/// our back (`_Fork`), the holder does not exist here; free everything.
#[cold]
pub fn check_orphaned_locks() {
    let now = sys::getpid();
    if now == pid() {
        return;
    }
    // SAFETY: we are a child created without atfork handlers, right after
    // the fork: the threads that held these locks are in the parent.
    unsafe { unlock_all() };
    become_child();
}

pub fn init() {
    PID.store(sys::getpid(), Release);
    // SAFETY: the handlers are plain functions that stay mapped.
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
}

/// fork(): the real one, then in the child a dumper thread of its own.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn fork() -> libc::pid_t {
    let r = match real::c_fn(Sym::Fork) {
        0 => {
            sys::set_errno(libc::ENOSYS);
            -1
        }
        a => call!(a, fn() -> libc::pid_t,),
    };
    if r == 0 {
        let _errno = sys::ErrnoGuard::save();
        dump::ensure_dumper();
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
    if !crate::hot::guard::busy() && sys::getpid() == pid() {
        dump::before_exec();
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
