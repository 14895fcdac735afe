//! Signal names and the one policy of which signals may carry dump
//! requests. The library reads `HEAPLIVE_SIGNAL` with [`parse`]; the command
//! checks `--signal` with it and reads a process's environment with it, so
//! `heaplive dump` never sends a signal the library would not use.
//! Allocation-free and panic-free.

use core::fmt;

/// Every signal with a name, as `kill -l` spells them (without `SIG`).
pub const NAMES: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("STKFLT", libc::SIGSTKFLT),
    ("CHLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("IO", libc::SIGIO),
    ("PWR", libc::SIGPWR),
    ("SYS", libc::SIGSYS),
];

/// Why a value is not a usable dump signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not a signal name or number at all.
    Unknown,
    /// KILL, STOP.
    CannotBeCaught,
    /// SEGV, BUS, FPE, ILL, TRAP, SYS, ABRT: the program's own fault
    /// handlers (a JVM, a crash reporter) must never see a dump request.
    Fault,
    /// Below 1 or above SIGRTMAX.
    OutOfRange,
    /// Between 31 and SIGRTMIN: glibc's own (threads, cancellation).
    Reserved,
}

impl Refused {
    /// The reason, worded to follow `NAME='value'`.
    pub fn why(self) -> &'static str {
        match self {
            Refused::Unknown => "is not a signal name or number",
            Refused::CannotBeCaught => "cannot be caught",
            Refused::Fault => "reports faults and cannot carry dump requests",
            Refused::OutOfRange => "is out of range",
            Refused::Reserved => "is reserved by the C library",
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.why())
    }
}

/// Parses a signal value without the policy: `USR2`, `SIGUSR1`, `RTMIN+3`,
/// `SIGRTMAX-1`, `12` (any case). `Ok(0)` for `none`, `off` and `0`.
pub fn number(v: &[u8]) -> Result<i32, Refused> {
    let v = crate::grammar::trim(v);
    if v.eq_ignore_ascii_case(b"none") || v.eq_ignore_ascii_case(b"off") || v == b"0" {
        return Ok(0);
    }
    let name = match v.get(..3) {
        Some(p) if v.len() > 3 && p.eq_ignore_ascii_case(b"SIG") => v.get(3..).unwrap_or(&[]),
        _ => v,
    };
    let offset = |rest: &[u8]| -> Result<i32, Refused> {
        Ok(crate::grammar::parse_u64(rest)
            .ok_or(Refused::Unknown)?
            .min(1000) as i32)
    };
    if let Some(n) = crate::grammar::parse_u64(name) {
        return Ok(n.min(1000) as i32);
    }
    if let (Some(head), Some(tail)) = (name.get(..5), name.get(5..)) {
        let base = if head.eq_ignore_ascii_case(b"RTMIN") {
            Some(libc::SIGRTMIN())
        } else if head.eq_ignore_ascii_case(b"RTMAX") {
            Some(libc::SIGRTMAX())
        } else {
            None
        };
        if let Some(base) = base {
            return match tail {
                [] => Ok(base),
                [b'+', rest @ ..] => Ok(base + offset(rest)?),
                [b'-', rest @ ..] => Ok(base - offset(rest)?),
                _ => Err(Refused::Unknown),
            };
        }
    }
    NAMES
        .iter()
        .find(|(n, _)| name.eq_ignore_ascii_case(n.as_bytes()))
        .map(|&(_, s)| s)
        .ok_or(Refused::Unknown)
}

/// The policy: may `sig` carry dump requests? 0 (none) may.
pub fn check(sig: i32) -> Result<i32, Refused> {
    let (rtmin, rtmax) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    match sig {
        0 => Ok(0),
        libc::SIGKILL | libc::SIGSTOP => Err(Refused::CannotBeCaught),
        libc::SIGSEGV
        | libc::SIGBUS
        | libc::SIGFPE
        | libc::SIGILL
        | libc::SIGTRAP
        | libc::SIGSYS
        | libc::SIGABRT => Err(Refused::Fault),
        s if s < 1 || s > rtmax => Err(Refused::OutOfRange),
        s if s > 31 && s < rtmin => Err(Refused::Reserved),
        s => Ok(s),
    }
}

/// `HEAPLIVE_SIGNAL`: the dump signal, 0 for none, or why it is refused.
/// The library, `heaplive run --signal` and `heaplive dump` all use this.
pub fn parse(v: &[u8]) -> Result<i32, Refused> {
    check(number(v)?)
}

/// The dump signal a process with `HEAPLIVE_SIGNAL` = `value` (None: unset)
/// uses: a refused value leaves the default, SIGUSR2, as the library does.
pub fn effective(value: Option<&[u8]>) -> i32 {
    match value.map(parse) {
        Some(Ok(sig)) => sig,
        _ => libc::SIGUSR2,
    }
}

/// `SIGUSR2`, `SIGRTMIN+3`, `signal 33`: a signal for messages.
#[derive(Clone, Copy, Debug)]
pub struct Name(pub i32);

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if let Some((name, _)) = NAMES.iter().find(|(_, n)| *n == self.0) {
            return write!(f, "SIG{name}");
        }
        let rtmin = libc::SIGRTMIN();
        if self.0 >= rtmin && self.0 <= libc::SIGRTMAX() {
            return match self.0 - rtmin {
                0 => f.write_str("SIGRTMIN"),
                k => write!(f, "SIGRTMIN+{k}"),
            };
        }
        write!(f, "signal {}", self.0)
    }
}

/// `heaplive start PID` / `heaplive stop PID` send the dump signal with
/// `sigqueue(2)` and one of these values (`si_value.sival_int`); the
/// library's handler treats them as commands, not dump requests. A plain
/// `kill` carries no value (`si_code` is not `SI_QUEUE`).
pub const SIGVAL_START: i32 = 0x4850_0001;
pub const SIGVAL_STOP: i32 = 0x4850_0002;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_numbers_and_policy() {
        assert_eq!(parse(b"USR2"), Ok(libc::SIGUSR2));
        assert_eq!(parse(b"sigusr1"), Ok(libc::SIGUSR1));
        assert_eq!(parse(b"12"), Ok(12));
        assert_eq!(parse(b"none"), Ok(0));
        assert_eq!(parse(b"RTMIN+3"), Ok(libc::SIGRTMIN() + 3));
        assert_eq!(parse(b"SIGRTMAX-1"), Ok(libc::SIGRTMAX() - 1));
        assert_eq!(parse(b"RTMIN"), Ok(libc::SIGRTMIN()));
        assert_eq!(parse(b"STKFLT"), Ok(16));
        assert_eq!(parse(b"KILL"), Err(Refused::CannotBeCaught));
        assert_eq!(parse(b"SIGSTOP"), Err(Refused::CannotBeCaught));
        assert_eq!(parse(b"SEGV"), Err(Refused::Fault));
        assert_eq!(parse(b"bus"), Err(Refused::Fault));
        assert_eq!(parse(b"ABRT"), Err(Refused::Fault));
        assert_eq!(parse(b"9"), Err(Refused::CannotBeCaught));
        assert_eq!(parse(b"11"), Err(Refused::Fault));
        assert_eq!(parse(b"32"), Err(Refused::Reserved));
        assert_eq!(parse(b"33"), Err(Refused::Reserved));
        assert_eq!(parse(b"200"), Err(Refused::OutOfRange));
        assert_eq!(parse(b"RTMIN+99"), Err(Refused::OutOfRange));
        assert_eq!(parse(b"RTMIN-1"), Err(Refused::Reserved));
        assert_eq!(parse(b"USR3"), Err(Refused::Unknown));
        assert_eq!(parse(b"RTMIN+x"), Err(Refused::Unknown));
        assert_eq!(parse(b"\xff"), Err(Refused::Unknown));
        assert_eq!(parse(b"SIG"), Err(Refused::Unknown));
        assert_eq!(effective(Some(b"SEGV")), libc::SIGUSR2);
        assert_eq!(effective(Some(b"none")), 0);
        assert_eq!(effective(None), libc::SIGUSR2);
    }

    #[test]
    fn every_name_and_its_number_agree() {
        for &(name, n) in NAMES {
            assert_eq!(number(name.as_bytes()), Ok(n), "{name}");
            assert_eq!(
                parse(name.as_bytes()),
                parse(n.to_string().as_bytes()),
                "{name}"
            );
            assert_eq!(Name(n).to_string(), format!("SIG{name}"));
        }
        for n in 0..=65 {
            let by_number = parse(n.to_string().as_bytes());
            assert_eq!(by_number, check(n), "{n}");
            let name = Name(n).to_string();
            if n > 0 && !name.starts_with("signal ") {
                assert_eq!(parse(name.as_bytes()), by_number, "{name}");
            }
        }
        assert_eq!(Name(libc::SIGRTMIN() + 3).to_string(), "SIGRTMIN+3");
        assert_eq!(Name(33).to_string(), "signal 33");
    }
}
