//! `heaplive top`: the stacks (or functions) holding the most live bytes.

use crate::Res;
use crate::cli::TopArgs;
use crate::folded::{self, Profile};
use crate::table::{Table, abbreviate_stack, emit, function_totals, shorten_frame};
use crate::units::{grouped, percent};

pub fn main(a: TopArgs) -> Res<()> {
    let t = Table::from_args(&a.table);
    let profile = folded::load_all(&a.files)?;
    let text = if a.inclusive {
        top_functions(&profile, &t)
    } else {
        top_stacks(&profile, &t, a.files.len())
    };
    emit(|out| out.write_all(text.as_bytes()))
}

fn top_stacks(p: &Profile, t: &Table, nfiles: usize) -> String {
    let total = p.total();
    let mut rows: Vec<(&String, u64)> = p.stacks.iter().map(|(s, &c)| (s, c)).collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let shown = t.shown(rows.len());
    let sizes: Vec<String> = rows[..shown].iter().map(|r| t.size(r.1 as u128)).collect();
    let w = sizes
        .iter()
        .map(|s| s.len())
        .chain([t.size(total).len(), 10])
        .max()
        .unwrap_or(10);
    let mut out = format!("{:>w$}  {:>6}  STACK (leaf first)\n", "LIVE", "SHARE");
    let mut shown_bytes = 0u128;
    for ((stack, count), size) in rows[..shown].iter().zip(&sizes) {
        shown_bytes += *count as u128;
        let line = abbreviate_stack(stack, t.room(w + 10));
        out += &format!(
            "{size:>w$}  {:>6}  {line}\n",
            percent(*count as u128, total)
        );
    }
    if shown < rows.len() {
        let rest = total - shown_bytes;
        out += &format!(
            "{:>w$}  {:>6}  ({} more stacks)\n",
            t.size(rest),
            percent(rest, total),
            grouped((rows.len() - shown) as u128)
        );
    }
    let files = if nfiles == 1 {
        String::new()
    } else {
        format!(" from {nfiles} files")
    };
    out += &format!(
        "{:>w$}  {:>6}  total: {} bytes in {} stacks{files}\n",
        t.size(total),
        percent(total, total),
        total,
        grouped(rows.len() as u128),
    );
    out
}

fn top_functions(p: &Profile, t: &Table) -> String {
    let total = p.total();
    let mut rows: Vec<(&str, (u128, u128))> = function_totals(p).into_iter().collect();
    rows.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(b.1.1.cmp(&a.1.1)).then(a.0.cmp(b.0)));
    let shown = t.shown(rows.len());
    let w = rows[..shown]
        .iter()
        .map(|r| t.size(r.1.0).len())
        .chain([t.size(total).len(), 10])
        .max()
        .unwrap_or(10);
    let mut out = format!(
        "{:>w$}  {:>6}  {:>w$}  FUNCTION\n",
        "INCLUSIVE", "SHARE", "SELF"
    );
    for (func, (incl, excl)) in &rows[..shown] {
        let name = shorten_frame(func, t.room(2 * w + 12));
        out += &format!(
            "{:>w$}  {:>6}  {:>w$}  {name}\n",
            t.size(*incl),
            percent(*incl, total),
            t.size(*excl)
        );
    }
    if shown < rows.len() {
        out += &format!(
            "{:>w$}  {:>6}  {:>w$}  ({} more functions)\n",
            "",
            "",
            "",
            grouped((rows.len() - shown) as u128)
        );
    }
    out += &format!(
        "{:>w$}  {:>6}  {:>w$}  total: {} bytes in {} stacks\n",
        t.size(total),
        percent(total, total),
        "",
        total,
        grouped(p.stacks.len() as u128)
    );
    out
}
