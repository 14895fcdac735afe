use super::*;
use crate::symbolize::debug_files::build_id_path;
use crate::symbolize::modules;
use object::{Object, ObjectSection};
use std::path::Path;

fn leak(v: Vec<u8>) -> &'static [u8] {
    Box::leak(v.into_boxed_slice())
}

fn slice(d: &'static [u8]) -> Slice {
    gimli::EndianSlice::new(d, gimli::RunTimeEndian::Little)
}

/// libc's debug file (libc6-dbg), every section decompressed whole.
fn libc_dwarf() -> (gimli::Dwarf<Slice>, modules::Module) {
    modules::refresh();
    let m = modules::find(libc::malloc as *const () as u64).unwrap();
    let path = build_id_path(Path::new("/usr/lib/debug"), &m.build_id).unwrap();
    let file = leak(std::fs::read(&path).expect("libc6-dbg"));
    let obj = object::File::parse(file).unwrap();
    let dwarf = gimli::Dwarf::load(|id| {
        let d = obj
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or_default();
        Ok::<_, ()>(slice(leak(d.into_owned())))
    })
    .unwrap();
    (dwarf, m)
}

/// What the classification reads of a unit's root DIE.
type RootFacts = (Option<usize>, u64, usize, usize, Vec<(u64, u64)>);

fn facts(
    dwarf: &gimli::Dwarf<Slice>,
    header: &gimli::UnitHeader<Slice>,
    abbrevs: AbbrevSource,
) -> Option<RootFacts> {
    let (unit, stmt_list) = root_unit(dwarf, header, abbrevs)?;
    let mut ranges = Vec::new();
    let mut iter = dwarf.unit_ranges(&unit).ok()?;
    while let Ok(Some(r)) = iter.next() {
        ranges.push((r.begin, r.end));
    }
    Some((
        stmt_list,
        unit.low_pc,
        unit.addr_base.0,
        unit.rnglists_base.0,
        ranges,
    ))
}

/// Every unit of libc's debug file: its root DIE read through its
/// declaration alone gives what the whole table gives (ranges,
/// `DW_AT_stmt_list`, bases), and every keep/hide decision is the same,
/// for no address, one, and 2,000 spread over libc's code.
#[test]
fn root_declaration_classifies_every_libc_unit_as_the_whole_table() {
    let (dwarf, m) = libc_dwarf();
    let one = vec![libc::malloc as *const () as u64 - m.bias + 1];
    let mut spread: Vec<u64> = Vec::new();
    for &(start, end, _) in &m.ranges {
        spread.extend((0..2000u64).map(|i| start + (end - start) * i / 2000 - m.bias));
    }
    spread.sort_unstable();
    let probe_sets = [vec![], one, spread];
    let classified: Vec<_> = probe_sets
        .iter()
        .map(|p| (p, aranges(&dwarf, p).unwrap()))
        .collect();
    let (mut units, mut late, mut with_ranges) = (0, 0, 0);
    let mut kept = [0usize; 3];
    let mut headers = dwarf.units();
    while let Some(header) = headers.next().unwrap() {
        units += 1;
        // The shortcut itself finds every root declaration, most of
        // them after others (GCC orders tables by use).
        assert!(root_declaration(&dwarf, &header).is_some());
        let code = header
            .range_from(header.root_offset()..)
            .unwrap()
            .read_uleb128()
            .unwrap();
        let table = &dwarf.debug_abbrev.reader().slice()[header.debug_abbrev_offset().0..];
        let (from, _) = find_declaration(table, code).unwrap();
        if from > 0 {
            late += 1;
        }
        let whole = facts(&dwarf, &header, whole_table);
        let short = facts(&dwarf, &header, root_abbreviations);
        assert!(whole.is_some(), "unit at {:?}", header.offset());
        assert_eq!(short, whole, "unit at {:?}", header.offset());
        if whole.is_some_and(|f| !f.4.is_empty()) {
            with_ranges += 1;
        }
        for (i, (probes, (named, hit))) in classified.iter().enumerate() {
            let a = keep(&dwarf, &header, probes, named, hit, whole_table);
            let b = keep(&dwarf, &header, probes, named, hit, root_abbreviations);
            assert_eq!(a, b, "unit at {:?}", header.offset());
            if a.is_some_and(|k| k.0) {
                kept[i] += 1;
            }
        }
    }
    assert!(units > 2000, "{units} units");
    assert!(late * 2 > units, "{late} of {units} roots after others");
    assert!(with_ranges * 2 > units, "{with_ranges} with ranges");
    // The decisions compared are real ones: few units for one address,
    // more for 2,000, and not all.
    assert!(kept[1] < kept[2] && kept[2] < units, "{kept:?} of {units}");
}

/// A hand-made unit whose root DIE's declaration (code 3) comes after
/// declarations with an implicit constant, a two-byte attribute name
/// and a two-byte constant, in a table that does not start the
/// section: the root reads its own attributes, as with the whole table.
#[test]
fn root_declaration_skips_the_declarations_before_it() {
    let mut abbrev = vec![1, 0x24, 0, 0, 0, 0]; // another unit's table
    let table_at = abbrev.len();
    abbrev.extend([1, 0x24, 0, 0x0b, 0x21, 0xb8, 0x7e, 0x03, 0x08, 0, 0]);
    abbrev.extend([2, 0x2e, 1, 0x97, 0x42, 0x19, 0x11, 0x01, 0, 0]);
    let root_at = abbrev.len() - table_at;
    abbrev.extend([3, 0x11, 1, 0x11, 0x01, 0x12, 0x07, 0x10, 0x17, 0, 0]);
    let root_end = abbrev.len() - table_at;
    abbrev.extend([4, 0x34, 0, 0x03, 0x08, 0, 0, 0]);
    let unit = |abbrev_offset: u32, root_code: u8| {
        let mut die = vec![root_code];
        die.extend(0x1000u64.to_le_bytes()); // DW_AT_low_pc
        die.extend(0x200u64.to_le_bytes()); // DW_AT_high_pc (length)
        die.extend(0x40u32.to_le_bytes()); // DW_AT_stmt_list
        die.extend([4, b'x', 0, 0]); // a child, then the children's end
        let mut u = ((die.len() + 7) as u32).to_le_bytes().to_vec();
        u.extend(4u16.to_le_bytes());
        u.extend(abbrev_offset.to_le_bytes());
        u.push(8);
        u.extend(die);
        u
    };
    let dwarf_of = |abbrev: &[u8], info: Vec<u8>| {
        let (abbrev, info) = (leak(abbrev.to_vec()), leak(info));
        gimli::Dwarf::load(|id| {
            Ok::<_, ()>(slice(match id {
                gimli::SectionId::DebugAbbrev => abbrev,
                gimli::SectionId::DebugInfo => info,
                _ => &[],
            }))
        })
        .unwrap()
    };
    let header_of = |d: &gimli::Dwarf<Slice>| d.units().next().unwrap().unwrap();

    let table = &abbrev[table_at..];
    assert_eq!(find_declaration(table, 3), Some((root_at, root_end)));
    assert_eq!(find_declaration(table, 5), None);

    let d = dwarf_of(&abbrev, unit(table_at as u32, 3));
    let h = header_of(&d);
    let expected = Some((Some(0x40), 0x1000, 0, 0, vec![(0x1000, 0x1200)]));
    assert!(root_declaration(&d, &h).is_some());
    assert_eq!(facts(&d, &h, root_abbreviations), expected);
    assert_eq!(facts(&d, &h, whole_table), expected);
    let none = HashSet::new();
    let keep_for = |p: &[u64]| keep(&d, &h, p, &none, &none, root_abbreviations);
    assert_eq!(keep_for(&[0x1100]), Some((true, Some(0x40))));
    assert_eq!(keep_for(&[0x1200, 0x3000]), Some((false, Some(0x40))));
    assert_eq!(keep_for(&[]), Some((false, Some(0x40))));

    // A root code the table lacks: the whole table is parsed (and the
    // root DIE does not read: kept).
    let d = dwarf_of(&abbrev, unit(table_at as u32, 5));
    let h = header_of(&d);
    assert!(root_declaration(&d, &h).is_none());
    assert_eq!(facts(&d, &h, root_abbreviations), None);
    assert_eq!(
        keep(&d, &h, &[0x3000], &none, &none, root_abbreviations),
        Some((true, None))
    );

    // A declaration gimli refuses (tag 0) before the root's: the whole
    // table fails (the unit was kept, and addr2line skips it); the
    // root's declaration alone still reads, so the unit is classified.
    let mut broken = abbrev.clone();
    broken[table_at + 1] = 0;
    let d = dwarf_of(&broken, unit(table_at as u32, 3));
    let h = header_of(&d);
    assert!(whole_table(&d, &h).is_none());
    assert_eq!(facts(&d, &h, root_abbreviations), expected);
}

/// A `Read` over bytes that counts what was read.
struct Counting<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Read for Counting<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// `.debug_line` keeps the programs asked for, byte for byte, and the
/// stream is read no further than the step holding the last one's end.
#[test]
fn line_programs_read_no_further_than_the_last() {
    let len = 8 * STEP + 100;
    let mut sec: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
    // A 32-bit program at 1000 (5,000 bytes after its length field) and
    // a 64-bit one across the second step's end.
    sec[1000..1004].copy_from_slice(&5000u32.to_le_bytes());
    let far = 2 * STEP - 20;
    sec[far..far + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    sec[far + 4..far + 12].copy_from_slice(&70_000u64.to_le_bytes());
    let near_end = len - 50;
    sec[near_end..near_end + 4].copy_from_slice(&10u32.to_le_bytes());
    let run = |programs: &[usize]| {
        let mut src = Counting { data: &sec, pos: 0 };
        let mut steps = 0;
        let out = build_lines(
            &mut src,
            len,
            programs,
            gimli::RunTimeEndian::Little,
            &mut || steps += 1,
        )
        .unwrap();
        (out, src.pos, steps)
    };

    let (out, read, steps) = run(&[far, 1000, far, len + 5]);
    assert_eq!(out.bytes().len(), len);
    assert!(
        out.bytes()[1000..6004] == sec[1000..6004],
        "bytes 1000..6004 differ"
    );
    assert!(
        out.bytes()[far..far + 70_012] == sec[far..far + 70_012],
        "bytes far..far + 70_012 differ"
    );
    assert_eq!(read, 3 * STEP, "read {read} of {len}");
    assert_eq!(steps, 3);

    // A program at the section's end: everything is read.
    let (out, read, _) = run(&[1000, near_end]);
    assert!(
        out.bytes()[near_end..near_end + 14] == sec[near_end..near_end + 14],
        "bytes near_end..near_end + 14 differ"
    );
    assert!(
        out.bytes()[1000..6004] == sec[1000..6004],
        "bytes 1000..6004 differ"
    );
    assert_eq!(read, len);

    // None: nothing is read.
    assert_eq!(run(&[]).1, 0);
}
