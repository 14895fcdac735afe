//! `hot::elf`'s unit tests: the hash, a dynamic section read from a table
//! built here, and lookups in the test process's own libc.

use super::*;

/// The GNU hash of the reference examples (the hash ld.so computes,
/// `dl_new_hash`).
#[test]
fn gnu_hash_is_the_loaders() {
    assert_eq!(gnu_hash(b""), 0x0000_1505);
    assert_eq!(gnu_hash(b"printf"), 0x156b_2bb8);
    assert_eq!(gnu_hash(b"exit"), 0x7c96_7e3f);
    assert_eq!(gnu_hash(b"syscall"), 0xbac2_12a0);
}

/// Addresses below the base are rebased (ld.so leaves them so only in the
/// vDSO), addresses above are taken as relocated, sizes stay sizes.
#[test]
fn dynamic_section_entries_are_read_and_rebased() {
    let base = 0x5555_0000_0000usize;
    let table = [
        Dyn { tag: 6, val: 0x300 }, // DT_SYMTAB, unrelocated
        Dyn {
            tag: 5,
            val: (base + 0x400) as u64,
        }, // DT_STRTAB, relocated
        Dyn {
            tag: 0x6fff_fef5,
            val: 0x500,
        }, // DT_GNU_HASH
        Dyn {
            tag: 23,
            val: 0x600,
        }, // DT_JMPREL
        Dyn { tag: 2, val: 0x48 },  // DT_PLTRELSZ
        Dyn { tag: 7, val: 0x700 }, // DT_RELA
        Dyn { tag: 8, val: 0x30 },  // DT_RELASZ
        Dyn {
            tag: 0x6fff_fff0,
            val: 0x800,
        }, // DT_VERSYM
        Dyn { tag: 0, val: 0 },     // DT_NULL
    ];
    // SAFETY: a table ending with DT_NULL.
    let o = unsafe { Object::new(base, table.as_ptr() as usize) };
    assert_eq!(o.symtab, base + 0x300);
    assert_eq!(o.strtab, base + 0x400);
    assert_eq!(o.gnu_hash, base + 0x500);
    assert_eq!((o.jmprel, o.pltrelsz), (base + 0x600, 0x48));
    assert_eq!((o.rela, o.relasz), (base + 0x700, 0x30));
    assert_eq!(o.versym, base + 0x800);
    // No dynamic section: nothing, and no lookup can say anything.
    // SAFETY: a null section is read as none.
    let none = unsafe { Object::new(base, 0) };
    assert_eq!((none.symtab, none.gnu_hash), (0, 0));
    // SAFETY: no table to read.
    assert!(!unsafe { with_hash(&none, gnu_hash(b"malloc"), |_| {}) });
    // SAFETY: as above.
    assert!(unsafe { lookup_in(none, b"malloc") } == Lookup::Unsure);
}

/// The test process's libc, as dl_iterate_phdr lists it.
fn libc_object() -> Object {
    let mut found: Option<Object> = None;
    each_loaded(|info, _| {
        if !name_of(info).to_bytes().ends_with(b"/libc.so.6") {
            return false;
        }
        // SAFETY: a loaded object's info.
        found = Some(unsafe { Object::of(info) });
        true
    });
    found.expect("the test process's libc")
}

/// The walk's helpers: the objects in load order, stopped when asked;
/// this test's own code in a load segment of the first object (the
/// executable); names.
#[test]
fn each_loaded_walks_the_objects_and_stops_when_asked() {
    let mut all = 0;
    assert!(!each_loaded(|_, _| {
        all += 1;
        false
    }));
    assert!(all >= 3, "the executable, libc, the loader: {all}");
    let mut seen = 0;
    assert!(each_loaded(|_, _| {
        seen += 1;
        seen == 2
    }));
    assert_eq!(seen, 2);
    let here = each_loaded_walks_the_objects_and_stops_when_asked as *const () as usize;
    let mut first = None;
    each_loaded(|info, _| {
        first = Some((
            load_segment_holding(info, here),
            name_of(info).to_bytes().is_empty(),
        ));
        true
    });
    let (seg, unnamed) = first.unwrap();
    let (start, end) = seg.expect("the executable holds this test's code");
    assert!(start <= here && here < end);
    assert!(unnamed, "the executable's name is empty");
}

/// A plain function of libc is found where dlsym finds it; a name libc
/// does not define is not found; a name under a non-default version only
/// is not taken as a function.
#[test]
fn lookups_in_libc_agree_with_dlsym() {
    let o = libc_object();
    assert!(o.gnu_hash != 0 && o.symtab != 0);
    for name in [&b"getpid"[..], b"sched_yield", b"dl_iterate_phdr"] {
        let mut c = name.to_vec();
        c.push(0);
        // SAFETY: a NUL-terminated name.
        let want = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c.as_ptr().cast()) } as usize;
        assert_ne!(want, 0);
        // SAFETY: the process's own libc, loaded and relocated.
        let got = unsafe { lookup_in(o, name) };
        assert!(
            got == Lookup::Function(want),
            "{}",
            String::from_utf8_lossy(name)
        );
    }
    // SAFETY: as above.
    let absent = unsafe { lookup_in(o, b"heaplive_no_such_function_here") };
    assert!(absent != Lookup::Function(0) && !matches!(absent, Lookup::Function(_)));
    // The resolver's question: could some loaded module export it?
    assert!(crate::hot::real::maybe_exported(b"getpid\0"));
}
