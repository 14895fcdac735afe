//! Links libgcc's DWARF unwinder (`unwind-dw2.o`, `unwind-dw2-fde-dip.o`
//! from the toolchain's `libgcc_eh.a`, the objects `-static-libgcc` uses)
//! into the preload library, so that `libgcc_s.so.1` is no longer NEEDED:
//! a process that never samples does not load it (nor run its constructor,
//! `__cpu_indicator_init`). The objects' symbols are hidden, and rustc's
//! version script keeps everything but our exports local, so nothing here
//! can interpose the program's own `_Unwind_*` (`nm -D` shows none).
//! Stacks are the same: the copy is the system's libgcc code, and when the
//! process has loaded libgcc_s itself heaplive uses that one
//! (`hot::unwind::find_system_libgcc`).
//!
//! When the archive cannot be found or unpacked, nothing is linked here and
//! std's `-lgcc_s` provides the unwinder as before (with a build warning).

use std::path::PathBuf;
use std::process::Command;

const MEMBERS: [&str; 2] = ["unwind-dw2.o", "unwind-dw2-fde-dip.o"];

fn main() {
    println!("cargo:rerun-if-changed=src/build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let target = std::env::var("TARGET").unwrap_or_default();
    if !target.starts_with("x86_64-") || !target.contains("linux-gnu") {
        return;
    }
    // The start-up layout (src/layout.ld: the code and variables a process that
    // never samples touches, grouped).
    let layout = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("src/layout.ld");
    println!("cargo:rerun-if-changed={}", layout.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-T,{}", layout.display());
    match static_unwinder() {
        Ok(dir) => {
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-lib=static:+whole-archive=heaplive_unwind");
        }
        Err(why) => println!(
            "cargo:warning=libgcc's unwinder not linked statically ({why}); libgcc_s.so.1 stays NEEDED"
        ),
    }
}

fn static_unwinder() -> Result<PathBuf, String> {
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let found = Command::new(&cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .map_err(|e| format!("{cc}: {e}"))?;
    let archive = PathBuf::from(String::from_utf8_lossy(&found.stdout).trim());
    if !archive.is_absolute() || !archive.is_file() {
        return Err(format!("{cc} does not know libgcc_eh.a"));
    }
    println!("cargo:rerun-if-changed={}", archive.display());
    let work = out.join("libgcc_eh");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;
    run(Command::new("ar")
        .arg("x")
        .arg(&archive)
        .args(MEMBERS)
        .current_dir(&work))?;
    let lib = out.join("libheaplive_unwind.a");
    let _ = std::fs::remove_file(&lib);
    run(Command::new("ar")
        .arg("crs")
        .arg(&lib)
        .args(MEMBERS.iter().map(|m| work.join(m))))?;
    Ok(out)
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let what = format!("{cmd:?}");
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("{what}: {s}")),
        Err(e) => Err(format!("{what}: {e}")),
    }
}
