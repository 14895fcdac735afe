//! The start-up probe: PHP's functions and data that heaplive uses, looked
//! up with dlsym when the library loads and PHP starts (never on an
//! allocation path), the running version, and whether the JIT is on and
//! safe to walk under. `interpose::php` fills and reads the table.

use crate::hot::php;
use crate::hot::real::call;
use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering::*};

/// The PHP functions and data we use, resolved in the constructor.
pub struct Syms {
    pub get_heap: AtomicUsize,
    pub is_zend_mm: AtomicUsize,
    pub set_handlers: AtomicUsize,
    pub get_handlers: AtomicUsize,
    pub mm_alloc: AtomicUsize,
    pub mm_free: AtomicUsize,
    pub mm_realloc: AtomicUsize,
    pub mm_block_size: AtomicUsize,
    pub register_module: AtomicUsize,
    pub module_version: AtomicUsize,
    pub str_find: AtomicUsize,
    pub ini_long: AtomicUsize,
    pub ini_string: AtomicUsize,
    pub compiler_globals: AtomicUsize,
    pub sapi_globals: AtomicUsize,
    pub sapi_module: AtomicUsize,
    pub error_cb: AtomicUsize,
    pub memory_usage: AtomicUsize,
    pub compile_file: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
pub const Z: AtomicUsize = AtomicUsize::new(0);
pub static S: Syms = Syms {
    get_heap: Z,
    is_zend_mm: Z,
    set_handlers: Z,
    get_handlers: Z,
    mm_alloc: Z,
    mm_free: Z,
    mm_realloc: Z,
    mm_block_size: Z,
    register_module: Z,
    module_version: Z,
    str_find: Z,
    ini_long: Z,
    ini_string: Z,
    compiler_globals: Z,
    sapi_globals: Z,
    sapi_module: Z,
    error_cb: Z,
    memory_usage: Z,
    compile_file: Z,
};

pub fn sym(name: &[u8]) -> usize {
    // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches the process.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr().cast()) as usize }
}

/// Is PHP told to use the tracked (malloc) allocator? It reads
/// `USE_ZEND_ALLOC` with atol: set and 0 means ZendMM is off.
pub fn zend_alloc_off() -> bool {
    // SAFETY: NUL-terminated name; getenv does not allocate.
    let v = unsafe { libc::getenv(c"USE_ZEND_ALLOC".as_ptr()) };
    // SAFETY: a NUL-terminated string from the environment.
    !v.is_null() && unsafe { libc::atol(v) } == 0
}

/// `_emalloc_<size>`'s address, 0 if not exported.
pub fn bin_allocator_symbol(size: usize) -> usize {
    let mut name = [0u8; 24];
    let prefix = b"_emalloc_";
    name[..prefix.len()].copy_from_slice(prefix);
    let mut digits = [0u8; 20];
    let (mut n, mut k) = (size, 0);
    loop {
        digits[k] = b'0' + (n % 10) as u8;
        k += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..k {
        name[prefix.len() + i] = digits[k - 1 - i];
    }
    sym(&name)
}

/// [start, end) of the function at `addr`, from its symbol's size.
pub fn symbol_extent(addr: usize) -> (usize, usize) {
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    let mut s: *const libc::Elf64_Sym = core::ptr::null();
    // SAFETY: valid out-pointers; 1 = RTLD_DL_SYMENT stores the symbol.
    let ok = unsafe {
        libc::dladdr1(
            addr as *const c_void,
            &mut info,
            (&mut s as *mut *const libc::Elf64_Sym).cast(),
            1,
        )
    };
    // SAFETY: dladdr1 gave a symbol table entry.
    let size = if ok != 0 && !s.is_null() {
        unsafe { (*s).st_size as usize }
    } else {
        0
    };
    (addr, addr + size.max(1))
}

/// The running PHP's version ("8.2.36"), once `standard` is registered.
pub fn version() -> Option<(u32, u32, u32, &'static [u8])> {
    let f = S.module_version.load(Relaxed);
    if f == 0 {
        return None;
    }
    let v = call!(f, fn(*const c_char) -> *const c_char, c"standard".as_ptr());
    if v.is_null() {
        return None;
    }
    // SAFETY: PHP's module version, a NUL-terminated static string.
    let text = unsafe { core::ffi::CStr::from_ptr(v) }.to_bytes();
    let (a, b, c) = php::parse_version(text)?;
    Some((a, b, c, text))
}

pub fn text(b: &[u8]) -> &str {
    core::str::from_utf8(b).unwrap_or("?")
}

/// Where stack walking under the JIT is known to crash (dd-trace-php turns
/// its allocation profiling off there: php-src #11380, #18289).
pub fn jit_walk_unsafe(major: u32, minor: u32, patch: u32) -> bool {
    match (major, minor) {
        (8, 0) => true,
        (8, 1) => patch <= 20,
        (8, 2) => patch <= 7,
        (8, 4) => patch <= 6,
        _ => false,
    }
}

pub fn jit_on() -> bool {
    let (l, s) = (S.ini_long.load(Relaxed), S.ini_string.load(Relaxed));
    if l == 0 || s == 0 {
        return false;
    }
    let name = c"opcache.jit_buffer_size";
    let size = call!(
        l,
        fn(*const c_char, usize, c_int) -> i64,
        name.as_ptr(),
        name.count_bytes(),
        0
    );
    let name = c"opcache.jit";
    let mode = call!(
        s,
        fn(*const c_char, usize, c_int) -> *const c_char,
        name.as_ptr(),
        name.count_bytes(),
        0
    );
    let off = mode.is_null() || {
        // SAFETY: an ini value, NUL-terminated.
        let m = unsafe { core::ffi::CStr::from_ptr(mode) }.to_bytes();
        matches!(m, b"" | b"0" | b"off" | b"disable" | b"disabled")
    };
    size > 0 && !off
}

/// Is the heap's `size` (`php::HEAP_SIZE`) what `zend_memory_usage(0)`
/// (memory_get_usage()) reads? Then erealloc works out a block's growth
/// from it instead of asking ZendMM the old block's size.
pub fn size_field_is_usage(heap: usize) -> bool {
    let f = S.memory_usage.load(Relaxed);
    if f == 0 {
        return false;
    }
    let usage = call!(f, fn(bool) -> usize, false);
    // SAFETY: the heap is ZendMM's (is_zend_mm), far larger than 24 bytes.
    usage != 0 && unsafe { ((heap + php::HEAP_SIZE) as *const usize).read() } == usage
}

/// Are `a` and `b` addresses in the same loaded object (dladdr's base)?
pub fn same_object(a: usize, b: usize) -> bool {
    let base = |addr: usize| {
        let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
        // SAFETY: a valid out-pointer; dladdr only looks the address up.
        let ok = unsafe { libc::dladdr(addr as *const c_void, &mut info) };
        (ok != 0).then_some(info.dli_fbase as usize)
    };
    matches!((base(a), base(b)), (Some(x), Some(y)) if x == y && x != 0)
}

/// The root frame of the request starting (`[GET /api/report]`, `[cli
/// script.php]`): SG(request_info), and the path of `REQUEST_URI` when the
/// SAPI's getenv gives it (php-fpm: a look-up in the request's FastCGI
/// parameters, no allocation).
pub fn read_request_frame() -> usize {
    let (sg, sm) = (S.sapi_globals.load(Relaxed), S.sapi_module.load(Relaxed));
    if sg == 0 || sm == 0 {
        return 0;
    }
    // SAFETY: sapi_module is a global struct of the executable; `name` and
    // `getenv` are its 1st and 10th words in 7.4 to 8.4.
    let (name, getenv) = unsafe {
        (
            ((sm + php::SAPI_NAME) as *const usize).read(),
            ((sm + php::SAPI_GETENV) as *const usize).read(),
        )
    };
    let mut n = crate::hot::sys::StackBuf::<{ crate::hot::names::MAX_NAME }>::new();
    let cli = name != 0 && php::read_cstr(name, 16, &mut n) && n.as_bytes() == b"cli";
    let uri = if !cli && getenv != 0 {
        let k = c"REQUEST_URI";
        call!(
            getenv,
            fn(*const c_char, usize) -> usize,
            k.as_ptr(),
            k.count_bytes()
        )
    } else {
        0
    };
    php::make_request_frame(sg, cli, uri)
}
