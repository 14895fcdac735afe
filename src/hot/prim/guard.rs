//! Per-thread state and the re-entrancy guard, in initial-exec TLS.
//!
//! WARNING: `thread_local!` in a cdylib compiles to `__tls_get_addr`, which
//! glibc 2.39+ may serve with malloc: a malloc hook using it can recurse
//! forever. This block lives in the static TLS block instead (`.tbss`,
//! reached through `@gottpoff` and `%fs`), so reading it is two instructions,
//! never a call, and it has no destructor (registering one calls calloc).
//! Every thread starts with all fields zero.

/// This thread's profiler state. Zero is the valid initial state.
#[repr(C)]
pub struct ThreadState {
    /// Bytes this thread may still allocate before the next sample; the
    /// allocation that takes it below zero is sampled.
    pub bytes_until_sample: i64,
    /// xorshift state for the exponential gaps; 0 until first use.
    pub rng: u64,
    /// Non-zero while the library itself runs on this thread: hooks then
    /// pass straight through to the real functions.
    pub busy: u32,
    /// Set once the sampler drew this thread's first gap.
    pub sampler_ready: u32,
    /// Requested size + 1 of an aligned operator new in progress (0 = none):
    /// libstdc++ rounds the size up to the alignment before aligned_alloc,
    /// and the profile reports what the program asked for.
    pub aligned_new_size: u64,
    /// Set while this thread's fork holds every heaplive lock (from the
    /// prepare handler to the parent or child handler).
    pub fork_locks_held: u32,
    /// Forks begun on this thread that took no heaplive locks: from a
    /// signal handler that interrupted heaplive or another fork on this
    /// thread (see `hot::forking`).
    pub forks_without_locks: u32,
    /// The program's view of the dump signal in this thread's mask: 1 when
    /// the program blocked it. The real mask always blocks it in program
    /// threads (heaplive's thread takes it); see `hot::signal`.
    pub dump_sig_blocked: u32,
    /// 1 on heaplive's own thread.
    pub heaplive_thread: u32,
    /// An exec in progress: the caller's return address, restored if the
    /// exec fails (`interpose::process`).
    pub exec_return: u64,
    /// What the exec changed, for `hot::signal::restore_after_exec`.
    pub exec_done: u64,
    /// When the program last blocked the dump signal in this thread.
    pub blocked_since: u64,
    /// Set on the thread that runs PHP code (PHP mode): only its samples
    /// get PHP frames.
    pub php_thread: u32,
    /// The lock witness (`lock-witness` builds and unit tests, see
    /// `hot::prim::lock`): bit r set while this thread holds a lock of
    /// rank r.
    pub locks_held: u32,
    /// The stack mapping this thread last unwound JIT frames on (`[lo,
    /// hi)`, from /proc/self/maps; 0 = not read): frame-pointer reads stay
    /// inside it (`hot::unwind`).
    pub stack_lo: u64,
    pub stack_hi: u64,
    /// Samples taken on this thread (wrapping): with the countdown, what
    /// tells whether the thread allocated since a sample
    /// (`api::thread_stamp`, the temporary view).
    pub samples_taken: u32,
    pub _pad: u32,
}

const _: () = assert!(core::mem::size_of::<ThreadState>() == 104);

#[cfg(not(target_arch = "x86_64"))]
compile_error!("heaplive's initial-exec TLS access is written for x86_64");

core::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 4",
    ".globl heaplive_thread_state",
    ".hidden heaplive_thread_state",
    ".type heaplive_thread_state, @object",
    ".size heaplive_thread_state, 104",
    "heaplive_thread_state:",
    ".zero 104",
    ".popsection",
);

/// This thread's state. Valid for the thread's whole life.
#[inline(always)]
pub fn state() -> *mut ThreadState {
    let p: *mut ThreadState;
    // SAFETY: the initial-exec sequence: the GOT slot holds the symbol's
    // offset from the thread pointer, and %fs:0 holds the thread pointer.
    unsafe {
        core::arch::asm!(
            "mov {p}, qword ptr [rip + heaplive_thread_state@GOTTPOFF]",
            "add {p}, qword ptr fs:[0]",
            p = out(reg) p,
            options(pure, readonly, nostack),
        );
    }
    p
}

/// Takes `n` bytes off this thread's `bytes_until_sample` unless that
/// would take it below zero (then nothing changes and the answer is
/// false): the ZendMM handler's countdown (`api::count_zend_alloc`). The
/// field is read and written at `%fs:` plus its offset, without forming
/// the block's address as `state()` does: one instruction less on every
/// emalloc.
#[inline(always)]
pub fn countdown_take(n: usize) -> bool {
    const _: () = assert!(core::mem::offset_of!(ThreadState, bytes_until_sample) == 0);
    let off: usize;
    let left: i64;
    // SAFETY: the initial-exec sequence of `state()`, reading the field at
    // the block's start (offset 0, asserted above) through %fs.
    unsafe {
        core::arch::asm!(
            "mov {o}, qword ptr [rip + heaplive_thread_state@GOTTPOFF]",
            "mov {l}, qword ptr fs:[{o}]",
            o = out(reg) off,
            l = out(reg) left,
            options(readonly, nostack, preserves_flags),
        );
    }
    let left = left.wrapping_sub(n as i64);
    if left < 0 {
        return false;
    }
    // SAFETY: as above; this thread's own field.
    unsafe {
        core::arch::asm!(
            "mov qword ptr fs:[{o}], {l}",
            o = in(reg) off,
            l = in(reg) left,
            options(nostack, preserves_flags),
        );
    }
    true
}

/// True while this thread runs library code.
#[inline(always)]
pub fn busy() -> bool {
    // SAFETY: state() is this thread's own block.
    unsafe { (*state()).busy != 0 }
}

/// Marks this thread busy until dropped; restores the previous value, so
/// guards nest.
pub struct Busy(u32);

impl Busy {
    #[inline(always)]
    pub fn enter() -> Busy {
        let s = state();
        // SAFETY: this thread's own block.
        unsafe {
            let prev = (*s).busy;
            (*s).busy = 1;
            Busy(prev)
        }
    }
}

impl Drop for Busy {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: this thread's own block.
        unsafe { (*state()).busy = self.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_is_per_thread_and_starts_zeroed() {
        let a = state() as usize;
        unsafe { (*state()).rng = 42 };
        let (b, rng) = std::thread::spawn(|| (state() as usize, unsafe { (*state()).rng }))
            .join()
            .unwrap();
        assert_ne!(a, b);
        assert_eq!(rng, 0);
        assert_eq!(unsafe { (*state()).rng }, 42);
    }

    #[test]
    fn busy_nests() {
        assert!(!busy());
        {
            let _g = Busy::enter();
            assert!(busy());
            {
                let _h = Busy::enter();
                assert!(busy());
            }
            assert!(busy());
        }
        assert!(!busy());
    }
}
