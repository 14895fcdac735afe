pub mod alloc;
pub mod api;
pub mod attach;
pub mod cxx;
pub mod dl;
pub mod php;
pub mod process;
pub mod signals;
