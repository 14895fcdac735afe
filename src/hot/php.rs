//! PHP mode, the part that runs inside allocations: reading the PHP call
//! stack of the running request (`executor_globals.current_execute_data`),
//! splicing it into the native stack, the weight of a ZendMM block, and the
//! list of the request's ZendMM samples (dropped when the request's heap is
//! reset). The hook points (detection, the internal module, the ZendMM
//! handlers) are in `interpose::php`, which fills the state here.
//!
//! Reads of engine memory go through `process_vm_readv` on our own process
//! into buffers on the stack: a bad pointer (a wrong offset, a frame being
//! built, memory an opcache restart took back) makes the call fail with
//! EFAULT, never a fault. Nothing here allocates.

use crate::hot::guard;
use crate::hot::names;
use crate::hot::stacks::MAX_FRAMES;
use crate::hot::sys::StackBuf;
use core::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering::*,
};

/// Struct offsets that differ between PHP versions (x86-64, non-ZTS).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Offsets {
    pub major: u32,
    pub minor: u32,
    /// `zend_op_array.last`, `.opcodes`, `.filename`, `.line_start`.
    pub op_last: usize,
    pub op_opcodes: usize,
    pub op_filename: usize,
    pub op_line_start: usize,
    /// `zend_compiler_globals.function_table` and
    /// `zend_internal_function.handler`: where `gc_mem_caches` is
    /// wrapped. None where not checked against the headers.
    pub cg_function_table: Option<usize>,
    pub internal_handler: Option<usize>,
    /// `ZEND_MODULE_API_NO`, for the module entry.
    pub api_no: u32,
}

/// Offsets that are the same in 7.4 to 8.4.
pub const EG_CURRENT_EXECUTE_DATA: usize = 488;
const EX_OPLINE: usize = 0;
const EX_FUNC: usize = 24;
const EX_CALL_INFO: usize = 40;
const EX_PREV: usize = 48;
const EX_SIZE: usize = 56;
const FN_TYPE: usize = 0;
const FN_NAME: usize = 8;
const FN_SCOPE: usize = 16;
const CE_NAME: usize = 8;
const ZSTR_LEN: usize = 16;
const ZSTR_VAL: usize = 24;
const OP_SIZE: usize = 32;
const OP_LINENO: usize = 24;
const ZEND_CALL_TOP: u32 = 1 << 17;
const ZEND_INTERNAL_FUNCTION: u8 = 1;
const ZEND_USER_FUNCTION: u8 = 2;

/// The versions heaplive knows. 8.2 was compiled against the headers of
/// Debian's 8.2.36 (and walked); 7.4 against its release sources and run
/// (scripts/check-php-version.sh 7.4); 8.0, 8.1 and 8.3 were compiled from
/// reli-prof's headers (`offsetof`, the same headers give 7.4's and 8.2's
/// values exactly) and 8.4 comes from phpspy's, checked by hand against
/// reli-prof's 8.4 header (see the PHP research notes). 8.4's
/// `internal_handler` is left out: the headers read disagree on
/// `zend_internal_function`'s common part.
const TABLE: [Offsets; 6] = [
    Offsets {
        major: 7,
        minor: 4,
        op_last: 60,
        op_opcodes: 64,
        op_filename: 136,
        op_line_start: 144,
        cg_function_table: Some(56),
        internal_handler: Some(48),
        api_no: 20190902,
    },
    Offsets {
        major: 8,
        minor: 0,
        op_last: 68,
        op_opcodes: 72,
        op_filename: 144,
        op_line_start: 152,
        cg_function_table: Some(56),
        internal_handler: Some(56),
        api_no: 20200930,
    },
    Offsets {
        major: 8,
        minor: 1,
        op_last: 68,
        op_opcodes: 72,
        op_filename: 144,
        op_line_start: 152,
        cg_function_table: Some(56),
        internal_handler: Some(56),
        api_no: 20210902,
    },
    Offsets {
        major: 8,
        minor: 2,
        op_last: 80,
        op_opcodes: 88,
        op_filename: 152,
        op_line_start: 160,
        cg_function_table: Some(56),
        internal_handler: Some(72),
        api_no: 20220829,
    },
    Offsets {
        major: 8,
        minor: 3,
        op_last: 76,
        op_opcodes: 80,
        op_filename: 144,
        op_line_start: 152,
        cg_function_table: Some(56),
        internal_handler: Some(72),
        api_no: 20230831,
    },
    Offsets {
        major: 8,
        minor: 4,
        op_last: 96,
        op_opcodes: 104,
        op_filename: 168,
        op_line_start: 176,
        cg_function_table: None,
        internal_handler: None,
        api_no: 20240924,
    },
];

/// The offsets of PHP `major.minor`, if heaplive knows that version.
pub fn offsets_for(major: u32, minor: u32) -> Option<&'static Offsets> {
    TABLE.iter().find(|o| o.major == major && o.minor == minor)
}

/// `8.2.36` (or `8.2.36-dev`, `8.3.0RC1`) -> (8, 2, 36).
pub fn parse_version(v: &[u8]) -> Option<(u32, u32, u32)> {
    let mut parts = [0u32; 3];
    let mut i = 0;
    for (k, part) in parts.iter_mut().enumerate() {
        let start = i;
        while i < v.len() && v[i].is_ascii_digit() {
            *part = part.checked_mul(10)?.checked_add((v[i] - b'0') as u32)?;
            i += 1;
        }
        if i == start {
            return None;
        }
        if k < 2 {
            if v.get(i) != Some(&b'.') {
                return None;
            }
            i += 1;
        }
    }
    Some((parts[0], parts[1], parts[2]))
}

// ---------------------------------------------------------------------------
// State, filled by interpose::php at startup.

/// `&executor_globals`; 0 = not PHP.
static EG: AtomicUsize = AtomicUsize::new(0);
/// Index into TABLE + 1; 0 = frames off.
static FRAMES: AtomicU32 = AtomicU32::new(0);
/// `execute_ex`: [start, end).
static EXEC_START: AtomicUsize = AtomicUsize::new(0);
static EXEC_END: AtomicUsize = AtomicUsize::new(0);
/// The ZendMM heap of the hooked request and `_zend_mm_block_size`.
static HEAP: AtomicUsize = AtomicUsize::new(0);
static BLOCK_SIZE: AtomicUsize = AtomicUsize::new(0);

pub fn set_executor_globals(eg: usize) {
    let (start, end) = segment_of(eg);
    STATIC_START.store(start, Relaxed);
    STATIC_END.store(end, Relaxed);
    EG.store(eg, Release);
}

/// [start, end) of the loaded segment (PT_LOAD, with its bss) holding
/// `addr`; (0, 0) if none does. Start-up only (dl_iterate_phdr).
fn segment_of(addr: usize) -> (usize, usize) {
    let mut found = (addr, 0usize);
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info with `dlpi_phnum`
        // program headers; `data` is `found`.
        unsafe {
            let found = &mut *(data as *mut (usize, usize));
            let info = &*info;
            for i in 0..info.dlpi_phnum as usize {
                let ph = &*info.dlpi_phdr.add(i);
                if ph.p_type != libc::PT_LOAD {
                    continue;
                }
                let start = info.dlpi_addr as usize + ph.p_vaddr as usize;
                let end = start + ph.p_memsz as usize;
                if found.0 >= start && found.0 < end {
                    *found = (start, end);
                    return 1;
                }
            }
            0
        }
    }
    // SAFETY: the callback only reads the headers it is given.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut found as *mut (usize, usize)).cast()) };
    if found.1 == 0 { (0, 0) } else { found }
}

pub fn set_execute_ex(start: usize, end: usize) {
    EXEC_END.store(end, Relaxed);
    EXEC_START.store(start, Release);
}

/// Turns PHP frames on with `o`'s offsets (or off with None).
pub fn set_frames(o: Option<&'static Offsets>) {
    let i = o
        .and_then(|o| TABLE.iter().position(|t| core::ptr::eq(t, o)))
        .map_or(0, |i| i as u32 + 1);
    FRAMES.store(i, Release);
}

pub fn set_heap(heap: usize, block_size_fn: usize) {
    BLOCK_SIZE.store(block_size_fn, Relaxed);
    HEAP.store(heap, Release);
}

pub fn heap() -> usize {
    HEAP.load(Acquire)
}

/// `zend_mm_heap.size` (the bytes memory_get_usage() reports): after the
/// `use_custom_heap` int and the `storage` pointer in 7.4 to 8.4
/// (ZEND_MM_CUSTOM, ZEND_MM_STORAGE and ZEND_MM_STAT are always on).
pub const HEAP_SIZE: usize = 16;
/// Whether the running heap's `size` was found at HEAP_SIZE (RINIT checks
/// it against `zend_memory_usage`).
static SIZE_FIELD: AtomicBool = AtomicBool::new(false);

pub fn set_size_field(ok: bool) {
    SIZE_FIELD.store(ok, Relaxed);
}

#[inline(always)]
pub fn size_field() -> bool {
    SIZE_FIELD.load(Relaxed)
}

/// Is this a PHP process heaplive reads (PHP mode on)?
pub fn detected() -> bool {
    EG.load(Acquire) != 0
}

/// Marks the calling thread as the one that runs PHP code: only its samples
/// get PHP frames (in a non-ZTS PHP, `executor_globals` belongs to it; an
/// extension's own thread must not be blamed on the running script).
pub fn mark_php_thread() {
    // SAFETY: this thread's own state.
    unsafe { (*guard::state()).php_thread = 1 };
}

fn is_php_thread() -> bool {
    // SAFETY: this thread's own state.
    unsafe { (*guard::state()).php_thread != 0 }
}

/// `ZEND_MM_CUSTOM_HEAP_STD`: the heap's flag while custom handlers are
/// on (`zend_mm_set_custom_handlers` sets it, 7.4 to 8.4). ZendMM calls a
/// handler only while the flag is set, so a handler that clears it around
/// a call through puts it back as this constant: nothing to keep across
/// the call.
pub const CUSTOM_HEAP_STD: i32 = 1;

/// The size ZendMM gave the block at `p` of `heap` (the bin or
/// page-rounded size that `memory_get_usage()` counts); 0 if unknown. For
/// the handlers only (the flag is CUSTOM_HEAP_STD there).
#[inline(always)]
pub fn block_size(heap: usize, p: usize) -> usize {
    let f = BLOCK_SIZE.load(Relaxed);
    if f == 0 {
        return 0;
    }
    // SAFETY: `_zend_mm_block_size(zend_mm_heap*, void*)`, resolved by
    // dlsym; p is a live block of that heap (we were just given it). On
    // 8.4+ it answers 0 for a heap in custom mode: the flag is cleared
    // around the call, as the ZendMM handlers do.
    unsafe {
        let flag = heap as *mut i32;
        flag.write_volatile(0);
        let f: unsafe extern "C" fn(usize, usize) -> usize = core::mem::transmute(f);
        let n = f(heap, p);
        flag.write_volatile(CUSTOM_HEAP_STD);
        n
    }
}

/// ZendMM's small size classes (`zend_alloc_sizes.h`, the same in 7.4 to
/// 8.4); larger blocks are whole 4 KiB pages.
const BINS: [u16; 30] = [
    8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640,
    768, 896, 1024, 1280, 1536, 1792, 2048, 2560, 3072,
];
pub const MAX_SMALL: usize = 3072;
const PAGE: usize = 4096;

/// The bin of each size in 8-byte steps up to MAX_SMALL: one load.
static BIN_OF: [u16; MAX_SMALL / 8 + 1] = {
    let mut t = [0u16; MAX_SMALL / 8 + 1];
    let mut i = 0;
    let mut b = 0;
    while i < t.len() {
        while (BINS[b] as usize) < i * 8 {
            b += 1;
        }
        t[i] = BINS[b];
        i += 1;
    }
    t
};

/// ZendMM's bin-specialised allocators, `_emalloc_8` to `_emalloc_3072`
/// (one per entry of BINS), indexed by `(size + 7) / 8` for sizes up to
/// MAX_SMALL: the one ZendMM's own `emalloc(size)` of a constant size would
/// call, beside its block size (one entry, one base address for the fast
/// path's two loads). 0 where unknown (a ZEND_DEBUG build exports none of
/// them).
#[repr(C, align(16))]
struct BinAlloc {
    f: AtomicUsize,
    block: AtomicUsize,
}
static BIN_ALLOC: [BinAlloc; MAX_SMALL / 8 + 1] = [const {
    BinAlloc {
        f: AtomicUsize::new(0),
        block: AtomicUsize::new(0),
    }
}; MAX_SMALL / 8 + 1];

/// Sets the bin allocators: `resolve(size)` gives `_emalloc_<size>`'s
/// address (0 if not exported) for each size class. All or none: a PHP
/// whose bins were not exactly BINS would get blocks of the wrong class
/// (and memory_get_usage() figures unlike its own) from a partial table.
/// Returns whether they are set.
pub fn set_bin_allocators(mut resolve: impl FnMut(usize) -> usize) -> bool {
    let mut f = [0usize; BINS.len()];
    for (i, b) in BINS.iter().enumerate() {
        f[i] = resolve(*b as usize);
        if f[i] == 0 {
            for a in &BIN_ALLOC {
                a.f.store(0, Relaxed);
            }
            return false;
        }
    }
    for (i, a) in BIN_ALLOC.iter().enumerate() {
        let bin = BIN_OF[i];
        let k = BINS.iter().position(|b| *b == bin).unwrap_or(0);
        a.block.store(bin as usize, Relaxed);
        a.f.store(f[k], Relaxed);
    }
    true
}

/// The common case of an emalloc of `size` bytes: its block size and the
/// bin-specialised ZendMM function that allocates it (called with the
/// heap's custom flag cleared); None for large and huge blocks, or without
/// the table.
#[inline(always)]
pub fn bin_allocator(size: usize) -> Option<(usize, usize)> {
    if size > MAX_SMALL {
        return None;
    }
    let e = &BIN_ALLOC[(size + 7) >> 3];
    let f = e.f.load(Relaxed);
    (f != 0).then(|| (e.block.load(Relaxed), f))
}

/// The size of the block ZendMM gives for `size` requested bytes: its
/// size class, or whole pages (large and huge blocks), which is what
/// `memory_get_usage()` counts.
#[inline(always)]
pub fn zend_block_size(size: usize) -> usize {
    if size <= MAX_SMALL {
        BIN_OF[size.max(1).div_ceil(8)] as usize
    } else {
        size.div_ceil(PAGE).saturating_mul(PAGE)
    }
}

// ---------------------------------------------------------------------------
// Reads that cannot fault.

/// Copies up to `buf.len()` bytes from `addr` of this process; the number
/// of bytes copied (fewer when the range ends in unmapped memory).
fn read(pid: i32, addr: usize, buf: &mut [u8]) -> usize {
    if addr < 4096 || addr.checked_add(buf.len()).is_none() {
        return 0;
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the local iovec is our own buffer; the kernel checks the
    // remote range and fails with EFAULT instead of faulting.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n < 0 { 0 } else { n as usize }
}

/// Copies several ranges of this process with one system call: the
/// number of bytes copied into each buffer (fewer when a range ends in
/// unmapped memory). The kernel stops at the first range it cannot copy
/// whole, so a short range and the ones after it are read again one by
/// one: the counts are those `read` would give for each.
fn read_n<const N: usize>(pid: i32, parts: [(usize, &mut [u8]); N]) -> [usize; N] {
    let mut got = [0usize; N];
    let empty = libc::iovec {
        iov_base: core::ptr::null_mut(),
        iov_len: 0,
    };
    let (mut local, mut remote) = ([empty; N], [empty; N]);
    let mut which = [0usize; N];
    let mut k = 0;
    for (i, (addr, buf)) in parts.into_iter().enumerate() {
        if addr < 4096 || buf.is_empty() || addr.checked_add(buf.len()).is_none() {
            continue;
        }
        local[k] = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        remote[k] = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: buf.len(),
        };
        which[k] = i;
        k += 1;
    }
    if k == 0 {
        return got;
    }
    // SAFETY: the local iovecs are the callers' buffers, each its own
    // length; the kernel checks the remote ranges and fails with EFAULT
    // instead of faulting.
    let n =
        unsafe { libc::process_vm_readv(pid, local.as_ptr(), k as _, remote.as_ptr(), k as _, 0) };
    let mut left = if n < 0 { 0 } else { n as usize };
    for j in 0..k {
        let len = local[j].iov_len;
        if left >= len {
            got[which[j]] = len;
            left -= len;
            continue;
        }
        // Cut here: this range and the rest, one by one.
        for r in j..k {
            // SAFETY: local[r] is a caller's buffer of iov_len bytes,
            // borrowed for this call.
            let buf = unsafe {
                core::slice::from_raw_parts_mut(local[r].iov_base.cast::<u8>(), local[r].iov_len)
            };
            got[which[r]] = read(pid, remote[r].iov_base as usize, buf);
        }
        break;
    }
    got
}

fn word(b: &[u8], at: usize) -> usize {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    usize::from_ne_bytes(w)
}

fn word32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_ne_bytes(w)
}

/// Can this process read its own memory with process_vm_readv? Checked
/// once at start-up. A seccomp filter may forbid the call, and some kill
/// the process instead of failing it (systemd's `SystemCallFilter=` without
/// `SystemCallErrorNumber=`): under a filter the first call is made in a
/// throw-away child that shares our memory (clone with CLONE_VM |
/// CLONE_VFORK, no exit signal), so only that child can die of it.
pub fn can_read_self() -> bool {
    if seccomp_filtered() && !probe_in_child() {
        return false;
    }
    read_self_once()
}

/// Is a seccomp filter installed (`Seccomp: 2` in /proc/self/status)?
/// Unknown counts as yes.
fn seccomp_filtered() -> bool {
    let mut buf = [0u8; 4096];
    // SAFETY: a NUL-terminated path; read into our buffer; closed after.
    let n = unsafe {
        let fd = libc::open(
            c"/proc/self/status".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return true;
        }
        let mut got = 0usize;
        loop {
            let r = libc::read(fd, buf.as_mut_ptr().add(got).cast(), buf.len() - got);
            if r <= 0 {
                break;
            }
            got += r as usize;
            if got == buf.len() {
                break;
            }
        }
        libc::close(fd);
        got
    };
    let text = &buf[..n];
    match text.windows(9).position(|w| w == b"Seccomp:\t") {
        Some(i) => text.get(i + 9) != Some(&b'0'),
        None => true,
    }
}

extern "C" fn probe_child(_: *mut libc::c_void) -> libc::c_int {
    // The child only makes the call: if the filter kills, it dies alone.
    if read_self_once() { 0 } else { 1 }
}

/// Runs `read_self_once` in a child sharing our memory; true if the child
/// came back alive and the read worked.
fn probe_in_child() -> bool {
    let mut stack = [0u8; 64 * 1024];
    // The stack grows down: the child starts at the (aligned) top.
    let top = ((stack.as_mut_ptr() as usize + stack.len()) & !15) as *mut libc::c_void;
    // SAFETY: CLONE_VFORK suspends us until the child exits, so the child
    // has this buffer as its stack alone; it touches nothing else of ours.
    let pid = unsafe {
        libc::clone(
            probe_child,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK,
            core::ptr::null_mut(),
        )
    };
    if pid <= 0 {
        return false;
    }
    let mut status = 0;
    // SAFETY: waits for our own child (a clone child: __WALL).
    let r = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
    core::hint::black_box(&mut stack);
    r == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

fn read_self_once() -> bool {
    let probe = [0x5au8; 16];
    let mut out = [0u8; 16];
    read(
        crate::hot::sys::getpid() as i32,
        probe.as_ptr() as usize,
        &mut out,
    ) == 16
        && out == probe
}

/// Appends the text of the zend_string at `zs` (at most `max` bytes; with
/// `base_name`, only what follows the last `/`). False if it cannot be read
/// or does not look like a string.
fn push_zstr(
    pid: i32,
    zs: usize,
    max: usize,
    base_name: bool,
    out: &mut StackBuf<{ names::MAX_NAME }>,
) -> bool {
    push_zstr_lib(pid, zs, max, base_name, out).is_some()
}

/// `push_zstr`; Some(whether the whole text, a file's path, matches
/// `HEAPLIVE_PHP_LIBRARY`: a path longer than 256 bytes is matched by its
/// last 256, which `*/vendor/*` still finds when the base name is short).
fn push_zstr_lib(
    pid: i32,
    zs: usize,
    max: usize,
    base_name: bool,
    out: &mut StackBuf<{ names::MAX_NAME }>,
) -> Option<bool> {
    let mut b = [0u8; ZSTR_BUF];
    let got = read(pid, zs, &mut b);
    push_read_zstr(pid, zs, &b[..got], max, base_name, out)
}

/// How much of a zend_string one read takes: the header and 256 bytes.
const ZSTR_BUF: usize = ZSTR_VAL + 256;

/// `push_zstr_lib` of a zend_string at `zs` whose first bytes, `b` (up
/// to ZSTR_BUF), are already read.
fn push_read_zstr(
    pid: i32,
    zs: usize,
    b: &[u8],
    max: usize,
    base_name: bool,
    out: &mut StackBuf<{ names::MAX_NAME }>,
) -> Option<bool> {
    let got = b.len();
    if got < ZSTR_VAL {
        return None;
    }
    let len = word(b, ZSTR_LEN);
    if len == 0 || len > 1 << 20 {
        return None;
    }
    let want = len.min(256);
    if got < ZSTR_VAL + want {
        return None;
    }
    let mut text = &b[ZSTR_VAL..ZSTR_VAL + want];
    let mut tail = [0u8; 256];
    let mut library = false;
    if base_name {
        if len > 256 {
            // The base name is at the end: read the last 256 bytes.
            if read(pid, zs + ZSTR_VAL + len - 256, &mut tail) < 256 {
                return None;
            }
            text = &tail[..];
        }
        library = heaplive_format::grammar::php_library_match(
            crate::hot::config::get().php_library.as_bytes(),
            text,
        );
        if let Some(slash) = text.iter().rposition(|&c| c == b'/') {
            text = &text[slash + 1..];
        }
    }
    out.push_bytes(&text[..text.len().min(max)]);
    Some(library)
}

/// The pseudo frame of one PHP frame; Some(0) for a frame with nothing to
/// show; None when it cannot be read.
fn frame_name(pid: i32, o: &Offsets, func: usize, opline: usize, call_info: u32) -> Option<usize> {
    let mut f = [0u8; FN_READ];
    let got = read(pid, func, &mut f);
    frame_name_of(pid, o, &f[..got], opline, call_info)
}

/// `frame_name` of a function whose first bytes, `f` (up to FN_READ), are
/// read. Two more system calls at most, one for each level of pointers:
/// the class entry's name pointer, the function's name and file strings
/// and the opline's line (read before the opline is known to be the
/// function's: it is used only if it is), then the class's name.
fn frame_name_of(pid: i32, o: &Offsets, f: &[u8], opline: usize, call_info: u32) -> Option<usize> {
    let got = f.len();
    if got < FN_SCOPE + 8 {
        return None;
    }
    let kind = f[FN_TYPE];
    let name = word(f, FN_NAME);
    let scope = word(f, FN_SCOPE);
    let user = kind == ZEND_USER_FUNCTION;
    if user && got < o.op_line_start + 8 {
        return None;
    }
    let file_zs = if user { word(f, o.op_filename) } else { 0 };
    let (mut ce, mut nb, mut fb, mut l) = ([0u8; 8], [0u8; ZSTR_BUF], [0u8; ZSTR_BUF], [0u8; 4]);
    let [got_ce, got_name, got_file, got_line] = read_n(
        pid,
        [
            (if scope != 0 { scope + CE_NAME } else { 0 }, &mut ce[..]),
            (name, &mut nb[..]),
            (file_zs, &mut fb[..]),
            // Last: a stale opline that faults cuts no other read.
            (
                if user {
                    opline.wrapping_add(OP_LINENO)
                } else {
                    0
                },
                &mut l[..],
            ),
        ],
    );
    let mut t = StackBuf::<{ names::MAX_NAME }>::new();
    if scope != 0 {
        if got_ce < 8 {
            return None;
        }
        let cname = word(&ce, 0);
        let mut cb = [0u8; ZSTR_BUF];
        let got_c = read(pid, cname, &mut cb);
        push_read_zstr(pid, cname, &cb[..got_c], 300, false, &mut t)?;
        t.push_bytes(b"::");
    }
    match kind {
        ZEND_INTERNAL_FUNCTION => {
            if name == 0 && scope == 0 {
                // A fiber's bottom frame (zend_fiber_function) has no
                // name: nothing to show, the walk goes on to the resumer.
                return Some(0);
            }
            if name == 0 {
                return None;
            }
            push_read_zstr(pid, name, &nb[..got_name], 300, false, &mut t)?;
            t.push_bytes(b" [internal]");
        }
        ZEND_USER_FUNCTION => {
            use core::fmt::Write;
            let mut file = StackBuf::<{ names::MAX_NAME }>::new();
            let library = push_read_zstr(pid, file_zs, &fb[..got_file], 300, true, &mut file)?;
            let (start, end) = (word32(f, o.op_line_start), word32(f, o.op_line_start + 4));
            if name == 0 {
                // A file's own code: the script, or an include/eval.
                t.push_bytes(if call_info & ZEND_CALL_TOP != 0 {
                    b"{main}"
                } else {
                    b"{include}"
                });
            } else {
                let mut n = StackBuf::<{ names::MAX_NAME }>::new();
                push_read_zstr(pid, name, &nb[..got_name], 300, false, &mut n)?;
                if is_closure(n.as_bytes()) {
                    // `ns\{closure}` (8.3 and before), `{closure:/path:3}`
                    // (8.4): which closure, by its file and lines.
                    t.push_bytes(b"{closure:");
                    t.push_bytes(file.as_bytes());
                    let _ = write!(t, ":{start}-{end}}}");
                } else {
                    t.push_bytes(n.as_bytes());
                }
            }
            let last = word32(f, o.op_last) as usize;
            let opcodes = word(f, o.op_opcodes);
            let mut line = start;
            // The current line, when opline is one of this function's
            // opcodes (it can be stale or unset in a frame being built).
            if got_line == 4
                && opline >= opcodes
                && opline < opcodes.wrapping_add(last.saturating_mul(OP_SIZE))
                && (opline - opcodes).is_multiple_of(OP_SIZE)
            {
                line = u32::from_ne_bytes(l);
            }
            t.push_bytes(b" (");
            t.push_bytes(file.as_bytes());
            let _ = write!(t, ":{})", line);
            if library {
                // Under HEAPLIVE_PHP_LIBRARY (Composer's vendor/...).
                t.push_bytes(LIBRARY_MARK);
            }
        }
        _ => return None,
    }
    Some(names::intern(t.as_bytes()))
}

/// The mark after a frame of a library's file (`HEAPLIVE_PHP_LIBRARY`).
pub const LIBRARY_MARK: &[u8] = b" [library]";

/// A closure's function name: `{closure}`, `Ns\{closure}`, `{closure:...}`.
fn is_closure(name: &[u8]) -> bool {
    name.ends_with(b"{closure}") || name.starts_with(b"{closure:")
}

/// The most PHP frames one sample keeps (the innermost ones).
pub const MAX_PHP_FRAMES: usize = 64;

/// The PHP frames of the running code, innermost first, as pseudo frames;
/// the number written. A frame that cannot be read ends the walk with
/// `[php?]`.
///
/// During a request on a ZendMM heap (`begin_request_frames`), frames are
/// read in place where that is known to be safe (`Fast`), and their names
/// come from a cache; anything else is read with process_vm_readv.
fn walk(o: &Offsets, out: &mut [usize; MAX_PHP_FRAMES]) -> usize {
    let eg = EG.load(Acquire);
    if eg == 0 {
        return 0;
    }
    // SAFETY: executor_globals is a global of the executable, always
    // mapped; a word-sized aligned read.
    let ex = unsafe { ((eg + EG_CURRENT_EXECUTE_DATA) as *const usize).read_volatile() };
    if ex == 0 {
        return 0;
    }
    let mut pid = Pid(0);
    let Some(mut fast) = Fast::enter() else {
        return walk_from(o, &mut pid, ex, out, None);
    };
    let n = walk_from(o, &mut pid, ex, out, Some(&mut fast));
    drop(fast);
    if crate::hot::config::get().unwind != heaplive_format::grammar::Unwind::Check {
        return n;
    }
    // HEAPLIVE_UNWIND=check: the walk again with process_vm_readv and no
    // cache; its frames are kept, a difference is said (the first ten) and
    // counted.
    let mut safe = [0usize; MAX_PHP_FRAMES];
    let m = walk_from(o, &mut pid, ex, &mut safe, None);
    PHP_COMPARED.fetch_add(1, Relaxed);
    if out[..n] != safe[..m] {
        let k = PHP_DIFFERED.fetch_add(1, Relaxed);
        if k < 10 {
            let at = (0..n.min(m))
                .find(|&i| out[i] != safe[i])
                .unwrap_or(n.min(m));
            let show = |f: Option<&usize>| {
                f.and_then(|&f| names::text(f))
                    .map_or("(none)", |t| core::str::from_utf8(t).unwrap_or("?"))
            };
            crate::hot::log::line(format_args!(
                "heaplive[{}]: php frames check: frames read in place differ at frame {}: {} vs {} ({} vs {} frames)",
                pid.get(),
                at,
                show(out[..n].get(at)),
                show(safe[..m].get(at)),
                n,
                m
            ));
        }
    }
    *out = safe;
    m
}

/// HEAPLIVE_UNWIND=check: PHP walks made both ways, and how many differed.
pub static PHP_COMPARED: AtomicU64 = AtomicU64::new(0);
pub static PHP_DIFFERED: AtomicU64 = AtomicU64::new(0);

/// This process's pid for process_vm_readv, asked (a system call) only
/// when a read needs it.
struct Pid(i32);

impl Pid {
    fn get(&mut self) -> i32 {
        if self.0 == 0 {
            self.0 = crate::hot::sys::getpid() as i32;
        }
        self.0
    }
}

/// The walk from the frame `ex` outwards.
fn walk_from(
    o: &Offsets,
    pid: &mut Pid,
    mut ex: usize,
    out: &mut [usize; MAX_PHP_FRAMES],
    mut fast: Option<&mut Fast>,
) -> usize {
    let mut n = 0;
    let mut steps = 0;
    while ex != 0 && n < MAX_PHP_FRAMES && steps < 4 * MAX_PHP_FRAMES {
        steps += 1;
        // The frame's four fields: read in place when the frame is in a
        // chunk of the request's heap, else copied with process_vm_readv.
        let (func, opline, call_info, prev) = match fast.as_deref() {
            Some(f) if f.in_chunk(ex, EX_SIZE) => {
                // SAFETY: [ex, ex + EX_SIZE) lies in a chunk of the running
                // request's ZendMM heap, mapped while the request runs, and
                // `ex` is 8-aligned (`in_chunk`).
                unsafe {
                    (
                        ((ex + EX_FUNC) as *const usize).read(),
                        ((ex + EX_OPLINE) as *const usize).read(),
                        ((ex + EX_CALL_INFO) as *const u32).read(),
                        ((ex + EX_PREV) as *const usize).read(),
                    )
                }
            }
            _ => {
                let mut e = [0u8; EX_SIZE];
                if read(pid.get(), ex, &mut e) < EX_SIZE {
                    out[n] = names::php_bad();
                    n += 1;
                    break;
                }
                (
                    word(&e, EX_FUNC),
                    word(&e, EX_OPLINE),
                    word32(&e, EX_CALL_INFO),
                    word(&e, EX_PREV),
                )
            }
        };
        // A NULL func is a generator's placeholder frame (`yield from`):
        // nothing to show; the chain goes on through prev.
        if func != 0 {
            let name = match fast.as_deref_mut() {
                Some(f) => f.frame_name(o, pid, func, opline, call_info),
                None => frame_name(pid.get(), o, func, opline, call_info),
            };
            match name {
                Some(0) => {}
                Some(f) => {
                    out[n] = f;
                    n += 1;
                }
                None => {
                    out[n] = names::php_bad();
                    n += 1;
                    break;
                }
            }
        }
        if prev == ex {
            break;
        }
        ex = prev;
    }
    n
}

// ---------------------------------------------------------------------------
// Frames read in place, names cached.
//
// While a request runs on a ZendMM heap, the sample is taken on the PHP
// thread between two engine operations, where the executor's frames are
// consistent; every `zend_execute_data` (the VM stacks, a fiber's stack, a
// generator's frame) is ZendMM memory. A frame is read in place when it
// lies in one of the heap's chunks (2 MiB, listed from the main chunk,
// which holds the heap), else with process_vm_readv.
//
// A frame's name is the same for the same function and opline for as long
// as the function lives, so it is cached, keyed by (function, opline or 0
// for an internal function, the ZEND_CALL_TOP bit), in a table of the PHP
// thread with a generation bumped at every request start and end (a
// request's own op_arrays are freed at its end, opcache resets between
// requests). A function whose memory can be freed and reused within a
// request (ZendMM memory: op_arrays of included files without opcache,
// closures; and the trampoline in executor_globals, renamed per call) is
// read in place and its words checked against the cached ones; any other
// (opcache's shared memory, internal functions: stable for the request) is
// used by address, without a read. A miss reads with process_vm_readv.

const CHUNK: usize = 2 << 20;
const MAX_CHUNKS: usize = 64;
/// How much of a `zend_function` is read (the largest offset read is
/// `op_line_start` + 4 <= 180).
const FN_READ: usize = 192;

/// The heap whose chunks may be read in place (0 = no request running on
/// a ZendMM heap), and the cache's generation.
static FAST_HEAP: AtomicUsize = AtomicUsize::new(0);
static GENERATION: AtomicU64 = AtomicU64::new(1);
/// The executable's writable segment holding executor_globals: [start,
/// end), always mapped.
static STATIC_START: AtomicUsize = AtomicUsize::new(0);
static STATIC_END: AtomicUsize = AtomicUsize::new(0);

/// A request starts on `heap`, a ZendMM heap (`is_zend_mm()`): its chunks
/// may be read in place from now on, and cached names of the last request
/// are forgotten.
pub fn begin_request_frames(heap: usize) {
    GENERATION.fetch_add(1, Relaxed);
    // The heap lives in its main chunk, after the chunk's 64-byte header
    // whose first word points back to it.
    let main = heap & !(CHUNK - 1);
    let mut w = [0u8; 8];
    let ok = heap & (CHUNK - 1) == 64
        && SAFE_READS.load(Relaxed)
        && read(crate::hot::sys::getpid() as i32, main, &mut w) == 8
        && word(&w, 0) == heap;
    FAST_HEAP.store(if ok { heap } else { 0 }, Release);
}

/// The request ends: no more reads in place, cached names forgotten.
pub fn end_request_frames() {
    FAST_HEAP.store(0, Release);
    GENERATION.fetch_add(1, Relaxed);
}

#[derive(Clone, Copy)]
struct Slot {
    generation: u64,
    func: usize,
    key: usize,
    sig: u64,
    val: usize,
}

const EMPTY: Slot = Slot {
    generation: 0,
    func: 0,
    key: 0,
    sig: 0,
    val: 0,
};
const CACHE_LEN: usize = 4096;
/// A slot's key for a function's own entry (kind, opcodes, last): no
/// opline has all bits set.
const FUNC_INFO: usize = usize::MAX;

struct Cache {
    busy: crate::hot::lock::SpinLock<()>,
    slots: core::cell::UnsafeCell<[Slot; CACHE_LEN]>,
}

// SAFETY: `slots` is only touched by the holder of `busy`.
unsafe impl Sync for Cache {}

static CACHE: Cache = Cache {
    busy: crate::hot::lock::SpinLock::new(crate::hot::lock::Rank::PhpFrameCache, ()),
    slots: core::cell::UnsafeCell::new([EMPTY; CACHE_LEN]),
};

/// One walk's view of the fast path: the heap's chunks, and the cache
/// (held until dropped).
struct Fast {
    chunks: [usize; MAX_CHUNKS],
    n: usize,
    generation: u64,
    slots: *mut [Slot; CACHE_LEN],
}

impl Drop for Fast {
    fn drop(&mut self) {
        // SAFETY: `enter` took it on this thread.
        unsafe { CACHE.busy.unlock_kept() };
    }
}

#[inline(always)]
fn mix(a: u64, b: u64) -> u64 {
    (a ^ b.rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl Fast {
    /// The fast path, when a request runs on a ZendMM heap and no other
    /// walk holds the cache.
    fn enter() -> Option<Fast> {
        let heap = FAST_HEAP.load(Acquire);
        if heap == 0 || !CACHE.busy.try_lock_kept() {
            return None;
        }
        let mut f = Fast {
            chunks: [0; MAX_CHUNKS],
            n: 0,
            generation: GENERATION.load(Relaxed),
            slots: CACHE.slots.get(),
        };
        // The heap's chunks: a ring from the main chunk through `next` (the
        // second word of a chunk's header). The PHP thread is outside ZendMM
        // here, so the ring is consistent; each chunk must point back to the
        // heap, else the rest is not used.
        let main = heap & !(CHUNK - 1);
        let mut c = main;
        loop {
            // SAFETY: `c` is the main chunk (holding the heap, checked at
            // request start) or a chunk of the heap's ring: mapped.
            let (owner, next) =
                unsafe { ((c as *const usize).read(), ((c + 8) as *const usize).read()) };
            if owner != heap {
                break;
            }
            f.chunks[f.n] = c;
            f.n += 1;
            if next == main || next == 0 || next & (CHUNK - 1) != 0 || f.n == MAX_CHUNKS {
                break;
            }
            c = next;
        }
        Some(f)
    }

    /// Is [addr, addr + len) in one of the heap's chunks (and aligned)?
    #[inline(always)]
    fn in_chunk(&self, addr: usize, len: usize) -> bool {
        let base = addr & !(CHUNK - 1);
        addr & 7 == 0
            && addr - base >= 64
            && addr - base <= CHUNK - len
            && self.chunks[..self.n].contains(&base)
    }

    fn in_static(addr: usize, len: usize) -> bool {
        let s = STATIC_START.load(Relaxed);
        s != 0 && addr >= s && addr & 7 == 0 && addr.saturating_add(len) <= STATIC_END.load(Relaxed)
    }

    #[inline(always)]
    fn index(func: usize, key: usize) -> usize {
        (mix(func as u64, key as u64) >> 52) as usize & (CACHE_LEN - 1)
    }

    /// The cached slot of (func, key), if any.
    #[inline(always)]
    fn slot(&self, func: usize, key: usize) -> Option<Slot> {
        let i = Self::index(func, key);
        // SAFETY: we hold the cache (`enter`); i, i ^ 1 < CACHE_LEN.
        let slots = unsafe { &*self.slots };
        [slots[i], slots[i ^ 1]]
            .into_iter()
            .find(|s| s.generation == self.generation && s.func == func && s.key == key)
    }

    /// The cached value for (func, key, sig), if any.
    #[inline(always)]
    fn get(&self, func: usize, key: usize, sig: u64) -> Option<usize> {
        self.slot(func, key).filter(|s| s.sig == sig).map(|s| s.val)
    }

    fn put(&mut self, func: usize, key: usize, sig: u64, val: usize) {
        let i = Self::index(func, key);
        // SAFETY: as in `get`.
        let slots = unsafe { &mut *self.slots };
        // The first slot of the pair unless it holds a live entry and the
        // second does not; the second moves to the first on a conflict.
        let j = if slots[i].generation == self.generation
            && slots[i ^ 1].generation != self.generation
        {
            i ^ 1
        } else {
            slots[i ^ 1] = slots[i];
            i
        };
        slots[j] = Slot {
            generation: self.generation,
            func,
            key,
            sig,
            val,
        };
    }

    /// `frame_name`, cached.
    fn frame_name(
        &mut self,
        o: &Offsets,
        pid: &mut Pid,
        func: usize,
        opline: usize,
        call_info: u32,
    ) -> Option<usize> {
        let top = (call_info & ZEND_CALL_TOP != 0) as usize;
        // The function's bytes when they were read here (FUNC_INFO's
        // miss): the name, if it misses too, is made from them.
        let mut f = [0u8; FN_READ];
        let mut read_now = 0;
        // What the name depends on: the key (the opline within the function,
        // or none; the TOP bit), and for a function read in place the words
        // it is made of (sig).
        let (key, sig) = if self.in_chunk(func, FN_READ) || Self::in_static(func, FN_READ) {
            // SAFETY: [func, func + FN_READ) is in a chunk of the running
            // request's heap or in the executable's data: mapped; `func` is
            // 8-aligned (`in_chunk`, `in_static`) and every offset read is
            // within FN_READ.
            let w = |at: usize| unsafe { ((func + at) as *const usize).read_unaligned() };
            let w32 = |at: usize| unsafe { ((func + at) as *const u32).read_unaligned() };
            // SAFETY: as above.
            let kind = unsafe { ((func + FN_TYPE) as *const u8).read() };
            let mut sig = mix(kind as u64, w(FN_NAME) as u64);
            sig = mix(sig, w(FN_SCOPE) as u64);
            let key = if kind == ZEND_USER_FUNCTION {
                let opcodes = w(o.op_opcodes);
                let last = w32(o.op_last);
                sig = mix(sig, opcodes as u64);
                sig = mix(sig, w(o.op_filename) as u64);
                sig = mix(sig, (last as u64) << 32 | w32(o.op_line_start) as u64);
                own_opline(opline, opcodes, last as usize) | top
            } else {
                0
            };
            (key, sig | 1)
        } else {
            // Stable for the request: the function's kind and opcodes by
            // address, cached too (val: opcodes, 0 for an internal
            // function; sig: last).
            let (opcodes, last) = match self.slot(func, FUNC_INFO) {
                Some(s) => (s.val, s.sig as usize),
                None => {
                    read_now = read(pid.get(), func, &mut f);
                    let (opcodes, last) = func_info(o, &f[..read_now])?;
                    self.put(func, FUNC_INFO, last as u64, opcodes);
                    (opcodes, last)
                }
            };
            let key = if opcodes == 0 {
                0
            } else {
                own_opline(opline, opcodes, last) | top
            };
            (key, 0)
        };
        if let Some(v) = self.get(func, key, sig) {
            return Some(v);
        }
        let v = if read_now > 0 {
            frame_name_of(pid.get(), o, &f[..read_now], opline, call_info)?
        } else {
            frame_name(pid.get(), o, func, opline, call_info)?
        };
        self.put(func, key, sig, v);
        Some(v)
    }
}

/// A function's opcodes and their number (0, 0 for an internal function),
/// from its first bytes `f` (read with process_vm_readv); None if too few
/// were read or it is neither.
fn func_info(o: &Offsets, f: &[u8]) -> Option<(usize, usize)> {
    let got = f.len();
    if got < FN_SCOPE + 8 {
        return None;
    }
    match f[FN_TYPE] {
        ZEND_INTERNAL_FUNCTION => Some((0, 0)),
        ZEND_USER_FUNCTION if got >= o.op_line_start + 4 => {
            let opcodes = word(f, o.op_opcodes);
            // 0 opcodes would read as internal: no opline is then its own.
            Some((opcodes.max(1), word32(f, o.op_last) as usize))
        }
        _ => None,
    }
}

/// `opline` if it is one of the opcodes at `opcodes` (`last` of them),
/// else 0.
#[inline(always)]
fn own_opline(opline: usize, opcodes: usize, last: usize) -> usize {
    if opline >= opcodes
        && opline < opcodes.wrapping_add(last.saturating_mul(OP_SIZE))
        && (opline - opcodes).is_multiple_of(OP_SIZE)
    {
        opline
    } else {
        0
    }
}

fn in_execute_ex(ip: usize) -> bool {
    let s = EXEC_START.load(Acquire);
    // A return address points after the call: it may equal the end.
    s != 0 && ip > s && ip <= EXEC_END.load(Relaxed)
}

/// Adds PHP's share to a captured native stack (`buf[..n]`, leaf first):
/// the `[zend_mm]` leaf for a ZendMM sample, and on the PHP thread while PHP
/// code runs, the PHP frames where the VM runs them: native frames up to
/// the innermost `execute_ex`, then the PHP frames, then the native frames
/// from the outermost `execute_ex` to the root (the ones between are the
/// VM calling itself for callbacks, which the PHP frames show). Without an
/// `execute_ex` (the unwinder stopped in JIT code), the PHP frames go at the
/// root end. Returns the new length.
pub fn splice(buf: &mut [usize; MAX_FRAMES], n: usize, zend_mm: bool) -> usize {
    let mut n = n.min(MAX_FRAMES);
    let o = match FRAMES.load(Acquire) {
        0 => None,
        i => TABLE.get(i as usize - 1),
    };
    if let Some(o) = o.filter(|_| is_php_thread()) {
        let mut php = [0usize; MAX_PHP_FRAMES];
        let k = walk(o, &mut php);
        if k > 0 {
            let inner = buf[..n].iter().position(|&ip| in_execute_ex(ip));
            let outer = buf[..n].iter().rposition(|&ip| in_execute_ex(ip));
            let (leaf_end, root_start) = match (inner, outer) {
                (Some(i), Some(j)) => (i, j),
                _ => (n, n),
            };
            n = merge(buf, n, leaf_end, root_start, &php[..k]);
        }
    }
    if is_php_thread() {
        let r = REQUEST_FRAME.load(Relaxed);
        if r != 0 {
            // The request is the root: the outermost frame.
            if n == MAX_FRAMES {
                n -= 1;
            }
            buf[n] = r;
            n += 1;
        }
    }
    if zend_mm {
        let cut = n == MAX_FRAMES;
        if cut {
            n -= 1;
        }
        buf.copy_within(0..n, 1);
        buf[0] = names::zend_mm();
        n += 1;
        if cut {
            buf[n - 1] = names::truncated();
        }
    }
    n
}

/// In place in `buf`: the native frames `buf[..leaf_end]`, then `php`,
/// then the native frames `buf[root_start..n]`; when more than fit, the
/// root end is cut and the last frame says so. Returns the new length.
/// (The same as copying the three parts frame by frame into a new buffer:
/// `php_merge_test.rs`.)
fn merge(
    buf: &mut [usize; MAX_FRAMES],
    n: usize,
    leaf_end: usize,
    root_start: usize,
    php: &[usize],
) -> usize {
    let n = n.min(MAX_FRAMES);
    let root_start = root_start.min(n);
    let leaf_end = leaf_end.min(root_start);
    let total = leaf_end + php.len() + (n - root_start);
    let cut = total > MAX_FRAMES;
    // The frames kept before the mark of a cut.
    let keep = if cut { MAX_FRAMES - 1 } else { total };
    // The root part first (it may overlap where the PHP frames go).
    let root_at = leaf_end + php.len();
    if root_at < keep {
        let len = keep - root_at;
        buf.copy_within(root_start..root_start + len, root_at);
    }
    let k = php.len().min(keep.saturating_sub(leaf_end));
    buf[leaf_end..leaf_end + k].copy_from_slice(&php[..k]);
    if cut {
        buf[MAX_FRAMES - 1] = names::truncated();
        MAX_FRAMES
    } else {
        total
    }
}

// ---------------------------------------------------------------------------
// The running request: its root frame (`[GET /api/report]`) and the peak of
// its ZendMM live total.

/// `SG(request_info)` fields (`sapi_globals_struct`, x86-64 non-ZTS): the
/// same in 7.4 to 8.4 (checked against 8.2's headers): `request_info` is at
/// +8, and in it `request_method`, `path_translated`, `request_uri` are the
/// 1st, 5th and 6th words.
pub const SG_REQUEST_METHOD: usize = 8;
pub const SG_PATH_TRANSLATED: usize = 8 + 32;
pub const SG_REQUEST_URI: usize = 8 + 40;
/// `sapi_module_struct`: `name` and `getenv`.
pub const SAPI_NAME: usize = 0;
pub const SAPI_GETENV: usize = 72;

/// The pseudo frame of the running request (0: none, or between requests).
static REQUEST_FRAME: AtomicUsize = AtomicUsize::new(0);

/// The running request's root frame (0 = none).
pub fn request_frame() -> usize {
    REQUEST_FRAME.load(Relaxed)
}

/// Sets the running request's root frame (0: no request).
pub fn set_request_frame(f: usize) {
    REQUEST_FRAME.store(f, Relaxed);
}

/// Appends the C string at `p` (at most `max` bytes; read so that a bad
/// pointer fails instead of faulting). False if unreadable.
fn push_cstr(pid: i32, p: usize, max: usize, out: &mut StackBuf<{ names::MAX_NAME }>) -> bool {
    let mut b = [0u8; 512];
    let want = max.min(b.len());
    let got = read(pid, p, &mut b[..want]);
    // A string near the end of a mapping: read what is there.
    let got = if got == 0 {
        let mut n = 0;
        while n < want && read(pid, p + n, &mut b[n..n + 1]) == 1 {
            if b[n] == 0 {
                break;
            }
            n += 1;
        }
        n
    } else {
        got
    };
    if got == 0 {
        return false;
    }
    let end = b[..got].iter().position(|&c| c == 0).unwrap_or(got);
    out.push_bytes(&b[..end]);
    true
}

/// Writes `path` without its query string, with path segments that are
/// numbers (`/user/12345`) or long hexadecimal ids (uuids, hashes) shown
/// as `{n}` and `{id}`: one root frame per endpoint, not per URL, so that
/// the stack table does not grow with every distinct URL.
pub fn push_endpoint(path: &[u8], out: &mut StackBuf<{ names::MAX_NAME }>) {
    let path = match path.iter().position(|&c| c == b'?' || c == b'#') {
        Some(q) => &path[..q],
        None => path,
    };
    let path = &path[..path.len().min(256)];
    for (i, seg) in path.split(|&c| c == b'/').enumerate() {
        if i > 0 {
            out.push_bytes(b"/");
        }
        let digits = seg.iter().filter(|c| c.is_ascii_digit()).count();
        if !seg.is_empty() && digits == seg.len() {
            out.push_bytes(b"{n}");
        } else if seg.len() >= 16
            && digits > 0
            && seg.iter().all(|c| c.is_ascii_hexdigit() || *c == b'-')
        {
            out.push_bytes(b"{id}");
        } else {
            out.push_bytes(seg);
        }
    }
}

/// The root frame of the request PHP is starting, from `SG(request_info)`
/// (`sg` = `&sapi_globals`) and, when the SAPI gives it, the path of
/// `REQUEST_URI` (`uri`: what `sapi_module.getenv` answered, which names the
/// endpoint behind a front controller; SG's `request_uri` is the script in
/// php-fpm). php-cli: `[cli script.php]`. 0 when nothing can be read.
pub fn make_request_frame(sg: usize, cli: bool, uri: usize) -> usize {
    if sg == 0 {
        return 0;
    }
    let mut w = [0u8; 56];
    // SAFETY: sapi_globals is a global of the executable, always mapped.
    unsafe { core::ptr::copy_nonoverlapping(sg as *const u8, w.as_mut_ptr(), w.len()) };
    let mut t = StackBuf::<{ names::MAX_NAME }>::new();
    t.push_bytes(b"[");
    if cli {
        t.push_bytes(b"cli ");
        let script = word(&w, SG_PATH_TRANSLATED);
        let mut p = StackBuf::<{ names::MAX_NAME }>::new();
        if script == 0 || !read_cstr(script, 512, &mut p) || p.as_bytes().is_empty() {
            t.push_bytes(b"-");
        } else {
            let b = p.as_bytes();
            let base = b
                .iter()
                .rposition(|&c| c == b'/')
                .map_or(b, |i| &b[i + 1..]);
            t.push_bytes(base);
        }
    } else {
        let method = word(&w, SG_REQUEST_METHOD);
        if method == 0 || !read_cstr(method, 16, &mut t) {
            t.push_bytes(b"?");
        }
        t.push_bytes(b" ");
        let mut p = StackBuf::<{ names::MAX_NAME }>::new();
        let sg_uri = word(&w, SG_REQUEST_URI);
        let got = (uri != 0 && read_cstr(uri, 512, &mut p))
            || (sg_uri != 0 && read_cstr(sg_uri, 512, &mut p));
        if got && !p.as_bytes().is_empty() {
            push_endpoint(p.as_bytes(), &mut t);
        } else {
            t.push_bytes(b"-");
        }
    }
    t.push_bytes(b"]");
    names::intern(t.as_bytes())
}

/// Appends the text of the zend_string at `zs` (at most 256 bytes); false
/// if it cannot be read.
///
/// `zs` comes from the engine (an argument it passed us): where a seccomp
/// filter refuses process_vm_readv, it is read directly.
pub fn read_zstr(zs: usize, out: &mut StackBuf<{ names::MAX_NAME }>) -> bool {
    if SAFE_READS.load(Relaxed) {
        return push_zstr(crate::hot::sys::getpid() as i32, zs, 256, false, out);
    }
    if zs < 4096 {
        return false;
    }
    // SAFETY: a zend_string the engine handed us: header, then `len` bytes.
    unsafe {
        let len = ((zs + ZSTR_LEN) as *const usize).read();
        let text = core::slice::from_raw_parts((zs + ZSTR_VAL) as *const u8, len.min(256));
        out.push_bytes(text);
    }
    true
}

/// Appends the C string at `p` (at most `max` bytes, up to 512); false if
/// it cannot be read. As `read_zstr` for pointers from the engine.
pub fn read_cstr(p: usize, max: usize, out: &mut StackBuf<{ names::MAX_NAME }>) -> bool {
    if SAFE_READS.load(Relaxed) {
        return push_cstr(crate::hot::sys::getpid() as i32, p, max, out);
    }
    if p < 4096 {
        return false;
    }
    // SAFETY: a NUL-terminated string the engine handed us; strnlen reads
    // no further than its end or `max`.
    unsafe {
        let n = libc::strnlen(p as *const libc::c_char, max.min(512));
        out.push_bytes(core::slice::from_raw_parts(p as *const u8, n));
    }
    true
}

/// process_vm_readv on ourselves works (checked once at start-up, where a
/// seccomp filter may kill for it): PHP frames and the reads above use it.
static SAFE_READS: AtomicBool = AtomicBool::new(false);

pub fn set_safe_reads(ok: bool) {
    SAFE_READS.store(ok, Relaxed);
}

/// The running request's ZendMM live total (un-biased bytes of its live
/// ZendMM samples), its highest value, and the value whose stacks the
/// records' `request_peak_*` fields hold. Only the PHP thread changes them.
static REQ_LIVE: AtomicI64 = AtomicI64::new(0);
static REQ_PEAK: AtomicI64 = AtomicI64::new(0);
static REQ_COPIED: AtomicI64 = AtomicI64::new(0);
/// HEAPLIVE_PHP_PEAK_BYTES (0 = off).
static REQ_THRESHOLD: AtomicI64 = AtomicI64::new(0);

pub fn set_request_peak_threshold(bytes: u64) {
    REQ_THRESHOLD.store(bytes.min(i64::MAX as u64) as i64, Relaxed);
}

/// A ZendMM sample of `bytes` was added.
#[inline]
pub fn request_grew(bytes: i64) {
    let t = REQ_LIVE.fetch_add(bytes, Relaxed) + bytes;
    if t > REQ_PEAK.load(Relaxed) {
        REQ_PEAK.store(t, Relaxed);
    }
}

/// A ZendMM sample of `bytes` is about to be taken out: the first decline
/// after a new maximum at or above the threshold freezes every stack's live
/// amounts (the DHAT way, as `hot::peak`, copy-on-write: every such maximum
/// is kept, at no walk over the stacks).
#[inline]
pub fn request_shrinking(bytes: i64) {
    if bytes > 0 && REQ_LIVE.load(Relaxed) >= REQ_PEAK.load(Relaxed) {
        copy_request_peak();
    }
    REQ_LIVE.fetch_sub(bytes, Relaxed);
}

/// The freezes of request peaks so far (`stacks::Slot::request_peak`).
static REQ_EPOCH: AtomicU64 = AtomicU64::new(0);

#[inline(always)]
pub fn request_epoch() -> u64 {
    REQ_EPOCH.load(Acquire)
}

fn copy_request_peak() {
    let peak = REQ_PEAK.load(Relaxed);
    let threshold = REQ_THRESHOLD.load(Relaxed);
    if threshold <= 0 || peak < threshold || peak <= REQ_COPIED.load(Relaxed) {
        return;
    }
    REQ_COPIED.store(peak, Relaxed);
    REQ_EPOCH.fetch_add(1, Release);
}

/// At request end, before its ZendMM samples are dropped: the request's
/// peak if it reached the threshold (the stacks at the peak are then in the
/// records' `request_peak_*` fields: copied now if the total is still at its
/// maximum), else None.
pub fn finish_request_peak() -> Option<i64> {
    let peak = REQ_PEAK.load(Relaxed);
    let threshold = REQ_THRESHOLD.load(Relaxed);
    if threshold <= 0 || peak < threshold {
        return None;
    }
    if REQ_LIVE.load(Relaxed) >= peak {
        copy_request_peak();
    }
    Some(peak)
}

/// A new request starts (and after the last one's samples were dropped).
pub fn reset_request_peak() {
    REQ_LIVE.store(0, Relaxed);
    REQ_PEAK.store(0, Relaxed);
    REQ_COPIED.store(0, Relaxed);
}

// ---------------------------------------------------------------------------
// The request's ZendMM samples.
//
// ZendMM frees a request's blocks in one go when the request ends (no efree
// reaches us), so every ZendMM sample is noted here and dropped at request
// shutdown. Only the PHP thread notes and drops (ZendMM is per thread); a
// try-lock keeps a misbehaving extension thread out instead of waiting.

struct List {
    addrs: *mut usize,
    cap: usize,
    len: usize,
}

struct Request {
    busy: crate::hot::lock::SpinLock<()>,
    list: core::cell::UnsafeCell<List>,
}

// SAFETY: `list` is only touched by the holder of `busy`.
unsafe impl Sync for Request {}

static REQUEST: Request = Request {
    busy: crate::hot::lock::SpinLock::new(crate::hot::lock::Rank::PhpRequest, ()),
    list: core::cell::UnsafeCell::new(List {
        addrs: core::ptr::null_mut(),
        cap: 0,
        len: 0,
    }),
};

fn with_list<R>(f: impl FnOnce(&mut List) -> R) -> Option<R> {
    let held = REQUEST.busy.try_lock()?;
    // SAFETY: we hold `busy`.
    let r = f(unsafe { &mut *REQUEST.list.get() });
    drop(held);
    Some(r)
}

/// The efree filter, in front of the shadow bitmap: a counter per slot of
/// `addr >> 3` modulo 16384 (16 KiB, direct-mapped: no hash to compute),
/// of the ZendMM samples of this request that are live at an address of
/// that slot. A zero means "not a ZendMM sample of this request"; a
/// non-zero one may be a neighbour 128 KiB away, and the shadow bitmap
/// decides. Counting (incremented when a sample is noted, decremented when
/// it goes) keeps only the live samples' slots set, so that the rate of
/// efrees sent to the slow path is about (live samples)/16384 however many
/// samples the request took. A counter that reaches 255 stays there (set) until request end,
/// when all are cleared. Only the PHP thread touches it (ZendMM is its
/// own; non-ZTS), hence plain loads and stores.
static FILTER: [AtomicU8; FILTER_SLOTS] = [const { AtomicU8::new(0) }; FILTER_SLOTS];
const FILTER_SLOTS: usize = 16384;
const FILTER_FULL: u8 = u8::MAX;

#[inline(always)]
fn filter_slot(addr: usize) -> &'static AtomicU8 {
    &FILTER[(addr >> 3) & (FILTER_SLOTS - 1)]
}

/// May `addr` be a ZendMM sample of the running request? The efree filter.
#[inline(always)]
pub fn maybe_zend_sample(addr: usize) -> bool {
    filter_slot(addr).load(Relaxed) != 0
}

fn filter_add(addr: usize) {
    let c = filter_slot(addr);
    let n = c.load(Relaxed);
    if n != FILTER_FULL {
        c.store(n + 1, Relaxed);
    }
}

/// A ZendMM sample noted at `addr` is gone (efree'd, or moved by erealloc):
/// its slot's count goes down (a full counter stays full).
pub fn forget_zend_sample(addr: usize) {
    let c = filter_slot(addr);
    let n = c.load(Relaxed);
    if n != 0 && n != FILTER_FULL {
        c.store(n - 1, Relaxed);
    }
}

/// Counts `heap` in the filter while our handlers are on it: a full ZendMM
/// shutdown hands the heap itself to the free handler, and the handler
/// tells it from a block only past the filter.
pub fn note_heap_in_filter(heap: usize) {
    filter_add(heap);
}

/// Notes a ZendMM sample at `addr`. False when it cannot (no memory): the
/// caller must then drop the sample, which nothing would drop later.
pub fn note_zend_sample(addr: usize) -> bool {
    let noted = with_list(|l| {
        if l.len == l.cap {
            // Forget the addresses whose samples are gone (efree'd) first.
            let mut keep = 0;
            for i in 0..l.len {
                // SAFETY: i < len <= cap.
                let a = unsafe { *l.addrs.add(i) };
                if crate::hot::shadow::test(a) {
                    // SAFETY: keep <= i.
                    unsafe { *l.addrs.add(keep) = a };
                    keep += 1;
                }
            }
            l.len = keep;
            if (l.cap == 0 || l.len * 2 > l.cap) && !grow(l) {
                return false;
            }
        }
        // SAFETY: len < cap after the above.
        unsafe { *l.addrs.add(l.len) = addr };
        l.len += 1;
        true
    })
    .unwrap_or(false);
    if noted {
        filter_add(addr);
    }
    noted
}

fn grow(l: &mut List) -> bool {
    let cap = (l.cap * 2).max(4096);
    let p = crate::hot::sys::map(cap * 8) as *mut usize;
    if p.is_null() {
        return false;
    }
    if !l.addrs.is_null() {
        // SAFETY: both hold at least len words; the old mapping is ours.
        unsafe {
            core::ptr::copy_nonoverlapping(l.addrs, p, l.len);
            crate::hot::sys::unmap(l.addrs.cast(), l.cap * 8);
        }
    }
    l.addrs = p;
    l.cap = cap;
    true
}

/// Calls `f` on every noted address and forgets them all. Returns how many
/// were noted.
pub fn drain_zend_samples(mut f: impl FnMut(usize)) -> usize {
    with_list(|l| {
        for i in 0..l.len {
            // SAFETY: i < len <= cap.
            f(unsafe { *l.addrs.add(i) });
        }
        let n = l.len;
        l.len = 0;
        // SAFETY: the counters are bytes (AtomicU8 is a u8 in an
        // UnsafeCell), written only by this, the PHP thread.
        unsafe { core::ptr::write_bytes(FILTER.as_ptr() as *mut u8, 0, FILTER_SLOTS) };
        n
    })
    .unwrap_or(0)
}

#[cfg(test)]
#[path = "php_merge_test.rs"]
mod merge_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// The emalloc fast path's table: every small size goes to the
    /// function of its own bin (the block memory_get_usage() counts), and
    /// a PHP missing one bin's function gets no table at all.
    #[test]
    fn bin_allocators_pick_the_requests_bin_all_or_none() {
        assert!(!set_bin_allocators(|b| if b == 3072 {
            0
        } else {
            0x1000 + b
        }));
        assert!((0..=MAX_SMALL).all(|s| bin_allocator(s).is_none()));
        assert!(set_bin_allocators(|b| 0x1000 + b));
        for size in 0..=MAX_SMALL {
            let (block, f) = bin_allocator(size).unwrap();
            assert_eq!(block, zend_block_size(size), "size {size}");
            assert_eq!(f, 0x1000 + block, "size {size}");
        }
        assert!(bin_allocator(MAX_SMALL + 1).is_none());
        set_bin_allocators(|_| 0);
    }

    #[test]
    fn block_sizes_follow_zend_mm() {
        assert_eq!(zend_block_size(0), 8);
        assert_eq!(zend_block_size(1), 8);
        assert_eq!(zend_block_size(8), 8);
        assert_eq!(zend_block_size(9), 16);
        assert_eq!(zend_block_size(57), 64);
        assert_eq!(zend_block_size(65), 80);
        assert_eq!(zend_block_size(257), 320);
        assert_eq!(zend_block_size(3000), 3072);
        assert_eq!(zend_block_size(3072), 3072);
        assert_eq!(zend_block_size(3073), 4096);
        assert_eq!(zend_block_size(4025), 4096);
        assert_eq!(zend_block_size(4097), 8192);
        assert_eq!(zend_block_size(3 << 20), 3 << 20);
        for s in 1..=3072usize {
            let b = zend_block_size(s);
            assert!(b >= s && BINS.contains(&(b as u16)), "{s} -> {b}");
            assert!(BINS.iter().all(|&x| (x as usize) < s || x as usize >= b));
        }
    }

    #[test]
    fn endpoints_drop_the_query_and_ids() {
        let e = |p: &[u8]| {
            let mut t = StackBuf::<{ names::MAX_NAME }>::new();
            push_endpoint(p, &mut t);
            String::from_utf8(t.as_bytes().to_vec()).unwrap()
        };
        assert_eq!(e(b"/api/report?id=7&x=1"), "/api/report");
        assert_eq!(e(b"/user/12345/orders"), "/user/{n}/orders");
        assert_eq!(
            e(b"/doc/3f2a9c1e-77b0-4c1e-9a55-0d3e2f1a6b7c#top"),
            "/doc/{id}"
        );
        // Words stay, even hexadecimal-looking ones without digits.
        assert_eq!(e(b"/v2/deadbeefdeadbeefcafe"), "/v2/deadbeefdeadbeefcafe");
        assert_eq!(e(b"/"), "/");
        assert_eq!(e(b"/index.php"), "/index.php");
    }

    #[test]
    fn versions_parse() {
        assert_eq!(parse_version(b"8.2.36"), Some((8, 2, 36)));
        assert_eq!(parse_version(b"8.3.0RC1"), Some((8, 3, 0)));
        assert_eq!(parse_version(b"7.4.33-dev"), Some((7, 4, 33)));
        assert_eq!(parse_version(b"8.2"), None);
        assert_eq!(parse_version(b"x.2.1"), None);
        assert_eq!(offsets_for(8, 2).map(|o| o.op_filename), Some(152));
        assert!(offsets_for(8, 5).is_none());
        assert!(offsets_for(7, 3).is_none());
    }

    #[test]
    fn the_probe_child_reads_and_comes_back() {
        assert!(probe_in_child());
    }

    #[test]
    fn reads_of_bad_memory_fail_instead_of_faulting() {
        assert!(can_read_self());
        let pid = crate::hot::sys::getpid() as i32;
        let mut b = [0u8; 64];
        assert_eq!(read(pid, 0, &mut b), 0);
        assert_eq!(read(pid, 0x10, &mut b), 0);
        assert_eq!(read(pid, usize::MAX - 8, &mut b), 0);
        // The end of a mapping: a partial read.
        let page = crate::hot::sys::map(8192);
        assert!(!page.is_null());
        unsafe { crate::hot::sys::unmap(page.add(4096), 4096) };
        assert_eq!(read(pid, page as usize + 4096 - 16, &mut b), 16);
        unsafe { crate::hot::sys::unmap(page, 4096) };
        assert_eq!(read(pid, page as usize, &mut b), 0);
    }

    /// Several ranges in one call give, each, what `read` gives it alone:
    /// a range cut by unmapped memory, a bad one first, between or last.
    #[test]
    fn reads_of_several_ranges_count_each_as_one_read_would() {
        let pid = crate::hot::sys::getpid() as i32;
        let page = crate::hot::sys::map(8192);
        assert!(!page.is_null());
        unsafe { crate::hot::sys::unmap(page.add(4096), 4096) };
        let base = page as usize;
        unsafe { core::ptr::write_bytes(page, 7, 4096) };
        let good = [9u8; 40];
        let (mut a, mut b, mut c) = ([0u8; 64], [0u8; 32], [0u8; 16]);
        // Cut: the first range ends 16 bytes into the hole.
        let got = read_n(
            pid,
            [
                (base + 4096 - 48, &mut a[..]),
                (good.as_ptr() as usize, &mut b[..]),
                (base, &mut c[..]),
            ],
        );
        assert_eq!(got, [48, 32, 16]);
        assert_eq!((a[0], a[47], b[31], c[15]), (7, 7, 9, 7));
        // Unmapped, null and wrapping ranges read nothing; the others all.
        let (mut a, mut b, mut c) = ([0u8; 8], [0u8; 32], [0u8; 16]);
        let got = read_n(
            pid,
            [
                (base + 4096, &mut a[..]),
                (0, &mut b[..]),
                (good.as_ptr() as usize, &mut c[..]),
            ],
        );
        assert_eq!(got, [0, 0, 16]);
        let got = read_n(
            pid,
            [
                (usize::MAX - 4, &mut a[..]),
                (good.as_ptr() as usize, &mut b[..]),
            ],
        );
        assert_eq!(got, [0, 32]);
        unsafe { crate::hot::sys::unmap(page, 4096) };
    }

    /// A fake zend_string: header, then the bytes.
    fn zstr(text: &str) -> Vec<u8> {
        let mut v = vec![0u8; ZSTR_VAL];
        v[ZSTR_LEN..ZSTR_LEN + 8].copy_from_slice(&text.len().to_ne_bytes());
        v.extend_from_slice(text.as_bytes());
        v.push(0);
        v
    }

    #[test]
    fn frame_names_from_fake_engine_memory() {
        let o = offsets_for(8, 2).unwrap();
        let pid = crate::hot::sys::getpid() as i32;
        let fname = zstr("build_cache");
        let file = zstr("/srv/app/lib/cache.php");
        let cname = zstr("Repo");
        let mut ce = [0u8; 64];
        ce[CE_NAME..CE_NAME + 8].copy_from_slice(&(cname.as_ptr() as usize).to_ne_bytes());
        let mut ops = [0u8; 4 * OP_SIZE];
        for (i, line) in [10u32, 11, 12, 13].iter().enumerate() {
            ops[i * OP_SIZE + OP_LINENO..i * OP_SIZE + OP_LINENO + 4]
                .copy_from_slice(&line.to_ne_bytes());
        }
        let mut f = [0u8; 248];
        f[FN_TYPE] = ZEND_USER_FUNCTION;
        f[FN_NAME..FN_NAME + 8].copy_from_slice(&(fname.as_ptr() as usize).to_ne_bytes());
        f[o.op_last..o.op_last + 4].copy_from_slice(&4u32.to_ne_bytes());
        f[o.op_opcodes..o.op_opcodes + 8].copy_from_slice(&(ops.as_ptr() as usize).to_ne_bytes());
        f[o.op_filename..o.op_filename + 8]
            .copy_from_slice(&(file.as_ptr() as usize).to_ne_bytes());
        f[o.op_line_start..o.op_line_start + 4].copy_from_slice(&9u32.to_ne_bytes());
        let opline = ops.as_ptr() as usize + 2 * OP_SIZE;
        let got = frame_name(pid, o, f.as_ptr() as usize, opline, 0).unwrap();
        assert_eq!(names::text(got), Some(&b"build_cache (cache.php:12)"[..]));
        // An opline outside the function: the first line.
        let got = frame_name(pid, o, f.as_ptr() as usize, 0x1234, 0).unwrap();
        assert_eq!(names::text(got), Some(&b"build_cache (cache.php:9)"[..]));
        // A method.
        f[FN_SCOPE..FN_SCOPE + 8].copy_from_slice(&(ce.as_ptr() as usize).to_ne_bytes());
        let got = frame_name(pid, o, f.as_ptr() as usize, opline, 0).unwrap();
        assert_eq!(
            names::text(got),
            Some(&b"Repo::build_cache (cache.php:12)"[..])
        );
        // The script's own code.
        f[FN_SCOPE..FN_SCOPE + 8].copy_from_slice(&0usize.to_ne_bytes());
        f[FN_NAME..FN_NAME + 8].copy_from_slice(&0usize.to_ne_bytes());
        let got = frame_name(pid, o, f.as_ptr() as usize, opline, ZEND_CALL_TOP).unwrap();
        assert_eq!(names::text(got), Some(&b"{main} (cache.php:12)"[..]));
        // An internal function.
        let mut g = [0u8; 136];
        g[FN_TYPE] = ZEND_INTERNAL_FUNCTION;
        let sr = zstr("str_repeat");
        g[FN_NAME..FN_NAME + 8].copy_from_slice(&(sr.as_ptr() as usize).to_ne_bytes());
        let got = frame_name(pid, o, g.as_ptr() as usize, 0, 0).unwrap();
        assert_eq!(names::text(got), Some(&b"str_repeat [internal]"[..]));
        // A fiber's bottom frame: no name, nothing to show.
        g[FN_NAME..FN_NAME + 8].copy_from_slice(&0usize.to_ne_bytes());
        assert_eq!(frame_name(pid, o, g.as_ptr() as usize, 0, 0), Some(0));
        // Garbage: a bad type, a dangling name.
        g[FN_TYPE] = 7;
        assert!(frame_name(pid, o, g.as_ptr() as usize, 0, 0).is_none());
        g[FN_TYPE] = ZEND_INTERNAL_FUNCTION;
        g[FN_NAME..FN_NAME + 8].copy_from_slice(&0x18usize.to_ne_bytes());
        assert!(frame_name(pid, o, g.as_ptr() as usize, 0, 0).is_none());
        assert!(frame_name(pid, o, 0x20, 0, 0).is_none());
        // Strings at the end of a mapping (the name's read is cut, so the
        // file name read with it is read again alone), and a stale opline
        // in unmapped memory: the same names.
        let page = crate::hot::sys::map(8192);
        assert!(!page.is_null());
        unsafe { crate::hot::sys::unmap(page.add(4096), 4096) };
        let at_end = |off: usize, v: &[u8]| {
            let p = unsafe { page.add(4096 - off) };
            unsafe { core::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
            p as usize
        };
        let n_at = at_end(fname.len(), &fname);
        let c_at = at_end(fname.len() + cname.len(), &cname);
        let mut ce2 = [0u8; 64];
        ce2[CE_NAME..CE_NAME + 8].copy_from_slice(&c_at.to_ne_bytes());
        f[FN_NAME..FN_NAME + 8].copy_from_slice(&n_at.to_ne_bytes());
        f[FN_SCOPE..FN_SCOPE + 8].copy_from_slice(&(ce2.as_ptr() as usize).to_ne_bytes());
        let got = frame_name(pid, o, f.as_ptr() as usize, opline, 0).unwrap();
        assert_eq!(
            names::text(got),
            Some(&b"Repo::build_cache (cache.php:12)"[..])
        );
        let stale = page as usize + 4096;
        let got = frame_name(pid, o, f.as_ptr() as usize, stale, 0).unwrap();
        assert_eq!(
            names::text(got),
            Some(&b"Repo::build_cache (cache.php:9)"[..])
        );
        unsafe { crate::hot::sys::unmap(page, 4096) };
    }

    #[test]
    fn the_name_cache_keys_by_function_opline_words_and_generation() {
        assert!(CACHE.busy.try_lock_kept());
        let mut f = Fast {
            chunks: [0; MAX_CHUNKS],
            n: 1,
            generation: 7,
            slots: CACHE.slots.get(),
        };
        f.chunks[0] = 0x7f00_0000_0000;
        // In a chunk: past the header, not across its end, aligned.
        assert!(f.in_chunk(0x7f00_0000_0040, EX_SIZE));
        assert!(!f.in_chunk(0x7f00_0000_0008, EX_SIZE));
        assert!(!f.in_chunk(0x7f00_0000_0000 + CHUNK - 8, EX_SIZE));
        assert!(!f.in_chunk(0x7f00_0000_0044, EX_SIZE));
        assert!(!f.in_chunk(0x7f00_0020_0040, EX_SIZE));
        f.put(0x1000, 0x2000, 5, 42);
        assert_eq!(f.get(0x1000, 0x2000, 5), Some(42));
        // Other words of the function (an op_array reused), another line.
        assert_eq!(f.get(0x1000, 0x2000, 6), None);
        assert_eq!(f.get(0x1000, 0x2020, 5), None);
        // Two keys of one pair of slots both stay.
        let i = Fast::index(0x1000, 0x2000);
        let other = (1..1_000_000usize)
            .map(|k| 0x1000 + k * 8)
            .find(|&g| Fast::index(g, 0x2000) & !1 == i & !1)
            .unwrap();
        f.put(other, 0x2000, 5, 43);
        assert_eq!(f.get(0x1000, 0x2000, 5), Some(42));
        assert_eq!(f.get(other, 0x2000, 5), Some(43));
        // The next request: nothing cached.
        f.generation = 8;
        assert_eq!(f.get(0x1000, 0x2000, 5), None);
        drop(f);
        assert!(!CACHE.busy.is_locked());
        // Oplines: only one of the function's own.
        assert_eq!(own_opline(0x5040, 0x5000, 4), 0x5040);
        assert_eq!(own_opline(0x5080, 0x5000, 4), 0);
        assert_eq!(own_opline(0x5044, 0x5000, 4), 0);
        assert_eq!(own_opline(0x4fe0, 0x5000, 4), 0);
    }

    /// The efree filter counts live samples per slot: a slot shared by
    /// two samples (128 KiB apart) stays set until both are gone, a slot
    /// whose samples are all gone lets efrees through, and a full counter
    /// stays set until request end.
    #[test]
    fn efree_filter_counts_live_samples() {
        let _s = crate::hot::shadow::tests::SERIAL
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        drain_zend_samples(|_| {});
        let (a, b) = (0x7300_0010usize, 0x7300_0010usize + 8 * FILTER_SLOTS);
        assert!(!maybe_zend_sample(a));
        assert!(note_zend_sample(a) && note_zend_sample(b));
        assert!(maybe_zend_sample(a) && maybe_zend_sample(b));
        // The neighbour's slot is its own.
        assert!(!maybe_zend_sample(a + 8));
        forget_zend_sample(a);
        assert!(maybe_zend_sample(b), "b is still live");
        forget_zend_sample(b);
        assert!(!maybe_zend_sample(a) && !maybe_zend_sample(b));
        // Never below zero: a second forget leaves the slot clear, and a
        // new sample there sets it again.
        forget_zend_sample(b);
        assert!(note_zend_sample(a));
        assert!(maybe_zend_sample(b));
        forget_zend_sample(a);
        assert!(!maybe_zend_sample(a));
        // Saturated: stays set until the request's end.
        for _ in 0..300 {
            assert!(note_zend_sample(a));
        }
        for _ in 0..300 {
            forget_zend_sample(a);
        }
        assert!(maybe_zend_sample(a));
        drain_zend_samples(|_| {});
        assert!(!maybe_zend_sample(a));
    }

    #[test]
    fn request_list_drains_and_compacts() {
        let _s = crate::hot::shadow::tests::SERIAL
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        drain_zend_samples(|_| {});
        // Live samples (bit set) survive compaction; efree'd ones may go.
        let base = 0x7100_0000usize;
        for a in 0..10_000usize {
            let addr = base + a * 16;
            if a % 2 == 0 {
                assert!(crate::hot::shadow::set(addr));
            }
            assert!(note_zend_sample(addr));
        }
        for a in (0..10_000usize).step_by(2) {
            assert!(maybe_zend_sample(base + a * 16));
        }
        let mut seen = Vec::new();
        let n = drain_zend_samples(|a| seen.push(a));
        assert_eq!(n, seen.len());
        assert!(n < 10_000, "compacted: {n}");
        for a in (0..10_000usize).step_by(2) {
            assert!(seen.contains(&(base + a * 16)), "{a}");
            crate::hot::shadow::clear(base + a * 16);
        }
        assert_eq!(drain_zend_samples(|_| {}), 0);
        assert!(!maybe_zend_sample(base));
    }
}
