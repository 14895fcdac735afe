//! Attach mode (hot/attach.rs): redirect the allocation entry points of
//! every loaded module to heaplive's exports by rewriting their GOT slots,
//! and put them back on detach.
//!
//! A module calls `malloc` through its PLT, which jumps through a GOT slot
//! (relocation `R_X86_64_JUMP_SLOT`; `R_X86_64_GLOB_DAT` for code built
//! with `-fno-plt` or that takes the function's address). A preloaded
//! heaplive is found by the loader when it fills those slots; an attached
//! one rewrites them. Slots inside the module's RELRO range are made
//! writable for the write and read-only again after.
//!
//! Skipped: heaplive itself, libc and the dynamic loader (glibc's own
//! internal calls stay its own: a block libc allocates for itself, say in
//! `strdup` or `fopen`, is not seen), and the vDSO. Each module is
//! taken only once it is fully loaded (`dlopen(name, RTLD_NOLOAD)` waits
//! for a load in progress on another thread and fails for one that is not
//! finished), so a slot is never written while the loader still relocates.
//!
//! Runs in `heaplive_attach`, `heaplive_detach` and after each `dlopen`
//! (interpose/attach.rs), with the guard set: it may allocate.

use crate::hot::attach::is_libc;
use std::ffi::{CStr, CString};
use std::sync::Mutex;

/// A slot we rewrote: where, and what was there.
struct Saved {
    slot: usize,
    original: usize,
}

static SAVED: Mutex<Vec<Saved>> = Mutex::new(Vec::new());

const R_X86_64_GLOB_DAT: u32 = 6;
const R_X86_64_JUMP_SLOT: u32 = 7;
const PT_GNU_RELRO: u32 = 0x6474_e552;

/// One loaded module as the loader lists it.
struct Module {
    name: CString,
    base: usize,
    dynamic: usize,
    relro: Option<(usize, usize)>,
    /// Contains `me` (heaplive itself).
    is_me: bool,
}

fn modules() -> Vec<Module> {
    use crate::hot::elf;
    let me = modules as *const () as usize;
    let mut out = Vec::new();
    elf::each_loaded(|info, _| {
        let base = info.dlpi_addr as usize;
        let mut m = Module {
            name: elf::name_of(info).to_owned(),
            base,
            dynamic: 0,
            relro: None,
            is_me: false,
        };
        for ph in elf::phdrs(info) {
            let start = base + ph.p_vaddr as usize;
            match ph.p_type {
                libc::PT_LOAD if me >= start && me < start + ph.p_memsz as usize => m.is_me = true,
                libc::PT_DYNAMIC => m.dynamic = start,
                PT_GNU_RELRO => m.relro = Some((start, start + ph.p_memsz as usize)),
                _ => {}
            }
        }
        out.push(m);
        false
    });
    out
}

/// Is the module fully loaded? (Waits for a dlopen in progress.)
fn loaded(m: &Module) -> bool {
    let name = if m.name.as_bytes().is_empty() {
        core::ptr::null()
    } else {
        m.name.as_ptr()
    };
    // SAFETY: RTLD_NOLOAD never loads; the reference taken is dropped.
    unsafe {
        let h = libc::dlopen(name, libc::RTLD_NOLOAD | libc::RTLD_LAZY);
        if h.is_null() {
            libc::dlerror();
            return false;
        }
        libc::dlclose(h);
    }
    true
}

fn skipped(m: &Module) -> bool {
    let n = m.name.as_bytes();
    let base = n.rsplit(|&b| b == b'/').next().unwrap_or(n);
    m.is_me
        || m.dynamic == 0
        || is_libc(m.name.as_ptr())
        || base.starts_with(b"ld-linux")
        || base.starts_with(b"linux-vdso")
}

/// Every slot of `m` whose symbol has a replacement: (slot, replacement).
fn slots(m: &Module, targets: &[(&CStr, usize)]) -> Vec<(usize, usize)> {
    // The loader relocates the pointers in the dynamic section in place
    // (not for a read-only one, like the vDSO's, which is skipped anyway):
    // `hot::elf` reads them as the resolver does.
    // SAFETY: PT_DYNAMIC of a loaded module: entries up to DT_NULL.
    let o = unsafe { crate::hot::elf::Object::new(m.base, m.dynamic) };
    let (symtab, strtab) = (o.symtab, o.strtab);
    let mut out = Vec::new();
    if symtab == 0 || strtab == 0 {
        return out;
    }
    for (table, size) in [(o.jmprel, o.pltrelsz), (o.rela, o.relasz)] {
        if table == 0 {
            continue;
        }
        let n = size / core::mem::size_of::<libc::Elf64_Rela>();
        for i in 0..n {
            // SAFETY: the module's relocation table has n entries.
            let r = unsafe { &*(table as *const libc::Elf64_Rela).add(i) };
            let kind = (r.r_info & 0xffff_ffff) as u32;
            if kind != R_X86_64_JUMP_SLOT && kind != R_X86_64_GLOB_DAT {
                continue;
            }
            let sym = (r.r_info >> 32) as usize;
            // SAFETY: a symbol index of this module's own table, and its
            // NUL-terminated name in the string table.
            let name = unsafe {
                let s = &*(symtab as *const libc::Elf64_Sym).add(sym);
                CStr::from_ptr((strtab + s.st_name as usize) as *const libc::c_char)
            };
            if let Some(&(_, to)) = targets.iter().find(|(t, a)| *a != 0 && *t == name) {
                out.push((m.base.wrapping_add(r.r_offset as usize), to));
            }
        }
    }
    out
}

/// Writes `value` into the slot, through mprotect when it lies in RELRO.
/// The loader made read-only only the whole pages of the RELRO range (its
/// end rounded down): a slot in the last, partial page is writable, and
/// that page must stay so.
fn write_slot(slot: usize, value: usize, relro: Option<(usize, usize)>) -> bool {
    let in_relro = relro.is_some_and(|(s, e)| slot >= s && slot < e & !4095);
    let page = slot & !4095;
    if in_relro {
        // SAFETY: a page of a loaded module's RELRO range.
        if unsafe { libc::mprotect(page as *mut _, 4096, libc::PROT_READ | libc::PROT_WRITE) } != 0
        {
            return false;
        }
    }
    // SAFETY: an aligned GOT slot of a loaded module, writable now. One
    // aligned 8-byte store: a thread calling through it sees the old or
    // the new function, both valid.
    unsafe { core::ptr::write_volatile(slot as *mut usize, value) };
    if in_relro {
        // SAFETY: as above; RELRO pages are read-only after loading.
        unsafe { libc::mprotect(page as *mut _, 4096, libc::PROT_READ) };
    }
    true
}

/// Redirects the slots of every module not yet done; returns how many
/// slots were rewritten by this call.
pub fn patch(targets: &[(&CStr, usize)]) -> usize {
    patch_where(targets, &skipped)
}

/// Preloaded after another allocator (`hot::winner::Winner::Library`, whose
/// load bias is `winner`): redirects every module's allocation slots to
/// heaplive, whose real functions are that allocator's, as if heaplive
/// had come first. libc's slots too (its internal calls, `strdup`'s
/// malloc, went through them to the other allocator, as they would have
/// gone to heaplive first); not the allocator's own (its internal calls
/// stay its own, else heaplive's forward would come back to heaplive),
/// nor heaplive's, the loader's (it allocates through pointers of its own,
/// set to the first malloc before any constructor) or the vDSO. Returns
/// how many slots were rewritten.
pub fn redirect_from(targets: &[(&CStr, usize)], winner: usize) -> usize {
    patch_where(targets, &|m: &Module| {
        let n = m.name.as_bytes();
        let base = n.rsplit(|&b| b == b'/').next().unwrap_or(n);
        m.is_me
            || m.dynamic == 0
            || (m.base == winner && !n.is_empty())
            || base.starts_with(b"ld-linux")
            || base.starts_with(b"linux-vdso")
    })
}

fn patch_where(targets: &[(&CStr, usize)], skip: &dyn Fn(&Module) -> bool) -> usize {
    let Ok(mut saved) = SAVED.lock() else {
        return 0;
    };
    let mut n = 0;
    for m in modules() {
        if skip(&m) || !loaded(&m) {
            continue;
        }
        for (slot, to) in slots(&m, targets) {
            if saved.iter().any(|s| s.slot == slot) {
                continue;
            }
            // SAFETY: an aligned GOT slot of a loaded module.
            let original = unsafe { core::ptr::read_volatile(slot as *const usize) };
            if original == to {
                continue;
            }
            if write_slot(slot, to, m.relro) {
                saved.push(Saved { slot, original });
                n += 1;
            }
        }
    }
    n
}

/// Puts every rewritten slot back (of modules still loaded); returns how
/// many.
pub fn restore() -> usize {
    let Ok(mut saved) = SAVED.lock() else {
        return 0;
    };
    let mods = modules();
    let mut n = 0;
    for s in saved.drain(..) {
        // A module unloaded since: its slot is gone with it.
        let Some(m) = mods.iter().find(|m| {
            m.relro.is_some_and(|(a, e)| s.slot >= a && s.slot < e) || contains(m, s.slot)
        }) else {
            continue;
        };
        if write_slot(s.slot, s.original, m.relro) {
            n += 1;
        }
    }
    n
}

/// Does a writable segment of `m` hold `addr`? (Read from its program
/// headers again: the module is loaded.)
fn contains(m: &Module, addr: usize) -> bool {
    use crate::hot::elf;
    let mut hit = false;
    elf::each_loaded(|info, _| {
        if info.dlpi_addr as usize == m.base {
            hit = elf::load_segment_holding(info, addr).is_some();
            return true;
        }
        false
    });
    hit
}
