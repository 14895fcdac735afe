//! `heaplive merge`: sum several folded files into one, to stdout.

use crate::Res;
use crate::cli::MergeArgs;
use crate::folded;
use crate::table::emit;

pub fn main(a: MergeArgs) -> Res<()> {
    let profile = folded::load_all(&a.files)?;
    emit(|out| profile.write(out))
}
