//! Small pure helpers: byte sizes for people, the grammars of the
//! `HEAPLIVE_*` settings (sizes, durations, signals), error text, times.

/// `1536` -> `1.5 KiB`. Bytes below 1 KiB are exact.
pub fn human(bytes: u128) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Signed: `+1.5 MiB`, `-512 B`, `0 B`.
pub fn human_signed(delta: i128) -> String {
    match delta {
        0 => "0 B".to_string(),
        d if d > 0 => format!("+{}", human(d as u128)),
        d => format!("-{}", human(d.unsigned_abs())),
    }
}

/// `part` as a percentage of `whole`, `12.3%`.
pub fn percent(part: u128, whole: u128) -> String {
    if whole == 0 {
        return "-".to_string();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

/// `1234567` -> `1,234,567`.
pub fn grouped(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `HEAPLIVE_SAMPLE_INTERVAL`: an integer with an optional unit, `B`, `K`,
/// `KB`, `KiB`, `M`.., `G`.. (powers of 1024, any case), as the library
/// reads it. Returns the bytes.
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(s.len());
    if digits == 0 {
        return None;
    }
    let mult: u64 = match s[digits..].to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    s[..digits].parse::<u64>().ok()?.checked_mul(mult)
}

/// `HEAPLIVE_DUMP_EVERY`: an integer with an optional unit, `s`, `ms`,
/// `m`/`min`, `h`, as the library reads it. Returns milliseconds.
pub fn parse_interval_ms(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(s.len());
    if digits == 0 {
        return None;
    }
    let mult: u64 = match &s[digits..] {
        "" | "s" | "S" => 1000,
        "ms" => 1,
        "m" | "M" | "min" => 60_000,
        "h" | "H" => 3_600_000,
        _ => return None,
    };
    s[..digits].parse::<u64>().ok()?.checked_mul(mult)
}

/// Timeouts: seconds, `30`, `30s`, `5m`, `1h`;
/// fractions allowed (`0.5`). Returns seconds.
pub fn parse_seconds(s: &str) -> Option<f64> {
    let (num, mult) = match s.char_indices().last()? {
        (i, 's') => (&s[..i], 1.0),
        (i, 'm') => (&s[..i], 60.0),
        (i, 'h') => (&s[..i], 3600.0),
        _ => (s, 1.0),
    };
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let v: f64 = num.parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v * mult)
}

const SIGNALS: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("STKFLT", libc::SIGSTKFLT),
    ("CHLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("IO", libc::SIGIO),
    ("PWR", libc::SIGPWR),
    ("SYS", libc::SIGSYS),
];

/// `HEAPLIVE_SIGNAL`: `USR2`, `SIGUSR2`, `usr2`, `RTMIN+3`, `RTMAX-1`, `12`,
/// or `none`. `Ok(None)` means none.
pub fn parse_signal(s: &str) -> Result<Option<i32>, String> {
    let up = s.trim().to_ascii_uppercase();
    if up == "NONE" || up == "OFF" || up == "0" {
        return Ok(None);
    }
    let name = up.strip_prefix("SIG").unwrap_or(&up);
    let (rtmin, rtmax) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    let bad = || format!("unknown signal '{s}' (try USR1, USR2, RTMIN+3, a number, or none)");
    let number = if name.bytes().all(|b| b.is_ascii_digit()) {
        name.parse::<i32>().map_err(|_| bad())?
    } else if let Some(off) = name.strip_prefix("RTMIN") {
        rtmin + rt_offset(off, '+').ok_or_else(bad)?
    } else if let Some(off) = name.strip_prefix("RTMAX") {
        rtmax - rt_offset(off, '-').ok_or_else(bad)?
    } else {
        SIGNALS.iter().find(|(n, _)| *n == name).ok_or_else(bad)?.1
    };
    if number < 1 || number > rtmax {
        return Err(format!("signal '{s}' is out of range (1..{rtmax})"));
    }
    Ok(Some(number))
}

fn rt_offset(s: &str, sign: char) -> Option<i32> {
    if s.is_empty() {
        return Some(0);
    }
    let n: i32 = s.strip_prefix(sign)?.parse().ok()?;
    let span = libc::SIGRTMAX() - libc::SIGRTMIN();
    (0..=span).contains(&n).then_some(n)
}

/// `12` -> `SIGUSR2`, `37` -> `SIGRTMIN+3`.
pub fn signal_name(sig: i32) -> String {
    if let Some((name, _)) = SIGNALS.iter().find(|(_, n)| *n == sig) {
        return format!("SIG{name}");
    }
    let rtmin = libc::SIGRTMIN();
    if sig >= rtmin && sig <= libc::SIGRTMAX() {
        return match sig - rtmin {
            0 => "SIGRTMIN".to_string(),
            k => format!("SIGRTMIN+{k}"),
        };
    }
    format!("signal {sig}")
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(64 << 20), "64.0 MiB");
        assert_eq!(human_signed(-2048), "-2.0 KiB");
        assert_eq!(human_signed(5), "+5 B");
        assert_eq!(grouped(1234567), "1,234,567");
        assert_eq!(grouped(123), "123");
        assert_eq!(parse_bytes("512K"), Some(512 << 10));
        assert_eq!(parse_bytes("1"), Some(1));
        assert_eq!(parse_bytes("2g"), Some(2 << 30));
        assert_eq!(parse_bytes("K"), None);
        assert_eq!(parse_bytes("-1"), None);
        assert_eq!(parse_bytes("1.5M"), None);
        assert_eq!(parse_bytes("64KiB"), Some(64 << 10));
        assert_eq!(parse_bytes("3b"), Some(3));
        assert_eq!(parse_interval_ms("5m"), Some(300_000));
        assert_eq!(parse_interval_ms("500ms"), Some(500));
        assert_eq!(parse_interval_ms("0.5"), None);
        assert_eq!(parse_seconds("5m"), Some(300.0));
        assert_eq!(parse_seconds("0.5"), Some(0.5));
        assert_eq!(parse_seconds("x"), None);
    }

    #[test]
    fn signals() {
        assert_eq!(parse_signal("USR2"), Ok(Some(libc::SIGUSR2)));
        assert_eq!(parse_signal("sigusr1"), Ok(Some(libc::SIGUSR1)));
        assert_eq!(parse_signal("none"), Ok(None));
        assert_eq!(parse_signal("RTMIN+3"), Ok(Some(libc::SIGRTMIN() + 3)));
        assert_eq!(parse_signal("RTMAX-1"), Ok(Some(libc::SIGRTMAX() - 1)));
        assert_eq!(parse_signal("10"), Ok(Some(10)));
        assert!(parse_signal("FOO").is_err());
        assert!(parse_signal("RTMIN+99").is_err());
        assert!(parse_signal("999").is_err());
        assert_eq!(signal_name(libc::SIGUSR2), "SIGUSR2");
        assert_eq!(signal_name(libc::SIGRTMIN() + 3), "SIGRTMIN+3");
    }
}
