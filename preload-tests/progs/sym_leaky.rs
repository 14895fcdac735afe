// A Rust function that leaks a Vec (preload-tests/symbols.rs): built with
// `rustc -g -C opt-level=0 --crate-name leaky`, its frame must read
// `leaky::leaky_rust_fn` (no hash) demangled, `_ZN5leaky13leaky_rust_fn...`
// with HEAPLIVE_DEMANGLE=0.
#[inline(never)]
fn leaky_rust_fn(n: usize) {
    let v: Vec<u8> = vec![7u8; n];
    std::mem::forget(v);
}

fn main() {
    for _ in 0..4 {
        leaky_rust_fn(123_456);
    }
    println!("done");
}
