//! A module's `.debug_info` holding only the compilation units that the
//! addresses being symbolized fall in (the rest hidden), in memory that
//! costs only what it holds.
//!
//! addr2line's `Context` parses every unit of `.debug_info` up front and
//! keeps it: its abbreviations and its line program header. For libc's
//! 2,063 units that is 20 MiB (15 of them abbreviations) on top of the
//! 5.5 MiB of decompressed `.debug_info`, all to answer a few dozen
//! addresses. Here the section is decompressed (or copied) in steps into an
//! anonymous mapping at its own offsets; each unit, once complete, is kept
//! when one of the addresses may fall in it, else hidden: a run of hidden
//! units becomes one unit whose header names an abbreviation table past
//! the end of `.debug_abbrev`, which addr2line skips (as it skips any unit
//! it cannot parse), and the pages inside the run are given back at once
//! (`MADV_DONTNEED`). Only the kept units, the pages holding the runs'
//! headers and one step's window are ever resident. A unit is classified
//! from its root DIE alone (not `gimli::Dwarf::unit`, which parses the line
//! program), read with its own abbreviation declaration alone (not the
//! unit's whole table: [`root_abbreviations`]), so `.debug_line` is read
//! afterwards, the same way, keeping
//! only the kept units' line programs ([`build_lines`]).
//!
//! Answers stay the same as with the whole section: for an address,
//! addr2line reads only the units whose ranges contain it and the units
//! their DIEs refer to. A unit is kept when its `DW_AT_ranges` or
//! `DW_AT_low_pc`/`DW_AT_high_pc`, or a `.debug_aranges` set for it, cover
//! an address, when it has no address ranges at all (addr2line then uses
//! its line program), when its root DIE or ranges cannot be read here
//! (addr2line then skips it or fails, as with the whole section), and
//! partial units are always kept. Cross-unit references
//! (`DW_FORM_ref_addr`, `DW_FORM_indirect`) in a kept unit's abbreviations
//! give up: the caller loads the whole section instead.

use std::collections::HashSet;
use std::io::Read;
use std::sync::Arc;

use gimli::{Reader, Section};

use super::debug_files::Slice;
use crate::hot::sys;

const PAGE: usize = 4096;
/// Bytes decompressed per step.
const STEP: usize = 256 << 10;
/// A hidden run's header: unit_length (4), version 4 (2),
/// debug_abbrev_offset (4), address_size (1).
const FAKE_HEADER: usize = 11;
/// The longest run one 32-bit header may span.
const MAX_RUN: usize = 0xffff_0000;

/// An anonymous mapping holding a sparse `.debug_info`; unmapped on drop.
pub(super) struct SparseInfo {
    ptr: *mut u8,
    len: usize,
    /// Units kept and hidden, for tests and the bench notes.
    pub(super) kept: usize,
    pub(super) hidden: usize,
    /// Bytes of the section never read (decompressed): past the last unit
    /// that can be needed ([`last_needed`]).
    pub(super) unread: usize,
    /// `.debug_line` offsets of the kept units' line programs.
    pub(super) line_programs: Vec<usize>,
}

// SAFETY: the mapping is owned by this value alone; the raw pointer is
// only read through slices handed to the DWARF reader that this value
// outlives (see `debug_files::Dwarf`).
unsafe impl Send for SparseInfo {}

impl Drop for SparseInfo {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: our own mapping; the readers of it are gone (field
            // order in `Dwarf`).
            unsafe { sys::unmap(self.ptr, self.len) };
        }
    }
}

impl SparseInfo {
    /// The section's bytes (hidden runs read as zeros but for their
    /// headers).
    pub(super) fn bytes(&self) -> &'static [u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the mapping lives as long as this value; callers keep the
        // value alive while the slice is in use (see `debug_files::Dwarf`).
        unsafe { core::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// Builds the sparse section of `len` bytes read from `src`. `dwarf` has
/// every other section addr2line reads; `probes` are the addresses
/// (file-relative) to be symbolized, sorted. `step` is called after each
/// step (to give back the input's pages and to poll). `None`: the section
/// cannot be filtered safely (or reads short); load it whole instead.
pub(super) fn build(
    src: &mut dyn Read,
    len: usize,
    dwarf: &gimli::Dwarf<Slice>,
    probes: &[u64],
    step: &mut dyn FnMut(),
) -> Option<SparseInfo> {
    let endian = dwarf.debug_abbrev.reader().endian();
    if dwarf.debug_abbrev.reader().len() >= 0xffff_ffff {
        return None;
    }
    let (aranged, aranges_hit) = aranges(dwarf, probes)?;
    let stop_after = last_needed(dwarf, probes, &aranges_hit);
    if len == 0 {
        return Some(SparseInfo {
            ptr: core::ptr::null_mut(),
            len: 0,
            kept: 0,
            hidden: 0,
            unread: 0,
            line_programs: Vec::new(),
        });
    }
    // Virtual (untouched but for the kept units), yet counted against
    // RLIMIT_AS and RLIMIT_DATA: drawn on the dump's reserve if need be.
    let ptr = crate::hot::ownheap::map_heap(len);
    if ptr.is_null() {
        return None;
    }
    let mut out = SparseInfo {
        ptr,
        len,
        kept: 0,
        hidden: 0,
        unread: 0,
        line_programs: Vec::new(),
    };
    let mut filled = 0;
    let mut next = 0; // the first unit not classified yet
    let mut run: Option<(usize, usize)> = None; // hidden run [start, end)
    let mut discarded = 0; // pages below this are given back
    while next < len {
        if filled < len {
            let to = (filled + STEP).min(len);
            // SAFETY: `filled..to` is inside the mapping, and no slice of
            // it is alive (the ones below end with each iteration).
            let dst = unsafe { core::slice::from_raw_parts_mut(ptr.add(filled), to - filled) };
            let n = src.read(dst).ok()?;
            if n == 0 {
                return None; // short input
            }
            filled += n;
            step();
        }
        // Writes into the mapping (run headers, pages given back) wait until
        // the slice read below is gone.
        let mut closes: Vec<(usize, usize)> = Vec::new();
        let mut discards: Vec<(usize, usize)> = Vec::new();
        {
            // SAFETY: the bytes written so far; nothing writes to the
            // mapping while this slice lives.
            let data = unsafe { core::slice::from_raw_parts(ptr, filled) };
            let info = gimli::DebugInfo::from(gimli::EndianSlice::new(data, endian));
            loop {
                let header = match info.header_from_offset(gimli::DebugInfoOffset(next)) {
                    Ok(h) => h,
                    Err(_) if filled < len => break, // not complete yet
                    Err(_) => return None,           // as addr2line would fail
                };
                let end = next + header.length_including_self();
                let (kept, stmt_list) = keep(
                    dwarf,
                    &header,
                    probes,
                    &aranged,
                    &aranges_hit,
                    root_abbreviations,
                )?;
                if kept {
                    out.kept += 1;
                    out.line_programs.extend(stmt_list);
                    closes.extend(run.take());
                } else if end - next > MAX_RUN {
                    // One 32-bit header cannot span it (64-bit DWARF only).
                    return None;
                } else {
                    out.hidden += 1;
                    run = match run {
                        Some((s, _)) if end - s <= MAX_RUN => Some((s, end)),
                        Some(r) => {
                            closes.push(r);
                            Some((next, end))
                        }
                        None => Some((next, end)),
                    };
                    if let Some((s, e)) = run {
                        // Give back the run's pages as they complete (its
                        // header's page excepted).
                        let from = round_up(s + FAKE_HEADER).max(discarded);
                        let to = e & !(PAGE - 1);
                        if to > from {
                            discards.push((from, to));
                            discarded = to;
                        }
                    }
                }
                next = end;
                // Past the last unit `.debug_aranges` names for a probe:
                // the rest becomes one hidden run, never decompressed.
                let s = run.map_or(next, |(s, _)| s);
                if stop_after.is_some_and(|x| next > x)
                    && len - next >= FAKE_HEADER
                    && len - s <= MAX_RUN
                {
                    run = Some((s, len));
                    let from = round_up(s + FAKE_HEADER).max(discarded);
                    let to = round_up(filled).min(len) & !(PAGE - 1);
                    if to > from {
                        discards.push((from, to));
                        discarded = to;
                    }
                    out.unread = len - filled;
                    next = len;
                    break;
                }
                if next >= filled {
                    break;
                }
            }
        }
        for r in closes {
            close(&out, r, endian);
        }
        for (from, to) in discards {
            // SAFETY: pages of our mapping inside a hidden run (its header
            // page excluded), no slice of it alive: nothing will read them
            // but as zeros.
            unsafe { sys::discard(ptr.add(from), to - from) };
        }
    }
    if let Some(r) = run {
        close(&out, r, endian);
    }
    Some(out)
}

/// `.debug_line` of `len` bytes read from `src`, holding only the line
/// programs at `programs` (offsets, as the kept units name them): the
/// pages between them are given back as the section streams in, and the
/// stream is read no further than the end of the last of them (libc: a
/// dump's programs end, on average, well before the section does; the rest
/// was decompressed only to be given back). Only the kept units' line
/// programs are ever read (addr2line parses a unit's line program when it
/// parses the unit). `None` when the input reads short before the last
/// program's end.
pub(super) fn build_lines(
    src: &mut dyn Read,
    len: usize,
    programs: &[usize],
    endian: gimli::RunTimeEndian,
    step: &mut dyn FnMut(),
) -> Option<SparseInfo> {
    let mut starts: Vec<usize> = programs.iter().copied().filter(|&x| x < len).collect();
    starts.sort_unstable();
    starts.dedup();
    let out = SparseInfo {
        ptr: if len == 0 {
            core::ptr::null_mut()
        } else {
            crate::hot::ownheap::map_heap(len)
        },
        len,
        kept: starts.len(),
        hidden: 0,
        unread: 0,
        line_programs: Vec::new(),
    };
    if len != 0 && out.ptr.is_null() {
        return None;
    }
    let ptr = out.ptr;
    let (mut filled, mut next, mut done) = (0, 0, 0);
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let u32_at = |b: [u8; 4]| match endian {
        gimli::RunTimeEndian::Little => u32::from_le_bytes(b),
        gimli::RunTimeEndian::Big => u32::from_be_bytes(b),
    };
    let u64_at = |b: [u8; 8]| match endian {
        gimli::RunTimeEndian::Little => u64::from_le_bytes(b),
        gimli::RunTimeEndian::Big => u64::from_be_bytes(b),
    };
    // The end of the last program whose extent is known.
    let mut last_end = 0;
    while filled < len {
        if next == starts.len() && filled >= last_end {
            // Every program is in: the rest would only be given back (the
            // stream is not read on; its tail stays zeros, as the pages
            // given back read).
            break;
        }
        let to = (filled + STEP).min(len);
        // SAFETY: `filled..to` is inside the mapping; no slice of it is
        // alive.
        let dst = unsafe { core::slice::from_raw_parts_mut(ptr.add(filled), to - filled) };
        let n = src.read(dst).ok()?;
        if n == 0 {
            return None;
        }
        filled += n;
        step();
        {
            // SAFETY: the bytes written so far; nothing writes to the
            // mapping while this slice lives (it ends with this block).
            let data = unsafe { core::slice::from_raw_parts(ptr, filled) };
            // The extent of each program whose length field has arrived.
            while let Some(&x) = starts.get(next) {
                let end = match data.get(x..x + 4).map(|b| u32_at([b[0], b[1], b[2], b[3]])) {
                    None => break,
                    Some(0xffff_ffff) => match data.get(x + 4..x + 12) {
                        None => break,
                        Some(b) => {
                            let l = u64_at([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                            (x as u64 + 12).saturating_add(l)
                        }
                    },
                    Some(l) => x as u64 + 4 + u64::from(l),
                };
                let end = usize::try_from(end).unwrap_or(len).min(len);
                ranges.push((x, end));
                last_end = last_end.max(end);
                next += 1;
            }
        }
        // Give back the pages between programs, below the next program
        // whose extent is not known yet.
        let bound = starts.get(next).map_or(filled, |&x| x.min(filled));
        let mut cur = done;
        for &(s, e) in &ranges {
            if e <= cur {
                continue;
            }
            discard_between(ptr, cur, s.min(bound));
            cur = cur.max(e);
        }
        discard_between(ptr, cur, bound);
        done = done.max(bound);
    }
    Some(out)
}

/// Gives back the whole pages of `ptr[from..to]` (none when empty).
fn discard_between(ptr: *mut u8, from: usize, to: usize) {
    let (from, to) = (round_up(from), to & !(PAGE - 1));
    if to > from {
        // SAFETY: pages of our mapping that no kept program overlaps:
        // nothing reads them.
        unsafe { sys::discard(ptr.add(from), to - from) };
    }
}

fn round_up(n: usize) -> usize {
    (n + PAGE - 1) & !(PAGE - 1)
}

/// Writes the header of the hidden run `[s, e)`: one DWARF 4 unit spanning
/// it whose abbreviation table lies past the end of `.debug_abbrev`.
fn close(out: &SparseInfo, (s, e): (usize, usize), endian: gimli::RunTimeEndian) {
    let unit_length = (e - s - 4) as u32;
    let mut h = [0u8; FAKE_HEADER];
    let (l, v, a) = match endian {
        gimli::RunTimeEndian::Little => (
            unit_length.to_le_bytes(),
            4u16.to_le_bytes(),
            u32::MAX.to_le_bytes(),
        ),
        gimli::RunTimeEndian::Big => (
            unit_length.to_be_bytes(),
            4u16.to_be_bytes(),
            u32::MAX.to_be_bytes(),
        ),
    };
    h[..4].copy_from_slice(&l);
    h[4..6].copy_from_slice(&v);
    h[6..10].copy_from_slice(&a);
    h[10] = 8;
    // SAFETY: `s + FAKE_HEADER <= e <= len` (every unit header is at least
    // this long), inside our mapping; no slice of it is alive here.
    unsafe { core::ptr::copy_nonoverlapping(h.as_ptr(), out.ptr.add(s), FAKE_HEADER) };
}

/// Where a unit's root DIE finds its abbreviation: [`root_abbreviations`],
/// or (tests) the unit's whole table.
type AbbrevSource =
    fn(&gimli::Dwarf<Slice>, &gimli::UnitHeader<Slice>) -> Option<Arc<gimli::Abbreviations>>;

/// Whether addr2line may read the unit of `header` for one of `probes`,
/// and where its line program is, the root DIE read with the abbreviations
/// `abbrevs` gives. `None`: the unit refers to other units; filtering is
/// not safe.
fn keep(
    dwarf: &gimli::Dwarf<Slice>,
    header: &gimli::UnitHeader<Slice>,
    probes: &[u64],
    aranged: &HashSet<usize>,
    aranges_hit: &HashSet<usize>,
    abbrevs: AbbrevSource,
) -> Option<(bool, Option<usize>)> {
    let Some(offset) = header.debug_info_offset().map(|o| o.0) else {
        return Some((true, None));
    };
    let (kept, stmt_list) = match header.type_() {
        gimli::UnitType::Type { .. } | gimli::UnitType::SplitType { .. } => (false, None),
        // Kept: DIEs of other units may import it.
        gimli::UnitType::Partial => (true, root_unit(dwarf, header, abbrevs).and_then(|(_, s)| s)),
        _ => match root_unit(dwarf, header, abbrevs) {
            // Kept when unreadable here: addr2line reads (or skips) it
            // as it would with the whole section.
            None => (true, None),
            Some((unit, stmt_list)) => (
                aranges_hit.contains(&offset)
                    || ranges_hit(dwarf, &unit, probes, aranged.contains(&offset)),
                stmt_list,
            ),
        },
    };
    if kept && refers_across(dwarf, header.debug_abbrev_offset())? {
        return None;
    }
    Some((kept, stmt_list))
}

/// The unit of `header` as far as its ranges need (`gimli::Dwarf::unit`
/// without the line program, so `.debug_line` is not needed yet), and its
/// `DW_AT_stmt_list`. `None` when its root DIE cannot be read. The root
/// DIE is read with the abbreviations `abbrevs` gives; it reads no other.
fn root_unit(
    dwarf: &gimli::Dwarf<Slice>,
    header: &gimli::UnitHeader<Slice>,
    abbrevs: AbbrevSource,
) -> Option<(gimli::Unit<Slice>, Option<usize>)> {
    let encoding = header.encoding();
    let mut unit = gimli::Unit {
        header: *header,
        abbreviations: abbrevs(dwarf, header)?,
        name: None,
        comp_dir: None,
        low_pc: 0,
        str_offsets_base: gimli::DebugStrOffsetsBase::default_for_encoding_and_file(
            encoding,
            dwarf.file_type,
        ),
        addr_base: gimli::DebugAddrBase(0),
        loclists_base: gimli::DebugLocListsBase::default_for_encoding_and_file(
            encoding,
            dwarf.file_type,
        ),
        rnglists_base: gimli::DebugRngListsBase::default_for_encoding_and_file(
            encoding,
            dwarf.file_type,
        ),
        line_program: None,
        dwo_id: None,
    };
    let (mut stmt_list, mut low_pc) = (None, None);
    {
        let mut cursor = unit.header.entries(&unit.abbreviations);
        cursor.next_dfs().ok()?;
        let root = cursor.current()?;
        let (mut addr_base, mut rnglists_base) = (None, None);
        for attr in root.attrs() {
            match (attr.name(), attr.value()) {
                (gimli::DW_AT_stmt_list, gimli::AttributeValue::DebugLineRef(o)) => {
                    stmt_list = Some(o.0)
                }
                (
                    gimli::DW_AT_addr_base | gimli::DW_AT_GNU_addr_base,
                    gimli::AttributeValue::DebugAddrBase(b),
                ) => addr_base = Some(b),
                (
                    gimli::DW_AT_rnglists_base | gimli::DW_AT_GNU_ranges_base,
                    gimli::AttributeValue::DebugRngListsBase(b),
                ) => rnglists_base = Some(b),
                (gimli::DW_AT_low_pc, v) => low_pc = Some(v),
                _ => {}
            }
        }
        if let Some(b) = addr_base {
            unit.addr_base = b;
        }
        if let Some(b) = rnglists_base {
            unit.rnglists_base = b;
        }
    }
    if let Some(v) = low_pc
        && let Ok(Some(a)) = dwarf.attr_address(&unit, v)
    {
        unit.low_pc = a;
    }
    Some((unit, stmt_list))
}

/// The abbreviations a unit's root DIE needs: its declaration alone,
/// found by skipping the declarations before it in the unit's table
/// (GCC orders a table by use, so the root's, used once, comes late)
/// without parsing them, instead of gimli parsing the whole table
/// (libc: 2,174 tables, 960 KiB, allocating per declaration) for one
/// declaration each: that was a fifth of a dump's CPU. When the
/// declaration is not found this way (no such code before the table's
/// end, or bytes that do not read), the whole table, as before.
///
/// gimli parses the root's declaration as it would within the whole
/// table, so the root DIE reads the same attributes with the same forms:
/// the same ranges, `DW_AT_stmt_list` and bases, and the same keep/hide
/// decision (`sparse::tests`). Only a table that gimli would refuse for a
/// declaration other than the root's (a bad tag, a duplicate code) is now
/// classified where the whole table failed (the unit was kept, then the
/// whole section loaded): addr2line skips a unit whose table it cannot
/// parse, so hidden or kept it answers nothing, and the answers are the
/// same.
fn root_abbreviations(
    dwarf: &gimli::Dwarf<Slice>,
    header: &gimli::UnitHeader<Slice>,
) -> Option<Arc<gimli::Abbreviations>> {
    root_declaration(dwarf, header).or_else(|| whole_table(dwarf, header))
}

/// The unit's whole abbreviation table (what `gimli::Dwarf::unit` parses).
fn whole_table(
    dwarf: &gimli::Dwarf<Slice>,
    header: &gimli::UnitHeader<Slice>,
) -> Option<Arc<gimli::Abbreviations>> {
    dwarf.abbreviations(header).ok()
}

/// The declaration of the root DIE's code in the unit's table (and a
/// terminator), parsed by gimli. `None`: the code is 0 or not found, or
/// the bytes do not read.
fn root_declaration(
    dwarf: &gimli::Dwarf<Slice>,
    header: &gimli::UnitHeader<Slice>,
) -> Option<Arc<gimli::Abbreviations>> {
    let code = header
        .range_from(header.root_offset()..)
        .ok()?
        .read_uleb128()
        .ok()?;
    if code == 0 {
        return None;
    }
    let abbrev = dwarf.debug_abbrev.reader();
    let table = abbrev.slice().get(header.debug_abbrev_offset().0..)?;
    let (from, to) = find_declaration(table, code)?;
    let mut buf = Vec::with_capacity(to - from + 1);
    buf.extend_from_slice(&table[from..to]);
    buf.push(0);
    let abbrevs = gimli::DebugAbbrev::new(&buf[..], abbrev.endian())
        .abbreviations(gimli::DebugAbbrevOffset(0))
        .ok()?;
    Some(Arc::new(abbrevs))
}

/// Where the declaration of `code` lies in the abbreviation table `t`
/// (`[from, to)`), the declarations before it skipped as gimli reads
/// them: code, tag, children byte, then (name, form[, implicit_const
/// value]) pairs up to (0, 0). `None` at the table's end (code 0) or when
/// the bytes run out.
fn find_declaration(t: &[u8], code: u64) -> Option<(usize, usize)> {
    let mut i = 0;
    loop {
        let from = i;
        let c = uleb(t, &mut i)?;
        if c == 0 {
            return None;
        }
        skip_leb(t, &mut i)?; // tag
        i += 1; // children
        loop {
            let name = uleb(t, &mut i)?;
            let form = uleb(t, &mut i)?;
            if name == 0 && form == 0 {
                break;
            }
            if form == u64::from(gimli::DW_FORM_implicit_const.0) {
                skip_leb(t, &mut i)?;
            }
        }
        if c == code {
            return Some((from, i));
        }
    }
}

/// An unsigned LEB128 at `t[*i]` (bits past 64 dropped: only compared
/// with small values here).
#[inline]
fn uleb(t: &[u8], i: &mut usize) -> Option<u64> {
    let b = *t.get(*i)?;
    *i += 1;
    if b < 0x80 {
        return Some(u64::from(b));
    }
    let mut v = u64::from(b & 0x7f);
    let mut shift = 7;
    loop {
        let b = *t.get(*i)?;
        *i += 1;
        if shift < 64 {
            v |= u64::from(b & 0x7f) << shift;
        }
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
    }
}

/// Skips a LEB128 (signed or not) at `t[*i]`.
#[inline]
fn skip_leb(t: &[u8], i: &mut usize) -> Option<()> {
    loop {
        let b = *t.get(*i)?;
        *i += 1;
        if b < 0x80 {
            return Some(());
        }
    }
}

/// Does a range of the unit's root DIE cover a probe? True too when it has
/// no range at all (and no `.debug_aranges` set) or its ranges cannot be
/// read.
fn ranges_hit(
    dwarf: &gimli::Dwarf<Slice>,
    unit: &gimli::Unit<Slice>,
    probes: &[u64],
    aranged: bool,
) -> bool {
    let Ok(mut ranges) = dwarf.unit_ranges(unit) else {
        return true;
    };
    let mut any = aranged;
    loop {
        match ranges.next() {
            Ok(Some(r)) if r.begin < r.end => {
                any = true;
                let i = probes.partition_point(|&p| p < r.begin);
                if probes.get(i).is_some_and(|&p| p < r.end) {
                    return true;
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => return !any,
            Err(_) => return true,
        }
    }
}

/// Units named by `.debug_aranges` (offsets), and those of them with a set
/// covering a probe. `None` when the section's headers cannot be read
/// (addr2line fails then, with or without filtering).
fn aranges(
    dwarf: &gimli::Dwarf<Slice>,
    probes: &[u64],
) -> Option<(HashSet<usize>, HashSet<usize>)> {
    let mut named = HashSet::new();
    let mut hit = HashSet::new();
    let mut headers = dwarf.debug_aranges.headers();
    while let Some(h) = headers.next().ok()? {
        let unit = h.debug_info_offset().0;
        named.insert(unit);
        let mut entries = h.entries();
        while let Ok(Some(e)) = entries.next() {
            let r = e.range();
            let i = probes.partition_point(|&p| p < r.begin);
            if probes.get(i).is_some_and(|&p| p < r.end) {
                hit.insert(unit);
            }
        }
    }
    Some((named, hit))
}

/// The offset of the last unit that can answer a probe, when
/// `.debug_aranges` names a unit for every probe (`hit`: those units):
/// the units after it need not be read at all. addr2line finds a probe's
/// units by their ranges; another unit that could answer a probe already
/// covered by a named unit would be a second compilation unit claiming the
/// same code. `None` (read every unit) when a probe is in no set: it may
/// be in a unit `.debug_aranges` does not name (clang emits no such
/// section by default) or whose ranges say more than its set.
fn last_needed(dwarf: &gimli::Dwarf<Slice>, probes: &[u64], hit: &HashSet<usize>) -> Option<usize> {
    if probes.is_empty() {
        return None;
    }
    let mut covered = vec![false; probes.len()];
    let mut headers = dwarf.debug_aranges.headers();
    while let Some(h) = headers.next().ok()? {
        let mut entries = h.entries();
        while let Ok(Some(e)) = entries.next() {
            let r = e.range();
            let i = probes.partition_point(|&p| p < r.begin);
            for (c, _) in covered[i..]
                .iter_mut()
                .zip(&probes[i..])
                .take_while(|(_, p)| **p < r.end)
            {
                *c = true;
            }
        }
    }
    if covered.iter().all(|&c| c) {
        hit.iter().copied().max()
    } else {
        None
    }
}

/// Does the abbreviation table at `offset` use a form that refers to
/// another unit of `.debug_info` (or whose form is only known per DIE)?
/// `None` also when the table cannot be read.
fn refers_across(dwarf: &gimli::Dwarf<Slice>, offset: gimli::DebugAbbrevOffset) -> Option<bool> {
    let mut r = *dwarf.debug_abbrev.reader();
    r.skip(offset.0).ok()?;
    loop {
        let code = r.read_uleb128().ok()?;
        if code == 0 {
            return Some(false);
        }
        r.read_uleb128().ok()?; // tag
        r.read_u8().ok()?; // children
        loop {
            let name = r.read_uleb128().ok()?;
            let form = r.read_uleb128().ok()?;
            if name == 0 && form == 0 {
                break;
            }
            let form = gimli::DwForm(form as u16);
            if form == gimli::DW_FORM_ref_addr || form == gimli::DW_FORM_indirect {
                return Some(true);
            }
            if form == gimli::DW_FORM_implicit_const {
                r.read_sleb128().ok()?;
            }
        }
    }
}

/// A `Read` over a section's bytes in a file mapping that gives back the
/// mapping's pages it has read past (they read again from the file if
/// touched later).
pub(super) struct Consumed<'a> {
    data: &'a [u8],
    pos: core::cell::Cell<usize>,
}

impl<'a> Consumed<'a> {
    pub(super) fn new(data: &'a [u8]) -> Self {
        Consumed {
            data,
            pos: core::cell::Cell::new(0),
        }
    }

    /// The bytes not read yet.
    pub(super) fn rest(&self) -> &'a [u8] {
        &self.data[self.pos.get()..]
    }

    /// Marks `n` more bytes read (at most the rest).
    pub(super) fn advance(&self, n: usize) {
        self.pos.set((self.pos.get() + n).min(self.data.len()));
    }

    /// Drops the resident pages of `data[..pos]` (whole pages only).
    pub(super) fn give_back(&self) {
        let start = self.data.as_ptr() as usize;
        let from = round_up(start);
        let to = (start + self.pos.get()) & !(PAGE - 1);
        if to > from {
            drop_file_pages(from, to - from);
        }
    }
}

impl Read for &Consumed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let pos = self.pos.get();
        let n = buf.len().min(self.data.len() - pos);
        buf[..n].copy_from_slice(&self.data[pos..pos + n]);
        self.pos.set(pos + n);
        Ok(n)
    }
}

/// `MADV_DONTNEED` on pages of a private, read-only file mapping: they
/// stop counting in the process's RSS and are read again from the file (the
/// page cache) if touched.
pub(super) fn drop_file_pages(addr: usize, len: usize) {
    let saved = sys::errno();
    // SAFETY: whole pages of a read-only private file mapping of ours;
    // DONTNEED only drops them from our page tables (no data is lost: the
    // file holds it).
    unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) };
    sys::set_errno(saved);
}

#[cfg(test)]
#[path = "sparse_tests.rs"]
mod tests;
