//! The real allocation functions (the next definitions in lookup order) and
//! the bootstrap buffer that serves allocations made before they are known.
//!
//! The functions a process may need before it could resolve them (the
//! allocation functions ld.so and libc call before main) or where `dlsym`
//! may not run (the async-signal-safe ones a signal handler may call, and
//! those heaplive calls from an allocation path) are resolved once, at the
//! first allocation in the process (which comes before this library's
//! constructor), behind an atomic state. While `dlsym` runs it allocates
//! through our own exports; those calls, and any from other threads
//! meanwhile, are served from a static buffer with a size header. free,
//! realloc and malloc_usable_size recognise its pointers. Only malloc is
//! looked up with `dlsym`; the others are read from the symbol table of
//! the object malloc came from, when nothing between could define them
//! ([`NextObject`]: what dlsym would find, at a tenth of the cost).
//!
//! The others ([`eager`] says which) are resolved on their first call, one
//! `dlsym` each, with no lock: a process that never calls `popen` or
//! `memalign` pays no lookup for them at start (a `dlsym(RTLD_NEXT)` is
//! about 900 instructions). None of them is async-signal-safe, and
//! heaplive calls none of them with a lock of its own held; a lookup that
//! finds nothing is remembered (no failed `dlsym`, which allocates its
//! message, on every call).
//!
//! The C++ operators are resolved lazily on first use and never cached as
//! NULL: a C program has no libstdc++, and a C++ library dlopen'ed
//! RTLD_LOCAL binds its `new` to ours while RTLD_NEXT finds nothing.

pub(crate) use crate::hot::elf::{Lookup, Object, lookup_in};
use crate::hot::elf::{gnu_hash, with_hash};
use crate::hot::guard::Busy;
use crate::hot::sys::ErrnoGuard;
use core::ffi::{c_char, c_void};
use core::sync::atomic::{AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering::*};

#[derive(Clone, Copy)]
#[repr(usize)]
pub enum Sym {
    Malloc,
    Free,
    Calloc,
    Realloc,
    Reallocarray,
    PosixMemalign,
    AlignedAlloc,
    Memalign,
    Valloc,
    Pvalloc,
    MallocUsableSize,
    // Not allocation functions, interposed for the dump signal and dlopen.
    Sigaction,
    Signal,
    SysvSignal,
    BsdSignal,
    Sigset,
    Dlopen,
    Dlclose,
    Fork,
    Execve,
    Execv,
    Execvp,
    Execvpe,
    Execl,
    Execlp,
    Execle,
    Fexecve,
    Sigprocmask,
    PthreadSigmask,
    Sigsuspend,
    Pause,
    Pselect,
    Ppoll,
    EpollPwait,
    EpollPwait2,
    Sigtimedwait,
    Sigwaitinfo,
    Sigwait,
    Signalfd,
    PosixSpawn,
    PosixSpawnp,
    System,
    Popen,
    PthreadCreate,
    PthreadExit,
    Execveat,
    Raise,
    PthreadKill,
    Setuid,
    Setgid,
    Seteuid,
    Setegid,
    Setreuid,
    Setregid,
    Setresuid,
    Setresgid,
    Setgroups,
    Initgroups,
    Kill,
    // C++: resolved lazily.
    New,
    NewArr,
    NewNothrow,
    NewArrNothrow,
    NewAligned,
    NewArrAligned,
    NewAlignedNothrow,
    NewArrAlignedNothrow,
    Delete,
    DeleteArr,
    DeleteNothrow,
    DeleteArrNothrow,
    DeleteSized,
    DeleteArrSized,
    DeleteAligned,
    DeleteArrAligned,
    DeleteAlignedNothrow,
    DeleteArrAlignedNothrow,
    DeleteSizedAligned,
    DeleteArrSizedAligned,
}

const FIRST_CXX: usize = Sym::New as usize;

/// Is the C function `s` resolved with the allocation functions, before
/// the constructor? The allocation functions libc and ld.so call before
/// main (and malloc_usable_size, which the poisoning free calls), every
/// async-signal-safe function (a signal handler may be its first caller,
/// and dlsym is not async-signal-safe: the signal functions, fork, the
/// exec family, used between fork or vfork and exec, the credential
/// functions but initgroups), and pthread_create and pthread_exit, which
/// heaplive calls from an allocation path or at a thread's end. The rest
/// (the aligned allocation functions and reallocarray, dlopen/dlclose, the
/// waits that are not async-signal-safe, posix_spawn, system, popen,
/// initgroups) is resolved at its first call.
pub const fn eager(s: Sym) -> bool {
    !matches!(
        s,
        Sym::Reallocarray
            | Sym::PosixMemalign
            | Sym::AlignedAlloc
            | Sym::Memalign
            | Sym::Valloc
            | Sym::Pvalloc
            | Sym::Dlopen
            | Sym::Dlclose
            | Sym::EpollPwait
            | Sym::EpollPwait2
            | Sym::Sigtimedwait
            | Sym::Sigwaitinfo
            | Sym::Sigwait
            | Sym::Signalfd
            | Sym::PosixSpawn
            | Sym::PosixSpawnp
            | Sym::System
            | Sym::Popen
            | Sym::Initgroups
    ) && (s as usize) < FIRST_CXX
}
const FIRST_DELETE: usize = Sym::Delete as usize;

impl Sym {
    /// The symbol at index `i` (what the trampolines pass).
    pub fn from_index(i: usize) -> Option<Sym> {
        // SAFETY: Sym is repr(usize) with contiguous discriminants 0..COUNT.
        (i < COUNT).then(|| unsafe { core::mem::transmute::<usize, Sym>(i) })
    }
}
const COUNT: usize = Sym::DeleteArrSizedAligned as usize + 1;

/// NUL-terminated names, in `Sym` order.
pub(crate) const NAMES: [&[u8]; COUNT] = [
    b"malloc\0",
    b"free\0",
    b"calloc\0",
    b"realloc\0",
    b"reallocarray\0",
    b"posix_memalign\0",
    b"aligned_alloc\0",
    b"memalign\0",
    b"valloc\0",
    b"pvalloc\0",
    b"malloc_usable_size\0",
    b"sigaction\0",
    b"signal\0",
    b"sysv_signal\0",
    b"bsd_signal\0",
    b"sigset\0",
    b"dlopen\0",
    b"dlclose\0",
    b"fork\0",
    b"execve\0",
    b"execv\0",
    b"execvp\0",
    b"execvpe\0",
    b"execl\0",
    b"execlp\0",
    b"execle\0",
    b"fexecve\0",
    b"sigprocmask\0",
    b"pthread_sigmask\0",
    b"sigsuspend\0",
    b"pause\0",
    b"pselect\0",
    b"ppoll\0",
    b"epoll_pwait\0",
    b"epoll_pwait2\0",
    b"sigtimedwait\0",
    b"sigwaitinfo\0",
    b"sigwait\0",
    b"signalfd\0",
    b"posix_spawn\0",
    b"posix_spawnp\0",
    b"system\0",
    b"popen\0",
    b"pthread_create\0",
    b"pthread_exit\0",
    b"execveat\0",
    b"raise\0",
    b"pthread_kill\0",
    b"setuid\0",
    b"setgid\0",
    b"seteuid\0",
    b"setegid\0",
    b"setreuid\0",
    b"setregid\0",
    b"setresuid\0",
    b"setresgid\0",
    b"setgroups\0",
    b"initgroups\0",
    b"kill\0",
    b"_Znwm\0",
    b"_Znam\0",
    b"_ZnwmRKSt9nothrow_t\0",
    b"_ZnamRKSt9nothrow_t\0",
    b"_ZnwmSt11align_val_t\0",
    b"_ZnamSt11align_val_t\0",
    b"_ZnwmSt11align_val_tRKSt9nothrow_t\0",
    b"_ZnamSt11align_val_tRKSt9nothrow_t\0",
    b"_ZdlPv\0",
    b"_ZdaPv\0",
    b"_ZdlPvRKSt9nothrow_t\0",
    b"_ZdaPvRKSt9nothrow_t\0",
    b"_ZdlPvm\0",
    b"_ZdaPvm\0",
    b"_ZdlPvSt11align_val_t\0",
    b"_ZdaPvSt11align_val_t\0",
    b"_ZdlPvSt11align_val_tRKSt9nothrow_t\0",
    b"_ZdaPvSt11align_val_tRKSt9nothrow_t\0",
    b"_ZdlPvmSt11align_val_t\0",
    b"_ZdaPvmSt11align_val_t\0",
];

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicUsize = AtomicUsize::new(0);
pub(crate) static SLOTS: [AtomicUsize; COUNT] = [ZERO; COUNT];

const UNRESOLVED: u8 = 0;
const RESOLVING: u8 = 1;
const RESOLVED: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNRESOLVED);

/// The address of the real function, or 0 while unknown.
#[inline(always)]
pub fn addr(s: Sym) -> usize {
    SLOTS[s as usize].load(Relaxed)
}

/// The handle the C functions are looked up in: RTLD_NEXT, or libc's
/// when attached; null until [`resolve_all`] ran (or libc was not found).
static HANDLE: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
/// The lazily resolved functions found missing (bit = `Sym` index).
static MISSING: AtomicU64 = AtomicU64::new(0);
const _: () = assert!(FIRST_CXX <= 64);

/// Address of a C function, resolving first if needed; 0 while resolving
/// (the caller then uses the bootstrap buffer) or when there is none.
#[inline(always)]
pub fn c_fn(s: Sym) -> usize {
    let a = addr(s);
    if a != 0 {
        return a;
    }
    c_fn_cold(s)
}

#[cold]
#[inline(never)]
fn c_fn_cold(s: Sym) -> usize {
    resolve_all();
    match addr(s) {
        0 if !eager(s) => resolve_lazy(s),
        a => a,
    }
}

/// Resolves one function that is not [`eager`], at its first call. Not
/// while the eager ones are being resolved (a call from inside that
/// `dlsym` gets 0, as every call does then). Two threads may both look it
/// up: they store the same address.
fn resolve_lazy(s: Sym) -> usize {
    let bit = 1u64 << (s as usize);
    if !resolved() || MISSING.load(Acquire) & bit != 0 {
        return 0;
    }
    let h = HANDLE.load(Acquire);
    if h.is_null() {
        return 0;
    }
    let _busy = Busy::enter();
    let _errno = ErrnoGuard::save();
    if let Some(a) = crate::hot::winner::lazy(s) {
        SLOTS[s as usize].store(a, Release);
        return a;
    }
    // SAFETY: a valid handle and a NUL-terminated name.
    let p = unsafe { libc::dlsym(h, NAMES[s as usize].as_ptr().cast()) };
    if p.is_null() {
        clear_dlerror();
        MISSING.fetch_or(bit, AcqRel);
    } else {
        SLOTS[s as usize].store(p as usize, Release);
    }
    p as usize
}

/// Resolves the C functions once. Re-entrant calls (dlsym allocates) and
/// other threads meanwhile return at once and see 0.
#[cold]
#[inline(never)]
pub fn resolve_all() {
    if STATE
        .compare_exchange(UNRESOLVED, RESOLVING, Acquire, Relaxed)
        .is_err()
    {
        return;
    }
    let _busy = Busy::enter();
    let _errno = ErrnoGuard::save();
    // Attached (hot/attach.rs): the settings come later, from
    // heaplive_attach, and the real functions from libc's handle.
    let handle = if crate::hot::attach::attached() {
        // SAFETY: RTLD_NOLOAD never loads anything; the handle stays open.
        unsafe { libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) }
    } else {
        crate::hot::config::load();
        libc::RTLD_NEXT
    };
    let mut failed = false;
    // After malloc (the first), the others are looked up directly in the
    // object dlsym found it in, when no object between this library and
    // that one could define them (`NextObject`): a lookup there costs
    // about a tenth of a `dlsym`.
    let mut next: Option<NextObject> = None;
    for i in 0..FIRST_CXX {
        if !Sym::from_index(i).is_some_and(eager) {
            continue;
        }
        let name = NAMES[i];
        // SAFETY: NAMES are NUL-terminated; the handle is valid (a null
        // one, libc not found, gives nothing: everything stays unresolved).
        let p = if handle.is_null() {
            core::ptr::null_mut()
        } else if let Some(a) = next.as_ref().and_then(|n| n.lookup(name)) {
            a as *mut c_void
        } else {
            unsafe { libc::dlsym(handle, name.as_ptr().cast()) }
        };
        if i == Sym::Malloc as usize && handle == libc::RTLD_NEXT && !p.is_null() {
            next = NextObject::of(p);
        }
        failed |= p.is_null();
        SLOTS[i].store(p as usize, Release);
    }
    if failed {
        clear_dlerror();
    }
    if handle == libc::RTLD_NEXT {
        crate::hot::winner::find_other_malloc();
    }
    HANDLE.store(handle, Release);
    STATE.store(RESOLVED, Release);
    refresh_jumps();
}

/// Where the exported malloc jumps when the allocation is not sampled: the
/// real malloc itself once it is known and no new block is poisoned, else
/// [`malloc_forward`]. One load and an indirect jump in place of two
/// tests, so that malloc's common case has a single compare-and-branch
/// (the countdown's).
pub(crate) static MALLOC_JUMP: AtomicPtr<()> = AtomicPtr::new(malloc_forward as *mut ());
/// The same for free (after the shadow bitmap test): the real free, or
/// [`free_forward`] while unknown or when freed blocks are poisoned.
pub(crate) static FREE_JUMP: AtomicPtr<()> = AtomicPtr::new(free_forward as *mut ());

/// An unsampled malloc before the real one is known, or with poisoning.
pub(crate) extern "C" fn malloc_forward(size: usize) -> *mut c_void {
    let p = malloc(size);
    crate::hot::poison::on_alloc(p, size);
    p
}

/// An unsampled free before the real one is known, or with poisoning.
///
/// # Safety
/// As free(3).
unsafe extern "C" fn free_forward(p: *mut c_void) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        crate::hot::poison::on_free(p);
        free(p)
    }
}

/// Sets [`MALLOC_JUMP`] and [`FREE_JUMP`] from the resolved functions and
/// the poison setting: after resolution and after the settings are read
/// (either may come first: attached, the settings come later).
pub fn refresh_jumps() {
    let m = addr(Sym::Malloc);
    let f = addr(Sym::Free);
    let m = if m != 0 && !crate::hot::poison::alloc_on() {
        m as *mut ()
    } else {
        malloc_forward as *mut ()
    };
    let f = if f != 0 && !crate::hot::poison::free_on() {
        f as *mut ()
    } else {
        free_forward as *mut ()
    };
    MALLOC_JUMP.store(m, Release);
    FREE_JUMP.store(f, Release);
}

pub fn resolved() -> bool {
    STATE.load(Acquire) == RESOLVED
}

/// Address of a C++ operator: RTLD_NEXT, else a libstdc++ that is loaded
/// but not global. 0 when none is loaded. Never caches 0.
#[inline(always)]
pub fn cxx_fn(s: Sym) -> usize {
    let a = addr(s);
    if a != 0 { a } else { resolve_cxx(s) }
}

#[cold]
#[inline(never)]
fn resolve_cxx(s: Sym) -> usize {
    if !resolved() {
        return 0;
    }
    let _busy = Busy::enter();
    let _errno = ErrnoGuard::save();
    let name: *const c_char = NAMES[s as usize].as_ptr().cast();
    // SAFETY: valid handle and NUL-terminated name. Attached, RTLD_NEXT
    // must not be used (hot/attach.rs).
    let mut p = if crate::hot::attach::attached() {
        core::ptr::null_mut()
    } else {
        unsafe { libc::dlsym(libc::RTLD_NEXT, name) }
    };
    // jemalloc and tcmalloc after heaplive in LD_PRELOAD define the
    // operators too, and theirs do not call malloc through a slot that
    // reaches heaplive (libstdc++'s do): with the real malloc in the same
    // object, libstdc++'s are the real ones, else no `new` would be seen.
    let next = p;
    if !p.is_null() && crate::hot::winner::same_object(p, addr(Sym::Malloc) as *const c_void) {
        p = core::ptr::null_mut();
    }
    if p.is_null() {
        // SAFETY: RTLD_NOLOAD never loads anything; the handle is released.
        unsafe {
            let h = libc::dlopen(
                c"libstdc++.so.6".as_ptr(),
                libc::RTLD_NOLOAD | libc::RTLD_LAZY,
            );
            if !h.is_null() {
                p = libc::dlsym(h, name);
                libc::dlclose(h);
            }
        }
    }
    if p.is_null() {
        p = next;
    }
    clear_dlerror();
    if !p.is_null() {
        if (s as usize) < FIRST_DELETE {
            note_new_extent(s as usize - FIRST_CXX, p);
        }
        SLOTS[s as usize].store(p as usize, Release);
    }
    p as usize
}

/// Where each real operator new lies ([start, end) from its symbol size):
/// stack capture skips its frame, which sits between our malloc hook and
/// the program when a trampoline jumped to it.
static NEW_EXTENTS: [(AtomicUsize, AtomicUsize); 8] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; 8];

/// glibc's `RTLD_DL_SYMENT` for dladdr1 (not in the libc crate).
const RTLD_DL_SYMENT: i32 = 1;

fn note_new_extent(i: usize, p: *mut c_void) {
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    let mut sym: *const libc::Elf64_Sym = core::ptr::null();
    // SAFETY: valid out-pointers; RTLD_DL_SYMENT stores a pointer to the
    // symbol table entry.
    let ok = unsafe {
        libc::dladdr1(
            p,
            &mut info,
            (&mut sym as *mut *const libc::Elf64_Sym).cast(),
            RTLD_DL_SYMENT,
        )
    };
    // Without a size, assume the short function libstdc++'s are.
    let size = if ok != 0 && !sym.is_null() {
        unsafe { (*sym).st_size as usize }
    } else {
        0
    };
    let size = if size == 0 { 256 } else { size };
    NEW_EXTENTS[i].1.store(p as usize + size, Relaxed);
    NEW_EXTENTS[i].0.store(p as usize, Release);
}

/// Is `ip` inside one of the real operator new functions?
pub fn in_real_new(ip: usize) -> bool {
    NEW_EXTENTS.iter().any(|(s, e)| {
        let s = s.load(Acquire);
        s != 0 && ip >= s && ip < e.load(Relaxed)
    })
}

/// Could a loaded module export `name` (NUL-terminated)? False only when
/// the GNU hash table of every loaded module says it does not (no name
/// with its hash in its bucket), so
/// a `dlsym` that would fail can be skipped: a failed lookup allocates
/// its message (starting glibc's malloc in a program that never calls it)
/// and clearing it formats it (printf and gettext), which a process that
/// never samples pays at start. A module without a GNU hash table counts
/// as "could".
pub fn maybe_exported(name: &[u8]) -> bool {
    let key = name.strip_suffix(b"\0").unwrap_or(name);
    let h = gnu_hash(key);
    crate::hot::elf::each_loaded(|info, _| {
        // SAFETY: the loader's info is of a loaded module, whose dynamic
        // section and GNU hash table are mapped.
        let o = unsafe { Object::of(info) };
        if o.dynamic == 0 {
            return false;
        }
        // The bloom filter may be wrong (libc's says "maybe" for
        // executor_globals): the hash chain of the bucket holds the
        // hashes of the names in it.
        let mut any = false;
        // SAFETY: as above.
        let known = unsafe { with_hash(&o, h, |_| any = true) };
        !known || any
    })
}

/// The object where `dlsym(RTLD_NEXT, "malloc")` found malloc (libc), and
/// the objects between this library and it in load order (normally none),
/// the order RTLD_NEXT searches at start: a name that object defines, and
/// that no object between could define, is what dlsym would return.
/// Anything else is left to dlsym.
struct NextObject {
    between: [Object; 8],
    n: usize,
    target: Object,
}

impl NextObject {
    /// From one walk of the loaded objects (dl_iterate_phdr, in load
    /// order): this library, then those up to the one holding `malloc`.
    fn of(malloc: *mut c_void) -> Option<NextObject> {
        use crate::hot::elf::{each_loaded, load_segment_holding};
        let (ours, malloc) = (resolve_all as *const () as usize, malloc as usize);
        let (mut seen_ours, mut done, mut overflow) = (false, false, false);
        let mut next = NextObject {
            between: [Object::default(); 8],
            n: 0,
            target: Object::default(),
        };
        each_loaded(|info, _| {
            if !seen_ours {
                seen_ours = load_segment_holding(info, ours).is_some();
                return false;
            }
            // SAFETY: the loader's info is of a loaded object.
            let o = unsafe { Object::of(info) };
            if load_segment_holding(info, malloc).is_some() {
                next.target = o;
                done = true;
                return true;
            }
            if next.n == next.between.len() {
                overflow = true;
                return true;
            }
            next.between[next.n] = o;
            next.n += 1;
            false
        });
        (done && !overflow && next.target.gnu_hash != 0).then_some(next)
    }

    /// The address dlsym(RTLD_NEXT, name) would give, when certain.
    fn lookup(&self, name: &[u8]) -> Option<usize> {
        let key = name.strip_suffix(b"\0").unwrap_or(name);
        // SAFETY: objects of the loaded list, which does not change while
        // the process starts (a dlopen meanwhile would only append).
        unsafe {
            if self.between[..self.n]
                .iter()
                .any(|&o| lookup_in(o, key) != Lookup::Absent)
            {
                return None;
            }
            match lookup_in(self.target, key) {
                Lookup::Function(a) => Some(a),
                _ => None,
            }
        }
    }
}

/// A failed dlsym leaves a message that the application would read at its
/// next dlerror(); take it.
pub(crate) fn clear_dlerror() {
    // SAFETY: dlerror has no preconditions.
    unsafe { libc::dlerror() };
}

// ---------------------------------------------------------------------------
// The bootstrap buffer.

const BOOT_LEN: usize = 256 * 1024;
const HEADER: usize = 16;

#[repr(C, align(64))]
struct BootBuf(core::cell::UnsafeCell<[u8; BOOT_LEN]>);
// SAFETY: disjoint ranges are handed out by an atomic bump pointer.
unsafe impl Sync for BootBuf {}
static BOOT: BootBuf = BootBuf(core::cell::UnsafeCell::new([0; BOOT_LEN]));
static BOOT_USED: AtomicUsize = AtomicUsize::new(0);

#[inline(always)]
fn boot_base() -> usize {
    BOOT.0.get() as usize
}

/// True for pointers handed out by the bootstrap buffer.
#[inline(always)]
pub fn is_boot(p: *const c_void) -> bool {
    (p as usize).wrapping_sub(boot_base()) < BOOT_LEN
}

/// Serves an allocation from the bootstrap buffer. Null when it is full.
#[cold]
pub fn boot_alloc(size: usize, align: usize) -> *mut c_void {
    let align = align.max(HEADER);
    let mut cur = BOOT_USED.load(Relaxed);
    loop {
        let start = (boot_base() + cur + HEADER + align - 1) & !(align - 1);
        let end = match (start - boot_base()).checked_add(size) {
            Some(e) if e <= BOOT_LEN => e,
            _ => {
                crate::hot::sys::set_errno(libc::ENOMEM);
                return core::ptr::null_mut();
            }
        };
        match BOOT_USED.compare_exchange_weak(cur, end, AcqRel, Relaxed) {
            Ok(_) => {
                // SAFETY: start-16..end lies inside BOOT and is ours alone.
                unsafe { *((start - HEADER) as *mut usize) = size };
                return start as *mut c_void;
            }
            Err(now) => cur = now,
        }
    }
}

/// The size a bootstrap pointer was allocated with.
pub fn boot_size(p: *const c_void) -> usize {
    // SAFETY: p came from boot_alloc, which wrote the header.
    unsafe { *((p as usize - HEADER) as *const usize) }
}

// ---------------------------------------------------------------------------
// Typed calls. Each transmutes the resolved address to the C signature of the
// symbol it was resolved from.

macro_rules! call {
    ($a:expr, fn($($t:ty),* $(,)?) -> $r:ty, $($arg:expr),* $(,)?) => {{
        // SAFETY: $a is the address dlsym gave for a symbol with this C
        // signature.
        let f: unsafe extern "C" fn($($t),*) -> $r = unsafe { core::mem::transmute($a) };
        unsafe { f($($arg),*) }
    }};
}
pub(crate) use call;

/// Real malloc, with the bootstrap buffer while unresolved. Used by the
/// global allocator and every wrapper.
#[inline(always)]
pub fn malloc(size: usize) -> *mut c_void {
    let a = addr(Sym::Malloc);
    if a == 0 {
        return malloc_cold(size);
    }
    call!(a, fn(usize) -> *mut c_void, size)
}

#[cold]
#[inline(never)]
fn malloc_cold(size: usize) -> *mut c_void {
    match c_fn(Sym::Malloc) {
        0 => boot_alloc(size, HEADER),
        a => call!(a, fn(usize) -> *mut c_void, size),
    }
}

/// Real free.
///
/// # Safety
/// `p` is null or a live block of the real allocator (or of the bootstrap
/// buffer), not used after this call.
#[inline(always)]
pub unsafe fn free(p: *mut c_void) {
    if is_boot(p) {
        return;
    }
    match addr(Sym::Free) {
        0 => free_cold(p),
        a => call!(a, fn(*mut c_void) -> (), p),
    }
}

#[cold]
#[inline(never)]
fn free_cold(p: *mut c_void) {
    // A pointer that is not ours arrived before resolution: it came from
    // the real allocator (for example through a library bound to libc
    // directly), so the real free must be found.
    if let a @ 1.. = c_fn(Sym::Free) {
        call!(a, fn(*mut c_void) -> (), p)
    }
}

pub fn calloc(n: usize, size: usize) -> *mut c_void {
    match c_fn(Sym::Calloc) {
        0 => match n.checked_mul(size) {
            // The bootstrap buffer is zeroed and never reused.
            Some(total) => boot_alloc(total, HEADER),
            None => {
                crate::hot::sys::set_errno(libc::ENOMEM);
                core::ptr::null_mut()
            }
        },
        a => call!(a, fn(usize, usize) -> *mut c_void, n, size),
    }
}

/// Real realloc.
///
/// # Safety
/// `p` is null or a live block of the real allocator (or of the bootstrap
/// buffer); after a non-null result it is not used again.
pub unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if is_boot(p) {
        return boot_realloc(p, size);
    }
    match c_fn(Sym::Realloc) {
        0 => boot_realloc(p, size),
        a => call!(a, fn(*mut c_void, usize) -> *mut c_void, p, size),
    }
}

/// Moves a bootstrap block into a new allocation (bootstrap blocks are
/// never resized in place). A null `p` is a plain allocation.
fn boot_realloc(p: *mut c_void, size: usize) -> *mut c_void {
    let q = malloc(size.max(1));
    if !q.is_null() && !p.is_null() {
        let old = if is_boot(p) { boot_size(p) } else { 0 };
        // SAFETY: both blocks are at least min(old, size) long and distinct.
        unsafe { core::ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, old.min(size)) };
    }
    q
}

/// Real malloc_usable_size.
///
/// # Safety
/// `p` is null or a live block of the real allocator (or of the bootstrap
/// buffer).
pub unsafe fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    if is_boot(p) {
        return boot_size(p);
    }
    match c_fn(Sym::MallocUsableSize) {
        0 => 0,
        a => call!(a, fn(*mut c_void) -> usize, p),
    }
}
