//! Finding and opening a module's debug info: the file itself, a build-id
//! file, a `.gnu_debuglink` (CRC checked), a dwz supplementary file.

use std::path::{Path, PathBuf};

use memmap2::Mmap;
use object::{Object, ObjectSection};

use super::SymConfig;
use super::sparse::{self, SparseInfo};
use super::zlib;

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An opened, parsed ELF file. `object::File` borrows the map, so callers
/// parse on demand with [`Mapped::parse`].
pub(super) struct Mapped {
    pub(super) path: PathBuf,
    map: Mmap,
}

/// A module's DWARF, ready for lookups: the addr2line context and the
/// memory it reads. Built from files mapped and closed at once, so no
/// descriptor of ours stays open while the (slow) parsing runs: a daemon
/// that closes every descriptor and opens its own files meanwhile must never
/// have one of them closed by us afterwards.
pub(super) struct Dwarf {
    // Field order is drop order: the context borrows the data below.
    ctx: addr2line::Context<Slice>,
    _owned: Vec<Box<[u8]>>,
    _sparse: Option<SparseInfo>,
    _sparse_lines: Option<SparseInfo>,
    _maps: Vec<Mmap>,
    /// `.debug_info` units kept and hidden (`sparse`); (0, 0) when the
    /// section was loaded whole. Read by tests.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) units: (usize, usize),
    /// Bytes of `.debug_info` never decompressed (`sparse`: past the last
    /// unit a probe needs). Read by tests.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) unread: usize,
}

const PAGE: usize = 4096;

pub(super) type Slice = gimli::EndianSlice<'static, gimli::RunTimeEndian>;

/// Sections addr2line never reads (its own `Context::from_sections` leaves
/// them empty): not decompressed.
fn unread(id: gimli::SectionId) -> bool {
    use gimli::SectionId::*;
    matches!(
        id,
        DebugLoc
            | DebugLocLists
            | DebugMacinfo
            | DebugMacro
            | DebugTypes
            | DebugNames
            | DebugCuIndex
            | DebugTuIndex
            | DebugFrame
            | EhFrame
            | EhFrameHdr
            | DebugPubNames
            | DebugPubTypes
    )
}

impl Dwarf {
    /// Loads the DWARF of `path` (and its dwz supplementary file `sup`).
    /// With `probes` (file-relative addresses, sorted), `.debug_info` keeps
    /// only the units that can answer them ([`super::sparse`]); without,
    /// every unit. `poll` is called between sections (each may take
    /// milliseconds to decompress).
    pub(super) fn load(
        path: &Path,
        sup: Option<&Path>,
        probes: Option<&[u64]>,
        opened: &mut usize,
        poll: &mut dyn FnMut(),
    ) -> Option<Dwarf> {
        if crate::hot::ownheap::low() {
            return None;
        }
        let main = Mapped::open(path, opened)?;
        let sup = match sup {
            Some(p) => Some(Mapped::open(p, opened)?),
            None => None,
        };
        let mut owned: Vec<Box<[u8]>> = Vec::new();
        let mut sparse = None;
        let mut sparse_lines = None;
        let ctx = {
            let obj = main.parse()?;
            let endian = if obj.is_little_endian() {
                gimli::RunTimeEndian::Little
            } else {
                gimli::RunTimeEndian::Big
            };
            let mut load = |o: &object::File<'_>,
                            id: gimli::SectionId,
                            skip: bool,
                            poll: &mut dyn FnMut()|
             -> Slice {
                poll();
                let data: &[u8] = match o.section_by_name(id.name()) {
                    // The kernel refused heaplive memory: the dump lives
                    // on its reserve (`hot::ownheap`) and reads no more.
                    _ if skip || unread(id) || crate::hot::ownheap::low() => &[],
                    Some(s) if !is_nobits(&s) => match uncompressed_data(&s) {
                        Some(std::borrow::Cow::Borrowed(b)) => b,
                        Some(std::borrow::Cow::Owned(v)) => {
                            // Decompressed: the compressed bytes' pages need
                            // not stay resident while the next loads.
                            if let Ok(raw) = s.data() {
                                let from = raw.as_ptr() as usize & !(PAGE - 1);
                                let to =
                                    (raw.as_ptr() as usize + raw.len() + PAGE - 1) & !(PAGE - 1);
                                sparse::drop_file_pages(from, to - from);
                            }
                            owned.push(v.into_boxed_slice());
                            owned.last().map(|b| &b[..]).unwrap_or(&[])
                        }
                        None => &[],
                    },
                    _ => &[],
                };
                // SAFETY: `data` points into a map or a box that this
                // `Dwarf` keeps (neither moves when its owner moves) and
                // drops only after `ctx`, which is the only reader.
                let data: &'static [u8] =
                    unsafe { core::slice::from_raw_parts(data.as_ptr(), data.len()) };
                gimli::EndianSlice::new(data, endian)
            };
            // `.debug_info` and `.debug_line` come last, when filtered.
            let filtered = probes.is_some();
            let mut dwarf = gimli::Dwarf::load(|id| {
                let skip = filtered
                    && matches!(
                        id,
                        gimli::SectionId::DebugInfo | gimli::SectionId::DebugLine
                    );
                Ok::<_, ()>(load(&obj, id, skip, poll))
            })
            .ok()?;
            if let Some(sup) = &sup {
                let sobj = sup.parse()?;
                dwarf
                    .load_sup(|id| Ok::<_, ()>(load(&sobj, id, false, poll)))
                    .ok()?;
            }
            if let Some(probes) = probes {
                poll();
                sparse = sparse_info(&obj, &dwarf, probes, poll);
                let info = match &sparse {
                    Some(s) => gimli::EndianSlice::new(s.bytes(), endian),
                    None => load(&obj, gimli::SectionId::DebugInfo, false, poll),
                };
                dwarf.debug_info = info.into();
                // The line programs of the kept units only, or all of them.
                sparse_lines = sparse
                    .as_ref()
                    .and_then(|s| sparse_line_programs(&obj, &s.line_programs, endian, poll));
                let line = match &sparse_lines {
                    Some(s) => gimli::EndianSlice::new(s.bytes(), endian),
                    None => load(&obj, gimli::SectionId::DebugLine, false, poll),
                };
                dwarf.debug_line = line.into();
            }
            poll();
            // Parsing every unit's header takes memory too: not once the
            // dump's reserve runs low (`hot::ownheap`).
            if crate::hot::ownheap::low() {
                return None;
            }
            let ctx = addr2line::Context::from_dwarf(dwarf).ok()?;
            // What the lookups need of the files' pages reads in again;
            // the rest (compressed sections, already decompressed) need
            // not stay resident.
            for m in std::iter::once(&main).chain(sup.as_ref()) {
                sparse::drop_file_pages(m.map.as_ptr() as usize, m.map.len());
            }
            ctx
        };
        let mut maps = vec![main.map];
        maps.extend(sup.map(|s| s.map));
        let units = sparse.as_ref().map_or((0, 0), |s| (s.kept, s.hidden));
        let unread = sparse.as_ref().map_or(0, |s| s.unread);
        Some(Dwarf {
            ctx,
            _owned: owned,
            _sparse: sparse,
            _sparse_lines: sparse_lines,
            _maps: maps,
            units,
            unread,
        })
    }

    /// The frames (innermost first) of `probe`, through inline calls.
    pub(super) fn find_frames(
        &self,
        probe: u64,
    ) -> Result<addr2line::FrameIter<'_, Slice>, gimli::Error> {
        self.ctx.find_frames(probe).skip_all_loads()
    }
}

/// `.debug_info` of `obj` with the units `probes` need ([`super::sparse`]),
/// decompressed (or copied) step by step, the input's pages given back as
/// they are read. `None`: load it whole.
fn sparse_info(
    obj: &object::File<'_>,
    dwarf: &gimli::Dwarf<Slice>,
    probes: &[u64],
    poll: &mut dyn FnMut(),
) -> Option<SparseInfo> {
    streamed(obj, ".debug_info", poll, &mut |src, len, step| {
        sparse::build(src, len, dwarf, probes, step)
    })
}

/// `.debug_line` of `obj` with the line programs at `programs` only.
fn sparse_line_programs(
    obj: &object::File<'_>,
    programs: &[usize],
    endian: gimli::RunTimeEndian,
    poll: &mut dyn FnMut(),
) -> Option<SparseInfo> {
    streamed(obj, ".debug_line", poll, &mut |src, len, step| {
        sparse::build_lines(src, len, programs, endian, step)
    })
}

type Build<'b> =
    dyn FnMut(&mut dyn std::io::Read, usize, &mut dyn FnMut()) -> Option<SparseInfo> + 'b;

/// Runs `build` over the section `name`'s bytes as a stream (decompressed
/// if need be), the input's pages given back as they are read.
fn streamed(
    obj: &object::File<'_>,
    name: &str,
    poll: &mut dyn FnMut(),
    build: &mut Build<'_>,
) -> Option<SparseInfo> {
    let section = obj.section_by_name(name)?;
    if is_nobits(&section) {
        return None;
    }
    let compressed = section.compressed_data().ok()?;
    let len = usize::try_from(compressed.uncompressed_size).ok()?;
    let input = sparse::Consumed::new(compressed.data);
    let mut step = || {
        input.give_back();
        poll();
    };
    match compressed.format {
        object::CompressionFormat::None => build(&mut &input, len, &mut step),
        object::CompressionFormat::Zlib => build(&mut zlib::Stream::new(&input), len, &mut step),
        object::CompressionFormat::Zstandard => {
            let mut r = ruzstd::decoding::StreamingDecoder::new(&input).ok()?;
            build(&mut r, len, &mut step)
        }
        _ => None,
    }
}

impl Mapped {
    /// Opens `path` only if it is a regular file (`format::regular`: a
    /// FIFO planted where a debug file is looked for, or at a module's
    /// path, never waits for a writer; links are followed, build-id trees
    /// are links).
    pub(super) fn open(path: &Path, opened: &mut usize) -> Option<Mapped> {
        let file = heaplive_format::regular::open_regular(path)?;
        // SAFETY: the map is read-only and private to this process; if the
        // file is truncated underneath us, reads fault (documented above).
        let map = unsafe { Mmap::map(&file) }.ok()?;
        *opened += 1;
        let m = Mapped {
            path: path.to_path_buf(),
            map,
        };
        m.parse()?;
        Some(m)
    }

    pub(super) fn parse(&self) -> Option<object::File<'_>> {
        object::File::parse(&*self.map).ok()
    }

    pub(super) fn has_dwarf(&self) -> bool {
        self.parse()
            .and_then(|o| {
                o.section_by_name(".debug_info")
                    .map(|s| s.size() > 0 && !is_nobits(&s))
            })
            .unwrap_or(false)
    }
}

/// A section's bytes, decompressed if need be (zlib by zlib-rs: see
/// [`zlib`]; zstd by `object`). `None`: corrupt.
fn uncompressed_data<'d>(s: &object::Section<'d, '_>) -> Option<std::borrow::Cow<'d, [u8]>> {
    let c = s.compressed_data().ok()?;
    match c.format {
        object::CompressionFormat::Zlib => {
            zlib::whole(c.data, c.uncompressed_size).map(std::borrow::Cow::Owned)
        }
        _ => c.decompress().ok(),
    }
}

pub(super) fn is_nobits(s: &object::Section<'_, '_>) -> bool {
    s.kind() == object::SectionKind::UninitializedData
}

/// Find separate debug info: build id first, then `.gnu_debuglink`.
pub(super) fn find_debug_file(
    binary_path: &Path,
    binary: Option<&Mapped>,
    build_id: &[u8],
    cfg: &SymConfig,
    opened: &mut usize,
) -> Option<Mapped> {
    for dir in &cfg.debug_dirs {
        let Some(p) = build_id_path(dir, build_id) else {
            break;
        };
        if let Some(m) = Mapped::open(&p, opened) {
            let id_ok = match m
                .parse()
                .and_then(|o| o.build_id().ok().flatten().map(<[u8]>::to_vec))
            {
                Some(id) => id == build_id,
                None => true,
            };
            if id_ok && m.has_dwarf() {
                return Some(m);
            }
        }
    }
    let (name, crc) = {
        let obj = binary?.parse()?;
        let (name, crc) = obj.gnu_debuglink().ok().flatten()?;
        (std::str::from_utf8(name).ok()?.to_owned(), crc)
    };
    for p in debuglink_candidates(binary_path, &name, &cfg.debug_dirs) {
        if p == binary_path {
            continue;
        }
        if let Some(m) = Mapped::open(&p, opened)
            && crc32(&m.map) == crc
            && m.has_dwarf()
        {
            return Some(m);
        }
    }
    None
}

/// The dwz supplementary file named by `.gnu_debugaltlink`, if it exists.
pub(super) fn find_sup_file(
    debug: &Mapped,
    cfg: &SymConfig,
    opened: &mut usize,
) -> Option<PathBuf> {
    let obj = debug.parse()?;
    let (name, id) = obj.gnu_debugaltlink().ok().flatten()?;
    let name = std::str::from_utf8(name).ok()?;
    let by_id = cfg.debug_dirs.iter().filter_map(|d| build_id_path(d, id));
    let by_path = debug.path.parent().map(|dir| dir.join(name)); // join keeps absolute names
    by_id
        .chain(by_path)
        .find(|p| Mapped::open(p, opened).is_some_and(|m| m.has_dwarf()))
}

/// `<dir>/.build-id/xx/rest.debug`.
pub(super) fn build_id_path(dir: &Path, id: &[u8]) -> Option<PathBuf> {
    if id.len() < 2 {
        return None;
    }
    let h = hex(id);
    Some(
        dir.join(".build-id")
            .join(&h[..2])
            .join(format!("{}.debug", &h[2..])),
    )
}

/// Where gdb looks for a `.gnu_debuglink` file, in order.
pub(super) fn debuglink_candidates(
    binary: &Path,
    link: &str,
    debug_dirs: &[PathBuf],
) -> Vec<PathBuf> {
    let bindir = binary.parent().unwrap_or(Path::new("/"));
    let mut out = vec![bindir.join(link), bindir.join(".debug").join(link)];
    let rel = bindir.strip_prefix("/").unwrap_or(bindir);
    for d in debug_dirs {
        out.push(d.join(rel).join(link));
    }
    out
}

/// CRC-32 (IEEE, reflected), as `.gnu_debuglink` uses.
pub(super) fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}
