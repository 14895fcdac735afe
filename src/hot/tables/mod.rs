//! The tables of `hot/`: what heaplive records, in memory it maps itself,
//! written on allocation paths and read by dumps. Re-exported by
//! `hot/mod.rs` as `crate::hot::<name>`.

pub mod live;
pub mod names;
pub mod peak;
pub mod shadow;
pub mod stacks;
