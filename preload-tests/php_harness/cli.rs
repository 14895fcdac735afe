//! php-cli under the preload, or beside it without: a script run in a test
//! directory that writes `ready` (its pid and a figure) and waits for
//! `release`.

use super::{clean_env, log_of, php_bin, signal_dump, wait_for};
use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

/// `php` in `dir` with `ld_preload` as LD_PRELOAD or, without the preload,
/// as XX_PRELOAD (the same variables and sizes: PHP copies the environment
/// into its own memory, so `memory_get_usage()` depends on it), heaplive's
/// output and log in `dir`, then `env`. Arguments are the caller's.
pub(crate) fn php_command(
    dir: &Path,
    preload: bool,
    ld_preload: impl AsRef<std::ffi::OsStr>,
    env: &[(&str, &str)],
) -> Command {
    let mut c = Command::new(php_bin());
    c.current_dir(dir);
    clean_env(&mut c);
    c.env(
        if preload { "LD_PRELOAD" } else { "XX_PRELOAD" },
        ld_preload,
    )
    .env("HEAPLIVE_OUTPUT", dir.join("heaplive.%e.%p.%n.folded"))
    .env("HEAPLIVE_LOG", dir.join("heaplive.log"));
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// Runs `php script` in `dir` with (or without) the preload
/// ([`php_command`]); returns the process, its stdout and stderr piped.
pub(crate) fn spawn_php(dir: &Path, script: &Path, preload: bool, env: &[(&str, &str)]) -> Child {
    spawn_php_with(dir, script, preload, &lib().display().to_string(), env)
}

/// [`spawn_php`] with `ld_preload` for the library alone (another library
/// before heaplive's, say).
pub(crate) fn spawn_php_with(
    dir: &Path,
    script: &Path,
    preload: bool,
    ld_preload: &str,
    env: &[(&str, &str)],
) -> Child {
    php_command(dir, preload, ld_preload, env)
        .arg(script)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", php_bin()))
}

/// Waits for the script's `ready` file: (pid, delta).
pub(crate) fn wait_ready(dir: &Path, child: &mut Child) -> (u32, u64) {
    let ctx = || log_of(dir);
    wait_for("the script's ready file", &ctx, || {
        if let Ok(Some(st)) = child.try_wait() {
            panic!("php exited early: {}", early_exit(dir, child, st));
        }
        let t = std::fs::read_to_string(dir.join("ready")).ok()?;
        let (p, d) = t.trim().split_once(' ')?;
        Some((p.parse().ok()?, d.parse().ok()?))
    })
}

/// Everything that tells why php ended before its script was ready: the
/// raw wait status, php's stdout and stderr (where ld.so and php say
/// why), heaplive's log and the files left in `dir` (a core file?).
fn early_exit(dir: &Path, child: &mut Child, st: std::process::ExitStatus) -> String {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    format!(
        "{st} (raw wait status {:#x})\n--- stdout:\n{out}\n--- stderr:\n{err}\n--- heaplive.log:\n{}\n--- files: {files:?}",
        st.into_raw(),
        log_of(dir)
    )
}

/// Creates `release`: the script ends; its output.
pub(crate) fn finish(dir: &Path, child: Child) -> Output {
    std::fs::write(dir.join("release"), "").unwrap();
    child.wait_with_output().unwrap()
}

/// Dumps the waiting script `pid` by SIGUSR2, then releases it: (the
/// signal dump, the script's output).
pub(crate) fn dump_then_finish(dir: &Path, child: Child, pid: u32) -> (PathBuf, Output) {
    let file = signal_dump(dir, pid, "the signal dump", &|| log_of(dir));
    (file, finish(dir, child))
}

/// The PHP a script for [`dump_while_ready`] ends with (before its own
/// output): writes `ready` (its pid and `$delta`), then waits up to 15 s
/// for `release`.
pub(crate) const READY_THEN_WAIT: &str = "\
file_put_contents(__DIR__ . '/ready.tmp', getmypid() . ' ' . $delta);\n\
rename(__DIR__ . '/ready.tmp', __DIR__ . '/ready');\n\
for ($i = 0; $i < 300 && !file_exists(__DIR__ . '/release'); $i++) { usleep(50000); }\n";

/// Runs `script` (which writes `ready` with its pid and a byte count, then
/// waits for `release`) with the preload and `env`, dumps it by signal
/// while it waits, and asserts it ends well; returns (dump, the script's
/// count, its stdout).
pub(crate) fn dump_while_ready(
    dir: &Path,
    script: &Path,
    env: &[(&str, &str)],
) -> (PathBuf, u64, String) {
    super::require_php();
    let mut child = spawn_php(dir, script, true, env);
    let (pid, delta) = wait_ready(dir, &mut child);
    let (file, out) = dump_then_finish(dir, child, pid);
    assert!(out.status.success(), "{}\n{}", show(&out), log_of(dir));
    (file, delta, stdout(&out))
}
