//! `heaplive merge`: sum several folded files into one, to stdout.

use crate::Res;
use crate::cli::MergeArgs;
use crate::folded;
use crate::table::emit;

pub fn main(a: MergeArgs) -> Res<()> {
    if !a.variance {
        let profile = folded::load_all(&a.files)?;
        return emit(|out| profile.write(out));
    }
    // The variance files of the dumps: an empty one (every stack exact)
    // adds nothing.
    let mut sum = folded::Profile::default();
    for f in folded::expand(&a.files)? {
        let Some(base) = f.strip_suffix(".folded") else {
            return crate::error(format!(
                "{f}: not a .folded file (--variance reads NAME.variance.folded beside NAME.folded)"
            ));
        };
        let companion = format!("{base}.variance.folded");
        let bytes = match std::fs::read(&companion) {
            Ok(b) => b,
            Err(e) => {
                return crate::error(format!(
                    "{companion}: {} (written by sampled-mode dumps with the samples view)",
                    crate::units::io_msg(&e)
                ));
            }
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        sum.try_add(folded::parse(&companion, &bytes).or_else(crate::error)?)
            .or_else(crate::error)?;
    }
    emit(|out| sum.write(out))
}
