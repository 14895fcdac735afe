//! `heaplive run`'s part of the report: the command that draws the run's
//! dumps in one page, printed after the list of files, and `--report FILE`,
//! which writes that page when the program ends.

use crate::Res;
use crate::cli::ReportArgs;
use std::path::PathBuf;

/// At most this many dumps are named on the printed command line; more are
/// named by their directory.
const NAMED: usize = 4;

/// `heaplive: all of it in one page: heaplive report FILES -o report.html`.
pub fn hint(dumps: &[&PathBuf]) -> String {
    let shell = |p: &std::path::Path| {
        let s = p.to_string_lossy();
        if s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"./_-+%,:=@".contains(&b))
        {
            s.into_owned()
        } else {
            format!("'{}'", s.replace('\'', "'\\''"))
        }
    };
    let args: Vec<String> = if dumps.len() <= NAMED {
        dumps.iter().map(|d| shell(d)).collect()
    } else {
        let mut dirs: Vec<String> = dumps
            .iter()
            .map(|d| {
                shell(
                    d.parent()
                        .filter(|p| !p.as_os_str().is_empty())
                        .unwrap_or(std::path::Path::new(".")),
                )
            })
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs
    };
    format!(
        "heaplive: all of it in one page: heaplive report {} -o report.html",
        args.join(" ")
    )
}

/// Writes the report page of `dumps` to `page` (nothing to draw: one line).
pub fn write(page: &str, dumps: &[PathBuf], quiet: bool) -> Res<()> {
    if dumps.is_empty() {
        if !quiet {
            say!("heaplive: no dumps, so no report page ({page})");
        }
        return Ok(());
    }
    crate::report::main(ReportArgs {
        output: Some(page.to_string()),
        title: None,
        files: dumps
            .iter()
            .map(|d| d.to_string_lossy().into_owned())
            .collect(),
    })?;
    if !quiet {
        say!("heaplive: report page: {page}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_names_few_dumps_and_else_their_directory() {
        let a = PathBuf::from("/t/heaplive.a.1.1.folded");
        let b = PathBuf::from("/t/x y/heaplive.a.1.2.folded");
        assert_eq!(
            hint(&[&a, &b]),
            "heaplive: all of it in one page: heaplive report /t/heaplive.a.1.1.folded '/t/x y/heaplive.a.1.2.folded' -o report.html"
        );
        let many: Vec<PathBuf> = (1..=6)
            .map(|n| PathBuf::from(format!("/t/heaplive.a.1.{n}.folded")))
            .collect();
        let refs: Vec<&PathBuf> = many.iter().collect();
        assert_eq!(
            hint(&refs),
            "heaplive: all of it in one page: heaplive report /t -o report.html"
        );
    }
}
