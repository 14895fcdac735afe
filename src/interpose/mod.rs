pub mod alloc;
pub mod dl;
