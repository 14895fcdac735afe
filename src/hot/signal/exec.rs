//! exec, posix_spawn, system, popen: what a new image inherits.
//!
//! Part of `hot::signal` (re-exported there: every
//! `crate::hot::signal::*` path stays).

use super::*;

/// Before an exec (or a spawn on this thread): the real mask and
/// disposition become the program's, so the new image inherits the mask
/// the program set and an ignored dump signal stays ignored. Returns what
/// [`restore_after_exec`] undoes.
pub fn prepare_exec() -> u32 {
    let sig = signal();
    if sig == 0 {
        return 0;
    }
    let mut done = 0;
    // SAFETY: this thread's own state.
    if unsafe { (*guard::state()).dump_sig_blocked } == 0 {
        sys::sigmask(libc::SIG_UNBLOCK, Some(bit()), None);
        done |= 1;
    }
    if APP_HANDLER.load(Acquire) == libc::SIG_IGN {
        // SAFETY: zeroed sigaction is SIG_DFL with an empty mask.
        let mut ign: libc::sigaction = unsafe { core::mem::zeroed() };
        ign.sa_sigaction = libc::SIG_IGN;
        real_sigaction(sig, &ign, core::ptr::null_mut());
        done |= 2;
    }
    done
}

/// The exec failed (or the spawn is done): heaplive's mask and handler again.
pub fn restore_after_exec(done: u32) {
    let sig = signal();
    if done & 2 != 0 {
        let act = our_action();
        real_sigaction(sig, &act, core::ptr::null_mut());
    }
    if done & 1 != 0 {
        sys::sigmask(libc::SIG_BLOCK, Some(bit()), None);
    }
}

/// posix_spawn's attributes: unless the program chose the child's mask, the
/// child gets the program's mask, not ours. Returns the attributes to use.
pub fn spawn_attr(
    attr: *const libc::posix_spawnattr_t,
    local: &mut libc::posix_spawnattr_t,
) -> *const libc::posix_spawnattr_t {
    if bit() == 0 {
        return attr;
    }
    // SAFETY: attr is the program's initialised attribute object or null;
    // glibc's is a plain struct that may be copied.
    unsafe {
        if attr.is_null() {
            libc::posix_spawnattr_init(local);
        } else {
            *local = core::ptr::read(attr);
        }
        let mut flags: libc::c_short = 0;
        libc::posix_spawnattr_getflags(local, &mut flags);
        if flags as c_int & libc::POSIX_SPAWN_SETSIGMASK != 0 {
            return attr;
        }
        let mut m: libc::sigset_t = core::mem::zeroed();
        sys::set_kmask(&mut m, program_mask());
        libc::posix_spawnattr_setsigmask(local, &m);
        libc::posix_spawnattr_setflags(
            local,
            (flags as c_int | libc::POSIX_SPAWN_SETSIGMASK) as libc::c_short,
        );
    }
    local
}

/// The virtual disposition is SIG_IGN (a spawned child must inherit that).
pub fn program_ignores() -> bool {
    signal() != 0 && APP_HANDLER.load(Acquire) == libc::SIG_IGN
}

/// Only the SIG_IGN half of [`prepare_exec`] (posix_spawn: the mask goes
/// through the attributes).
pub fn ignore_for_spawn() -> u32 {
    if !program_ignores() {
        return 0;
    }
    // SAFETY: zeroed sigaction is SIG_DFL with an empty mask.
    let mut ign: libc::sigaction = unsafe { core::mem::zeroed() };
    ign.sa_sigaction = libc::SIG_IGN;
    real_sigaction(signal(), &ign, core::ptr::null_mut());
    2
}
