//! C++ and Rust names made readable.

/// Demangle C++ (`std::vector<int, std::allocator<int> >::push_back`: no
/// parameters, no return type) and Rust (`{:#}`: no hash) names.
pub fn demangle_name(name: &str, demangle: bool) -> String {
    if !demangle {
        return name.to_owned();
    }
    // Rust legacy names are valid C++ manglings too: try Rust first. C++
    // names that are not Rust-shaped fail its parser and fall through.
    if (name.starts_with("_R") || name.starts_with("_ZN"))
        && let Ok(d) = rustc_demangle::try_demangle(name)
    {
        return format!("{d:#}");
    }
    if name.starts_with("_Z")
        && let Ok(sym) = cpp_demangle::Symbol::new(name)
    {
        let opts = cpp_demangle::DemangleOptions::new()
            .no_params()
            .no_return_type();
        if let Ok(s) = sym.demangle_with_options(&opts) {
            return s;
        }
    }
    name.to_owned()
}
