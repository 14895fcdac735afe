//! Small helpers of the command: error text, times. Sizes, durations,
//! signals and byte formatting come from the contract crate.

pub use heaplive_format::units::{grouped, human, human_signed, percent};

/// An I/O error as text without Rust's ` (os error 2)` suffix.
pub fn io_msg(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Local time as `2024-05-01 12:00:03`, for titles.
pub fn local_time(t: std::time::SystemTime) -> String {
    let secs = match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_secs() as libc::time_t,
        Err(_) => return "unknown time".to_string(),
    };
    // SAFETY: localtime_r writes only into `tm`, which we own; strftime
    // writes at most `buf.len()` bytes including the NUL and returns how
    // many it wrote before it (0 on overflow).
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return "unknown time".to_string();
        }
        let mut buf = [0u8; 64];
        let n = libc::strftime(
            buf.as_mut_ptr().cast(),
            buf.len(),
            c"%Y-%m-%d %H:%M:%S".as_ptr(),
            &tm,
        );
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}
