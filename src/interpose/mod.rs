pub mod alloc;
pub mod api;
pub mod cxx;
pub mod dl;
pub mod process;
pub mod signals;
