//! PHP's structures as heaplive reads them: the offsets that differ between
//! PHP versions (a table, one row a version) and those that do not; the
//! version parser. Adding a PHP version means adding its row here.

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
pub(super) const EX_OPLINE: usize = 0;
pub(super) const EX_FUNC: usize = 24;
pub(super) const EX_CALL_INFO: usize = 40;
pub(super) const EX_PREV: usize = 48;
pub(super) const EX_SIZE: usize = 56;
pub(super) const FN_TYPE: usize = 0;
pub(super) const FN_NAME: usize = 8;
pub(super) const FN_SCOPE: usize = 16;
pub(super) const CE_NAME: usize = 8;
pub(super) const ZSTR_LEN: usize = 16;
pub(super) const ZSTR_VAL: usize = 24;
pub(super) const OP_SIZE: usize = 32;
pub(super) const OP_LINENO: usize = 24;
pub(super) const ZEND_CALL_TOP: u32 = 1 << 17;
pub(super) const ZEND_INTERNAL_FUNCTION: u8 = 1;
pub(super) const ZEND_USER_FUNCTION: u8 = 2;

/// The versions heaplive knows. 8.2 was compiled against the headers of
/// Debian's 8.2.36 (and walked); 7.4 against its release sources and run
/// (scripts/check-php-version.sh 7.4); 8.0, 8.1 and 8.3 were compiled from
/// reli-prof's headers (`offsetof`, the same headers give 7.4's and 8.2's
/// values exactly) and 8.4 comes from phpspy's, checked by hand against
/// reli-prof's 8.4 header (see the PHP research notes). 8.4's
/// `internal_handler` is left out: the headers read disagree on
/// `zend_internal_function`'s common part.
///
/// A `static`, not a `const`: `set_frames` finds a row by its address,
/// and each use of a `const` may be its own copy (it was, once the rows
/// and their users were in different files).
pub(super) static TABLE: [Offsets; 6] = [
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

/// `zend_module_entry` of PHP 7.4 to 8.4 on x86-64, non-ZTS (168 bytes):
/// heaplive registers itself as an internal module
/// (`interpose::php`'s `MODULE`).
#[repr(C)]
pub struct ModuleEntry {
    pub size: u16,
    pub zend_api: u32,
    pub zend_debug: u8,
    pub zts: u8,
    pub ini_entry: *const core::ffi::c_void,
    pub deps: *const core::ffi::c_void,
    pub name: *const core::ffi::c_char,
    pub functions: *const core::ffi::c_void,
    pub module_startup:
        Option<extern "C" fn(core::ffi::c_int, core::ffi::c_int) -> core::ffi::c_int>,
    pub module_shutdown:
        Option<extern "C" fn(core::ffi::c_int, core::ffi::c_int) -> core::ffi::c_int>,
    pub request_startup:
        Option<extern "C" fn(core::ffi::c_int, core::ffi::c_int) -> core::ffi::c_int>,
    pub request_shutdown:
        Option<extern "C" fn(core::ffi::c_int, core::ffi::c_int) -> core::ffi::c_int>,
    pub info: *const core::ffi::c_void,
    pub version: *const core::ffi::c_char,
    pub globals_size: usize,
    pub globals_ptr: *mut core::ffi::c_void,
    pub globals_ctor: *const core::ffi::c_void,
    pub globals_dtor: *const core::ffi::c_void,
    pub post_deactivate: Option<extern "C" fn() -> core::ffi::c_int>,
    pub module_started: core::ffi::c_int,
    pub kind: u8,
    pub handle: *mut core::ffi::c_void,
    pub module_number: core::ffi::c_int,
    pub build_id: *const core::ffi::c_char,
}
const _: () = assert!(core::mem::size_of::<ModuleEntry>() == 168);
