//! The signal functions, for the dump signal only: the program sees and
//! sets a virtual disposition (`hot::signal`); every other signal goes
//! straight to libc.

use crate::hot::real::{self, Sym, call};
use crate::hot::signal::{is_dump_signal, real_sigaction, set_simple, virtual_sigaction};
use core::ffi::c_int;

/// `sigaction`.
///
/// # Safety
/// The contract of C's `sigaction` (signal(7)).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    if is_dump_signal(sig) {
        return virtual_sigaction(act, old);
    }
    real_sigaction(sig, act, old)
}

macro_rules! simple_signal_export {
    ($name:ident, $sym:ident, $flags:expr) => {
        /// # Safety
        /// The contract of the C function of the same name.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(
            sig: c_int,
            handler: libc::sighandler_t,
        ) -> libc::sighandler_t {
            if is_dump_signal(sig) {
                return set_simple(handler, $flags);
            }
            match real::c_fn(Sym::$sym) {
                0 => libc::SIG_ERR,
                a => call!(
                    a,
                    fn(c_int, libc::sighandler_t) -> libc::sighandler_t,
                    sig,
                    handler
                ),
            }
        }
    };
}

// glibc's signal() and bsd_signal() have BSD semantics; sysv_signal()
// resets the handler on delivery and does not block the signal.
simple_signal_export!(signal, Signal, libc::SA_RESTART);
simple_signal_export!(bsd_signal, BsdSignal, libc::SA_RESTART);
simple_signal_export!(
    sysv_signal,
    SysvSignal,
    libc::SA_RESETHAND | libc::SA_NODEFER
);

const SIG_HOLD: libc::sighandler_t = 2;

/// `sigset`.
///
/// # Safety
/// The contract of C's `sigset` (signal(7)).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn sigset(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if is_dump_signal(sig) && handler != SIG_HOLD {
        return set_simple(handler, 0);
    }
    match real::c_fn(Sym::Sigset) {
        0 => libc::SIG_ERR,
        a => call!(
            a,
            fn(c_int, libc::sighandler_t) -> libc::sighandler_t,
            sig,
            handler
        ),
    }
}
