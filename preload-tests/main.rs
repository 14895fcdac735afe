//! Tests that run real programs under the preload: C and C++ programs in
//! `progs/` compiled by the tests (named `noinline` functions, distinctive
//! sizes), and installed programs nobody here wrote. They need
//! `target/release/libheaplive.so`: `make test` builds it first.

mod adversary25;
mod attach;
mod cli;
mod cli_labels;
mod cli_processes;
mod cli_real;
mod cli_robust;
mod common;
mod completions;
mod config_errors;
mod core_exact;
mod dump_views;
mod glibc;
mod hardening3;
mod heaptrack;
mod install;
mod intervals;
mod jit_frames;
mod leaks;
mod limits;
mod links;
mod man_page;
mod other_allocators;
mod ownmem;
mod peak_true;
mod php_app;
mod php_cost;
mod php_fpm;
mod php_hooks;
mod php_mode;
mod php_requests;
mod php_xdebug;
mod readme_examples;
mod real_programs;
mod report;
mod run_children;
mod runtime_pools;
mod sampled;
mod security;
mod services;
mod settings_names;
mod signal_waits;
mod signals_fork;
mod signals_self;
mod startcost;
mod stress;
mod symbols;
mod temporary;
mod timeline;
mod top_pool;
mod unwind;
mod views;
mod witness;
