//! Runtime pools: memory a language runtime allocates once, when it is
//! loaded, and holds for the life of the process by design. They are live
//! at exit in every program that loads the runtime, so counted with the
//! program's own memory they read as a leak in every process (and make an
//! idle worker look non-empty). heaplive shows them apart: their stacks get
//! a root frame `[runtime pool: NAME]`, the exit dump's line gives their
//! total apart, an exit with nothing else live writes no dump, and a leak
//! warning is never issued for them.
//!
//! Known so far (found by stack: what allocated, called from where):
//! - libstdc++'s emergency exception pool (`eh_alloc.cc`, the constructor
//!   of its static `pool`, about 71 KiB in GCC 12): memory `__cxa_allocate_exception`
//!   falls back on when malloc fails. It is allocated by libstdc++'s
//!   initializer, which the dynamic loader runs (`_dl_init`) before
//!   `main`; libstdc++ frees it only in `__gnu_cxx::__freeres`, which only
//!   valgrind-like tools call. The stack: a libstdc++ frame (the
//!   initializer: `(anonymous namespace)::pool::pool` with symbols,
//!   `libstdc++.so.6+0x...` without) directly under ld.so's `call_init`.

use crate::background::profile::{Frame, Location, Profile};

/// The name of libstdc++'s pool, as its root frame shows it.
pub const LIBSTDCXX_EMERGENCY: &str = "[runtime pool: libstdc++ emergency exception pool]";

/// Which runtime pool a stack is, from its frames leaf first: each the
/// path of the module it is in (None for a pseudo frame) and its function
/// names, innermost (inlined) first. None: the program's own memory.
pub fn pool_of<'a>(
    frames: impl IntoIterator<Item = (Option<&'a str>, &'a [Frame])>,
) -> Option<&'static str> {
    let mut it = frames.into_iter();
    let (module, _) = it.next()?;
    let base = module.map(|m| m.rsplit('/').next().unwrap_or(m))?;
    if !base.starts_with("libstdc++.so") {
        return None;
    }
    // libstdc++'s own frames (the pool's constructor, inlined or not),
    // then the loader running initializers: nothing of the program's.
    for (m, fs) in it {
        let b = m.map(|m| m.rsplit('/').next().unwrap_or(m)).unwrap_or("");
        if b.starts_with("libstdc++.so") {
            continue;
        }
        let under_init = fs
            .iter()
            .any(|f| f.function == "call_init" || f.function == "_dl_init");
        return under_init.then_some(LIBSTDCXX_EMERGENCY);
    }
    None
}

/// Marks the runtime pools of `p`: each such stack gets its pool's root
/// frame.
pub fn mark(p: &mut Profile) {
    let mut root_of: Vec<(&'static str, usize)> = Vec::new();
    for i in 0..p.samples.len() {
        let pool = {
            let s = &p.samples[i];
            let (locations, mappings) = (&p.locations, &p.mappings);
            pool_of(s.locations.iter().filter_map(|&l| {
                let loc = locations.get(l)?;
                let module = loc
                    .mapping
                    .and_then(|m| mappings.get(m))
                    .map(|m| m.path.as_str());
                Some((module, &loc.frames[..]))
            }))
        };
        let Some(pool) = pool else {
            continue;
        };
        let root = match root_of.iter().find(|(n, _)| *n == pool) {
            Some(&(_, r)) => r,
            None => {
                p.locations.push(Location {
                    address: 0,
                    mapping: None,
                    frames: vec![Frame {
                        function: pool.to_string(),
                        file: None,
                        line: None,
                    }]
                    .into(),
                });
                root_of.push((pool, p.locations.len() - 1));
                p.locations.len() - 1
            }
        };
        p.samples[i].locations.push(root);
    }
}

/// The runtime pool a sample of `p` is (after `mark`): its root frame.
pub fn marked<'a>(p: &'a Profile, s: &crate::background::profile::Sample) -> Option<&'a str> {
    s.locations
        .last()
        .and_then(|&l| p.locations.get(l))
        .and_then(|l| l.frames.last())
        .map(|f| f.function.as_str())
        .filter(|f| f.starts_with("[runtime pool: "))
}

/// The bytes the runtime pools of `p` hold (after `mark`), and their
/// names (`libstdc++ emergency exception pool`).
pub fn held(p: &Profile) -> (u64, Vec<&str>) {
    let mut bytes = 0;
    let mut names: Vec<&str> = Vec::new();
    for s in &p.samples {
        if let Some(f) = marked(p, s) {
            bytes += s.bytes;
            let name = f
                .strip_prefix("[runtime pool: ")
                .and_then(|n| n.strip_suffix(']'))
                .unwrap_or(f);
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    (bytes, names)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LD: Option<&str> = Some("/lib64/ld-linux-x86-64.so.2");
    const CXX: Option<&str> = Some("/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30");
    const EXE: Option<&str> = Some("/usr/bin/prog");

    /// `pool_of` a stack of one frame a module, leaf first: each the module
    /// and its function's name.
    fn pool_of_stack(stack: &[(Option<&str>, &str)]) -> Option<&'static str> {
        let frames: Vec<(Option<&str>, Vec<Frame>)> = stack
            .iter()
            .map(|&(module, name)| {
                let frame = Frame {
                    function: name.into(),
                    file: None,
                    line: None,
                };
                (module, vec![frame])
            })
            .collect();
        pool_of(frames.iter().map(|(m, f)| (*m, &f[..])))
    }

    #[test]
    fn libstdcxx_pool_under_the_loaders_initializer() {
        assert_eq!(
            pool_of_stack(&[
                (CXX, "libstdc++.so.6+0xa57b9"),
                (LD, "call_init"),
                (LD, "_dl_init")
            ]),
            Some(LIBSTDCXX_EMERGENCY)
        );
        // With symbols: the pool's constructor, inlined in the initializer.
        assert_eq!(
            pool_of_stack(&[
                (CXX, "(anonymous namespace)::pool::pool"),
                (LD, "call_init")
            ]),
            Some(LIBSTDCXX_EMERGENCY)
        );
    }

    #[test]
    fn other_libstdcxx_memory_is_the_programs() {
        // `new` called by main.
        assert_eq!(pool_of_stack(&[(CXX, "operator new"), (EXE, "main")]), None);
        // A program's own initializer under call_init, not libstdc++'s.
        assert_eq!(
            pool_of_stack(&[(EXE, "_GLOBAL__sub_I_main"), (LD, "call_init")]),
            None
        );
        assert_eq!(pool_of_stack(&[(None, "main")]), None);
    }
}
