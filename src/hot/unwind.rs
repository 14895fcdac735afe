//! The cached unwinder: stack capture without a global FDE search per frame.
//!
//! libgcc's `_Unwind_Backtrace` looks up the FDE of every frame (a search
//! over the loaded modules) and interprets its CFI program from the start of
//! the function, on every capture. Here the result of that work, for one
//! return address, is kept in a small rule ([`Rule`]: where the CFA is,
//! where the return address and the caller's `rbp` are saved) in a
//! lock-free table keyed by the return address, in memory we map ourselves.
//! A frame whose rule is cached costs one probe and two loads from the
//! stack; a frame-pointer frame is the rule `CFA = rbp + 16`, so frame
//! pointers need no separate path (the rule and the frame pointer agree by
//! construction, and where a module has no frame pointers the rule still
//! holds).
//!
//! "libgcc" here is the process's own libgcc_s when it has loaded one, else
//! the copy of libgcc's unwinder linked into this library (src/build.rs), so
//! that libgcc_s.so.1 is not loaded into programs that do not need it.
//!
//! A miss asks libgcc for the FDE of that one address (`_Unwind_Find_FDE`,
//! the same lookup `_Unwind_Backtrace` does) and evaluates its CFI with
//! gimli, in a context kept in static memory behind a try-lock (no
//! allocation, no stack-hungry state; a thread that finds it busy falls back
//! to libgcc for that capture).
//!
//! What the rule cannot express makes the whole capture fall back to
//! libgcc, so the stack is always the one libgcc gives: signal frames
//! (augmentation `S`, glibc's `__restore_rt`), a CFA that is not `rsp` or
//! `rbp` plus an offset (DWARF expressions, stack realignment), a return
//! address or `rbp` not saved at an offset from the CFA. Those rules are
//! cached too ("unsupported"), so the fallback is decided in one probe.
//!
//! Where libgcc stops, we stop, on the same frame: a return address marked
//! undefined (`_start`, `clone`) or a zero return address. At an address
//! without an FDE libgcc stops too; we go on by the frame pointer
//! (`frame_pointer_step`, off the common path): JIT code (V8, LuaJIT, PHP's
//! JIT) and V8's builtins have no FDE but keep `rbp` frames, so a node
//! program's stacks reach `main`. The two words read there must lie in the
//! mapping that holds the thread's stack pointer, above it, and each `rbp`
//! must climb, so the walk never faults and ends; where they do not, the
//! stack ends as libgcc's does. (So HEAPLIVE_UNWIND=check reports such
//! stacks as longer than libgcc's.) The `rt_sigreturn` sequence libgcc
//! recognises without an FDE falls back. Addresses without an FDE are not
//! cached (JIT code comes and goes).
//!
//! Modules that go away: every entry carries the epoch it was computed in,
//! and our `dlclose` bumps the epoch before and after the real call, so no
//! rule computed while a module was (or might still be) mapped is used after
//! it was unmapped. A rule computed across a bump is stored with the old
//! epoch and never matches. Libraries unloaded without our `dlclose`
//! (glibc's internal `__libc_dlclose`) and FDEs deregistered by a JIT with
//! `__deregister_frame` are not seen; code at such an address later would
//! need a new mapping at the same address with different code.

use crate::hot::lock::{Rank, SpinLock};
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::*, fence};
use gimli::{
    BaseAddresses, CfaRule, EhFrame, EndianSlice, LittleEndian, Register, RegisterRule,
    UnwindContext, UnwindContextStorage, UnwindSection, UnwindTableRow, X86_64,
};

/// Entries of the rule table (16 bytes each; pages are touched as used).
const TABLE_LEN: usize = 1 << 17;
const PROBES: usize = 8;
/// Return addresses above this are not cached (user space is below 2^47).
const PC_BITS: u32 = 47;
const EPOCH_MASK: u64 = (1 << (64 - PC_BITS)) - 1;
const LOCKED: u64 = u64::MAX;

#[repr(C)]
struct Entry {
    /// `pc | epoch << 47`; 0 = empty, `LOCKED` = being written.
    key: AtomicU64,
    val: AtomicU64,
}

static TABLE: AtomicPtr<Entry> = AtomicPtr::new(core::ptr::null_mut());
static EPOCH: AtomicU64 = AtomicU64::new(1);

/// What to do at a return address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `CFA = (rbp if cfa_bp else rsp) + cfa_off`; the return address at
    /// `CFA + ra_off`; the caller's rbp at `CFA + bp_off` or unchanged.
    Step {
        cfa_bp: bool,
        cfa_off: i32,
        ra_off: i16,
        bp_off: Option<i16>,
    },
    /// The outermost frame (return address undefined).
    End,
    /// libgcc must do this stack.
    Unsupported,
}

impl Rule {
    fn pack(self) -> u64 {
        match self {
            Rule::End => 2,
            Rule::Unsupported => 3,
            Rule::Step {
                cfa_bp,
                cfa_off,
                ra_off,
                bp_off,
            } => {
                1 | (cfa_bp as u64) << 2
                    | (bp_off.is_some() as u64) << 3
                    | ((bp_off.unwrap_or(0) / 8) as u16 as u64 & 0xfff) << 4
                    | (ra_off as u16 as u64) << 16
                    | (cfa_off as u32 as u64) << 32
            }
        }
    }
}

// `bp_off` is kept in 12 bits in units of 8 bytes; `make_rule` refuses
// offsets that do not fit, so pack/unpack are exact for every rule stored.
#[inline(always)]
fn unpack(v: u64) -> Rule {
    match v & 3 {
        1 => Rule::Step {
            cfa_bp: v & 4 != 0,
            cfa_off: (v >> 32) as u32 as i32,
            ra_off: (v >> 16) as u16 as i16,
            bp_off: if v & 8 != 0 {
                // Sign-extend the 12-bit field.
                Some((((v >> 4) as u16) << 4) as i16 >> 4 << 3)
            } else {
                None
            },
        },
        2 => Rule::End,
        _ => Rule::Unsupported,
    }
}

/// A module was (or is about to be) unloaded: forget every cached rule.
pub fn modules_changed() {
    let e = EPOCH.fetch_add(1, AcqRel).wrapping_add(1);
    if e & EPOCH_MASK == 0 {
        // The epoch wrapped (2^17 dlcloses): old keys would match again.
        let t = TABLE.load(Acquire);
        if !t.is_null() {
            for i in 0..TABLE_LEN {
                // SAFETY: i < TABLE_LEN; the table is never unmapped.
                let k = unsafe { &(*t.add(i)).key };
                let cur = k.load(Relaxed);
                if cur != LOCKED && cur != 0 {
                    let _ = k.compare_exchange(cur, 0, AcqRel, Relaxed);
                }
            }
        }
    }
}

fn table() -> *mut Entry {
    crate::hot::tables::stacks::get_or_map(&TABLE, TABLE_LEN * core::mem::size_of::<Entry>())
}

fn slot_of(pc: usize) -> usize {
    ((pc as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - 17)) as usize & (TABLE_LEN - 1)
}

/// The cached rule of `pc` in the current epoch, packed (`Rule::pack`);
/// 0 when there is none.
#[inline(always)]
fn lookup(t: *mut Entry, key: u64, pc: usize) -> u64 {
    let mut i = slot_of(pc);
    for _ in 0..PROBES {
        // SAFETY: i < TABLE_LEN.
        let e = unsafe { &*t.add(i) };
        let k = e.key.load(Acquire);
        if k == key {
            let v = e.val.load(Relaxed);
            fence(Acquire);
            // A slot is rewritten only once its key is stale; if the key is
            // still ours, `v` is the value written with it.
            if e.key.load(Relaxed) == key {
                return v;
            }
            return 0;
        }
        if k == 0 {
            return 0;
        }
        i = (i + 1) & (TABLE_LEN - 1);
    }
    0
}

/// Stores `rule` for `key` in an empty or stale slot, if there is one.
fn insert(t: *mut Entry, key: u64, pc: usize, rule: Rule) {
    let epoch = EPOCH.load(Acquire) & EPOCH_MASK;
    let mut i = slot_of(pc);
    for _ in 0..PROBES {
        // SAFETY: i < TABLE_LEN.
        let e = unsafe { &*t.add(i) };
        let k = e.key.load(Acquire);
        if k == key {
            return;
        }
        let stale = k != LOCKED && (k == 0 || k >> PC_BITS != epoch);
        if stale && e.key.compare_exchange(k, LOCKED, Acquire, Relaxed).is_ok() {
            e.val.store(rule.pack(), Relaxed);
            e.key.store(key, Release);
            return;
        }
        i = (i + 1) & (TABLE_LEN - 1);
    }
}

// ---------------------------------------------------------------------------
// Computing a rule from the FDE.

#[repr(C)]
struct DwarfEhBases {
    tbase: usize,
    dbase: usize,
    func: usize,
}

// ---------------------------------------------------------------------------
// libgcc: our private copy, or the process's libgcc_s.

type FindFde = unsafe extern "C" fn(*const c_void, *mut DwarfEhBases) -> *const u8;
type TraceFn = extern "C" fn(*mut c_void, *mut c_void) -> c_int;
type Backtrace = unsafe extern "C" fn(TraceFn, *mut c_void) -> c_int;
type GetIp = unsafe extern "C" fn(*mut c_void) -> usize;

unsafe extern "C" {
    // libgcc's unwinder, linked in from libgcc_eh.a (src/build.rs): hidden,
    // never exported, so libgcc_s.so.1 is not NEEDED.
    /// The FDE lookup (what `_Unwind_Backtrace` does for each frame).
    fn _Unwind_Find_FDE(pc: *const c_void, bases: *mut DwarfEhBases) -> *const u8;
    fn _Unwind_Backtrace(trace: TraceFn, arg: *mut c_void) -> c_int;
    fn _Unwind_GetIP(ctx: *mut c_void) -> usize;
}

/// The process's own libgcc_s, once it has one (0 until then).
static SYS_FIND_FDE: AtomicUsize = AtomicUsize::new(0);
static SYS_BACKTRACE: AtomicUsize = AtomicUsize::new(0);
static SYS_GET_IP: AtomicUsize = AtomicUsize::new(0);
static SYS_READY: AtomicBool = AtomicBool::new(false);

/// One unwinder's entry points; a capture uses one set throughout.
#[derive(Clone, Copy)]
struct Libgcc {
    find_fde: FindFde,
    backtrace: Backtrace,
    get_ip: GetIp,
}

/// The process's libgcc_s when it has loaded one (frames that a JIT
/// registered with `__register_frame` are only known there), else the
/// private copy; both are libgcc's code, so stacks are the same.
#[inline]
fn libgcc() -> Libgcc {
    if SYS_READY.load(Acquire) {
        // SAFETY: addresses of these functions in a libgcc_s that stays
        // loaded (we hold a reference), stored before SYS_READY.
        unsafe {
            return Libgcc {
                find_fde: core::mem::transmute::<usize, FindFde>(SYS_FIND_FDE.load(Relaxed)),
                backtrace: core::mem::transmute::<usize, Backtrace>(SYS_BACKTRACE.load(Relaxed)),
                get_ip: core::mem::transmute::<usize, GetIp>(SYS_GET_IP.load(Relaxed)),
            };
        }
    }
    Libgcc {
        find_fde: _Unwind_Find_FDE,
        backtrace: _Unwind_Backtrace,
        get_ip: _Unwind_GetIP,
    }
}

/// Looks for a libgcc_s.so.1 the process has loaded (a C++ program, or a
/// library it dlopen'ed, needs it) and, if there is one, uses it from now
/// on. Runs where dlopen may: heaplive's start-up and heaplive's thread,
/// never in the allocation path or a signal handler, with no lock held.
/// Loads nothing (RTLD_NOLOAD).
pub fn find_system_libgcc() {
    if SYS_READY.load(Acquire) {
        return;
    }
    let mut path = [0u8; 512];
    let found = crate::hot::elf::each_loaded(|info, _| {
        let name = crate::hot::elf::name_of(info).to_bytes();
        let base = name.rsplit(|&b| b == b'/').next().unwrap_or(name);
        if base != b"libgcc_s.so.1" || name.len() >= path.len() {
            return false;
        }
        path[..name.len()].copy_from_slice(name);
        path[name.len()] = 0;
        true
    });
    if !found {
        return;
    }
    // SAFETY: a NUL-terminated path; RTLD_NOLOAD never loads. The handle
    // is kept: the functions must stay mapped.
    let h = unsafe { libc::dlopen(path.as_ptr().cast(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
    if h.is_null() {
        // SAFETY: takes the message the failure left.
        unsafe { libc::dlerror() };
        return;
    }
    // SAFETY: a valid handle and NUL-terminated names.
    let (f, b, g) = unsafe {
        (
            libc::dlsym(h, c"_Unwind_Find_FDE".as_ptr()),
            libc::dlsym(h, c"_Unwind_Backtrace".as_ptr()),
            libc::dlsym(h, c"_Unwind_GetIP".as_ptr()),
        )
    };
    if f.is_null() || b.is_null() || g.is_null() {
        // SAFETY: as above; the handle is released.
        unsafe {
            libc::dlerror();
            libc::dlclose(h);
        }
        return;
    }
    SYS_FIND_FDE.store(f as usize, Relaxed);
    SYS_BACKTRACE.store(b as usize, Relaxed);
    SYS_GET_IP.store(g as usize, Relaxed);
    SYS_READY.store(true, Release);
}

/// libgcc's own walk (`_Unwind_Backtrace`), calling `push` with each
/// frame's address (`_Unwind_GetIP`) until it returns false.
#[inline(never)]
pub fn libgcc_walk(mut push: impl FnMut(usize) -> bool) {
    if !SYS_READY.load(Acquire) {
        // The copy linked into this library: the backtrace crate's walk,
        // whose `_Unwind_Backtrace` and `_Unwind_GetIP` are that copy's.
        // SAFETY: the callback only calls `push`; the walk reads DWARF CFI
        // without locks and does not allocate.
        unsafe { backtrace::trace_unsynchronized(|f| push(f.ip() as usize)) };
        return;
    }
    struct Arg<'a> {
        push: &'a mut dyn FnMut(usize) -> bool,
        get_ip: GetIp,
    }
    extern "C" fn step(ctx: *mut c_void, arg: *mut c_void) -> c_int {
        // SAFETY: `arg` is the `Arg` below, alive for the whole walk; `ctx`
        // is the context of the libgcc that calls us, whose GetIP we use.
        unsafe {
            let a = &mut *(arg as *mut Arg);
            let ip = (a.get_ip)(ctx);
            // _URC_NO_REASON continues; _URC_END_OF_STACK stops the walk.
            if (a.push)(ip) { 0 } else { 5 }
        }
    }
    let l = libgcc();
    let mut arg = Arg {
        push: &mut push,
        get_ip: l.get_ip,
    };
    // SAFETY: `step` matches _Unwind_Trace_Fn; the walk only reads the
    // stack and does not allocate.
    unsafe { (l.backtrace)(step, (&mut arg as *mut Arg).cast()) };
}

struct Store;
impl UnwindContextStorage<usize> for Store {
    type Rules = [(Register, RegisterRule<usize>); 24];
    type Stack = [UnwindTableRow<usize, Store>; 4];
}

struct Ctx(core::cell::UnsafeCell<core::mem::MaybeUninit<UnwindContext<usize, Store>>>);
// SAFETY: used only while `CTX_LOCK` is held.
unsafe impl Sync for Ctx {}
static CTX: Ctx = Ctx(core::cell::UnsafeCell::new(core::mem::MaybeUninit::uninit()));
static CTX_READY: AtomicBool = AtomicBool::new(false);
/// Who uses `CTX`: a lock of the rank table, taken with `try_lock` only.
static CTX_LOCK: SpinLock<()> = SpinLock::new(Rank::UnwindContext, ());

/// What a miss found.
enum Found {
    Rule(Rule),
    /// No FDE: libgcc ends the stack here unless the code is a sigreturn.
    NoFde,
    /// The shared context is in use on this or another thread.
    Busy,
}

/// The fork handlers' take of `CTX_LOCK` (`background::fork`): never
/// waits; a context in use is reset in the child instead.
pub fn lock_for_fork() -> bool {
    CTX_LOCK.try_lock_raw()
}

/// # Safety
/// After `lock_for_fork` succeeded on this thread, or in a child whose
/// other threads are gone.
pub unsafe fn unlock_after_fork() {
    // SAFETY: guaranteed by the caller.
    unsafe { CTX_LOCK.unlock_raw() };
}

/// In a fork child, on its only thread, which was not inside heaplive: a
/// thread of the parent may have been evaluating CFI when it forked.
///
/// # Safety
/// A fork's child, on its only thread, before anything else unwinds.
pub unsafe fn reset_in_child() {
    // SAFETY: guaranteed by the caller; `()` holds nothing to leak.
    unsafe { CTX_LOCK.reset_in_child(()) };
}

fn compute(pc: usize) -> Found {
    let mut bases = DwarfEhBases {
        tbase: 0,
        dbase: 0,
        func: 0,
    };
    // SAFETY: a lookup by address; libgcc's FDE search is thread-safe and
    // does not allocate (glibc's _dl_find_object, or dl_iterate_phdr).
    let fde = unsafe { (libgcc().find_fde)((pc - 1) as *const _, &mut bases) } as usize;
    if fde == 0 {
        return Found::NoFde;
    }
    let Some(held) = CTX_LOCK.try_lock() else {
        return Found::Busy;
    };
    // SAFETY: CTX_LOCK is ours.
    let ctx = unsafe { &mut *CTX.0.get() };
    if !CTX_READY.load(Relaxed) {
        ctx.write(UnwindContext::new_in());
        CTX_READY.store(true, Relaxed);
    }
    // SAFETY: initialised above.
    let ctx = unsafe { ctx.assume_init_mut() };
    // SAFETY: `fde` points at an FDE in a loaded .eh_frame (libgcc found
    // it), whose CIE precedes it at the distance its CIE pointer says.
    let rule = unsafe { rule_from_fde(fde, &bases, ctx, pc - 1) }.unwrap_or(Rule::Unsupported);
    drop(held);
    Found::Rule(rule)
}

/// The first address of the function that holds `addr` (a return address
/// minus one), from the unwind tables (its FDE's start): for grouping a
/// stripped executable's frames by function (`top --app`). None when no
/// FDE covers it (code without unwind tables, a JIT's).
pub fn function_start(addr: usize) -> Option<usize> {
    let mut bases = DwarfEhBases {
        tbase: 0,
        dbase: 0,
        func: 0,
    };
    // SAFETY: a lookup by address, as in `compute`.
    let fde = unsafe { (libgcc().find_fde)(addr as *const _, &mut bases) } as usize;
    (fde != 0 && bases.func != 0 && bases.func <= addr).then_some(bases.func)
}

/// # Safety
/// `fde` must point at a complete FDE of a mapped `.eh_frame`.
unsafe fn rule_from_fde(
    fde: usize,
    bases: &DwarfEhBases,
    ctx: &mut UnwindContext<usize, Store>,
    addr: usize,
) -> Option<Rule> {
    // SAFETY: the caller's guarantee: the length and CIE pointer fields.
    let (len, cie_ptr) = unsafe {
        (
            (fde as *const u32).read_unaligned(),
            ((fde + 4) as *const u32).read_unaligned(),
        )
    };
    if len == 0 || len == u32::MAX || cie_ptr == 0 || cie_ptr as usize > fde + 4 {
        return None;
    }
    let cie = fde + 4 - cie_ptr as usize;
    let end = fde + 4 + len as usize;
    // SAFETY: from the CIE to the end of the FDE is one mapped section.
    let bytes = unsafe { core::slice::from_raw_parts(cie as *const u8, end - cie) };
    let eh = EhFrame::new(bytes, LittleEndian);
    let b = BaseAddresses::default()
        .set_eh_frame(cie as u64)
        .set_text(bases.tbase as u64)
        .set_got(bases.dbase as u64);
    let f = eh
        .fde_from_offset(
            &b,
            gimli::EhFrameOffset(fde - cie),
            EhFrame::<EndianSlice<LittleEndian>>::cie_from_offset,
        )
        .ok()?;
    if f.cie().is_signal_trampoline() || !f.contains(addr as u64) {
        return None;
    }
    let row = f.unwind_info_for_address(&eh, &b, ctx, addr as u64).ok()?;
    make_rule(row)
}

fn make_rule(row: &UnwindTableRow<usize, Store>) -> Option<Rule> {
    let (cfa_bp, cfa_off) = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } if *register == X86_64::RSP => {
            (false, offset)
        }
        CfaRule::RegisterAndOffset { register, offset } if *register == X86_64::RBP => {
            (true, offset)
        }
        _ => return None,
    };
    let cfa_off = i32::try_from(*cfa_off).ok()?;
    let ra_off = match row.register(X86_64::RA) {
        Some(RegisterRule::Offset(o)) => i16::try_from(o).ok()?,
        Some(RegisterRule::Undefined) => return Some(Rule::End),
        _ => return None,
    };
    let bp_off = match row.register(X86_64::RBP) {
        None | Some(RegisterRule::SameValue) => None,
        Some(RegisterRule::Offset(o)) if o % 8 == 0 && (-16376..=16376).contains(&o) => {
            Some(o as i16)
        }
        _ => return None,
    };
    match row.register(X86_64::RSP) {
        None => {}
        Some(_) => return None,
    }
    Some(Rule::Step {
        cfa_bp,
        cfa_off,
        ra_off,
        bp_off,
    })
}

/// libgcc's test for a signal frame without an FDE (x86-64 Linux):
/// `mov $15, %rax; syscall` at the address.
fn is_sigreturn(pc: usize) -> bool {
    // SAFETY: libgcc reads the same bytes at the same address before it
    // ends the stack; reading them here changes nothing.
    unsafe {
        (pc as *const u8).read() == 0x48
            && ((pc + 1) as *const u64).read_unaligned() == 0x050f_0000_000f_c0c7
    }
}

// ---------------------------------------------------------------------------
// The walk.

/// Writes the caller's return address, its stack pointer after the return
/// and its rbp into `out`.
#[unsafe(naked)]
unsafe extern "C" fn caller_regs(out: *mut [usize; 3]) {
    core::arch::naked_asm!(
        "mov rax, [rsp]",
        "mov [rdi], rax",
        "lea rax, [rsp + 8]",
        "mov [rdi + 8], rax",
        "mov [rdi + 16], rbp",
        "ret",
    )
}

/// Walks the stack from this function's caller outwards, calling `push`
/// with each return address as libgcc's `_Unwind_Backtrace` reports it,
/// until `push` returns false. Returns false when libgcc must do this stack
/// (nothing useful was pushed then).
///
/// Inlined, with the capture functions, into the sampling path: every
/// frame of ours costs a rule lookup and is then dropped (exact mode walks
/// on every allocation).
#[inline(always)]
pub fn walk(mut push: impl FnMut(usize) -> bool) -> bool {
    let mut regs = [0usize; 3];
    // SAFETY: writes three words into `regs`.
    unsafe { caller_regs(&mut regs) };
    let [mut pc, mut sp, mut bp] = regs;
    let t = table();
    if t.is_null() {
        return false;
    }
    let epoch = EPOCH.load(Acquire) & EPOCH_MASK;
    loop {
        if pc == 0 {
            return true;
        }
        if !push(pc) {
            return true;
        }
        let key = if (pc as u64) >> PC_BITS == 0 {
            pc as u64 | epoch << PC_BITS
        } else {
            0
        };
        let cached = if key != 0 { lookup(t, key, pc) } else { 0 };
        let v = if cached != 0 {
            cached
        } else {
            match compute(pc) {
                Found::Rule(r) => {
                    if key != 0 {
                        insert(t, key, pc, r);
                    }
                    r.pack()
                }
                Found::NoFde => {
                    if is_sigreturn(pc) {
                        return false;
                    }
                    // JIT code (V8, LuaJIT, PHP's JIT) and V8's builtins
                    // have no FDE but keep frame pointers.
                    match frame_pointer_step(sp, bp) {
                        Some((p, s, b)) => {
                            (pc, sp, bp) = (p, s, b);
                            continue;
                        }
                        None => return true,
                    }
                }
                Found::Busy => return false,
            }
        };
        match unpack(v) {
            Rule::End => return true,
            Rule::Unsupported => return false,
            Rule::Step {
                cfa_bp,
                cfa_off,
                ra_off,
                bp_off,
            } => {
                let cfa = (if cfa_bp { bp } else { sp }).wrapping_add(cfa_off as isize as usize);
                // SAFETY: the frame's CFI says the return address (and the
                // caller's rbp) are saved there; libgcc reads the same words.
                unsafe {
                    pc = (cfa.wrapping_add(ra_off as isize as usize) as *const usize).read();
                    if let Some(o) = bp_off {
                        bp = (cfa.wrapping_add(o as isize as usize) as *const usize).read();
                    }
                }
                sp = cfa;
            }
        }
    }
}

/// One step through a frame without an FDE by its frame pointer: the
/// caller's rbp at `[rbp]`, the return address at `[rbp + 8]`, the
/// caller's stack pointer `rbp + 16`. Only when both words lie on this
/// thread's stack, above `sp` (the stack mapping holding `sp`, read once
/// per thread from /proc/self/maps and kept in its TLS, read again when
/// `sp` leaves it: a fiber), so the reads never fault; the chain must
/// climb (each rbp above the last frame), so it ends. None: the stack ends
/// here, as it did before JIT frames were followed.
#[cold]
#[inline(never)]
fn frame_pointer_step(sp: usize, bp: usize) -> Option<(usize, usize, usize)> {
    let (lo, hi) = thread_stack(sp)?;
    let top = bp.checked_add(16)?;
    if !bp.is_multiple_of(8) || bp < sp || bp < lo || top > hi {
        return None;
    }
    // SAFETY: [bp, bp + 16) is inside the mapping that holds this thread's
    // stack pointer, between it and the mapping's end: mapped memory.
    let (caller_bp, ra) = unsafe {
        (
            (bp as *const usize).read(),
            (bp as *const usize).add(1).read(),
        )
    };
    if ra < 4096 {
        return None;
    }
    Some((ra, top, caller_bp))
}

/// The mapping `[lo, hi)` that holds `sp` (this thread's stack).
fn thread_stack(sp: usize) -> Option<(usize, usize)> {
    let st = crate::hot::guard::state();
    // SAFETY: this thread's own block.
    let (lo, hi) = unsafe { ((*st).stack_lo as usize, (*st).stack_hi as usize) };
    if lo <= sp && sp < hi {
        return Some((lo, hi));
    }
    let (lo, hi) = mapping_of(sp)?;
    // SAFETY: as above.
    unsafe {
        (*st).stack_lo = lo as u64;
        (*st).stack_hi = hi as u64;
    }
    Some((lo, hi))
}

/// The mapping of /proc/self/maps that holds `addr`, read with open and
/// read into a buffer on the stack (no allocation, no lock; errno kept).
fn mapping_of(addr: usize) -> Option<(usize, usize)> {
    let _errno = crate::hot::sys::ErrnoGuard::save();
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe {
        libc::open(
            c"/proc/self/maps".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 2048];
    // Per line `lo-hi perms ...`: 0 reading lo, 1 reading hi, 2 the rest.
    let (mut state, mut lo, mut hi) = (0u8, 0usize, 0usize);
    let mut found = None;
    'read: loop {
        // SAFETY: reads into our buffer.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        for &b in &buf[..n as usize] {
            let digit = (b as char).to_digit(16).unwrap_or(0) as usize;
            match (state, b) {
                (_, b'\n') => (state, lo, hi) = (0, 0, 0),
                (0, b'-') => state = 1,
                (0, _) => lo = lo.wrapping_shl(4) | digit,
                (1, b' ') => {
                    if lo <= addr && addr < hi {
                        found = Some((lo, hi));
                        break 'read;
                    }
                    state = 2;
                }
                (1, _) => hi = hi.wrapping_shl(4) | digit,
                _ => {}
            }
        }
    }
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stack_mapping_holds_the_stack() {
        let x = 0u64;
        let sp = &x as *const u64 as usize;
        let (lo, hi) = mapping_of(sp).expect("the stack is mapped");
        assert!(
            lo <= sp && sp < hi && hi - lo >= 4096,
            "{lo:x} {sp:x} {hi:x}"
        );
        assert_eq!(mapping_of(16), None, "page zero is not mapped");
    }

    #[test]
    fn rules_pack_and_unpack() {
        for r in [
            Rule::End,
            Rule::Unsupported,
            Rule::Step {
                cfa_bp: true,
                cfa_off: 16,
                ra_off: -8,
                bp_off: Some(-16),
            },
            Rule::Step {
                cfa_bp: false,
                cfa_off: 32000,
                ra_off: -8,
                bp_off: None,
            },
            Rule::Step {
                cfa_bp: false,
                cfa_off: -5,
                ra_off: -300,
                bp_off: Some(-16376),
            },
            Rule::Step {
                cfa_bp: true,
                cfa_off: 1 << 20,
                ra_off: -8,
                bp_off: Some(16376),
            },
        ] {
            assert_eq!(unpack(r.pack()), r);
        }
    }
}
