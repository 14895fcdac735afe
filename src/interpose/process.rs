//! Process functions: fork (the child gets a dumper thread of its own) and
//! the exec family (a dump that was requested or is being written is
//! finished first).

use crate::hot::real::{self, Sym, call};
use crate::hot::{forking, guard, pid, services, signal, sys, threads, trigger};

/// `fork`: the real one; in the child, a dumper thread of its own if the
/// parent had one (else it starts when the child first needs one).
///
/// # Safety
/// The contract of C's `fork` (fork(2)).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn fork() -> libc::pid_t {
    let had_dumper = trigger::dumper_pid() == pid::get();
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
    } else if had_dumper {
        let _errno = sys::ErrnoGuard::save();
        trigger::ensure_dumper();
    }
    r
}

// ---------------------------------------------------------------------------
// exec: the image is replaced (same pid) and the dumper thread with it. A
// dump that was requested, or is being written, would be lost: php-fpm's
// master re-executes itself on SIGUSR2 right after its workers exit. And
// the new image must inherit the program's mask and an ignored dump signal
// (heaplive's are not the program's). Each exec function is a trampoline
// that prepares on the calling thread, swaps its return address for a
// landing pad that undoes the preparation if the exec fails, and jumps to
// the real function with the arguments untouched (execl and friends are
// variadic: every argument register, %al and the stack are kept).

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
                "lea rsi, [rsp + 56]",
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
exec_export!(execveat, Execveat);

/// Before an exec: serve a pending dump request, or wait for the dump in
/// progress; give the new image the program's mask and disposition; make
/// a failed exec return through [`exec_returned`]. Returns the real
/// function (a stub failing with ENOSYS if it cannot be found).
extern "C" fn exec_prepare(sym: usize, ret_slot: *mut usize) -> usize {
    let _errno = sys::ErrnoGuard::save();
    // Not in the child of a vfork (it shares the parent's memory and thread,
    // and must do nothing but exec): there our pid is still the parent's.
    if !guard::busy()
        && sys::getpid() == pid::get()
        && let Some(s) = services::get()
    {
        (s.before_exec)();
    }
    let st = guard::state();
    // SAFETY: this thread's own state; ret_slot is the caller's return
    // address on the stack, which the trampoline computed.
    unsafe {
        (*st).exec_done = signal::prepare_exec() as u64;
        (*st).exec_return = *ret_slot as u64;
        *ret_slot = exec_returned as *const () as usize;
    }
    let s = Sym::from_index(sym).unwrap_or(Sym::Execve);
    match real::c_fn(s) {
        0 => exec_unavailable as *const () as usize,
        a => a,
    }
}

/// Where a failed exec returns: undo, then back to the caller with the
/// result in rax.
#[unsafe(naked)]
unsafe extern "C" fn exec_returned() {
    core::arch::naked_asm!(
        "push rax",
        "sub rsp, 8",
        "call {failed}",
        "add rsp, 8",
        "mov r11, rax",
        "pop rax",
        "jmp r11",
        failed = sym exec_failed,
    )
}

/// The exec failed: heaplive's mask and handler again. Returns the
/// caller's return address.
extern "C" fn exec_failed() -> usize {
    let _errno = sys::ErrnoGuard::save();
    let st = guard::state();
    // SAFETY: this thread's own state, set by exec_prepare.
    unsafe {
        signal::restore_after_exec((*st).exec_done as u32);
        (*st).exec_done = 0;
        (*st).exec_return as usize
    }
}

extern "C" fn exec_unavailable() -> i32 {
    sys::set_errno(libc::ENOSYS);
    -1
}

// ---------------------------------------------------------------------------
// posix_spawn, system, popen: the child inherits the program's mask (and an
// ignored dump signal), not heaplive's.

macro_rules! spawn_export {
    ($(#[$doc:meta])* $name:ident, $sym:ident) => {
        $(#[$doc])*
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(
            pid: *mut libc::pid_t,
            path: *const libc::c_char,
            fa: *const libc::posix_spawn_file_actions_t,
            attr: *const libc::posix_spawnattr_t,
            argv: *const *mut libc::c_char,
            envp: *const *mut libc::c_char,
        ) -> libc::c_int {
            let a = match real::c_fn(Sym::$sym) {
                0 => return libc::ENOSYS,
                a => a,
            };
            // SAFETY: zeroed is a valid place for a copy of the attributes.
            let mut local: libc::posix_spawnattr_t = unsafe { core::mem::zeroed() };
            let at = signal::spawn_attr(attr, &mut local);
            let done = signal::ignore_for_spawn();
            let r = call!(
                a,
                fn(
                    *mut libc::pid_t,
                    *const libc::c_char,
                    *const libc::posix_spawn_file_actions_t,
                    *const libc::posix_spawnattr_t,
                    *const *mut libc::c_char,
                    *const *mut libc::c_char,
                ) -> libc::c_int,
                pid,
                path,
                fa,
                at,
                argv,
                envp
            );
            signal::restore_after_exec(done);
            r
        }
    };
}

spawn_export!(
    /// `posix_spawn`.
    ///
    /// # Safety
    /// The contract of C's `posix_spawn`.
    posix_spawn,
    PosixSpawn
);
spawn_export!(
    /// `posix_spawnp`.
    ///
    /// # Safety
    /// The contract of C's `posix_spawnp`.
    posix_spawnp,
    PosixSpawnp
);

/// `system` and `popen`: the real function `sym` (or `failed`, errno
/// ENOSYS, without it) called by `f` with the program's mask and
/// disposition, heaplive's restored after it (errno kept).
#[inline(always)]
fn with_program_signals<R>(sym: Sym, failed: R, f: impl FnOnce(usize) -> R) -> R {
    let a = match real::c_fn(sym) {
        0 => {
            sys::set_errno(libc::ENOSYS);
            return failed;
        }
        a => a,
    };
    let done = signal::prepare_exec();
    let r = f(a);
    let _errno = sys::ErrnoGuard::save();
    signal::restore_after_exec(done);
    r
}

/// `system`: glibc spawns with the calling thread's real mask, so for the
/// call the real mask and disposition are the program's (a dump signal in
/// that window may run heaplive's handler on this thread; glibc's system
/// restarts its wait).
///
/// # Safety
/// The contract of C's `system`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn system(cmd: *const libc::c_char) -> libc::c_int {
    with_program_signals(Sym::System, -1, |a| {
        call!(a, fn(*const libc::c_char) -> libc::c_int, cmd)
    })
}

/// `popen`, as `system`.
///
/// # Safety
/// The contract of C's `popen`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn popen(
    cmd: *const libc::c_char,
    mode: *const libc::c_char,
) -> *mut libc::FILE {
    with_program_signals(Sym::Popen, core::ptr::null_mut(), |a| {
        call!(
            a,
            fn(*const libc::c_char, *const libc::c_char) -> *mut libc::FILE,
            cmd,
            mode
        )
    })
}

// ---------------------------------------------------------------------------
// Threads.

/// `pthread_create`: a thread inherits its creator's virtual mask.
///
/// # Safety
/// The contract of C's `pthread_create`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_create(
    t: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: threads::Start,
    arg: *mut libc::c_void,
) -> libc::c_int {
    if !guard::busy() && threads::creator_blocks() {
        let p = {
            let _busy = guard::Busy::enter();
            real::malloc(core::mem::size_of::<threads::Inherit>())
        };
        if !p.is_null() {
            // SAFETY: p has room for an Inherit; the thread frees it (or
            // we do, if it is not created).
            unsafe {
                core::ptr::write(p as *mut threads::Inherit, threads::Inherit { start, arg });
                let r = threads::create(t, attr, threads::start_blocked, p);
                if r != 0 {
                    let _busy = guard::Busy::enter();
                    real::free(p);
                }
                return r;
            }
        }
    }
    // SAFETY: the caller's arguments, passed on.
    unsafe { threads::create(t, attr, start, arg) }
}

/// `pthread_exit`: when the main thread leaves, heaplive's thread watches
/// for the program's last thread to end, and then ends itself, so glibc
/// ends the process as it would without heaplive.
///
/// # Safety
/// The contract of C's `pthread_exit`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_exit(v: *mut libc::c_void) -> ! {
    threads::before_thread_exit();
    let a = real::c_fn(Sym::PthreadExit);
    if a != 0 {
        // SAFETY: glibc's pthread_exit.
        let f: extern "C" fn(*mut libc::c_void) -> ! = unsafe { core::mem::transmute(a) };
        f(v)
    }
    loop {
        // SAFETY: ends this thread only.
        unsafe { libc::syscall(libc::SYS_exit, 0) };
    }
}

// ---------------------------------------------------------------------------
// Credentials: glibc changes them on every thread (its setxid broadcast).
// heaplive's thread steps out for the change (see
// `background::dumper::stop_dumper`) and comes back with the new ones.

fn around_setxid(f: &dyn Fn() -> libc::c_int) -> libc::c_int {
    let had = !guard::busy() && services::get().is_some_and(|s| (s.stop_dumper)());
    let r = f();
    if had {
        let _errno = sys::ErrnoGuard::save();
        trigger::ensure_dumper();
    }
    r
}

macro_rules! setxid_export {
    ($name:ident, $sym:ident, ($($arg:ident: $t:ty),*)) => {
        /// # Safety
        /// The contract of the C function of the same name.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name($($arg: $t),*) -> libc::c_int {
            let a = match real::c_fn(Sym::$sym) {
                0 => {
                    sys::set_errno(libc::ENOSYS);
                    return -1;
                }
                a => a,
            };
            around_setxid(&|| call!(a, fn($($t),*) -> libc::c_int, $($arg),*))
        }
    };
}

setxid_export!(setuid, Setuid, (u: libc::uid_t));
setxid_export!(setgid, Setgid, (g: libc::gid_t));
setxid_export!(seteuid, Seteuid, (u: libc::uid_t));
setxid_export!(setegid, Setegid, (g: libc::gid_t));
setxid_export!(setreuid, Setreuid, (r: libc::uid_t, e: libc::uid_t));
setxid_export!(setregid, Setregid, (r: libc::gid_t, e: libc::gid_t));
setxid_export!(setresuid, Setresuid, (r: libc::uid_t, e: libc::uid_t, s: libc::uid_t));
setxid_export!(setresgid, Setresgid, (r: libc::gid_t, e: libc::gid_t, s: libc::gid_t));
setxid_export!(setgroups, Setgroups, (n: libc::size_t, list: *const libc::gid_t));
setxid_export!(initgroups, Initgroups, (user: *const libc::c_char, g: libc::gid_t));
