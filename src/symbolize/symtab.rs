//! Symbol tables: sized function symbols as sorted ranges, glibc's alias
//! names.

use object::{ObjectSymbol, SymbolKind};

/// glibc's DWARF names its internal-call aliases (`__GI___libc_malloc`,
/// `__GI_strlen`): show the public name, as the symbol table does.
pub(super) fn strip_glibc_alias(name: &str) -> &str {
    name.strip_prefix("__GI_")
        .filter(|n| !n.is_empty())
        .unwrap_or(name)
}

/// A symbol: start, end, name, and the order among aliases.
pub(super) type Sym = (u64, u64, String, (u8, usize));

/// Sized function symbols as (start, end, name), preferred aliases last
/// among equal starts (see [`RangeTable::find`]); with `probes` (sorted),
/// only those covering one of them (which gives every probe the answer the
/// whole table gives: all ranges covering it are kept). The count is of
/// all such symbols, `probes` or not (whether the table has any).
pub(super) fn symbols_of<'d, S: ObjectSymbol<'d>>(
    iter: impl Iterator<Item = S>,
    probes: Option<&[u64]>,
) -> (Vec<Sym>, usize) {
    let mut count = 0;
    let v = iter
        .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.size() > 0)
        .filter_map(|s| {
            let name = s.name().ok().filter(|n| !n.is_empty())?;
            let end = s.address().checked_add(s.size())?;
            count += 1;
            if let Some(p) = probes {
                let i = p.partition_point(|&x| x < s.address());
                if p.get(i).is_none_or(|&x| x >= end) {
                    return None;
                }
            }
            // Aliases (malloc and __libc_malloc): global over weak over
            // local, then the fewest leading underscores.
            let binding = if s.is_global() && !s.is_weak() {
                2
            } else if s.is_weak() {
                1
            } else {
                0
            };
            let underscores = name.bytes().take_while(|&b| b == b'_').count();
            Some((
                s.address(),
                end,
                name.to_owned(),
                (binding, usize::MAX - underscores),
            ))
        })
        .collect();
    (v, count)
}

/// Sorted, possibly overlapping ranges with names. [`RangeTable::find`]
/// returns the covering range with the greatest start (the innermost), the
/// last one given among equal starts.
#[derive(Default)]
pub(super) struct RangeTable {
    starts: Vec<u64>,
    ends: Vec<u64>,
    /// `max_end[i]` = max of `ends[..=i]`: stops the backward walk early.
    max_end: Vec<u64>,
    names: Vec<String>,
}

impl RangeTable {
    pub(super) fn new<K: Ord>(mut items: Vec<(u64, u64, String, K)>) -> Self {
        items.sort_by(|a, b| (a.0, &a.3).cmp(&(b.0, &b.3)));
        let mut t = RangeTable::default();
        let mut max = 0;
        for (s, e, n, _) in items {
            max = max.max(e);
            t.starts.push(s);
            t.ends.push(e);
            t.max_end.push(max);
            t.names.push(n);
        }
        t
    }

    pub(super) fn find(&self, addr: u64) -> Option<&str> {
        let mut j = self.starts.partition_point(|&s| s <= addr);
        while j > 0 {
            j -= 1;
            if self.max_end[j] <= addr {
                return None;
            }
            if self.ends[j] > addr {
                return Some(&self.names[j]);
            }
        }
        None
    }
}
