//! `heaplive diff`: what grew and what shrank between two dumps.

use crate::Res;
use crate::cli::DiffArgs;
use crate::folded::{self, Profile};
use crate::table::{Table, abbreviate_stack, column_width, emit, function_totals, shorten_frame};
use std::collections::BTreeMap;
use std::io::{self, Write};

pub fn main(a: DiffArgs) -> Res<()> {
    let mut t = Table::from_args(&a.table);
    t.view = folded::View::of(&[a.old.clone(), a.new.clone()]);
    let old = folded::load(&a.old)?;
    let new = folded::load(&a.new)?;
    if a.folded {
        return emit(|out| write_two_column(&old, &new, out));
    }
    // The variance files of both dumps, when both have them.
    let variances = crate::top::companions_of(std::slice::from_ref(&a.old), "variance").zip(
        crate::top::companions_of(std::slice::from_ref(&a.new), "variance"),
    );
    let text = diff_report(&old, &new, &t, variances.as_ref());
    emit(|out| out.write_all(text.as_bytes()))
}

/// `stack OLD NEW` for the union of stacks, sorted by stack.
fn write_two_column(old: &Profile, new: &Profile, out: &mut dyn Write) -> io::Result<()> {
    let mut all: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (s, &c) in &old.stacks {
        all.entry(s).or_default().0 = c;
    }
    for (s, &c) in &new.stacks {
        all.entry(s).or_default().1 = c;
    }
    for (s, (a, b)) in all {
        writeln!(out, "{s} {a} {b}")?;
    }
    Ok(())
}

/// One row of a diff table: the key and its old and new bytes (None = absent).
type DiffRow<'a> = (&'a str, Option<u128>, Option<u128>);

fn diff_rows<'a>(
    old: impl Iterator<Item = (&'a str, u128)>,
    new: impl Iterator<Item = (&'a str, u128)>,
) -> Vec<DiffRow<'a>> {
    let mut all: BTreeMap<&str, (Option<u128>, Option<u128>)> = BTreeMap::new();
    for (k, v) in old {
        all.entry(k).or_default().0 = Some(v);
    }
    for (k, v) in new {
        all.entry(k).or_default().1 = Some(v);
    }
    let mut rows: Vec<DiffRow> = all.into_iter().map(|(k, (a, b))| (k, a, b)).collect();
    rows.sort_by(|x, y| {
        delta(y)
            .unsigned_abs()
            .cmp(&delta(x).unsigned_abs())
            .then(delta(y).cmp(&delta(x)))
            .then(x.0.cmp(y.0))
    });
    rows
}

fn delta(r: &DiffRow) -> i128 {
    r.2.unwrap_or(0) as i128 - r.1.unwrap_or(0) as i128
}

/// The half-width of the 95% interval of a stack's change, from the two
/// dumps' variances: `1.96 sqrt(v_old + v_new)`. Dumps of one process
/// share the samples of blocks live in both, which makes the two estimates
/// positively correlated and the change's variance smaller than the sum:
/// the interval is then conservative.
fn change_error(vars: &(Profile, Profile), stack: &str) -> f64 {
    let v = |p: &Profile| p.stacks.get(stack).copied().unwrap_or(0) as f64;
    heaplive_format::stats::Z95 * (v(&vars.0) + v(&vars.1)).sqrt()
}

fn diff_report(
    old: &Profile,
    new: &Profile,
    t: &Table,
    variances: Option<&(Profile, Profile)>,
) -> String {
    let (to, tn) = (old.total(), new.total());
    let change = tn as i128 - to as i128;
    let rel = if to == 0 {
        String::new()
    } else {
        format!(", {:+.1}%", change as f64 * 100.0 / to as f64)
    };
    let exact = if t.exact {
        String::new()
    } else {
        format!("; {to} -> {tn} bytes")
    };
    let mut out = format!(
        "total: {} -> {} ({}{rel}){exact}\n",
        t.size(to),
        t.size(tn),
        t.signed(change)
    );

    let stacks = diff_rows(
        old.stacks.iter().map(|(s, &c)| (s.as_str(), c as u128)),
        new.stacks.iter().map(|(s, &c)| (s.as_str(), c as u128)),
    );
    out += "\nper stack (leaf first):\n";
    let err = variances.map(|v| move |stack: &str| change_error(v, stack));
    out += &diff_table(
        &stacks,
        t,
        "STACK",
        true,
        err.as_ref().map(|f| f as &dyn Fn(&str) -> f64),
    );

    let fo = function_totals(old);
    let fnew = function_totals(new);
    let funcs = diff_rows(
        fo.iter().filter(|v| v.1.1 > 0).map(|(k, v)| (*k, v.1)),
        fnew.iter().filter(|v| v.1.1 > 0).map(|(k, v)| (*k, v.1)),
    );
    out += "\nper function (exclusive: bytes allocated directly in it, the leaf):\n";
    out += &diff_table(&funcs, t, "FUNCTION", false, None);
    out
}

/// `err`: the half-width of a row's 95% interval of the change (a column
/// `±95%` when given).
fn diff_table(
    rows: &[DiffRow],
    t: &Table,
    what: &str,
    stacks: bool,
    err: Option<&dyn Fn(&str) -> f64>,
) -> String {
    let changed: Vec<&DiffRow> = rows.iter().filter(|r| delta(r) != 0).collect();
    let unchanged = rows.len() - changed.len();
    if changed.is_empty() {
        return format!("  no change ({unchanged} unchanged)\n");
    }
    let shown = t.shown(changed.len());
    let cell = |v: Option<u128>| v.map_or("-".to_string(), |b| t.size(b));
    let cells: Vec<[String; 3]> = changed[..shown]
        .iter()
        .map(|r| [t.signed(delta(r)), cell(r.1), cell(r.2)])
        .collect();
    let (old_h, new_h) = (
        format!("OLD {}", t.view.column()),
        format!("NEW {}", t.view.column()),
    );
    let w = cells
        .iter()
        .flatten()
        .map(|c| c.len())
        .chain([10, old_h.len()])
        .max()
        .unwrap_or(10);
    let errs: Vec<String> = match err {
        Some(f) => changed[..shown]
            .iter()
            .map(|r| format!("±{}", t.size(f(r.0).round() as u128)))
            .collect(),
        None => Vec::new(),
    };
    let ew = column_width(&errs, 5);
    let mut out = if err.is_some() {
        format!(
            "{:>w$}  {:>ew$}  {:>w$}  {:>w$}  {what}\n",
            "CHANGE", "±95%", old_h, new_h
        )
    } else {
        format!("{:>w$}  {:>w$}  {:>w$}  {what}\n", "CHANGE", old_h, new_h)
    };
    for (i, (r, [d, a, b])) in changed[..shown].iter().zip(&cells).enumerate() {
        let room = t.room(3 * w + 6 + if err.is_some() { ew + 2 } else { 0 });
        let name = if stacks {
            abbreviate_stack(r.0, room)
        } else {
            shorten_frame(r.0, room)
        };
        match errs.get(i) {
            Some(e) => out += &format!("{d:>w$}  {e:>ew$}  {a:>w$}  {b:>w$}  {name}\n"),
            None => out += &format!("{d:>w$}  {a:>w$}  {b:>w$}  {name}\n"),
        }
    }
    let more = changed.len() - shown;
    let notes: Vec<String> = [(more, "more changed"), (unchanged, "unchanged")]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    if !notes.is_empty() {
        out += &format!("{:>w$}  ({})\n", "", notes.join(", "));
    }
    out
}
