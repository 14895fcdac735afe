//! Names of pseudo frames: PHP frames (`Repo::load (app.php:41)`) and
//! markers (`[zend_mm]`, `[php?]`), copied into our own memory when a
//! sample is taken and de-duplicated, so that a stack record can hold a
//! name as one word.
//!
//! A pseudo frame is `PSEUDO | address of its record`. Return addresses
//! never have bit 63 set in user space (they stay below 2^57), and a kernel
//! address with bit 63 cleared is still above 2^56, which `text` refuses.
//!
//! Records live in the stack table's arena (our own mmap, fork-safe lock)
//! and are never freed; the table of records is open addressing with
//! compare-and-swap on empty slots, so lookups and inserts take no lock. A
//! record is written completely before the compare-and-swap publishes it.

use core::sync::atomic::{AtomicUsize, Ordering::*};

/// Marks a frame value as a pseudo frame.
pub const PSEUDO: usize = 1 << 63;
/// The longest name kept; longer ones are cut.
pub const MAX_NAME: usize = 1024;

const SLOTS: usize = 1 << 18;
const MAX_PROBES: usize = 1024;
const MAGIC: u32 = 0x6e61_6d65;

/// The header of a record; `len` bytes of text follow it.
#[repr(C)]
struct Header {
    hash: u64,
    len: u32,
    magic: u32,
}

/// A record in the library's read-only data, for the fixed markers.
#[repr(C, align(8))]
struct Fixed<const N: usize> {
    h: Header,
    text: [u8; N],
}

const fn fixed<const N: usize>(text: &[u8; N]) -> Fixed<N> {
    Fixed {
        h: Header {
            hash: 0,
            len: N as u32,
            magic: MAGIC,
        },
        text: *text,
    }
}

static ZEND_MM: Fixed<9> = fixed(b"[zend_mm]");
static PHP_BAD: Fixed<6> = fixed(b"[php?]");
static FULL: Fixed<17> = fixed(b"[php names: full]");
static TRUNCATED: Fixed<11> = fixed(b"[truncated]");

/// The leaf frame of every ZendMM sample.
pub fn zend_mm() -> usize {
    PSEUDO | (&ZEND_MM as *const Fixed<9> as usize)
}

/// A PHP frame that could not be read (a bad offset, a half-built frame).
pub fn php_bad() -> usize {
    PSEUDO | (&PHP_BAD as *const Fixed<6> as usize)
}

/// The outermost frame of a stack cut at the frame limit (`MAX_FRAMES`):
/// the frames beyond it are missing.
pub fn truncated() -> usize {
    PSEUDO | (&TRUNCATED as *const Fixed<11> as usize)
}

fn full() -> usize {
    PSEUDO | (&FULL as *const Fixed<17> as usize)
}

static TABLE: AtomicUsize = AtomicUsize::new(0);

fn table() -> *const AtomicUsize {
    let p = TABLE.load(Acquire);
    if p != 0 {
        return p as *const AtomicUsize;
    }
    let bytes = SLOTS * core::mem::size_of::<AtomicUsize>();
    let fresh = crate::hot::sys::map(bytes);
    if fresh.is_null() {
        return core::ptr::null();
    }
    match TABLE.compare_exchange(0, fresh as usize, AcqRel, Acquire) {
        Ok(_) => fresh as *const AtomicUsize,
        Err(winner) => {
            // SAFETY: nobody saw `fresh`.
            unsafe { crate::hot::sys::unmap(fresh, bytes) };
            winner as *const AtomicUsize
        }
    }
}

fn hash(text: &[u8]) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for &b in text {
        h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01B3);
    }
    h | 1
}

/// The text of a record (the pointer part of a pseudo frame).
///
/// # Safety
/// `rec` is a record made by `intern` or a `Fixed`.
unsafe fn record_text(rec: usize) -> &'static [u8] {
    // SAFETY: records are complete and immutable once published.
    unsafe {
        let h = &*(rec as *const Header);
        core::slice::from_raw_parts(
            (rec + core::mem::size_of::<Header>()) as *const u8,
            h.len as usize,
        )
    }
}

/// The pseudo frame naming `text` (cut to `MAX_NAME` bytes), adding it if
/// new. Never allocates through the wrapped allocator.
pub fn intern(text: &[u8]) -> usize {
    let text = &text[..text.len().min(MAX_NAME)];
    let t = table();
    if t.is_null() {
        return full();
    }
    let h = hash(text);
    let mut i = (h >> 1) as usize & (SLOTS - 1);
    let mut mine = 0usize;
    for _ in 0..MAX_PROBES {
        // SAFETY: i < SLOTS, in the table's mapping, which is never freed.
        let slot = unsafe { &*t.add(i) };
        let cur = slot.load(Acquire);
        if cur == 0 {
            if mine == 0 {
                mine = make_record(h, text);
                if mine == 0 {
                    return full();
                }
            }
            match slot.compare_exchange(0, mine, AcqRel, Acquire) {
                Ok(_) => return PSEUDO | mine,
                Err(now) => {
                    // SAFETY: published records are complete.
                    if unsafe { (*(now as *const Header)).hash == h && record_text(now) == text } {
                        // Ours stays unused: a few bytes of the arena.
                        return PSEUDO | now;
                    }
                }
            }
        } else {
            // SAFETY: as above.
            if unsafe { (*(cur as *const Header)).hash == h && record_text(cur) == text } {
                return PSEUDO | cur;
            }
        }
        i = (i + 1) & (SLOTS - 1);
    }
    full()
}

fn make_record(h: u64, text: &[u8]) -> usize {
    let p = crate::hot::stacks::arena_alloc(core::mem::size_of::<Header>() + text.len());
    if p.is_null() {
        return 0;
    }
    // SAFETY: p has room for the header and the text, and is 8-aligned.
    unsafe {
        (p as *mut Header).write(Header {
            hash: h,
            len: text.len() as u32,
            magic: MAGIC,
        });
        core::ptr::copy_nonoverlapping(
            text.as_ptr(),
            p.add(core::mem::size_of::<Header>()),
            text.len(),
        );
    }
    p as usize
}

/// Is `frame` a pseudo frame (a name, not a return address)?
#[inline]
pub fn is_pseudo(frame: usize) -> bool {
    frame & PSEUDO != 0
}

/// The name of a pseudo frame; None for a value this module did not make
/// (a kernel address, say).
pub fn text(frame: usize) -> Option<&'static [u8]> {
    if !is_pseudo(frame) {
        return None;
    }
    let rec = frame & !PSEUDO;
    if rec == 0 || rec >= 1 << 56 || !rec.is_multiple_of(8) {
        return None;
    }
    // SAFETY: values with bit 63 below 2^56 are only made by this module
    // (see the module comment); records are never freed.
    unsafe {
        if (*(rec as *const Header)).magic != MAGIC {
            return None;
        }
        Some(record_text(rec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intern_dedups_and_gives_text_back() {
        let a = intern(b"Repo::load (app.php:41)");
        let b = intern(b"Repo::load (app.php:42)");
        assert_ne!(a, b);
        assert_eq!(intern(b"Repo::load (app.php:41)"), a);
        assert_eq!(text(a), Some(&b"Repo::load (app.php:41)"[..]));
        assert!(is_pseudo(a));
        assert_eq!(text(zend_mm()), Some(&b"[zend_mm]"[..]));
        assert_eq!(text(php_bad()), Some(&b"[php?]"[..]));
        assert_eq!(text(0x40_1000), None);
        assert_eq!(text(0xffff_ffff_ff60_0000), None);
        let long = [b'x'; 3000];
        assert_eq!(text(intern(&long)).map(|t| t.len()), Some(MAX_NAME));
    }

    #[test]
    fn intern_from_many_threads_agrees() {
        let ids = crate::same_from_threads(4, || {
            (0..3000)
                .map(|i| intern(format!("f{i} (a.php:{i})").as_bytes()))
                .collect()
        });
        assert_eq!(text(ids[7]), Some(&b"f7 (a.php:7)"[..]));
    }
}
