//! Reading the PHP call stack: reads of engine memory that cannot fault
//! (process_vm_readv on our own process), a frame's name, the walk of
//! `current_execute_data` and its splice into the native stack.

use super::*;

// ---------------------------------------------------------------------------
// Reads that cannot fault.

/// Copies up to `buf.len()` bytes from `addr` of this process; the number
/// of bytes copied (fewer when the range ends in unmapped memory).
pub(super) fn read(pid: i32, addr: usize, buf: &mut [u8]) -> usize {
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
pub(super) fn read_n<const N: usize>(pid: i32, parts: [(usize, &mut [u8]); N]) -> [usize; N] {
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

pub(super) fn word(b: &[u8], at: usize) -> usize {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    usize::from_ne_bytes(w)
}

pub(super) fn word32(b: &[u8], at: usize) -> u32 {
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
pub(super) fn seccomp_filtered() -> bool {
    let mut buf = [0u8; 4096];
    let Some(n) = crate::hot::sys::read_small_file(c"/proc/self/status", &mut buf) else {
        return true;
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
pub(super) fn probe_in_child() -> bool {
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

pub(super) fn read_self_once() -> bool {
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
pub(super) fn push_zstr(
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
pub(super) fn push_zstr_lib(
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
pub(super) const ZSTR_BUF: usize = ZSTR_VAL + 256;

/// `push_zstr_lib` of a zend_string at `zs` whose first bytes, `b` (up
/// to ZSTR_BUF), are already read.
pub(super) fn push_read_zstr(
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
pub(super) fn frame_name(
    pid: i32,
    o: &Offsets,
    func: usize,
    opline: usize,
    call_info: u32,
) -> Option<usize> {
    let mut f = [0u8; FN_READ];
    let got = read(pid, func, &mut f);
    frame_name_of(pid, o, &f[..got], opline, call_info)
}

/// `frame_name` of a function whose first bytes, `f` (up to FN_READ), are
/// read. Two more system calls at most, one for each level of pointers:
/// the class entry's name pointer, the function's name and file strings
/// and the opline's line (read before the opline is known to be the
/// function's: it is used only if it is), then the class's name.
pub(super) fn frame_name_of(
    pid: i32,
    o: &Offsets,
    f: &[u8],
    opline: usize,
    call_info: u32,
) -> Option<usize> {
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
pub(super) fn is_closure(name: &[u8]) -> bool {
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
pub(super) fn walk(o: &Offsets, out: &mut [usize; MAX_PHP_FRAMES]) -> usize {
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
    if let Some(at) = crate::hot::tables::stacks::compare_frames(
        &PHP_COMPARED,
        &PHP_DIFFERED,
        &out[..n],
        &safe[..m],
    ) {
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
    *out = safe;
    m
}

/// HEAPLIVE_UNWIND=check: PHP walks made both ways, and how many differed.
pub static PHP_COMPARED: AtomicU64 = AtomicU64::new(0);
pub static PHP_DIFFERED: AtomicU64 = AtomicU64::new(0);

/// This process's pid for process_vm_readv, asked (a system call) only
/// when a read needs it.
pub(super) struct Pid(pub(super) i32);

impl Pid {
    pub(super) fn get(&mut self) -> i32 {
        if self.0 == 0 {
            self.0 = crate::hot::sys::getpid() as i32;
        }
        self.0
    }
}

/// The walk from the frame `ex` outwards.
pub(super) fn walk_from(
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
                Some(f) => f.frame_name(o, pid, ex, func, opline, call_info),
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

pub(super) fn in_execute_ex(ip: usize) -> bool {
    let s = EXECUTE_EX.start.load(Acquire);
    // A return address points after the call: it may equal the end.
    s != 0 && ip > s && ip <= EXECUTE_EX.end.load(Relaxed)
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
/// `merge_tests.rs`.)
pub(super) fn merge(
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
