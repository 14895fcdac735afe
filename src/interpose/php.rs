//! PHP mode's hook points: what PHP calls in us.
//!
//! A preload library cannot interpose PHP's own functions (the executable
//! comes first in symbol lookup), only patch the data pointers PHP calls
//! through. In the constructor (`init`), when `executor_globals` and the
//! ZendMM functions are exported (php-fpm, php-cli; non-ZTS):
//!
//! - `zend_post_startup_cb` is chained: once PHP has started, the version
//!   (`zend_get_module_version("standard")`) picks the struct offsets and
//!   turns PHP frames on (`hot::php`);
//! - `php_register_internal_extensions_func` is chained to register an
//!   internal module `heaplive` (shown by `php -m`), whose RINIT installs
//!   ZendMM custom handlers when ZendMM is in use and no one else hooks it,
//!   and whose RSHUTDOWN removes them and drops the request's ZendMM
//!   samples (post_deactivate again, in case RSHUTDOWN did not run).
//!
//! Handlers left installed across a request would stop ZendMM's reset at
//! request end (memory_get_peak_usage would carry over), `zend_mm_gc` and
//! fast shutdown: they live from RINIT to RSHUTDOWN only. While they are
//! installed, the heap's `use_custom_heap` (its first int) is cleared around
//! each call through to ZendMM, so that ZendMM's own paths (gc before
//! "Allowed memory size exhausted") behave as without heaplive.
//!
//! A `memory_limit` error longjmps out of `_zend_mm_alloc` (zend_bailout),
//! straight through our handler: the handlers hold no lock and no guard
//! across the call, and do all their own work after it returns. The flag
//! then stays cleared, which only means the rest of that request is not
//! sampled; RSHUTDOWN still drops its samples.

use crate::hot::php::{
    ModuleEntry, S, bin_allocator_symbol, jit_on, jit_walk_unsafe, read_request_frame, same_object,
    size_field_is_usage, sym, symbol_extent, text, version, zend_alloc_off,
};
use crate::hot::real::{call, clear_dlerror};
use crate::hot::{config, log, php, real, sys, track};
use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};

/// What was there before us in PHP's hook pointers.
static PREV_POST_STARTUP: AtomicUsize = AtomicUsize::new(0);
static PREV_REGISTER: AtomicUsize = AtomicUsize::new(0);
/// `gc_mem_caches`'s own handler, when wrapped.
static GC_MEM_CACHES: AtomicUsize = AtomicUsize::new(0);
/// Our handlers are installed on `php::heap()` (between RINIT and
/// RSHUTDOWN).
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// ZendMM samples wanted (HEAPLIVE_PHP=auto, ZendMM in use).
static WANT_ZEND_MM: AtomicBool = AtomicBool::new(false);
static SAID_BACK_OFF: AtomicBool = AtomicBool::new(false);
/// Set when every `_emalloc_<bin>` was found: the allocation handler is
/// then `zm_alloc`, which takes them for granted, else `zm_alloc_no_bins`.
static BINS: AtomicBool = AtomicBool::new(false);

/// The allocation handler to install.
fn our_alloc_handler() -> usize {
    if BINS.load(Relaxed) {
        zm_alloc as *const () as usize
    } else {
        zm_alloc_no_bins as *const () as usize
    }
}

fn pid() -> u32 {
    sys::getpid()
}

/// The constructor's part: detect PHP and hook its start-up.
pub fn init() {
    let mode = config::get().php;
    if mode == config::PhpMode::Off {
        return;
    }
    // Not PHP (most processes): known without a failing lookup.
    if !real::maybe_exported(b"executor_globals\0")
        && !real::maybe_exported(b"executor_globals_offset\0")
    {
        return;
    }
    let eg = sym(b"executor_globals\0");
    if eg == 0 {
        if sym(b"executor_globals_offset\0") != 0 {
            log::line(format_args!(
                "heaplive[{}]: PHP is built thread-safe (ZTS), which heaplive does not read: no PHP frames, no ZendMM samples; malloc profiling goes on",
                pid()
            ));
        }
        clear_dlerror();
        return;
    }
    let names: [(&AtomicUsize, &[u8]); 19] = [
        (&S.get_heap, b"zend_mm_get_heap\0"),
        (&S.is_zend_mm, b"is_zend_mm\0"),
        (&S.set_handlers, b"zend_mm_set_custom_handlers\0"),
        (&S.get_handlers, b"zend_mm_get_custom_handlers\0"),
        (&S.mm_alloc, b"_zend_mm_alloc\0"),
        (&S.mm_free, b"_zend_mm_free\0"),
        (&S.mm_realloc, b"_zend_mm_realloc\0"),
        (&S.mm_block_size, b"_zend_mm_block_size\0"),
        (&S.register_module, b"zend_register_internal_module\0"),
        (&S.module_version, b"zend_get_module_version\0"),
        // Not zend_hash_str_find_ptr_lc: 7.4 does not export it.
        (&S.str_find, b"zend_hash_str_find\0"),
        (&S.ini_long, b"zend_ini_long\0"),
        (&S.ini_string, b"zend_ini_string\0"),
        (&S.compiler_globals, b"compiler_globals\0"),
        (&S.sapi_globals, b"sapi_globals\0"),
        (&S.sapi_module, b"sapi_module\0"),
        (&S.error_cb, b"zend_error_cb\0"),
        (&S.memory_usage, b"zend_memory_usage\0"),
        (&S.compile_file, b"zend_compile_file\0"),
    ];
    for (slot, name) in names {
        slot.store(sym(name), Relaxed);
    }
    let post_startup = sym(b"zend_post_startup_cb\0");
    let register = sym(b"php_register_internal_extensions_func\0");
    let execute_ex = sym(b"execute_ex\0");
    clear_dlerror();
    if post_startup == 0 || S.module_version.load(Relaxed) == 0 || execute_ex == 0 {
        log::line(format_args!(
            "heaplive[{}]: this PHP does not export what heaplive needs (zend_post_startup_cb, zend_get_module_version, execute_ex): no PHP frames, no ZendMM samples",
            pid()
        ));
        return;
    }
    php::set_executor_globals(eg);
    let (start, end) = symbol_extent(execute_ex);
    php::set_execute_ex(start, end);

    // SAFETY: zend_post_startup_cb is a `zend_result (*)(void)` variable of
    // the executable; nothing else runs yet (we are in a constructor).
    unsafe {
        let p = post_startup as *mut usize;
        PREV_POST_STARTUP.store(p.read(), Relaxed);
        p.write(post_startup_cb as *const () as usize);
    }
    let zend_mm_ok = [
        &S.get_heap,
        &S.is_zend_mm,
        &S.set_handlers,
        &S.get_handlers,
        &S.mm_alloc,
        &S.mm_free,
        &S.mm_realloc,
        &S.register_module,
    ]
    .iter()
    .all(|s| s.load(Relaxed) != 0);
    if mode == config::PhpMode::Auto && zend_mm_ok && register != 0 {
        if zend_alloc_off() {
            log::line(format_args!(
                "heaplive[{}]: USE_ZEND_ALLOC=0: PHP allocates through malloc, where heaplive sees it; no ZendMM hooks",
                pid()
            ));
        } else {
            WANT_ZEND_MM.store(true, Relaxed);
            BINS.store(php::set_bin_allocators(bin_allocator_symbol), Relaxed);
            clear_dlerror();
            // SAFETY: as above, for `php_register_internal_extensions_func`.
            unsafe {
                let p = register as *mut usize;
                PREV_REGISTER.store(p.read(), Relaxed);
                p.write(register_extensions as *const () as usize);
            }
        }
    }
}

/// The hook that was there before ours (`prev`, 0: none) runs first: its
/// result, or 0 without one.
fn call_prev(prev: &AtomicUsize) -> c_int {
    match prev.load(Relaxed) {
        0 => 0,
        f => call!(f, fn() -> c_int,),
    }
}

/// `zend_post_startup_cb`: PHP has started (extensions, ini, opcache).
extern "C" fn post_startup_cb() -> c_int {
    let rc = call_prev(&PREV_POST_STARTUP);
    let _busy = crate::hot::guard::Busy::enter();
    let _errno = sys::ErrnoGuard::save();
    let Some((major, minor, patch, v)) = version() else {
        log::line(format_args!(
            "heaplive[{}]: cannot tell this PHP's version: no PHP frames, no ZendMM samples; malloc profiling goes on",
            pid()
        ));
        return rc;
    };
    let Some(o) = php::offsets_for(major, minor) else {
        log::line(format_args!(
            "heaplive[{}]: PHP {} is not a version heaplive knows (7.4 to 8.4): no PHP frames, no ZendMM samples; malloc profiling goes on",
            pid(),
            text(v)
        ));
        return rc;
    };
    php::mark_php_thread();
    php::set_request_peak_threshold(config::get().php_peak_bytes);
    wrap_error_cb(major, minor);
    let zend_mm = if INSTALL_READY.load(Relaxed) {
        "ZendMM samples and "
    } else {
        ""
    };
    let safe_reads = php::can_read_self();
    php::set_safe_reads(safe_reads);
    if !safe_reads {
        log::line(format_args!(
            "heaplive[{}]: PHP {}: reading PHP's frames needs process_vm_readv, which a seccomp filter refuses here: PHP frames are off; {}malloc profiling {} on",
            pid(),
            text(v),
            zend_mm,
            if zend_mm.is_empty() { "goes" } else { "go" }
        ));
    } else if jit_walk_unsafe(major, minor, patch) && jit_on() {
        log::line(format_args!(
            "heaplive[{}]: PHP {} with the JIT on: PHP frames are off (stack walking under the JIT is unreliable before 8.1.21, 8.2.8 and 8.4.7)",
            pid(),
            text(v)
        ));
    } else {
        php::set_frames(Some(o));
        log::line(format_args!(
            "heaplive[{}]: PHP {}: {}PHP frames on",
            pid(),
            text(v),
            zend_mm
        ));
    }
    rc
}

// ---------------------------------------------------------------------------
// The internal module.

struct Module(core::cell::UnsafeCell<ModuleEntry>);
// SAFETY: written once, by the registration callback, on PHP's start-up
// thread before PHP reads it; PHP copies it into its registry.
unsafe impl Sync for Module {}

static MODULE: Module = Module(core::cell::UnsafeCell::new(ModuleEntry {
    size: 168,
    zend_api: 0,
    zend_debug: 0,
    zts: 0,
    ini_entry: core::ptr::null(),
    deps: core::ptr::null(),
    name: c"heaplive".as_ptr(),
    functions: core::ptr::null(),
    module_startup: Some(module_startup),
    module_shutdown: None,
    request_startup: Some(request_startup),
    request_shutdown: Some(request_shutdown),
    info: core::ptr::null(),
    version: c"0.1.0".as_ptr(),
    globals_size: 0,
    globals_ptr: core::ptr::null_mut(),
    globals_ctor: core::ptr::null(),
    globals_dtor: core::ptr::null(),
    post_deactivate: Some(post_deactivate),
    module_started: 0,
    kind: 0,
    handle: core::ptr::null_mut(),
    module_number: 0,
    build_id: c"API,NTS".as_ptr(),
}));

/// Set when the module is registered: its RINIT will install the handlers.
static INSTALL_READY: AtomicBool = AtomicBool::new(false);

/// `php_register_internal_extensions_func`: PHP registers its built-in
/// extensions (then `standard` is known, hence the version); we add ours.
extern "C" fn register_extensions() -> c_int {
    let rc = call_prev(&PREV_REGISTER);
    let _busy = crate::hot::guard::Busy::enter();
    let _errno = sys::ErrnoGuard::save();
    let Some(o) = version().and_then(|(a, b, _, _)| php::offsets_for(a, b)) else {
        // post_startup_cb says why, once.
        return rc;
    };
    // SAFETY: see `Module`.
    let m = unsafe { &mut *MODULE.0.get() };
    m.zend_api = o.api_no;
    let r = call!(
        S.register_module.load(Relaxed),
        fn(*mut ModuleEntry) -> *mut c_void,
        m
    );
    if r.is_null() {
        log::line(format_args!(
            "heaplive[{}]: PHP refused heaplive's internal module: no ZendMM samples; PHP frames and malloc profiling go on",
            pid()
        ));
    } else {
        INSTALL_READY.store(true, Relaxed);
    }
    rc
}

extern "C" fn module_startup(_type: c_int, _number: c_int) -> c_int {
    wrap_gc_mem_caches();
    0
}

extern "C" fn request_startup(_type: c_int, _number: c_int) -> c_int {
    let _errno = sys::ErrnoGuard::save();
    php::mark_php_thread();
    php::reset_request_peak();
    OOM_DUMPED.store(false, Relaxed);
    // Left set by a fatal error's longjmp out of the error callback.
    ACTIVE_FRAME.store(0, Relaxed);
    if config::get().php_request_frame {
        let _busy = crate::hot::guard::Busy::enter();
        php::set_request_frame(read_request_frame());
    }
    if !WANT_ZEND_MM.load(Relaxed) {
        return 0;
    }
    let heap = call!(S.get_heap.load(Relaxed), fn() -> usize,);
    if heap == 0 {
        return 0;
    }
    let zend_mm = call!(S.is_zend_mm.load(Relaxed), fn() -> bool,);
    if zend_mm {
        php::set_heap(heap, S.mm_block_size.load(Relaxed));
        php::begin_request_frames(heap);
        php::note_heap_in_filter(heap);
        INSTALLED.store(true, Relaxed);
        set_handlers(
            heap,
            our_alloc_handler(),
            zm_free as *const () as usize,
            if size_field_is_usage(heap) {
                zm_realloc as *const () as usize
            } else {
                zm_realloc_asking_handler as *const () as usize
            },
        );
        return 0;
    }
    if alloc_handler(heap) == our_alloc_handler() {
        // Ours, from a request whose RSHUTDOWN did not run.
        php::set_heap(heap, S.mm_block_size.load(Relaxed));
        php::begin_request_frames(heap);
        php::note_heap_in_filter(heap);
        INSTALLED.store(true, Relaxed);
        return 0;
    }
    if !SAID_BACK_OFF.swap(true, Relaxed) {
        log::line(format_args!(
            "heaplive[{}]: another ZendMM hook is installed (a profiler such as Datadog's or memprof, phpdbg, or USE_ZEND_ALLOC=0): heaplive leaves ZendMM alone; PHP frames and malloc profiling go on",
            pid()
        ));
    }
    0
}

/// The allocation handler `heap` has now (`zend_mm_get_custom_handlers`;
/// 0 when none is installed).
fn alloc_handler(heap: usize) -> usize {
    let (mut a, mut f, mut r) = (0usize, 0usize, 0usize);
    call!(
        S.get_handlers.load(Relaxed),
        fn(usize, *mut usize, *mut usize, *mut usize) -> (),
        heap,
        &mut a,
        &mut f,
        &mut r
    );
    a
}

/// `zend_mm_set_custom_handlers(heap, alloc, free, realloc)`; all three 0
/// take them off.
fn set_handlers(heap: usize, alloc: usize, free: usize, realloc: usize) {
    call!(
        S.set_handlers.load(Relaxed),
        fn(usize, usize, usize, usize) -> (),
        heap,
        alloc,
        free,
        realloc
    );
}

extern "C" fn request_shutdown(_type: c_int, _number: c_int) -> c_int {
    end_request();
    0
}

extern "C" fn post_deactivate() -> c_int {
    end_request();
    0
}

/// Removes our handlers (if they are still the installed ones) and drops
/// every ZendMM sample of the request: ZendMM reclaims those blocks without
/// any efree.
fn end_request() {
    let _errno = sys::ErrnoGuard::save();
    php::end_request_frames();
    if let Some(peak) = php::finish_request_peak()
        && let Some(s) = crate::hot::services::get()
    {
        let r = php::request_frame();
        (s.php_request_peak)(crate::hot::names::text(r).unwrap_or(b""), peak);
    }
    if INSTALLED.swap(false, Relaxed) {
        let heap = php::heap();
        // After a memory_limit bailout the flag is already clear (none).
        if alloc_handler(heap) == our_alloc_handler() {
            set_handlers(heap, 0, 0, 0);
        }
    }
    track::drop_zend_samples();
    php::reset_request_peak();
    php::set_request_frame(0);
}

// ---------------------------------------------------------------------------
// memory_limit errors: `zend_error_cb` is wrapped after start-up (PHP sets
// it to `php_error_cb` in php_module_startup; opcache and others may have
// chained it since). On "Allowed memory size of ... exhausted" the wrapper
// has the heap dumped (`background::php::oom`), then chains: PHP's own
// callback then logs the error and bails out (longjmp), as without us.

/// What `zend_error_cb` held before us: at start-up, then the callback
/// found in front of ours when the request's script is compiled.
static PREV_ERROR_CB: AtomicUsize = AtomicUsize::new(0);
/// What `zend_error_cb` held at start-up, when the wrapper went in (PHP's
/// `php_error_cb`, or the callbacks that extensions chained in their
/// MINIT): where a call of the wrapper from inside its own chain goes.
static START_ERROR_CB: AtomicUsize = AtomicUsize::new(0);
/// While the wrapper's chain runs: the stack address of the wrapper's frame
/// and the error's message (0: not running). See `error_cb`.
static ACTIVE_FRAME: AtomicUsize = AtomicUsize::new(0);
static ACTIVE_MESSAGE: AtomicUsize = AtomicUsize::new(0);
/// The callback's arguments: 1 = 8.1+ `(int, zend_string *file, u32,
/// zend_string *message)`; 2 = 8.0 `(int, const char *file, u32,
/// zend_string *message)`; 3 = 7.4 `(int, const char *file, u32, const
/// char *format, va_list)`.
static ERROR_CB_KIND: AtomicUsize = AtomicUsize::new(0);
/// This request was dumped at a memory_limit error already (a shutdown
/// function may hit the limit again).
static OOM_DUMPED: AtomicBool = AtomicBool::new(false);

const E_ERROR: c_int = 1;
const E_DONT_BAIL: c_int = 1 << 15;
const OOM_PREFIX: &[u8] = b"Allowed memory size of ";

fn wrap_error_cb(major: u32, minor: u32) {
    let slot = S.error_cb.load(Relaxed);
    if slot == 0 || !config::get().php_oom_dump || PREV_ERROR_CB.load(Relaxed) != 0 {
        return;
    }
    let kind = match (major, minor) {
        (7, _) => 3,
        (8, 0) => 2,
        _ => 1,
    };
    // SAFETY: `zend_error_cb` is a function pointer variable of the
    // executable; PHP has started and runs no other thread (non-ZTS).
    unsafe {
        let p = slot as *mut usize;
        let prev = p.read();
        if prev == 0 {
            return;
        }
        ERROR_CB_KIND.store(kind, Relaxed);
        PREV_ERROR_CB.store(prev, Relaxed);
        START_ERROR_CB.store(prev, Relaxed);
        p.write(error_cb as *const () as usize);
    }
    // Xdebug (develop and debug modes) sets `zend_error_cb` to its own in
    // its RINIT, after ours, and its callback does not chain to ours: the
    // wrapper is put back in front of it when the request's first script
    // is compiled (after every RINIT, before any code runs).
    let compile = S.compile_file.load(Relaxed);
    if compile != 0 {
        // SAFETY: `zend_compile_file` is a function pointer variable of the
        // executable (opcache and Xdebug chain it the same way); no other
        // thread runs PHP (non-ZTS).
        unsafe {
            let p = compile as *mut usize;
            let prev = p.read();
            if prev != 0 {
                PREV_COMPILE_FILE.store(prev, Relaxed);
                p.write(compile_file as *const () as usize);
            }
        }
    }
}

/// What `zend_compile_file` held before us.
static PREV_COMPILE_FILE: AtomicUsize = AtomicUsize::new(0);

/// `zend_compile_file(file_handle, type)`: puts the memory_limit wrapper
/// back in front of a callback installed since (Xdebug's), then compiles.
extern "C" fn compile_file(file_handle: usize, ty: c_int) -> usize {
    let slot = S.error_cb.load(Relaxed);
    let ours = error_cb as *const () as usize;
    if slot != 0 && PREV_ERROR_CB.load(Relaxed) != 0 {
        // SAFETY: as in `wrap_error_cb`.
        unsafe {
            let p = slot as *mut usize;
            let now = p.read();
            if now != ours && now != 0 {
                PREV_ERROR_CB.store(now, Relaxed);
                p.write(ours);
            }
        }
    }
    call!(
        PREV_COMPILE_FILE.load(Relaxed),
        fn(usize, c_int) -> usize,
        file_handle,
        ty
    )
}

/// Calls the error callback `f` with the five word arguments `error_cb`
/// was given (see there).
fn call_error_cb(f: usize, ty: c_int, file: usize, line: u32, message: usize, args: usize) {
    call!(
        f,
        fn(c_int, usize, u32, usize, usize) -> (),
        ty,
        file,
        line,
        message,
        args
    );
}

/// The wrapper. Five word arguments: 7.4's callback takes a va_list (a
/// pointer on x86-64) as the fifth; later ones four, and the fifth register
/// is passed on unread.
///
/// A call from inside its own chain: an extension that wraps
/// `zend_error_cb` in each RINIT finds ours there (from the request
/// before), and its callback chains to ours; `compile_file` then puts ours
/// in front of it again, so ours -> the extension's -> ours. That second
/// call forwards to the callback of start-up (`START_ERROR_CB`, PHP's
/// own), not to `PREV_ERROR_CB` (a cycle, a stack overflow at the first
/// warning): each callback of the chain runs once. It is told by the
/// same error (message) arriving deeper on the stack while the first call
/// runs; a fatal error longjmps out of the chain and leaves the marks set,
/// but a later error has another message or a shallower frame, and RINIT
/// clears them.
extern "C" fn error_cb(ty: c_int, file: usize, line: u32, message: usize, args: usize) {
    let marker = 0u8;
    let frame = core::hint::black_box(&marker) as *const u8 as usize;
    let active = ACTIVE_FRAME.load(Relaxed);
    let again = active != 0 && frame < active && ACTIVE_MESSAGE.load(Relaxed) == message;
    if again {
        let start = START_ERROR_CB.load(Relaxed);
        if start != 0 {
            call_error_cb(start, ty, file, line, message, args);
        }
        return;
    }
    if ty & !E_DONT_BAIL == E_ERROR && !crate::hot::guard::busy() && !OOM_DUMPED.load(Relaxed) {
        let _errno = sys::ErrnoGuard::save();
        memory_limit_dump(file, line, message);
    }
    let prev = PREV_ERROR_CB.load(Relaxed);
    if prev != 0 {
        // Another error while this one's chain runs (a callback that
        // warns) sets its own marks and puts these back.
        let saved = (active, ACTIVE_MESSAGE.load(Relaxed));
        ACTIVE_FRAME.store(frame, Relaxed);
        ACTIVE_MESSAGE.store(message, Relaxed);
        call_error_cb(prev, ty, file, line, message, args);
        ACTIVE_FRAME.store(saved.0, Relaxed);
        ACTIVE_MESSAGE.store(saved.1, Relaxed);
    }
}

fn memory_limit_dump(file: usize, line: u32, message: usize) {
    type Buf = sys::StackBuf<{ crate::hot::names::MAX_NAME }>;
    let kind = ERROR_CB_KIND.load(Relaxed);
    let mut m = Buf::new();
    let got = match kind {
        1 | 2 => php::read_zstr(message, &mut m),
        // 7.4: the format, with the numbers still to fill in.
        _ => php::read_cstr(message, 256, &mut m),
    };
    if !got || !m.as_bytes().starts_with(OOM_PREFIX) {
        return;
    }
    let Some(s) = crate::hot::services::get() else {
        return;
    };
    if INSTALL_READY.load(Relaxed) {
        // RINIT clears it for the next request.
        OOM_DUMPED.store(true, Relaxed);
    }
    let mut f = Buf::new();
    let ok = file != 0
        && match kind {
            1 => php::read_zstr(file, &mut f),
            _ => php::read_cstr(file, 512, &mut f),
        };
    if !ok {
        f.push_bytes(b"?");
    }
    let r = php::request_frame();
    (s.php_oom)(&crate::hot::services::PhpOom {
        message: m.as_bytes(),
        file: f.as_bytes(),
        line,
        request: crate::hot::names::text(r).unwrap_or(b""),
    });
}

// ---------------------------------------------------------------------------
// The ZendMM handlers (`emalloc`, `efree`, `erealloc` and all their sized
// variants arrive here while installed).

/// Calls `f` with the heap's custom flag cleared, so ZendMM takes its own
/// paths (gc on memory pressure); restores it after. A longjmp out of `f`
/// leaves the flag cleared (see the module comment).
#[inline(always)]
fn unhooked<R>(heap: usize, f: impl FnOnce() -> R) -> R {
    let flag = heap as *mut i32;
    // SAFETY: `use_custom_heap` is the heap's first int in 7.4 to 8.4.
    let saved = unsafe { flag.read_volatile() };
    unsafe { flag.write_volatile(0) };
    let r = f();
    unsafe { flag.write_volatile(saved) };
    r
}

/// emalloc. The common case (a small block that is not sampled): the
/// countdown, then ZendMM's own bin-specialised `_emalloc_<bin>` with the
/// flag cleared, as PHP would have called it without us.
extern "C" fn zm_alloc(size: usize) -> *mut c_void {
    if size <= php::MAX_SMALL
        && let (block, f) = php::bin_allocator_set(size)
        && track::count_zend_alloc(block)
    {
        // SAFETY: `use_custom_heap` is the heap's first int in 7.4 to 8.4;
        // it is put back as the constant it must be while a handler runs
        // (`php::CUSTOM_HEAP_STD`), so that nothing is kept across the call.
        let heap = php::heap() as *mut i32;
        unsafe { heap.write_volatile(0) };
        let p = call!(f, fn() -> *mut c_void,);
        unsafe { heap.write_volatile(php::CUSTOM_HEAP_STD) };
        return p;
    }
    zm_alloc_counted(size)
}

/// emalloc without the bin-specialised functions (a ZEND_DEBUG build):
/// every allocation counted and called through.
extern "C" fn zm_alloc_no_bins(size: usize) -> *mut c_void {
    zm_alloc_counted(size)
}

/// emalloc when the block may be sampled, or is large or huge.
#[inline(never)]
fn zm_alloc_counted(size: usize) -> *mut c_void {
    let heap = php::heap();
    let a = S.mm_alloc.load(Relaxed);
    let p = unhooked(heap, || {
        call!(a, fn(usize, usize) -> *mut c_void, heap, size)
    });
    if !p.is_null() {
        track::on_zend_alloc(p, size);
    }
    p
}

/// efree. The common case (the filter says "not a sample of this
/// request"): a jump to ZendMM's free.
extern "C" fn zm_free(p: *mut c_void) {
    // The filter first: most efrees are of blocks never sampled. The
    // heap's own address is in the filter while we are installed.
    if php::maybe_zend_sample(p as usize) {
        return zm_free_maybe_sampled(p);
    }
    call!(
        S.mm_free.load(Relaxed),
        fn(usize, *mut c_void) -> (),
        php::heap(),
        p
    )
}

#[cold]
#[inline(never)]
fn zm_free_maybe_sampled(p: *mut c_void) {
    let heap = php::heap();
    // A full shutdown with handlers installed hands the heap itself to
    // `_free` (ours are removed before, but be safe): not a block.
    if p as usize == heap {
        return;
    }
    track::on_free(p);
    call!(
        S.mm_free.load(Relaxed),
        fn(usize, *mut c_void) -> (),
        heap,
        p
    )
}

/// erealloc: the call through, and the block's growth from ZendMM's own
/// count of the heap's bytes (`size`, which every resize updates by the
/// new block's size less the old one's: ZEND_MM_STAT is always on), so
/// that the old block's size need not be asked. Installed when RINIT found
/// that count where heaplive reads it (`size_field_is_usage`); otherwise
/// `zm_realloc_asking_handler`.
///
/// The common case, a block that is no sample growing within the
/// countdown, is the call, the filter and the countdown: the growth is the
/// count's difference, and the blocks' sizes are worked out only when a
/// sample is involved (`zm_realloc_counted`).
extern "C" fn zm_realloc(p: *mut c_void, size: usize) -> *mut c_void {
    let heap = php::heap();
    let count = (heap + php::HEAP_SIZE) as *const usize;
    let a = S.mm_realloc.load(Relaxed);
    // SAFETY: as in zm_alloc; `count` is the heap's `size` (checked).
    let flag = heap as *mut i32;
    let before = unsafe { count.read_volatile() };
    unsafe { flag.write_volatile(0) };
    let q = call!(
        a,
        fn(usize, *mut c_void, usize) -> *mut c_void,
        heap,
        p,
        size
    );
    unsafe { flag.write_volatile(php::CUSTOM_HEAP_STD) };
    let grown = unsafe { count.read_volatile() }.wrapping_sub(before) as isize;
    if q.is_null() || (q == p && grown == 0) {
        // Failed, or the same block (a small one within its bin, a large
        // or huge one of the same pages).
        return q;
    }
    // `p` no sample of this request (a null `p` passes or not: either
    // way right), and a growth that leaves the countdown at or above zero
    // (counted then) or none.
    if !php::maybe_zend_sample(p as usize)
        && (grown <= 0 || track::count_zend_alloc(grown as usize))
    {
        return q;
    }
    zm_realloc_counted(p, q, size, grown);
    q
}

/// erealloc's uncommon case: `p` may be a sample, or the growth takes the
/// countdown below zero (nothing of it counted yet).
#[inline(never)]
fn zm_realloc_counted(p: *mut c_void, q: *mut c_void, size: usize, grown: isize) {
    // The block after, as zend_mm_realloc_heap makes it (7.4 to 8.4): a
    // small block that stays where it is keeps its bin (and does not
    // grow), and that is the only block not of `size`'s own class: a small
    // block that moved is a fresh one of its bin, a large one is resized
    // or moved to whole pages of `size`, a huge one to whole 4 KiB pages
    // (ZEND_MM_ALIGNED_SIZE_EX of REAL_PAGE_SIZE), as `zend_block_size`
    // counts them.
    let new_block = php::zend_block_size(size);
    let old_block = if p.is_null() {
        0
    } else {
        (new_block as isize).saturating_sub(grown).max(0) as usize
    };
    track::on_zend_realloc(p, old_block, q, new_block);
}

/// erealloc when the heap's `size` is not where heaplive reads it.
extern "C" fn zm_realloc_asking_handler(p: *mut c_void, size: usize) -> *mut c_void {
    zm_realloc_asking(php::heap(), p, size)
}

/// erealloc asking ZendMM the old block's size (`_zend_mm_block_size`),
/// when the heap's `size` is not where heaplive reads it.
#[inline(never)]
fn zm_realloc_asking(heap: usize, p: *mut c_void, size: usize) -> *mut c_void {
    let old_block = if p.is_null() {
        0
    } else {
        php::block_size(heap, p as usize)
    };
    let a = S.mm_realloc.load(Relaxed);
    let q = unhooked(heap, || {
        call!(
            a,
            fn(usize, *mut c_void, usize) -> *mut c_void,
            heap,
            p,
            size
        )
    });
    if q.is_null() {
        return q;
    }
    // As in zm_realloc.
    let new_block = if q == p && size <= php::MAX_SMALL && old_block != 0 {
        old_block
    } else {
        php::zend_block_size(size)
    };
    track::on_zend_realloc(p, old_block, q, new_block);
    q
}

// ---------------------------------------------------------------------------
// gc_mem_caches(): `zend_mm_gc` does nothing while the flag is set, so the
// function runs with it cleared, as ZendMM's other gc paths do.

type Zif = unsafe extern "C" fn(*mut c_void, *mut c_void);

fn wrap_gc_mem_caches() {
    let (Some((a, b, _, _)), cg, find) = (
        version(),
        S.compiler_globals.load(Relaxed),
        S.str_find.load(Relaxed),
    ) else {
        return;
    };
    let Some(o) = php::offsets_for(a, b) else {
        return;
    };
    let (Some(ft_off), Some(h_off)) = (o.cg_function_table, o.internal_handler) else {
        return;
    };
    if cg == 0 || find == 0 || GC_MEM_CACHES.load(Relaxed) != 0 {
        return;
    }
    // SAFETY: compiler_globals is a global of the executable; the function
    // table pointer is at the offset checked against this version's headers.
    let ft = unsafe { ((cg + ft_off) as *const usize).read() };
    if ft == 0 {
        return;
    }
    // The function table's keys are lower case; the value is a zval
    // whose first word is the zend_function pointer.
    let name = c"gc_mem_caches";
    let zv = call!(
        find,
        fn(usize, *const c_char, usize) -> usize,
        ft,
        name.as_ptr(),
        name.count_bytes()
    );
    if zv == 0 {
        return;
    }
    // SAFETY: zv is a live zval of the persistent function table.
    let f = unsafe { (zv as *const usize).read() };
    if f == 0 {
        return;
    }
    // SAFETY: f is the zend_internal_function of gc_mem_caches (type 1),
    // persistent; its handler is at the checked offset.
    unsafe {
        if *(f as *const u8) != 1 {
            return;
        }
        let h = (f + h_off) as *mut usize;
        let orig = h.read();
        // The handler is code of PHP itself: an offset that is wrong for
        // this build finds something else there, and nothing is written.
        if orig == 0 || !same_object(orig, S.module_version.load(Relaxed)) {
            return;
        }
        GC_MEM_CACHES.store(orig, Relaxed);
        h.write(gc_mem_caches as *const () as usize);
    }
}

extern "C" fn gc_mem_caches(ex: *mut c_void, rv: *mut c_void) {
    let orig = GC_MEM_CACHES.load(Relaxed);
    // SAFETY: the handler we replaced, with its signature.
    let f: Zif = unsafe { core::mem::transmute(orig) };
    if INSTALLED.load(Relaxed) {
        let heap = php::heap();
        unhooked(heap, || unsafe { f(ex, rv) })
    } else {
        unsafe { f(ex, rv) }
    }
}
