//! Numbers for people: `1.5 KiB`, `+2.0 MiB`, `1,234,567`, `12.3%`. The
//! `Display` types format without allocating (the library's log lines).

use core::fmt;

/// Human units: `512 B`, `1.5 KiB`, `256.0 MiB` (bytes below 1 KiB exact).
#[derive(Clone, Copy, Debug)]
pub struct HumanBytes(pub f64);

pub fn human_bytes(n: f64) -> HumanBytes {
    HumanBytes(n)
}

impl fmt::Display for HumanBytes {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
        let mut v = self.0;
        let mut u = 0;
        while v.abs() >= 1024.0 && u + 1 < UNITS.len() {
            v /= 1024.0;
            u += 1;
        }
        match UNITS.get(u) {
            Some(unit) if u > 0 => write!(f, "{v:.1} {unit}"),
            _ => write!(f, "{} B", v.round() as i64),
        }
    }
}

/// `1536` -> `1.5 KiB`.
pub fn human(bytes: u128) -> String {
    HumanBytes(bytes as f64).to_string()
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

/// Thousands separators: `4,096`.
#[derive(Clone, Copy, Debug)]
pub struct Grouped<T = u128>(pub T);

impl<T: Copy + Into<u128>> fmt::Display for Grouped<T> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let mut digits = [0u8; 40];
        let mut n: u128 = self.0.into();
        let mut len = 0;
        while len < digits.len() {
            digits[len] = b'0' + (n % 10) as u8;
            len += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for i in (0..len).rev() {
            write!(f, "{}", digits[i] as char)?;
            if i > 0 && i % 3 == 0 {
                f.write_str(",")?;
            }
        }
        Ok(())
    }
}

/// `1234567` -> `1,234,567`.
pub fn grouped(n: u128) -> String {
    Grouped(n).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(64 << 20), "64.0 MiB");
        assert_eq!(human(3 << 30), "3.0 GiB");
        assert_eq!(
            human(u128::MAX),
            format!("{:.1} EiB", u128::MAX as f64 / 2f64.powi(60))
        );
        assert_eq!(human_signed(-2048), "-2.0 KiB");
        assert_eq!(human_signed(5), "+5 B");
        assert_eq!(human_bytes(256.0 * 1048576.0).to_string(), "256.0 MiB");
        assert_eq!(percent(1, 8), "12.5%");
        assert_eq!(percent(1, 0), "-");
        assert_eq!(grouped(1234567), "1,234,567");
        assert_eq!(grouped(123), "123");
        assert_eq!(grouped(0), "0");
        assert_eq!(Grouped(4096u64).to_string(), "4,096");
        assert_eq!(
            grouped(u128::MAX),
            "340,282,366,920,938,463,463,374,607,431,768,211,455"
        );
    }
}
