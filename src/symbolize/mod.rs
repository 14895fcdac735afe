//! Addresses to names: module lookup, DWARF (with inline frames), symbol
//! tables, JIT perf maps, demangling.
//!
//! One [`Symbolizer`] lives in the dumper thread for the whole process and
//! caches everything across dumps: per module, the debug-info loader and the
//! symbol table, opened on first need and kept; per address, the answer.
//! Files are opened by path, so modules that were dlclose'd since still
//! symbolize (see `modules.rs`).
//!
//! Where the debug info comes from, first hit wins:
//! 1. the module's own `.debug_info`;
//! 2. `<debug dir>/.build-id/xx/rest.debug` for each configured debug dir;
//! 3. `.gnu_debuglink` next to the binary, in `<bindir>/.debug/`, then in
//!    `<debug dir>/<bindir>/`, each candidate checked against the link's CRC32.
//!
//! A dwz supplementary file named by the debug file's `.gnu_debugaltlink` is
//! found by its build id in the debug dirs, else by its path.
//!
//! Names without debug info come from `.symtab` (the binary's, else the debug
//! file's), else `.dynsym`, honouring symbol sizes: an address no symbol
//! covers becomes `basename+0xfileoffset`, never a neighbour's name.
//!
//! Nothing here may panic (the library runs inside other people's processes
//! with panic=abort): a missing or corrupt file only means fewer names.
//! Debug files are memory-mapped: a file truncated on disk while mapped would
//! fault (SIGBUS), as with any mmap-based symbolizer.

mod debug_files;
mod demangle;
mod jit;
pub mod modules;
mod sparse;
mod symtab;
mod zlib;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::Object;

use debug_files::{Dwarf, Mapped, find_debug_file, find_sup_file, hex};
pub use demangle::demangle_name;
use heaplive_format::profile::{Frame, Mapping};
use jit::Jit;
use modules::Module;
use symtab::{RangeTable, strip_glibc_alias, symbols_of};

/// Where to look for debug info and how to print names.
#[derive(Clone, Debug)]
pub struct SymConfig {
    /// Roots holding `.build-id/` trees and `<bindir>/<debuglink>` files. The
    /// caller passes `/usr/lib/debug` plus `HEAPLIVE_DEBUG_DIRS`.
    pub debug_dirs: Vec<PathBuf>,
    /// Demangle C++ and Rust names; false keeps them mangled.
    pub demangle: bool,
}

impl Default for SymConfig {
    fn default() -> Self {
        SymConfig {
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
            demangle: true,
        }
    }
}

/// What an address symbolized to: the mapping index (`None` outside any
/// module) and the frames, innermost (inlined callee) first, the containing
/// function last; never empty. The frames are shared: a lookup hands out
/// the cached answer, not a copy.
pub type Answer = (Option<usize>, Arc<[Frame]>);

/// Process-lifetime symbolizer. Not for signal handlers or allocation paths.
pub struct Symbolizer {
    cfg: SymConfig,
    /// Per registry index (see [`modules::find_index`]); `None` = not loaded
    /// yet, or released after a dump.
    states: Vec<Option<ModState>>,
    /// Per registry index: where its mappings start in `mappings`, once
    /// handed out (kept when the state is released).
    first_mappings: Vec<Option<usize>>,
    mappings: Vec<Mapping>,
    /// (registry index, address) -> answer. Keyed by module too, so a new
    /// library loaded where a dlclose'd one was gets its own answers. The
    /// frames are shared with the profiles built from them.
    cache: HashMap<(usize, u64), Answer>,
    jit: Jit,
    /// Files opened (and loaders built) so far; tests check the caching.
    files_opened: usize,
}

/// What one module needs for lookups, built once.
struct ModState {
    bias: u64,
    ranges: Vec<(u64, u64, u64)>,
    /// Index in `Symbolizer::mappings` of `ranges[0]`; the others follow.
    first_mapping: usize,
    basename: String,
    dwarf: Option<Dwarf>,
    symbols: RangeTable,
    /// No debug information and no `.symtab` (a stripped binary: Debian's
    /// php-fpm8.2): its path and build id, for the one-line hint given the
    /// first time one of its addresses has no name (`hint_no_symbols`).
    stripped: Option<(String, String)>,
    hinted: core::cell::Cell<bool>,
}

/// Stripped modules whose addresses got no name (path, build id), in the
/// order met; the hint about them is given once per process.
static UNNAMED: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());
static HINTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// After a dump: one line, once per process, when frames of stripped
/// modules (no debug information, no `.symtab`: Debian's php-fpm8.2)
/// showed as `module+0x...`: which, and where their debug symbols would be
/// found, by the build id of the first (the executable when it is one).
pub fn hint_no_symbols(exe: &str) {
    use std::sync::atomic::Ordering::Relaxed;
    let Ok(list) = UNNAMED.lock() else {
        return;
    };
    if list.is_empty() || HINTED.swap(true, Relaxed) {
        return;
    }
    let base = |p: &str| {
        Path::new(p)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(p)
            .to_string()
    };
    let first = list
        .iter()
        .find(|(p, _)| base(p) == exe)
        .unwrap_or(&list[0]);
    let (path, id) = first;
    let where_ = if id.len() > 2 {
        let (dir, rest) = id.split_at(2);
        format!(
            "{path} has build id {id}: install its debug symbols (Debian: its -dbgsym package from the debian-debug archive, or debuginfod), or put them at /usr/lib/debug/.build-id/{dir}/{rest}.debug or in a directory of HEAPLIVE_DEBUG_DIRS"
        )
    } else {
        format!("{path} has no build id: put its debug file in a directory of HEAPLIVE_DEBUG_DIRS")
    };
    let names: Vec<String> = list.iter().take(4).map(|(p, _)| base(p)).collect();
    let more = if list.len() > 4 {
        format!(" and {} more", list.len() - 4)
    } else {
        String::new()
    };
    crate::hot::log::line(format_args!(
        "heaplive[{}]: frames of modules without symbols show as module+0x... ({}{more}); {where_}",
        crate::hot::sys::getpid(),
        names.join(", "),
    ));
}

fn note_unnamed(path: &str, build_id: &str) {
    if let Ok(mut l) = UNNAMED.lock()
        && l.len() < 64
    {
        l.push((path.to_string(), build_id.to_string()));
    }
}

impl Symbolizer {
    pub fn new(cfg: SymConfig) -> Self {
        Symbolizer {
            cfg,
            states: Vec::new(),
            first_mappings: Vec::new(),
            mappings: Vec::new(),
            cache: HashMap::new(),
            jit: Jit::new(),
            files_opened: 0,
        }
    }

    /// Every module mapping handed out so far. An index returned by
    /// [`Self::lookup`] keeps meaning the same mapping for the process's life.
    pub fn mappings(&self) -> Vec<Mapping> {
        self.mappings.clone()
    }

    /// Symbolize `addr` (a return address minus one). Returns the mapping
    /// index (`None` outside any module) and the frames, innermost (inlined
    /// callee) first, the containing function last. Never empty.
    ///
    /// The first address in a module opens its files (milliseconds for a
    /// large library); later ones reuse them, and a repeated address is a
    /// hash lookup.
    pub fn lookup(&mut self, addr: u64) -> Answer {
        self.lookup_polling(addr, &mut || {})
    }

    /// [`Self::lookup`], calling `poll` between the steps of loading a
    /// module (files, sections, symbol tables), so a caller can look
    /// at other work (a dump signal) while a large library loads.
    pub fn lookup_polling(&mut self, addr: u64, poll: &mut dyn FnMut()) -> Answer {
        let index = match modules::find_index(addr) {
            Some(i) => Some(i),
            None => {
                modules::refresh_if_changed();
                modules::find_index(addr)
            }
        };
        let Some(index) = index else {
            return (None, Arc::from([self.jit.frame(addr, self.cfg.demangle)]));
        };
        if let Some(hit) = self.cache.get(&(index, addr)) {
            return hit.clone();
        }
        // Debug information is read (lazily, by addr2line) into heaplive's
        // scratch heap, given back after the dump; the answer is copied out.
        self.state(index, poll);
        let answer = self.lookup_out_of_scratch(index, addr);
        self.cache.insert((index, addr), answer.clone());
        answer
    }

    /// [`Self::lookup_uncached`] with debug information read into
    /// heaplive's scratch heap (given back after the dump); the answer is
    /// copied out of it.
    fn lookup_out_of_scratch(&mut self, index: usize, addr: u64) -> Answer {
        let (mapping, scratch_frames) = {
            let _scratch = crate::hot::ownheap::Scratch::enter();
            self.lookup_uncached(index, addr)
        };
        let frames: Arc<[Frame]> = scratch_frames.iter().cloned().collect();
        drop(scratch_frames);
        (mapping, frames)
    }

    fn lookup_uncached(&mut self, index: usize, addr: u64) -> (Option<usize>, Vec<Frame>) {
        let demangle = self.cfg.demangle;
        let Some(state) = self.state(index, &mut || {}) else {
            return (None, vec![unknown()]);
        };
        let Some((ri, &(start, _, file_offset))) = state
            .ranges
            .iter()
            .enumerate()
            .find(|(_, r)| r.0 <= addr && addr < r.1)
        else {
            return (None, vec![unknown()]);
        };
        let mapping = Some(state.first_mapping + ri);
        let probe = addr.wrapping_sub(state.bias);
        let symbol = state.symbols.find(probe);
        if symbol.is_none()
            && state.dwarf.is_none()
            && let Some((path, id)) = &state.stripped
            && !state.hinted.replace(true)
        {
            note_unnamed(path, id);
        }
        let fallback = || match symbol {
            Some(name) => demangle_name(name, demangle),
            None => format!(
                "{}+0x{:x}",
                state.basename,
                addr.wrapping_sub(start).wrapping_add(file_offset)
            ),
        };

        let mut frames = Vec::new();
        if let Some(loader) = &state.dwarf
            && let Ok(mut iter) = loader.find_frames(probe)
        {
            // A corrupt unit ends the walk; keep what came before.
            while let Ok(Some(f)) = iter.next() {
                let name = f
                    .function
                    .as_ref()
                    .and_then(|n| n.raw_name().ok())
                    .map(|n| demangle_name(strip_glibc_alias(&n), demangle));
                let (file, line) = match &f.location {
                    Some(l) => (l.file.map(str::to_owned), l.line),
                    None => (None, None),
                };
                frames.push(Frame {
                    function: name.unwrap_or_else(fallback),
                    file,
                    line,
                });
            }
        }
        if frames.is_empty() {
            frames.push(Frame {
                function: fallback(),
                file: None,
                line: None,
            });
        }
        (mapping, frames)
    }

    /// The state of registry module `index`, loading it on first use.
    fn state(&mut self, index: usize, poll: &mut dyn FnMut()) -> Option<&ModState> {
        self.state_for(index, None, poll)
    }

    /// Where the mappings of registry module `index` start in
    /// `self.mappings`, handed out on first need (in the order modules are
    /// first met, which the profile's mapping table keeps).
    fn first_mapping(&mut self, index: usize, module: &Module) -> usize {
        if self.first_mappings.len() <= index {
            self.first_mappings.resize(index + 1, None);
        }
        if let Some(f) = self.first_mappings[index] {
            return f;
        }
        let f = self.mappings.len();
        let build_id = hex(&module.build_id);
        for &(start, end, file_offset) in &module.ranges {
            self.mappings.push(Mapping {
                start,
                end,
                file_offset,
                path: module.path.clone(),
                build_id: build_id.clone(),
            });
        }
        self.first_mappings[index] = Some(f);
        f
    }

    /// [`Self::state`]; a module loaded here for `addrs` (sorted) reads the
    /// debug info of just the units those addresses fall in.
    fn state_for(
        &mut self,
        index: usize,
        addrs: Option<&[u64]>,
        poll: &mut dyn FnMut(),
    ) -> Option<&ModState> {
        if self.states.len() <= index {
            self.states.resize_with(index + 1, || None);
        }
        if self.states[index].is_none() {
            if crate::hot::ownheap::low() {
                // The kernel refuses heaplive memory: no debug info now.
                return None;
            }
            let module = modules::get(index)?;
            let first_mapping = self.first_mapping(index, &module);
            let state = {
                let _scratch = crate::hot::ownheap::Scratch::enter();
                load_module(
                    &module,
                    first_mapping,
                    addrs,
                    &self.cfg,
                    &mut self.files_opened,
                    poll,
                )
            };
            self.states[index] = Some(state);
        }
        self.states[index].as_ref()
    }

    /// Answers (and caches) every address of `addrs` not answered yet,
    /// module by module: a module's debug information is read for just its
    /// addresses (the compilation units they fall in) and dropped, its
    /// scratch memory given back, before the next module's is read. So a
    /// dump holds one module's debug information at a time, not every
    /// module's at once. Later [`Self::lookup`]s of these addresses are
    /// hash lookups.
    pub fn prefetch(&mut self, addrs: &[u64], poll: &mut dyn FnMut()) {
        let mut by_module: std::collections::BTreeMap<usize, Vec<u64>> = Default::default();
        let mut refreshed = false;
        for &addr in addrs {
            let index = match modules::find_index(addr) {
                Some(i) => i,
                None if !refreshed => {
                    refreshed = true;
                    modules::refresh_if_changed();
                    match modules::find_index(addr) {
                        Some(i) => i,
                        None => continue,
                    }
                }
                None => continue,
            };
            if !self.cache.contains_key(&(index, addr)) {
                // Mappings in the order of the addresses, as lookups one
                // by one would hand them out.
                if !crate::hot::ownheap::low()
                    && let Some(module) = modules::get(index)
                {
                    self.first_mapping(index, &module);
                }
                by_module.entry(index).or_default().push(addr);
            }
        }
        for (index, mut list) in by_module {
            list.sort_unstable();
            list.dedup();
            let loaded_before = self.states.get(index).is_some_and(|s| s.is_some());
            self.state_for(index, Some(&list), poll);
            for &addr in &list {
                let answer = self.lookup_out_of_scratch(index, addr);
                self.cache.insert((index, addr), answer);
            }
            if !loaded_before {
                self.states[index] = None;
                crate::hot::ownheap::release_scratch();
            }
            poll();
        }
    }

    /// Drops the debug information and symbol tables loaded so far (tens
    /// of MiB for libc's decompressed DWARF) but keeps every answer and
    /// mapping: a later dump of the same addresses is still a hash lookup,
    /// and a module is read again only for addresses not seen before.
    pub fn release_debug_info(&mut self) {
        for s in &mut self.states {
            *s = None;
        }
        crate::hot::ownheap::release_scratch();
    }

    #[cfg(test)]
    fn files_opened(&self) -> usize {
        self.files_opened
    }
}

fn unknown() -> Frame {
    Frame {
        function: "[unknown]".to_owned(),
        file: None,
        line: None,
    }
}

fn load_module(
    module: &Module,
    first_mapping: usize,
    addrs: Option<&[u64]>,
    cfg: &SymConfig,
    opened: &mut usize,
    poll: &mut dyn FnMut(),
) -> ModState {
    let path = Path::new(&module.path);
    let basename = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(module.path.as_str())
        .to_owned();
    let mut state = ModState {
        bias: module.bias,
        ranges: module.ranges.clone(),
        first_mapping,
        basename,
        dwarf: None,
        symbols: RangeTable::default(),
        stripped: None,
        hinted: core::cell::Cell::new(false),
    };

    let binary = Mapped::open(path, opened);
    let file_build_id = binary
        .as_ref()
        .and_then(|b| b.parse()?.build_id().ok().flatten().map(<[u8]>::to_vec));
    // A file replaced on disk since it was loaded must not name the old code.
    let binary = match (&binary, &file_build_id) {
        (Some(_), Some(id)) if !module.build_id.is_empty() && *id != module.build_id => None,
        _ => binary,
    };
    let build_id = if module.build_id.is_empty() {
        file_build_id.unwrap_or_default()
    } else {
        module.build_id.clone()
    };

    // Only what the addresses asked for need be read, when they are known.
    let probes: Option<Vec<u64>> = addrs.map(|a| {
        let mut p: Vec<u64> = a.iter().map(|&x| x.wrapping_sub(module.bias)).collect();
        p.sort_unstable();
        p
    });
    let probes = probes.as_deref();
    poll();
    let debug = match &binary {
        Some(b) if b.has_dwarf() => None, // its own DWARF
        _ => find_debug_file(path, binary.as_ref(), &build_id, cfg, opened),
    };
    let dwarf_file = match (&debug, &binary) {
        (Some(d), _) => Some(d),
        (None, Some(b)) if b.has_dwarf() => Some(b),
        _ => None,
    };
    poll();
    if let Some(d) = dwarf_file {
        let sup = find_sup_file(d, cfg, opened);
        poll();
        state.dwarf = match Dwarf::load(&d.path, sup.as_deref(), probes, opened, poll) {
            Some(l) => Some(l),
            None if sup.is_some() => Dwarf::load(&d.path, None, probes, opened, poll),
            None => None,
        };
    }

    let symtab = |m: &Mapped| {
        m.parse()
            .map(|o| symbols_of(o.symbols(), probes))
            .unwrap_or_default()
    };
    poll();
    let mut syms = binary.as_ref().map(symtab).unwrap_or_default();
    if syms.1 == 0 {
        syms = debug.as_ref().map(symtab).unwrap_or_default();
    }
    if syms.1 == 0 {
        syms = binary
            .as_ref()
            .and_then(|b| b.parse().map(|o| symbols_of(o.dynamic_symbols(), probes)))
            .unwrap_or_default();
        if state.dwarf.is_none() && binary.is_some() {
            state.stripped = Some((module.path.clone(), hex(&build_id)));
        }
    }
    let syms = syms.0;
    poll();
    state.symbols = RangeTable::new(syms);
    poll();
    state
}

#[cfg(test)]
mod tests;
