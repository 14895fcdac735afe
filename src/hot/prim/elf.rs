//! A loaded ELF object's dynamic section and its GNU hash table, read in
//! place (no allocation, no system call): the one ELF lookup of the
//! library. The resolver (`hot::real`: which module could export a name,
//! what `dlsym(RTLD_NEXT)` would find) and the allocator check
//! (`hot::winner`) look names up with it; attach (`background::attach`)
//! reads the relocation tables it lists. `each_loaded` is the one walk of
//! the loaded objects (`dl_iterate_phdr`) for everyone who needs one.

use core::ffi::{CStr, c_char};

/// Calls `f` with each loaded object (the loader's `dl_phdr_info`, and
/// that struct's size, which says which of its fields the loader filled),
/// in load order, until `f` returns true; whether one did. This is
/// `dl_iterate_phdr`: the loader's lock is held during the walk, nothing
/// is allocated, and the info is valid only during its call.
pub(crate) fn each_loaded<F: FnMut(&libc::dl_phdr_info, usize) -> bool>(mut f: F) -> bool {
    unsafe extern "C" fn visit<F: FnMut(&libc::dl_phdr_info, usize) -> bool>(
        info: *mut libc::dl_phdr_info,
        size: usize,
        data: *mut core::ffi::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid info for a loaded object, for
        // the call; `data` is the `F` of `each_loaded`, borrowed for the
        // walk.
        unsafe { (*data.cast::<F>())(&*info, size) as libc::c_int }
    }
    // SAFETY: `visit::<F>` is the trampoline of `f`'s own type.
    unsafe { libc::dl_iterate_phdr(Some(visit::<F>), (&mut f as *mut F).cast()) != 0 }
}

/// The program headers of a loaded object.
pub(crate) fn phdrs(info: &libc::dl_phdr_info) -> &[libc::Elf64_Phdr] {
    if info.dlpi_phdr.is_null() {
        return &[];
    }
    // SAFETY: the loader's info points at its object's `dlpi_phnum`
    // program headers, mapped while the object is loaded.
    unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) }
}

/// The `PT_LOAD` segment of a loaded object that holds `addr`: its [start,
/// end) (with its bss).
pub(crate) fn load_segment_holding(
    info: &libc::dl_phdr_info,
    addr: usize,
) -> Option<(usize, usize)> {
    let base = info.dlpi_addr as usize;
    phdrs(info)
        .iter()
        .filter(|ph| ph.p_type == libc::PT_LOAD)
        .map(|ph| {
            let start = base + ph.p_vaddr as usize;
            (start, start + ph.p_memsz as usize)
        })
        .find(|&(start, end)| addr >= start && addr < end)
}

/// A loaded object's name (empty for the main program and where the
/// loader has none).
pub(crate) fn name_of(info: &libc::dl_phdr_info) -> &CStr {
    if info.dlpi_name.is_null() {
        return c"";
    }
    // SAFETY: the loader's names are NUL-terminated, and live while the
    // object is loaded.
    unsafe { CStr::from_ptr(info.dlpi_name) }
}

/// `Elf64_Dyn` (elf.h).
#[repr(C)]
pub(crate) struct Dyn {
    tag: i64,
    val: u64,
}

/// A loaded object's dynamic symbol tables (addresses; 0 = none).
#[derive(Clone, Copy, Default)]
pub(crate) struct Object {
    pub(crate) base: usize,
    /// The dynamic section (0: the object has none).
    pub(crate) dynamic: usize,
    pub(crate) gnu_hash: usize,
    pub(crate) symtab: usize,
    pub(crate) strtab: usize,
    pub(crate) versym: usize,
    /// The PLT's relocations (`DT_JMPREL`) and their size in bytes.
    pub(crate) jmprel: usize,
    pub(crate) pltrelsz: usize,
    /// The other relocations with addends (`DT_RELA`) and their size.
    pub(crate) rela: usize,
    pub(crate) relasz: usize,
}

impl Object {
    /// From the object's load bias and dynamic section.
    ///
    /// # Safety
    /// `dynamic` is the dynamic section of a loaded object.
    pub(crate) unsafe fn new(base: usize, dynamic: usize) -> Object {
        const DT_PLTRELSZ: i64 = 2;
        const DT_STRTAB: i64 = 5;
        const DT_SYMTAB: i64 = 6;
        const DT_RELA: i64 = 7;
        const DT_RELASZ: i64 = 8;
        const DT_JMPREL: i64 = 23;
        const DT_GNU_HASH: i64 = 0x6fff_fef5;
        const DT_VERSYM: i64 = 0x6fff_fff0;
        let mut o = Object {
            base,
            dynamic,
            ..Object::default()
        };
        let mut d = dynamic as *const Dyn;
        if d.is_null() {
            return o;
        }
        // SAFETY: guaranteed by the caller: the section ends with DT_NULL.
        unsafe {
            while (*d).tag != 0 {
                // ld.so rebases the address entries in loaded objects
                // (not in the vDSO's, which are below its base); sizes
                // are sizes.
                let size = (*d).val as usize;
                let v = if size < base { size + base } else { size };
                match (*d).tag {
                    DT_GNU_HASH => o.gnu_hash = v,
                    DT_SYMTAB => o.symtab = v,
                    DT_STRTAB => o.strtab = v,
                    DT_VERSYM => o.versym = v,
                    DT_JMPREL => o.jmprel = v,
                    DT_RELA => o.rela = v,
                    DT_PLTRELSZ => o.pltrelsz = size,
                    DT_RELASZ => o.relasz = size,
                    _ => {}
                }
                d = d.add(1);
            }
        }
        o
    }

    /// The object `info` describes.
    ///
    /// # Safety
    /// `info` is what dl_iterate_phdr passes for a loaded object.
    pub(crate) unsafe fn of(info: &libc::dl_phdr_info) -> Object {
        let base = info.dlpi_addr as usize;
        // SAFETY: dlpi_phdr has dlpi_phnum entries.
        let dynamic = (0..info.dlpi_phnum as usize)
            .map(|i| unsafe { &*info.dlpi_phdr.add(i) })
            .find(|ph| ph.p_type == libc::PT_DYNAMIC)
            .map_or(0, |ph| base + ph.p_vaddr as usize);
        // SAFETY: the dynamic section of a loaded object, or none.
        unsafe { Object::new(base, dynamic) }
    }
}

/// Calls `each` with the index of every dynamic symbol of `o` whose GNU
/// hash is `h` (the bloom filter, then the chain of its bucket). False when
/// `o` has no usable GNU hash table: nothing can be said.
///
/// # Safety
/// `o` is a loaded object (its tables are mapped and relocated by ld.so).
pub(crate) unsafe fn with_hash(o: &Object, h: u32, mut each: impl FnMut(usize)) -> bool {
    let table = o.gnu_hash;
    if table == 0 {
        return false;
    }
    // SAFETY: guaranteed by the caller; every index below is bounded by
    // the table's own counts.
    unsafe {
        let nbuckets = *(table as *const u32);
        let symoffset = *((table + 4) as *const u32);
        let words = *((table + 8) as *const u32) as usize;
        let shift = *((table + 12) as *const u32);
        if nbuckets == 0 || words == 0 {
            return false;
        }
        let bloom = (table + 16) as *const u64;
        let word = *bloom.add((h as usize / 64) % words);
        let mask = (1u64 << (h % 64)) | (1u64 << ((h >> shift) % 64));
        if word & mask != mask {
            return true;
        }
        let buckets = bloom.add(words) as *const u32;
        let chain = buckets.add(nbuckets as usize);
        let mut i = *buckets.add((h % nbuckets) as usize);
        if i < symoffset {
            return true;
        }
        loop {
            let ch = *chain.add((i - symoffset) as usize);
            if ch | 1 == h | 1 {
                each(i as usize);
            }
            if ch & 1 != 0 {
                return true;
            }
            i += 1;
        }
    }
}

/// What a loaded object's GNU hash table says of a name.
#[derive(PartialEq, Debug)]
pub(crate) enum Lookup {
    /// Not defined there.
    Absent,
    /// A plain function of the default version at this address.
    Function(usize),
    /// Anything else (a name with the same hash, another version, an
    /// IFUNC, no GNU hash table...): dlsym decides.
    Unsure,
}

/// The GNU hash of `name` (without its NUL).
pub(crate) fn gnu_hash(name: &[u8]) -> u32 {
    name.iter()
        .fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(c as u32))
}

/// Looks `name` (without its NUL) up in the dynamic symbol table of the
/// loaded object `o`, as an unversioned dlsym would: defined, global or
/// weak, and the default version.
///
/// # Safety
/// `o` is a loaded object (its dynamic section and tables are mapped and
/// were relocated by ld.so).
pub(crate) unsafe fn lookup_in(o: Object, name: &[u8]) -> Lookup {
    if o.symtab == 0 || o.strtab == 0 {
        return Lookup::Unsure;
    }
    let mut found = Lookup::Absent;
    let mut twice = false;
    // SAFETY: guaranteed by the caller; `i` indexes the symbol table (the
    // hash table covers it) and the version table, when there is one.
    let known = unsafe {
        with_hash(&o, gnu_hash(name), |i| {
            let sym = &*(o.symtab as *const libc::Elf64_Sym).add(i);
            let sname = CStr::from_ptr((o.strtab + sym.st_name as usize) as *const c_char);
            if sname.to_bytes() != name {
                return;
            }
            let ty = sym.st_info & 0xf;
            let bind = sym.st_info >> 4;
            let ver = if o.versym == 0 {
                1
            } else {
                *(o.versym as *const u16).add(i)
            };
            // A hidden (non-default) version is skipped, as dlsym skips
            // it; anything unusual goes to dlsym.
            if ver & 0x8000 != 0 {
                return;
            }
            twice |= found != Lookup::Absent;
            found = if sym.st_shndx != 0
                && sym.st_value != 0
                && ty == 2 // STT_FUNC
                && (bind == 1 || bind == 2) // GLOBAL, WEAK
                && ver & 0x7fff != 0
            {
                Lookup::Function(o.base + sym.st_value as usize)
            } else {
                Lookup::Unsure
            };
        })
    };
    if !known || twice {
        return Lookup::Unsure;
    }
    found
}

#[cfg(test)]
#[path = "elf_tests.rs"]
mod tests;
