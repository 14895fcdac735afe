//! `heaplive flamegraph`: folded files to an interactive SVG through
//! inferno. Input is parsed (strictly) and summed here first, so a bad file
//! gets our error message rather than a picture of half of it.

use crate::cli::FlameArgs;
use crate::folded::{self, Profile, View};
use crate::units::{grouped, human, io_msg, local_time};
use crate::{Res, error};
use std::io::{self, Write};
use std::path::Path;

pub fn main(a: FlameArgs) -> Res<()> {
    let FlameArgs {
        output,
        title,
        php,
        files,
    } = a;
    if let Some(diff) = differential(&files)? {
        return write_svg(output, &render_differential(&diff, &files[0], title, php)?);
    }
    let mut profile = folded::load_all(&files)?;
    if php {
        profile = crate::top::php_frames_only(&profile);
    }
    if profile.total() == 0 {
        return error(format!(
            "{}: every count is 0, nothing to draw",
            files.join(", ")
        ));
    }
    let view = folded::View::of(&folded::expand(&files)?);
    let title = title.unwrap_or_else(|| default_title(&files, view));
    let svg = render(&profile, &title, view)?;
    write_svg(output, &svg)
}

/// The SVG to `-o FILE`, else to standard output.
fn write_svg(output: Option<String>, svg: &[u8]) -> Res<()> {
    match output {
        Some(path) => write_output(&path, svg),
        None => {
            let mut out = io::stdout().lock();
            match out.write_all(svg).and_then(|()| out.flush()) {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
                    error(format!("writing to standard output: {}", io_msg(&e)))
                }
                _ => Ok(()),
            }
        }
    }
}

/// Writes `-o FILE` with the library's rules for the files it writes
/// (`safe_path`): reached without a directory on the way that another user
/// can write (unless sticky) or a symlink that is not ours or root's, and
/// written into only when it is new, a regular file of ours (truncated),
/// a character device or a FIFO (`-o /dev/stdout`).
pub fn write_output(path: &str, svg: &[u8]) -> Res<()> {
    use heaplive_format::safe_path;
    use std::os::fd::FromRawFd;
    let refused = |r: safe_path::Refusal| {
        if r.is_errno() {
            error(format!(
                "{path}: {}",
                io_msg(&io::Error::from_raw_os_error(r.errno))
            ))
        } else {
            error(format!("{path}: {r}"))
        }
    };
    let t = match safe_path::open_target(path.as_bytes()) {
        Ok(t) => t,
        Err(r) => return refused(r),
    };
    let (fd, st) = match safe_path::open_into(&t, libc::O_WRONLY | libc::O_CREAT, 0o666) {
        Ok(x) => x,
        Err(r) => return refused(r),
    };
    // SAFETY: a descriptor of ours, owned by the File from here on.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    let blocking = || {
        // SAFETY: fcntl on our descriptor: writes may wait for a reader.
        unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            if fl >= 0 {
                libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
            }
        }
    };
    blocking();
    let r = if st.st_mode & libc::S_IFMT == libc::S_IFREG {
        file.set_len(0)
    } else {
        Ok(())
    };
    match r
        .and_then(|()| file.write_all(svg))
        .and_then(|()| file.flush())
    {
        Ok(()) => Ok(()),
        Err(e) => error(format!("{path}: {}", io_msg(&e))),
    }
}

fn render(profile: &Profile, title: &str, view: View) -> Res<Vec<u8>> {
    render_with(profile, title, view.counts(), None)
}

/// The SVG of `profile`, its subtitle counting `what` (`live bytes`),
/// `width` pixels wide (None: as wide as its window, redrawn as it
/// changes).
pub fn render_with(
    profile: &Profile,
    title: &str,
    what: &str,
    width: Option<usize>,
) -> Res<Vec<u8>> {
    let mut opt = inferno::flamegraph::Options::default();
    opt.image_width = width;
    if width.is_some() {
        // In a page (heaplive report): the roots on top, where the frame
        // opens, however deep the stacks.
        opt.direction = inferno::flamegraph::Direction::Inverted;
    }
    opt.title = title.to_string();
    opt.subtitle = Some(format!(
        "{} {what} ({}) in {} stacks",
        grouped(profile.total()),
        human(profile.total()),
        grouped(profile.stacks.len() as u128)
    ));
    opt.count_name = "bytes".to_string();
    opt.name_type = "Function:".to_string();
    opt.colors =
        inferno::flamegraph::color::Palette::Basic(inferno::flamegraph::color::BasicPalette::Mem);
    // Colour by name hash: the same function gets the same colour in every
    // graph, so two graphs can be compared by eye.
    opt.hash = true;
    opt.deterministic = true;
    let lines: Vec<String> = profile
        .stacks
        .iter()
        .map(|(s, c)| format!("{s} {c}"))
        .collect();
    let mut svg = Vec::new();
    match inferno::flamegraph::from_lines(&mut opt, lines.iter().map(String::as_str), &mut svg) {
        Ok(()) => Ok(svg),
        Err(e) => error(format!("rendering the flame graph: {e}")),
    }
}

/// The stacks of a differential file (`heaplive diff --folded`,
/// difffolded.pl: `stack OLD NEW` on every line), with their two counts;
/// None when `files` is not one such file (one count per line: a dump).
type Differential = std::collections::BTreeMap<String, (u64, u64)>;

fn differential(files: &[String]) -> Res<Option<Differential>> {
    let [file] = files else {
        return Ok(None);
    };
    if std::path::Path::new(file).is_dir() {
        return Ok(None);
    }
    let bytes = folded::read_input(file)?;
    let name = if file == "-" { "<stdin>" } else { file };
    match folded::parse(name, &bytes) {
        Ok(_) => return Ok(None),
        Err(e) if !e.contains("two counts on every line") => return error(e),
        Err(_) => {}
    }
    // Every line ends with two counts (the parser checked the last and
    // that the stack before it ends with a number).
    let mut out = Differential::new();
    let text = String::from_utf8_lossy(&bytes);
    for (i, line) in text.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let two = heaplive_format::folded::parse_line(line)
            .and_then(|(rest, new)| Ok((heaplive_format::folded::parse_line(rest)?, new)));
        let ((stack, old), new) = two.or_else(|why| error(format!("{name}:{}: {why}", i + 1)))?;
        let slot = out.entry(stack.to_string()).or_default();
        slot.0 = slot.0.saturating_add(old);
        slot.1 = slot.1.saturating_add(new);
    }
    Ok(Some(out))
}

/// A differential flame graph (inferno's): boxes as wide as the NEW
/// bytes, red where a stack grew, blue where it shrank, the deeper the
/// colour the larger the change; stacks gone since OLD have no width.
fn render_differential(
    d: &Differential,
    file: &str,
    title: Option<String>,
    php: bool,
) -> Res<Vec<u8>> {
    if php {
        return crate::usage(
            "--php does not apply to a differential file: diff the --php views instead",
        );
    }
    let (old, new) = d.values().fold((0u128, 0u128), |(a, b), &(o, n)| {
        (a + o as u128, b + n as u128)
    });
    if new == 0 {
        return error(format!(
            "{file}: every NEW count is 0, nothing to draw (widths are the NEW bytes)"
        ));
    }
    let mut opt = inferno::flamegraph::Options::default();
    let base = Path::new(file)
        .file_name()
        .and_then(|b| b.to_str())
        .unwrap_or(file);
    opt.title = title.unwrap_or_else(|| format!("Change in the heap: {base}"));
    opt.subtitle = Some(format!(
        "{} -> {} bytes ({} -> {}); width: the new bytes; red grew, blue shrank",
        grouped(old),
        grouped(new),
        human(old),
        human(new)
    ));
    opt.count_name = "bytes".to_string();
    opt.name_type = "Function:".to_string();
    opt.deterministic = true;
    let lines: Vec<String> = d.iter().map(|(s, (o, n))| format!("{s} {o} {n}")).collect();
    let mut svg = Vec::new();
    match inferno::flamegraph::from_lines(&mut opt, lines.iter().map(String::as_str), &mut svg) {
        Ok(()) => Ok(svg),
        Err(e) => error(format!("rendering the flame graph: {e}")),
    }
}

/// What a dump file's name says: `heaplive.<exe>.<pid>.<n>.folded` (or
/// `<name>.<pid>.<n>.folded` of a template like `fpm.%p.%n.folded`; a view
/// `.alloc`, `.peak` or a request-peak dump's `.request` before `.folded`).
/// The exe may itself contain dots (`php-fpm8.2`), so this parses from the
/// end.
pub fn parse_name(path: &str) -> Option<(String, u32, u32)> {
    let base = Path::new(path).file_name()?.to_str()?;
    // `heaplive.EXE.PID.N` (the default template) or any `X.PID.N` (a
    // template such as `fpm.%p.%n.folded`).
    let core = base.strip_suffix(".folded")?;
    let core = core.strip_prefix("heaplive.").unwrap_or(core);
    // A view's file, or a PHP request-peak dump (`NAME.request.folded`):
    // the process and dump number are NAME's.
    let core = [".alloc", ".peak", ".request"]
        .iter()
        .find_map(|v| core.strip_suffix(v))
        .unwrap_or(core);
    let (rest, n) = core.rsplit_once('.')?;
    let (exe, pid) = rest.rsplit_once('.')?;
    if exe.is_empty() {
        return None;
    }
    Some((exe.to_string(), pid.parse().ok()?, n.parse().ok()?))
}

fn default_title(files: &[String], view: View) -> String {
    let what = view.title();
    let newest = files
        .iter()
        .filter_map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
        .max()
        .map(local_time);
    let when = newest.map(|t| format!(", {t}")).unwrap_or_default();
    let names: Vec<_> = files.iter().map(|f| parse_name(f)).collect();
    if let [Some((exe, pid, n))] = names.as_slice() {
        return format!("{what} of {exe} (pid {pid}), dump {n}{when}");
    }
    if let [single] = files {
        let base = Path::new(single)
            .file_name()
            .and_then(|b| b.to_str())
            .unwrap_or(single);
        return format!("{what}: {base}{when}");
    }
    let exes: Vec<&str> = names.iter().flatten().map(|(e, _, _)| e.as_str()).collect();
    match exes.first() {
        Some(first) if exes.len() == files.len() && exes.iter().all(|e| e == first) => {
            format!("{what} of {first}, {} dumps summed{when}", files.len())
        }
        _ => format!("{what}, {} files summed{when}", files.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for (name, want) in [
            (
                "/tmp/heaplive.php-fpm8.2.4242.3.folded",
                Some(("php-fpm8.2", 4242, 3)),
            ),
            ("heaplive.a.1.2.folded", Some(("a", 1, 2))),
            ("heaplive.1.2.folded", None),
            ("heaplive.a.1.2.peak.folded", Some(("a", 1, 2))),
            ("other.folded", None),
            ("/d/fpm.4242.7.request.folded", Some(("fpm", 4242, 7))),
            (
                "heaplive.php-fpm8.2.4242.3.request.folded",
                Some(("php-fpm8.2", 4242, 3)),
            ),
        ] {
            let want = want.map(|(exe, pid, n)| (exe.to_string(), pid, n));
            assert_eq!(parse_name(name), want, "{name}");
        }
    }
}
