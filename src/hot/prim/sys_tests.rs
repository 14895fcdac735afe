use super::*;

/// A pipe whose reader is closed: (write end).
fn dead_pipe() -> i32 {
    let mut fds = [0i32; 2];
    // SAFETY: a valid out-array of two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: our own descriptor.
    unsafe { libc::close(fds[0]) };
    fds[1]
}

const PIPE: u64 = 1u64 << (libc::SIGPIPE - 1);

/// On a thread of its own: a write into a dead pipe leaves no SIGPIPE
/// pending (the harness ignores SIGPIPE, but a blocked signal is queued
/// all the same) and the mask as it was; a SIGPIPE the thread had
/// pending before stays pending.
#[test]
fn quiet_writes_raise_no_sigpipe_and_keep_one_pending_before() {
    std::thread::spawn(|| {
        let fd = dead_pipe();
        let mask = current_mask();
        assert!(!write_all(fd, b"x"));
        assert_eq!(current_mask(), mask);
        assert_eq!(sigpending() & PIPE, 0);
        assert_eq!(thread_pending().map(|p| p & PIPE), Some(0));
        // The program blocks SIGPIPE and has one of its own pending
        // on this thread (its own write): ours merges, theirs stays.
        sigmask(libc::SIG_BLOCK, Some(PIPE), None);
        // SAFETY: a valid buffer; our own descriptor.
        assert!(unsafe { libc::write(fd, b"y".as_ptr().cast(), 1) } < 0);
        assert_eq!(thread_pending().map(|p| p & PIPE), Some(PIPE));
        assert!(!write_all(fd, b"x"));
        assert_eq!(thread_pending().map(|p| p & PIPE), Some(PIPE));
        // SAFETY: zeroed siginfo is a valid out-buffer.
        let mut info: libc::siginfo_t = unsafe { core::mem::zeroed() };
        assert_eq!(sigtimedwait(PIPE, &mut info, Some(0)), libc::SIGPIPE);
        assert_eq!(sigtimedwait(PIPE, &mut info, Some(0)), -libc::EAGAIN);
        sigmask(libc::SIG_UNBLOCK, Some(PIPE), None);
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
    })
    .join()
    .unwrap();
}

#[test]
fn parse_hex_reads_a_status_mask() {
    assert_eq!(parse_hex(b"\t0000000000001000"), Some(0x1000));
    assert_eq!(parse_hex(b" ffffffffffffffff "), Some(u64::MAX));
    assert_eq!(parse_hex(b""), None);
    assert_eq!(parse_hex(b"12x"), None);
}

#[test]
fn push_dec_writes_decimal() {
    for v in [0u64, 7, 10, 99, 4_294_967_295, u64::MAX] {
        let mut b = StackBuf::<32>::new();
        b.push_dec(v);
        assert_eq!(b.as_bytes(), v.to_string().as_bytes());
    }
}

/// The list entry holding the page of `p`, if any.
fn listed(l: &List, p: *mut u8) -> Option<(usize, usize, Owner)> {
    let page = p as usize >> 12;
    (0..l.len())
        .map(|i| l.slot(i).load(Relaxed))
        .filter(|&w| w != 0)
        .map(unpack)
        .find(|&(q, n, _)| page >= q && page < q + n)
}

/// A list of its own for a test (the process's is shared by every
/// test thread): leaked, 128 KiB.
fn fresh_list() -> List<'static> {
    List {
        first: Box::leak(Box::new([const { AtomicU64::new(0) }; FIRST])),
        more: Box::leak(Box::new([const { AtomicU64::new(0) }; SLOTS - FIRST])),
        hint: Box::leak(Box::new(AtomicUsize::new(0))),
        top: Box::leak(Box::new(AtomicUsize::new(0))),
        taken: Box::leak(Box::new(AtomicUsize::new(0))),
        unlisted: Box::leak(Box::new([const { AtomicUsize::new(0) }; 2])),
    }
}

/// A mapping is listed with its owner while it is mapped, shrinks when
/// unmapped in parts and leaves when unmapped; only touched pages
/// count as resident; a full list counts a mapping by its length.
#[test]
fn own_mappings_are_listed_until_unmapped() {
    let l = fresh_list();
    let t = map_anon(16 << 12, 0, Owner::Tables);
    let h = map_anon(4 << 12, 0, Owner::Heap);
    assert!(!t.is_null() && !h.is_null());
    l.add(t as usize, 16 << 12, Owner::Tables);
    l.add(h as usize, 4 << 12, Owner::Heap);
    assert_eq!(listed(&l, t), Some((t as usize >> 12, 16, Owner::Tables)));
    assert_eq!(listed(&l, h), Some((h as usize >> 12, 4, Owner::Heap)));
    // Three pages touched of sixteen, one of four.
    for i in [0, 5, 15] {
        // SAFETY: inside the mapping.
        unsafe { *t.add(i << 12) = 1 };
    }
    // SAFETY: inside the mapping.
    unsafe { *h = 1 };
    // A small page vector: counted in steps.
    assert_eq!(l.resident(&mut [0u8; 3]), (3 << 12, 1 << 12));
    // The last four pages, then the first two.
    l.remove(t as usize + (12 << 12), 4 << 12);
    l.remove(t as usize, 2 << 12);
    // SAFETY: pointer arithmetic inside the mapping.
    let rest = unsafe { t.add(2 << 12) };
    assert_eq!(
        listed(&l, rest),
        Some((rest as usize >> 12, 10, Owner::Tables))
    );
    assert_eq!(listed(&l, t), None);
    assert_eq!(l.resident(&mut [0u8; 64]), (1 << 12, 1 << 12));
    l.remove(rest as usize, 10 << 12);
    l.remove(h as usize, 4 << 12);
    assert_eq!(listed(&l, rest), None);
    assert_eq!(listed(&l, h), None);
    assert_eq!(l.resident(&mut [0u8; 64]), (0, 0));
    // Full: counted by length, and taken out again by length.
    // (Filled with made-up one-page mappings; full, a new mapping is
    // counted without a search.)
    for i in 0..l.len() {
        l.add((i + 1) << 12, 1 << 12, Owner::Tables);
    }
    assert_eq!(l.taken.load(Relaxed), l.len());
    assert_eq!(l.unlisted[0].load(Relaxed), 0);
    l.add(h as usize, 4 << 12, Owner::Heap);
    assert_eq!(l.unlisted[1].load(Relaxed), 4 << 12);
    for i in 0..l.len() {
        l.remove((i + 1) << 12, 1 << 12);
    }
    assert_eq!(l.taken.load(Relaxed), 0);
    l.remove(h as usize, 4 << 12);
    assert_eq!(l.unlisted[1].load(Relaxed), 0);
    // SAFETY: our mappings, unused now.
    unsafe {
        libc::munmap(t.cast(), 16 << 12);
        libc::munmap(h.cast(), 4 << 12);
    }
}

/// `map` and `unmap` keep the process's list (`OWN`) up to date.
#[test]
fn map_and_unmap_list_and_unlist() {
    let t = map(3 << 12);
    assert!(!t.is_null());
    let found = listed(&own(), t);
    let counted = own().unlisted[0].load(Relaxed) >= 3 << 12;
    assert!(
        found == Some((t as usize >> 12, 3, Owner::Tables)) || counted,
        "{found:?}"
    );
    // SAFETY: ours, unused. (Whether it left the list is not checked
    // here: another test's thread may map the same pages at once; the
    // removal itself is tested above.)
    unsafe { unmap(t, 3 << 12) };
}

#[test]
fn list_entries_pack_page_length_and_owner() {
    let w = pack(0x0007_ffff_ffff, (1 << LEN_BITS) - 1, Owner::Heap).unwrap();
    assert_eq!(
        unpack(w),
        (0x0007_ffff_ffff, (1 << LEN_BITS) - 1, Owner::Heap)
    );
    assert_eq!(
        unpack(pack(1, 1, Owner::Tables).unwrap()),
        (1, 1, Owner::Tables)
    );
    // Too long, too high, or empty: counted apart, never mis-listed.
    assert_eq!(pack(1, 1 << LEN_BITS, Owner::Tables), None);
    assert_eq!(pack(1 << PAGE_BITS, 1, Owner::Tables), None);
    assert_eq!(pack(0, 1, Owner::Tables), None);
    assert_eq!(pack(1, 0, Owner::Tables), None);
}
