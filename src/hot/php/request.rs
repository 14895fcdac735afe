//! The running request: its root frame (`[GET /api/report]`) and the peak
//! of its ZendMM live total.

use super::*;

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
pub(super) static REQUEST_FRAME: AtomicUsize = AtomicUsize::new(0);

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
pub(super) fn push_cstr(
    pid: i32,
    p: usize,
    max: usize,
    out: &mut StackBuf<{ names::MAX_NAME }>,
) -> bool {
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
pub(super) static SAFE_READS: AtomicBool = AtomicBool::new(false);

pub fn set_safe_reads(ok: bool) {
    SAFE_READS.store(ok, Relaxed);
}

/// The running request's ZendMM live total (un-biased bytes of its live
/// ZendMM samples), its highest value, and the value whose stacks the
/// records' `request_peak_*` fields hold. Only the PHP thread changes them.
pub(super) static REQ_LIVE: AtomicI64 = AtomicI64::new(0);
pub(super) static REQ_PEAK: AtomicI64 = AtomicI64::new(0);
pub(super) static REQ_COPIED: AtomicI64 = AtomicI64::new(0);
/// HEAPLIVE_PHP_PEAK_BYTES (0 = off).
pub(super) static REQ_THRESHOLD: AtomicI64 = AtomicI64::new(0);

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
pub(super) static REQ_EPOCH: AtomicU64 = AtomicU64::new(0);

#[inline(always)]
pub fn request_epoch() -> u64 {
    REQ_EPOCH.load(Acquire)
}

pub(super) fn copy_request_peak() {
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
