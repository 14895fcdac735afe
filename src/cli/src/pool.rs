//! `heaplive top --pool MASTER_PID|DIR`: a pool's workers side by side and
//! summed: per worker its newest dump's live total (the sum of its
//! `NAME.folded`) and the rows of its `NAME.maps.txt` (resident memory by
//! kind: ZendMM kept after requests, malloc, opcache, stacks, files; written
//! by the library in PHP mode, `background/rss.rs`), so an operator sees
//! what `pm.max_children` x retained ZendMM costs.
//!
//! The workers: a master pid's children (/proc), each one's newest dump
//! from its status file (`dump::latest_dump`, as `heaplive dump` reads
//! it); or a directory's dumps, grouped by the pid in their names (the
//! number before the dump number, `%p.%n`, as the default template
//! `heaplive.%e.%p.%n.folded` has it), the highest dump number per pid.

use crate::cli::TopArgs;
use crate::table::{Table, emit};
use crate::units::io_msg;
use crate::{Res, error};
use std::collections::BTreeMap;

/// One worker's row.
struct Row {
    pid: String,
    file: String,
    live: u128,
    /// The maps file's rows (kind, bytes), in file order; None without one.
    maps: Option<Vec<(String, u64)>>,
}

pub fn main(a: &TopArgs, target: &str) -> Res<()> {
    let t = Table::from_args(&a.table);
    let files = if let Ok(master) = target.parse::<i32>() {
        of_master(master)?
    } else {
        of_dir(target)?
    };
    let mut rows = Vec::new();
    for (pid, file) in files {
        let p = crate::folded::load(&file)?;
        rows.push(Row {
            pid,
            live: p.total(),
            maps: read_maps(&maps_path(&file)),
            file,
        });
    }
    let text = table(&rows, &t);
    emit(|out| out.write_all(text.as_bytes()))
}

/// The newest dump of every child of `master`.
fn of_master(master: i32) -> Res<Vec<(String, String)>> {
    if !std::path::Path::new(&format!("/proc/{master}")).exists() {
        return error(format!("pid {master}: no such process"));
    }
    let kids = crate::dump::children_of(master);
    if kids.is_empty() {
        return error(format!("pid {master}: no child processes (workers)"));
    }
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for k in &kids {
        match crate::dump::latest_dump(*k) {
            Some(f) if f.ends_with(".folded") => out.push((k.to_string(), f)),
            Some(f) => {
                say!("heaplive: pid {k}: its newest dump {f} is not a folded file: left out");
            }
            None => missing.push(k.to_string()),
        }
    }
    let uid = unsafe { libc::geteuid() };
    let dir = heaplive_format::status::dir(uid);
    if out.is_empty() {
        return error(format!(
            "pid {master}: none of its {} workers ({}) has written a dump (looked for their status files in {}): run 'heaplive dump --children {master}' or 'pkill -USR2 -P {master}' first",
            kids.len(),
            missing.join(" "),
            dir.display()
        ));
    }
    if !missing.is_empty() {
        say!(
            "heaplive: workers without a dump (no status file in {}): {}; 'heaplive dump --children {master}' dumps them all",
            dir.display(),
            missing.join(" ")
        );
    }
    Ok(out)
}

/// The pid and dump number at the end of a dump's name (`X.PID.N.folded`).
fn pid_and_number(name: &str) -> Option<(u32, u64)> {
    let mut parts = name.strip_suffix(".folded")?.rsplit('.');
    let n = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    Some((pid, n))
}

/// The newest dump of every pid in the directory.
fn of_dir(dir: &str) -> Res<Vec<(String, String)>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => {
            return error(format!(
                "--pool {dir}: not a master pid, and not a directory of dumps ({})",
                io_msg(&e)
            ));
        }
    };
    let mut newest: BTreeMap<u32, (u64, String)> = BTreeMap::new();
    for e in rd.flatten() {
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !crate::folded::is_dump_name(&name)
            || crate::folded::is_request_peak_name(&name)
            || !e.file_type().is_ok_and(|t| t.is_file())
        {
            continue;
        }
        let Some((pid, n)) = pid_and_number(&name) else {
            continue;
        };
        let path = std::path::Path::new(dir).join(&name).display().to_string();
        if newest.get(&pid).is_none_or(|(m, _)| n > *m) {
            newest.insert(pid, (n, path));
        }
    }
    if newest.is_empty() {
        return error(format!(
            "{dir}: no dumps here (files NAME.PID.N.folded, as HEAPLIVE_OUTPUT's %p.%n names them): run 'heaplive dump --children MASTER_PID' or 'pkill -USR2 -P MASTER_PID' first"
        ));
    }
    Ok(newest
        .into_iter()
        .map(|(pid, (_, f))| (pid.to_string(), f))
        .collect())
}

/// `NAME.maps.txt` beside `NAME.folded`.
fn maps_path(folded: &str) -> String {
    format!(
        "{}.maps.txt",
        folded.strip_suffix(".folded").unwrap_or(folded)
    )
}

/// The kinds of a maps file and their bytes (`RSS` first), or None.
/// A row: `BYTES  HUMAN  KIND  what it is`, the human size and the kind
/// ended by two spaces (the kind is padded to 16 columns).
fn read_maps(path: &str) -> Option<Vec<(String, u64)>> {
    let bytes = crate::folded::read_regular_text(path)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut rows = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let line = line.trim_start();
        let Some((n, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        // Past the human size: "52.0 MiB  ZendMM           PHP's ..."
        let Some((_, rest)) = rest.trim_start().split_once("  ") else {
            continue;
        };
        let rest = rest.trim_start();
        let kind = rest.split_once("  ").map_or(rest, |(k, _)| k).trim_end();
        let kind = kind
            .split_once(' ')
            .filter(|_| !rest.contains("  "))
            .map_or(kind, |(k, _)| k);
        rows.push((kind.to_string(), n));
    }
    (!rows.is_empty()).then_some(rows)
}

fn table(rows: &[Row], t: &Table) -> String {
    // The columns: every kind seen, in the order of the first file listing it.
    let mut kinds: Vec<String> = Vec::new();
    for r in rows {
        for (k, _) in r.maps.iter().flatten() {
            if !kinds.contains(k) {
                kinds.push(k.clone());
            }
        }
    }
    let mut head = vec!["PID".to_string(), "LIVE".to_string()];
    head.extend(kinds.iter().map(|k| k.replace(' ', "-")));
    head.push("FILE".into());
    let mut cells: Vec<Vec<String>> = vec![head];
    let mut sums = vec![0u128; kinds.len()];
    let mut live = 0u128;
    for r in rows {
        live += r.live;
        let mut line = vec![r.pid.clone(), t.size(r.live)];
        for (i, k) in kinds.iter().enumerate() {
            match r.maps.as_ref().and_then(|m| m.iter().find(|(n, _)| n == k)) {
                Some((_, b)) => {
                    sums[i] += *b as u128;
                    line.push(t.size(*b as u128));
                }
                None => line.push("-".into()),
            }
        }
        line.push(r.file.clone());
        cells.push(line);
    }
    let mut sum = vec!["SUM".to_string(), t.size(live)];
    sum.extend(sums.iter().map(|&b| t.size(b)));
    sum.push(format!("{} workers", rows.len()));
    cells.push(sum);
    let widths: Vec<usize> = (0..cells[0].len())
        .map(|c| cells.iter().map(|l| l[c].len()).max().unwrap_or(0))
        .collect();
    let mut s = String::new();
    for l in &cells {
        let last = l.len() - 1;
        for (c, v) in l.iter().enumerate() {
            if c == last {
                s.push_str(v);
            } else if c == 0 {
                s.push_str(&format!("{v:<w$}  ", w = widths[c]));
            } else {
                s.push_str(&format!("{v:>w$}  ", w = widths[c]));
            }
        }
        s.push('\n');
    }
    if let Some(i) = kinds.iter().position(|k| k == "ZendMM")
        && !rows.is_empty()
    {
        s.push_str(&format!(
            "ZendMM resident (kept after requests): {} over {} workers, {} each on average: pm.max_children x that is what the pool keeps\n",
            t.size(sums[i]),
            rows.len(),
            t.size(sums[i] / rows.len() as u128)
        ));
    }
    let shared: Vec<&str> = ["opcache", "JIT", "files"]
        .into_iter()
        .filter(|k| kinds.iter().any(|n| n == k))
        .collect();
    if rows.len() > 1 && !shared.is_empty() {
        s.push_str(&format!(
            "{} are pages shared between the workers: their SUM counts them once per worker\n",
            shared.join(", ")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(pid_and_number("fpm.4242.3.folded"), Some((4242, 3)));
        assert_eq!(
            pid_and_number("heaplive.php-fpm8.2.17.1.folded"),
            Some((17, 1))
        );
        assert_eq!(pid_and_number("a.folded"), None);
    }

    #[test]
    fn maps_rows() {
        let dir = std::env::temp_dir().join(format!("heaplive-pool-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.maps.txt");
        std::fs::write(
            &p,
            "# h\n# r\n# c\n    10485760    10.0 MiB  RSS              all resident memory of the process\n     2097152     2.0 MiB  ZendMM           PHP's request memory\n        4096     4.0 KiB  malloc heap      glibc malloc's main arena ([heap])\n           0         0 B  other anonymous  other memory\n",
        )
        .unwrap();
        let rows = read_maps(p.to_str().unwrap()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            rows,
            vec![
                ("RSS".to_string(), 10485760),
                ("ZendMM".to_string(), 2097152),
                ("malloc heap".to_string(), 4096),
                ("other anonymous".to_string(), 0),
            ]
        );
    }
}
