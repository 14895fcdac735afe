//! Calling a function inside another process with ptrace (x86-64), for
//! `heaplive attach` and `heaplive detach`.
//!
//! One thread of the target is stopped (PTRACE_SEIZE + PTRACE_INTERRUPT);
//! its general registers and its whole extended register state (x87, SSE,
//! AVX: `NT_X86_XSTATE`) are saved. For a call, the thread's registers are
//! set to the System V calling convention (arguments in rdi, rsi, rdx; a
//! stack below the thread's own, past its 128-byte red zone, aligned so
//! that rsp+8 is a multiple of 16 at entry) with the return address 0: when
//! the function returns the thread faults at address 0, which stops it in
//! a SIGSEGV signal-delivery stop that we take and never deliver. After the
//! calls the registers, the extended state and every byte of stack written
//! are put back, and the thread is let go (PTRACE_DETACH).
//!
//! A thread stopped inside a system call: the kernel left rax at
//! -ERESTARTSYS (or -ERESTARTNOHAND, -ERESTARTNOINTR,
//! -ERESTART_RESTARTBLOCK) and orig_rax at the call's number. For our calls
//! orig_rax is set to -1, as gdb does for its inferior calls, so the kernel
//! does not "restart" a system call into the middle of our function. The
//! saved registers go back exactly, so when the thread resumes the kernel
//! restarts (or fails with EINTR) the interrupted call just as it does
//! after any ptrace stop: a blocked read or poll goes on waiting, a
//! nanosleep resumes with its remaining time (restart_syscall). Signals
//! that arrive for the thread during our call are delivered to it as they
//! come (its handlers run as they would at any other moment).
//!
//! Only this one thread is stopped; the others run on. That is what gdb's
//! inferior calls do too (scheduler-locking off), and it matters: dlopen
//! and malloc take locks that a stopped thread might hold.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

const NT_X86_XSTATE: libc::c_int = 0x202;
const XSTATE_MAX: usize = 16 * 1024;
/// How long a function called in the target may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

fn os_err(what: &str) -> String {
    format!("{what}: {}", io::Error::last_os_error())
}

/// One seized, stopped thread. Dropping it lets the thread go.
pub struct Stopped {
    pub tid: i32,
    mem: File,
    pub regs: libc::user_regs_struct,
    xstate: Vec<u8>,
    pub stopped_at: Instant,
    detached: bool,
    /// Registers and extended state were read (and may be written back).
    captured: bool,
}

/// The registers' view: is the thread inside a system call, which one?
pub fn in_syscall(r: &libc::user_regs_struct) -> Option<u64> {
    (r.orig_rax as i64 >= 0).then_some(r.orig_rax)
}

unsafe fn ptrace(req: libc::c_uint, tid: i32, addr: usize, data: usize) -> libc::c_long {
    // SAFETY: the caller passes arguments valid for `req`.
    unsafe {
        libc::ptrace(
            req,
            tid,
            addr as *mut libc::c_void,
            data as *mut libc::c_void,
        )
    }
}

/// Waits for the next stop (or end) of `tid`.
fn wait(tid: i32, deadline: Option<Instant>) -> Result<i32, String> {
    loop {
        let mut status = 0;
        let flags = if deadline.is_some() { libc::WNOHANG } else { 0 } | libc::__WALL;
        // SAFETY: waitpid with a valid out-pointer.
        let r = unsafe { libc::waitpid(tid, &mut status, flags) };
        if r == tid {
            return Ok(status);
        }
        if r < 0 {
            if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(os_err(&format!("waitpid({tid})")));
        }
        if let Some(d) = deadline {
            if Instant::now() > d {
                return Err(format!(
                    "thread {tid} did not come back within {} s",
                    CALL_TIMEOUT.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

impl Stopped {
    /// Seizes `tid` of process `pid` and stops it.
    pub fn stop(pid: i32, tid: i32) -> Result<Stopped, String> {
        let mem = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))
            .map_err(|e| format!("cannot open /proc/{pid}/mem: {e}"))?;
        // SAFETY: PTRACE_SEIZE takes no pointers.
        if unsafe { ptrace(libc::PTRACE_SEIZE, tid, 0, 0) } != 0 {
            return Err(os_err(&format!("ptrace(PTRACE_SEIZE, {tid})")));
        }
        let mut s = Stopped {
            tid,
            mem,
            // SAFETY: plain data.
            regs: unsafe { std::mem::zeroed() },
            xstate: vec![0; XSTATE_MAX],
            stopped_at: Instant::now(),
            detached: false,
            captured: false,
        };
        // SAFETY: PTRACE_INTERRUPT takes no pointers.
        if unsafe { ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) } != 0 {
            return Err(os_err(&format!("ptrace(PTRACE_INTERRUPT, {tid})")));
        }
        loop {
            let st = wait(tid, None)?;
            if !libc::WIFSTOPPED(st) {
                s.detached = true;
                return Err(format!("thread {tid} ended"));
            }
            if st >> 16 == libc::PTRACE_EVENT_STOP {
                break;
            }
            // A signal arrived first: deliver it and wait for our stop.
            // SAFETY: resumes a stopped tracee.
            unsafe { ptrace(libc::PTRACE_CONT, tid, 0, libc::WSTOPSIG(st) as usize) };
        }
        s.stopped_at = Instant::now();
        s.regs = s.get_regs()?;
        let mut iov = libc::iovec {
            iov_base: s.xstate.as_mut_ptr().cast(),
            iov_len: s.xstate.len(),
        };
        // SAFETY: iov describes our buffer; the kernel shortens iov_len.
        if unsafe {
            ptrace(
                libc::PTRACE_GETREGSET,
                tid,
                NT_X86_XSTATE as usize,
                &mut iov as *mut _ as usize,
            )
        } != 0
        {
            return Err(os_err("ptrace(PTRACE_GETREGSET, NT_X86_XSTATE)"));
        }
        s.xstate.truncate(iov.iov_len);
        s.captured = true;
        Ok(s)
    }

    fn get_regs(&self) -> Result<libc::user_regs_struct, String> {
        // SAFETY: plain data, filled by the kernel.
        let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        // SAFETY: a valid out-pointer.
        if unsafe { ptrace(libc::PTRACE_GETREGS, self.tid, 0, &mut r as *mut _ as usize) } != 0 {
            return Err(os_err("ptrace(PTRACE_GETREGS)"));
        }
        Ok(r)
    }

    fn set_regs(&self, r: &libc::user_regs_struct) -> Result<(), String> {
        // SAFETY: a valid in-pointer.
        if unsafe { ptrace(libc::PTRACE_SETREGS, self.tid, 0, r as *const _ as usize) } != 0 {
            return Err(os_err("ptrace(PTRACE_SETREGS)"));
        }
        Ok(())
    }

    pub fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>, String> {
        let mut b = vec![0; len];
        self.mem
            .read_exact_at(&mut b, addr)
            .map_err(|e| format!("cannot read the target's memory at {addr:#x}: {e}"))?;
        Ok(b)
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), String> {
        self.mem
            .write_all_at(data, addr)
            .map_err(|e| format!("cannot write the target's memory at {addr:#x}: {e}"))
    }

    /// A NUL-terminated string of the target (at most 4096 bytes).
    pub fn read_cstr(&self, addr: u64) -> String {
        let mut out = Vec::new();
        for i in 0..64u64 {
            let Ok(chunk) = self.read(addr + i * 64, 64) else {
                break;
            };
            if let Some(n) = chunk.iter().position(|&b| b == 0) {
                out.extend_from_slice(&chunk[..n]);
                break;
            }
            out.extend_from_slice(&chunk);
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Calls `func(args...)` on this thread with `data` copied onto the
    /// stack; the data's address replaces any argument equal to
    /// `DATA`. Returns rax. The thread's registers and stack are put
    /// back whatever happens.
    pub fn call(&self, func: u64, args: [u64; 3], data: &[u8]) -> Result<u64, String> {
        let sp = self.regs.rsp - 256;
        let data_at = (sp - data.len() as u64) & !15;
        let entry_sp = data_at - 8;
        let low = entry_sp - 64;
        let saved = self.read(low, (self.regs.rsp - low) as usize)?;
        let result = (|| {
            self.write(data_at, data)?;
            self.write(entry_sp, &0u64.to_ne_bytes())?;
            let mut r = self.regs;
            let arg = |a: u64| if a == DATA { data_at } else { a };
            r.rip = func;
            r.rdi = arg(args[0]);
            r.rsi = arg(args[1]);
            r.rdx = arg(args[2]);
            r.rax = 0;
            r.orig_rax = u64::MAX;
            r.rsp = entry_sp;
            self.set_regs(&r)?;
            self.run_until_return()
        })();
        let back = self.write(low, &saved).and(self.set_regs(&self.regs));
        let rax = result?;
        back?;
        Ok(rax)
    }

    fn run_until_return(&self) -> Result<u64, String> {
        let deadline = Instant::now() + CALL_TIMEOUT;
        let mut sig = 0;
        loop {
            // SAFETY: resumes a stopped tracee.
            if unsafe { ptrace(libc::PTRACE_CONT, self.tid, 0, sig as usize) } != 0 {
                return Err(os_err("ptrace(PTRACE_CONT)"));
            }
            let st = wait(self.tid, Some(deadline))?;
            if libc::WIFEXITED(st) || libc::WIFSIGNALED(st) {
                return Err("the target ended during the call".into());
            }
            sig = 0;
            if st >> 16 != 0 {
                // An event stop (group stop, interrupt): go on.
                continue;
            }
            let s = libc::WSTOPSIG(st);
            if s == libc::SIGSEGV {
                let r = self.get_regs()?;
                if r.rip == 0 {
                    return Ok(r.rax);
                }
                return Err(format!(
                    "the call crashed in the target at {:#x} (SIGSEGV)",
                    r.rip
                ));
            }
            // Someone else's signal: the thread gets it now.
            sig = s;
        }
    }

    /// Puts the registers back and lets the thread go.
    pub fn release(mut self) -> Result<Duration, String> {
        let r = self.restore();
        self.detached = true;
        r
    }

    fn restore(&mut self) -> Result<Duration, String> {
        if !self.captured {
            // Nothing was changed: just let it go (a seized thread that
            // is not stopped is detached by the kernel as well).
            // SAFETY: no pointers.
            unsafe { ptrace(libc::PTRACE_DETACH, self.tid, 0, 0) };
            return Ok(self.stopped_at.elapsed());
        }
        let mut iov = libc::iovec {
            iov_base: self.xstate.as_mut_ptr().cast(),
            iov_len: self.xstate.len(),
        };
        // SAFETY: iov describes the state read at the stop.
        let x = unsafe {
            ptrace(
                libc::PTRACE_SETREGSET,
                self.tid,
                NT_X86_XSTATE as usize,
                &mut iov as *mut _ as usize,
            )
        };
        let r = self.set_regs(&self.regs);
        let held = self.stopped_at.elapsed();
        // SAFETY: lets the tracee go; no signal.
        let d = unsafe { ptrace(libc::PTRACE_DETACH, self.tid, 0, 0) };
        if x != 0 {
            return Err(os_err("ptrace(PTRACE_SETREGSET)"));
        }
        r?;
        if d != 0 {
            return Err(os_err("ptrace(PTRACE_DETACH)"));
        }
        Ok(held)
    }
}

/// Marks an argument that stands for the address of the data.
pub const DATA: u64 = 0xDA7A_DA7A_DA7A_DA7A;

impl Drop for Stopped {
    fn drop(&mut self) {
        if !self.detached {
            let _ = self.restore();
        }
    }
}
