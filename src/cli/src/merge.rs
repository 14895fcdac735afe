//! `heaplive merge`: sum several folded files into one, to stdout.

use crate::Res;
use crate::cli::MergeArgs;
use crate::folded;
use crate::table::emit;
use heaplive_format::samples;

pub fn main(a: MergeArgs) -> Res<()> {
    if a.samples {
        return merge_samples(&a.files);
    }
    if !a.variance {
        let profile = folded::load_all(&a.files)?;
        return emit(|out| profile.write(out));
    }
    // The variances of the dumps (their samples files, or the variance
    // files of older dumps): an empty one (every stack exact) adds nothing.
    let mut sum = folded::Profile::default();
    for f in folded::expand(&a.files)? {
        if f.strip_suffix(".folded").is_none() {
            return crate::error(format!(
                "{f}: not a .folded file (--variance reads the samples file NAME.samples.folded beside NAME.folded)"
            ));
        }
        let Some(v) = crate::top::companions_of(std::slice::from_ref(&f), "variance") else {
            return crate::error(no_samples(&f));
        };
        sum.add(v);
    }
    emit(|out| sum.write(out))
}

fn no_samples(f: &str) -> String {
    format!(
        "{f}: no samples file with variances beside it (NAME.samples.folded, written by sampled-mode dumps with the samples view)"
    )
}

/// `merge --samples`: the samples file of the sum (version 2), its rows
/// under `live` (they go with the merged `NAME.folded`): per stack the
/// samples and the variances of every file added up, and the size rows of
/// the live files' samples files.
fn merge_samples(files: &[String]) -> Res<()> {
    let files = folded::expand(files)?;
    let mut sum = samples::Samples {
        interval: crate::top::interval_of_files(&files),
        ..samples::Samples::default()
    };
    for f in files {
        let one = std::slice::from_ref(&f);
        let Some(variances) = crate::top::companions_of(one, "variance") else {
            return crate::error(no_samples(&f));
        };
        let counts = crate::top::companions_of(one, "samples");
        let bytes = folded::load(&f)?;
        for stack in bytes.stacks.keys() {
            let stat = samples::Stat {
                samples: counts
                    .as_ref()
                    .map(|c| c.stacks.get(stack).copied().unwrap_or(0)),
                variance: variances.stacks.get(stack).copied().unwrap_or(0) as f64,
            };
            sum.add("live", stack, stat);
        }
        // A live file's size rows (the live samples by size class).
        if let Some((dump, "live")) = crate::top::dump_and_view(&f) {
            let path = format!("{dump}.samples.folded");
            if let Some(bytes) = folded::read_regular_text(&path)
                && let Ok(s) = samples::parse(&path, &bytes)
            {
                for (stack, classes) in &s.sizes {
                    for (&class, &size) in classes {
                        sum.add_size(stack, class, size);
                    }
                }
            }
        }
    }
    emit(|out| sum.write(out))
}
