//! Frames read in place and their names cached, while a request runs on a
//! ZendMM heap (the section's comment below says when that is safe).

use super::*;

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
// Before all that, a frame is looked up by its own address (`Seen`): the
// outer frames of a request's samples stay where they are, and a frame of
// a function of the second kind found there with the same function and
// opline has the name it had.

pub(super) const CHUNK: usize = 2 << 20;
pub(super) const MAX_CHUNKS: usize = 64;
/// How much of a `zend_function` is read (the largest offset read is
/// `op_line_start` + 4 <= 180).
pub(super) const FN_READ: usize = 192;

/// The heap whose chunks may be read in place (0 = no request running on
/// a ZendMM heap), and the cache's generation.
pub(super) static FAST_HEAP: AtomicUsize = AtomicUsize::new(0);
pub(super) static GENERATION: AtomicU64 = AtomicU64::new(1);
/// The executable's writable segment holding executor_globals: [start,
/// end), always mapped.
pub(super) static STATIC_START: AtomicUsize = AtomicUsize::new(0);
pub(super) static STATIC_END: AtomicUsize = AtomicUsize::new(0);

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
pub(super) struct Slot {
    pub(super) generation: u64,
    pub(super) func: usize,
    pub(super) key: usize,
    pub(super) sig: u64,
    pub(super) val: usize,
}

pub(super) const EMPTY: Slot = Slot {
    generation: 0,
    func: 0,
    key: 0,
    sig: 0,
    val: 0,
};
pub(super) const CACHE_LEN: usize = 4096;
/// A slot's key for a function's own entry (kind, opcodes, last): no
/// opline has all bits set.
pub(super) const FUNC_INFO: usize = usize::MAX;

/// A frame's name as the last walk that met it found it: the frame at `ex`
/// running `func` at `opline` (and its TOP bit in `top`), for a function
/// whose name is stable for the request (not ZendMM memory). Samples of a
/// request meet the same outer frames at the same addresses again and
/// again: one look here instead of the function's checks and two cache
/// looks.
#[derive(Clone, Copy)]
pub(super) struct Seen {
    pub(super) generation: u64,
    pub(super) ex: usize,
    pub(super) func: usize,
    pub(super) opline: usize,
    pub(super) top: usize,
    pub(super) val: usize,
}

pub(super) const NOT_SEEN: Seen = Seen {
    generation: 0,
    ex: 0,
    func: 0,
    opline: 0,
    top: 0,
    val: 0,
};
pub(super) const SEEN_LEN: usize = 1024;

pub(super) struct Cache {
    pub(super) busy: crate::hot::lock::SpinLock<()>,
    pub(super) slots: core::cell::UnsafeCell<[Slot; CACHE_LEN]>,
    pub(super) seen: core::cell::UnsafeCell<[Seen; SEEN_LEN]>,
}

// SAFETY: `slots` and `seen` are only touched by the holder of `busy`.
unsafe impl Sync for Cache {}

pub(super) static CACHE: Cache = Cache {
    busy: crate::hot::lock::SpinLock::new(crate::hot::lock::Rank::PhpFrameCache, ()),
    slots: core::cell::UnsafeCell::new([EMPTY; CACHE_LEN]),
    seen: core::cell::UnsafeCell::new([NOT_SEEN; SEEN_LEN]),
};

/// One walk's view of the fast path: the heap's chunks, and the cache
/// (held until dropped).
pub(super) struct Fast {
    pub(super) chunks: [usize; MAX_CHUNKS],
    pub(super) n: usize,
    pub(super) generation: u64,
    pub(super) slots: *mut [Slot; CACHE_LEN],
    pub(super) seen: *mut [Seen; SEEN_LEN],
}

impl Drop for Fast {
    fn drop(&mut self) {
        // SAFETY: `enter` took it on this thread.
        unsafe { CACHE.busy.unlock_kept() };
    }
}

#[inline(always)]
pub(super) fn mix(a: u64, b: u64) -> u64 {
    (a ^ b.rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl Fast {
    /// The fast path, when a request runs on a ZendMM heap and no other
    /// walk holds the cache.
    pub(super) fn enter() -> Option<Fast> {
        let heap = FAST_HEAP.load(Acquire);
        if heap == 0 || !CACHE.busy.try_lock_kept() {
            return None;
        }
        let mut f = Fast {
            chunks: [0; MAX_CHUNKS],
            n: 0,
            generation: GENERATION.load(Relaxed),
            slots: CACHE.slots.get(),
            seen: CACHE.seen.get(),
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
    pub(super) fn in_chunk(&self, addr: usize, len: usize) -> bool {
        let base = addr & !(CHUNK - 1);
        addr & 7 == 0
            && addr - base >= 64
            && addr - base <= CHUNK - len
            && self.chunks[..self.n].contains(&base)
    }

    pub(super) fn in_static(addr: usize, len: usize) -> bool {
        let s = STATIC_START.load(Relaxed);
        s != 0 && addr >= s && addr & 7 == 0 && addr.saturating_add(len) <= STATIC_END.load(Relaxed)
    }

    #[inline(always)]
    pub(super) fn index(func: usize, key: usize) -> usize {
        (mix(func as u64, key as u64) >> 52) as usize & (CACHE_LEN - 1)
    }

    /// The cached slot of (func, key), if any.
    #[inline(always)]
    pub(super) fn slot(&self, func: usize, key: usize) -> Option<Slot> {
        let i = Self::index(func, key);
        // SAFETY: we hold the cache (`enter`); i, i ^ 1 < CACHE_LEN.
        let slots = unsafe { &*self.slots };
        [slots[i], slots[i ^ 1]]
            .into_iter()
            .find(|s| s.generation == self.generation && s.func == func && s.key == key)
    }

    /// The cached value for (func, key, sig), if any.
    #[inline(always)]
    pub(super) fn get(&self, func: usize, key: usize, sig: u64) -> Option<usize> {
        self.slot(func, key).filter(|s| s.sig == sig).map(|s| s.val)
    }

    pub(super) fn put(&mut self, func: usize, key: usize, sig: u64, val: usize) {
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

    /// `frame_name` of the frame at `ex`, cached.
    pub(super) fn frame_name(
        &mut self,
        o: &Offsets,
        pid: &mut Pid,
        ex: usize,
        func: usize,
        opline: usize,
        call_info: u32,
    ) -> Option<usize> {
        let top = (call_info & ZEND_CALL_TOP != 0) as usize;
        let at = (mix(ex as u64, 0) >> 54) as usize & (SEEN_LEN - 1);
        // SAFETY: we hold the cache (`enter`); at < SEEN_LEN.
        let seen = unsafe { &mut (*self.seen)[at] };
        if seen.generation == self.generation
            && seen.ex == ex
            && seen.func == func
            && seen.opline == opline
            && seen.top == top
        {
            return Some(seen.val);
        }
        let (v, stable) = self.function_frame_name(o, pid, func, opline, top)?;
        if stable {
            *seen = Seen {
                generation: self.generation,
                ex,
                func,
                opline,
                top,
                val: v,
            };
        }
        Some(v)
    }

    /// `frame_name` by the functions' cache: the name, and whether it is
    /// stable for the request (the function is not memory that may be
    /// freed and reused within it: ZendMM memory, the trampoline).
    fn function_frame_name(
        &mut self,
        o: &Offsets,
        pid: &mut Pid,
        func: usize,
        opline: usize,
        top: usize,
    ) -> Option<(usize, bool)> {
        let call_info = if top != 0 { ZEND_CALL_TOP } else { 0 };
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
        let stable = sig == 0;
        if let Some(v) = self.get(func, key, sig) {
            return Some((v, stable));
        }
        let v = if read_now > 0 {
            frame_name_of(pid.get(), o, &f[..read_now], opline, call_info)?
        } else {
            frame_name(pid.get(), o, func, opline, call_info)?
        };
        self.put(func, key, sig, v);
        Some((v, stable))
    }
}

/// A function's opcodes and their number (0, 0 for an internal function),
/// from its first bytes `f` (read with process_vm_readv); None if too few
/// were read or it is neither.
pub(super) fn func_info(o: &Offsets, f: &[u8]) -> Option<(usize, usize)> {
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
pub(super) fn own_opline(opline: usize, opcodes: usize, last: usize) -> usize {
    if opline >= opcodes
        && opline < opcodes.wrapping_add(last.saturating_mul(OP_SIZE))
        && (opline - opcodes).is_multiple_of(OP_SIZE)
    {
        opline
    } else {
        0
    }
}
