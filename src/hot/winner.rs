//! Another allocator reached before heaplive (issue 25): jemalloc or
//! tcmalloc earlier in `LD_PRELOAD`, or an executable with its own malloc.
//! The program's modules then bind malloc there and none of their calls
//! would reach heaplive.
//!
//! [`find_other_malloc`] (from the resolver, at every start) asks the
//! loader where malloc is bound: normally heaplive's own. A library's:
//! the constructor calls [`adopt_other_allocator`], which makes the
//! allocation functions it defines heaplive's real ones, and then has the
//! modules' slots redirected to heaplive (`background::attach`); an
//! executable's: only said. Nothing here allocates.

use crate::hot::guard::Busy;
use crate::hot::real::{
    Lookup, MALLOC_JUMP, NAMES, Object, SLOTS, Sym, clear_dlerror, is_boot, lookup_in,
    malloc_forward, refresh_jumps, resolve_all,
};
use crate::hot::sys::ErrnoGuard;
use core::ffi::{CStr, c_char, c_void};
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering::*};

/// Whose malloc the program's modules call (found by the resolver,
/// preloaded only; a library is adopted by the constructor).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Winner {
    /// heaplive's: it comes first in the lookup order, as it should (or
    /// a wrapper's that forwards to heaplive's).
    Ours,
    /// A library loaded before heaplive (jemalloc or tcmalloc earlier in
    /// `LD_PRELOAD`): the program binds its calls there, and heaplive's
    /// real allocation functions are that library's, so that the modules'
    /// slots can be redirected to heaplive (`background::attach`). Set by
    /// [`adopt_other_allocator`].
    Library,
    /// The executable defines malloc itself: nothing can be redirected.
    Executable,
}

const W_OURS: u8 = 0;
const W_LIBRARY: u8 = 1;
const W_EXECUTABLE: u8 = 2;
static WINNER: AtomicU8 = AtomicU8::new(W_OURS);
/// The winning library's link map (glibc's `struct link_map *`, which is
/// also its `dlopen` handle).
static WINNER_MAP: AtomicPtr<LinkMap> = AtomicPtr::new(core::ptr::null_mut());

/// The head of glibc's `struct link_map` (link.h), the public part.
#[repr(C)]
pub struct LinkMap {
    l_addr: usize,
    l_name: *const c_char,
    l_ld: *const c_void,
}

/// glibc's `RTLD_DL_LINKMAP` for dladdr1 (not in the libc crate).
const RTLD_DL_LINKMAP: i32 = 2;

/// Did [`find_other_malloc`] find malloc elsewhere than in heaplive?
#[inline]
pub fn pending() -> bool {
    WINNER.load(Acquire) != W_OURS || !WINNER_MAP.load(Acquire).is_null()
}

pub fn winner() -> Winner {
    match WINNER.load(Acquire) {
        W_LIBRARY => Winner::Library,
        W_EXECUTABLE => Winner::Executable,
        _ => Winner::Ours,
    }
}

/// The winning library: its path (as the loader names it) and its load
/// bias, which `dl_iterate_phdr` reports as `dlpi_addr`.
pub fn winner_library() -> Option<(&'static CStr, usize)> {
    let m = WINNER_MAP.load(Acquire);
    if m.is_null() || winner() != Winner::Library {
        return None;
    }
    // SAFETY: the link map of a preloaded library, never unloaded; its
    // name is NUL-terminated.
    unsafe { Some((CStr::from_ptr((*m).l_name), (*m).l_addr)) }
}

/// The link map of the object holding `p`, and whether `p` is the start of
/// a symbol there; None when no loaded object holds it.
#[inline(never)]
fn object_at(p: *const c_void) -> Option<(*mut LinkMap, bool)> {
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    let mut map: *mut LinkMap = core::ptr::null_mut();
    // SAFETY: valid out-pointers; RTLD_DL_LINKMAP stores the link map.
    let ok = unsafe {
        libc::dladdr1(
            p,
            &mut info,
            (&mut map as *mut *mut LinkMap).cast(),
            RTLD_DL_LINKMAP,
        )
    };
    (ok != 0 && !map.is_null()).then_some((map, core::ptr::eq(info.dli_saddr, p)))
}

/// Finds the malloc that the program's modules bind to (the first
/// definition in the global lookup order), once the real functions are
/// known. Not ours: a library came first in `LD_PRELOAD` (its link map is
/// kept for [`adopt_other_allocator`], which the constructor calls), or
/// the executable defines its own (only said).
#[inline(never)]
pub fn find_other_malloc() {
    // SAFETY: a NUL-terminated name; the global scope always has a malloc.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"malloc".as_ptr()) };
    if p.is_null() {
        clear_dlerror();
        return;
    }
    let (Some((map, start)), Some((ours, _))) =
        (object_at(p), object_at(resolve_all as *const c_void))
    else {
        return;
    };
    // A non-PIE executable that takes malloc's address defines a PLT
    // stub as malloc's canonical address: not a definition, nothing to say.
    if map == ours || !start {
        return;
    }
    // SAFETY: a loaded object's link map; the executable's name is "".
    if unsafe { (*map).l_name.is_null() || *(*map).l_name == 0 } {
        WINNER.store(W_EXECUTABLE, Release);
    } else {
        WINNER_MAP.store(map, Release);
    }
}

/// From the constructor, when a library before heaplive defines malloc
/// (jemalloc, tcmalloc): makes the allocation functions it defines
/// heaplive's real ones, so that the modules' slots can be redirected to
/// heaplive (`background::attach::redirect_from`). True when done. Until
/// now heaplive's exports kept the next definitions (libc's): only calls
/// the library does not serve reached them, and keep doing so.
///
/// A wrapper that forwards to the next malloc itself (another profiler,
/// through dlsym(RTLD_NEXT)) already reaches heaplive: nothing to
/// redirect, and forwarding back to it would never end. Its malloc,
/// called here while heaplive's real malloc is unset, comes back to
/// heaplive and gets a block of the bootstrap buffer: then nothing
/// changes.
pub fn adopt_other_allocator() -> bool {
    let Some(m) = winner_lookup(Sym::Malloc) else {
        WINNER_MAP.store(core::ptr::null_mut(), Release);
        return false;
    };
    let _busy = Busy::enter();
    let _errno = ErrnoGuard::save();
    let saved = SLOTS[Sym::Malloc as usize].swap(0, AcqRel);
    MALLOC_JUMP.store(malloc_forward as *mut (), Release);
    // SAFETY: the library's malloc.
    let q = unsafe {
        let m: unsafe extern "C" fn(usize) -> *mut c_void = core::mem::transmute(m);
        m(1)
    };
    SLOTS[Sym::Malloc as usize].store(saved, Release);
    let own = !q.is_null() && !is_boot(q);
    if own && let Some(f) = winner_lookup(Sym::Free) {
        // SAFETY: the library's free, of its own block.
        unsafe {
            let f: unsafe extern "C" fn(*mut c_void) = core::mem::transmute(f);
            f(q)
        }
    }
    if own {
        let alloc = Sym::Malloc as usize..=Sym::MallocUsableSize as usize;
        for (i, slot) in SLOTS.iter().enumerate().filter(|(i, _)| alloc.contains(i)) {
            if let Some(a) = Sym::from_index(i).and_then(winner_lookup) {
                slot.store(a, Release);
            }
        }
        WINNER.store(W_LIBRARY, Release);
    } else {
        WINNER_MAP.store(core::ptr::null_mut(), Release);
    }
    refresh_jumps();
    own
}

/// A function resolved at its first call: the winning library's, once
/// adopted.
#[cold]
#[inline(never)]
pub fn lazy(s: Sym) -> Option<usize> {
    (winner() == Winner::Library)
        .then(|| winner_lookup(s))
        .flatten()
}

/// The winning library's definition of the allocation function `s`, when
/// it defines one (else heaplive's lookup stands: what the program would
/// bind to without heaplive, libc's).
fn winner_lookup(s: Sym) -> Option<usize> {
    let m = WINNER_MAP.load(Acquire);
    if m.is_null() || s as usize > Sym::MallocUsableSize as usize {
        return None;
    }
    let name = NAMES[s as usize];
    let key = name.strip_suffix(b"\0").unwrap_or(name);
    // SAFETY: the link map of a loaded library: its dynamic section and
    // tables are mapped and relocated.
    match unsafe { lookup_in(Object::new((*m).l_addr, (*m).l_ld as usize), key) } {
        Lookup::Function(a) => Some(a),
        Lookup::Absent => None,
        Lookup::Unsure => {
            // SAFETY: glibc's link map is the object's handle; the name
            // is NUL-terminated. Its own scope: the library, then its
            // dependencies (libc for what it does not define).
            let p = unsafe { libc::dlsym(m.cast(), name.as_ptr().cast()) };
            if p.is_null() {
                clear_dlerror();
            }
            (!p.is_null()).then_some(p as usize)
        }
    }
}

/// Do `a` and `b` lie in the same loaded object?
#[cold]
#[inline(never)]
pub fn same_object(a: *const c_void, b: *const c_void) -> bool {
    match (object_at(a), object_at(b)) {
        (Some((x, _)), Some((y, _))) => x == y,
        _ => false,
    }
}
