//! Byte sizes as people write them: `1.67GiB`, `512MiB`, `2GB`, `1e9`.

use tensorfit_core::{Error, Result};

/// Parses a size. Binary units (KiB, MiB, GiB, TiB) are powers of 1024, decimal units
/// (kB, MB, GB, TB) powers of 1000, a bare number is bytes and must be whole (`1.5` is
/// refused rather than read as one or two bytes: a unit was surely meant).
/// Case-insensitive, spaces allowed between number and unit.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .trim()
        .parse()
        .map_err(|_| Error::input(format!("`{text}` is not a size (try 1.67GiB or 512MiB)")))?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0f64.powi(4),
        other => {
            return Err(Error::input(format!(
            "unknown size unit `{other}` in `{text}` (use B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)"
        )))
        }
    };
    let bytes = value * scale;
    if bytes < 0.0 {
        return Err(Error::input(format!(
            "`{text}` is negative: a size is 0 or more"
        )));
    }
    if !bytes.is_finite() || bytes > u64::MAX as f64 {
        return Err(Error::input(format!(
            "`{text}` is more bytes than can be counted (at most 16 EiB)"
        )));
    }
    if scale == 1.0 && value.fract() != 0.0 {
        return Err(Error::input(format!(
            "`{text}` is a fraction of a byte: give a whole number of bytes or a unit (such as 1.5GiB or 1.5GB)"
        )));
    }
    Ok(bytes.round() as u64)
}

/// Seconds for people: `123 ms` below a second, `4.5 s` above, `none` for NaN.
pub fn format_seconds(s: f64) -> String {
    if s.is_nan() {
        "none".into()
    } else if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{s:.1} s")
    }
}

/// Formats bytes with a binary unit and three significant digits: `1.67 GiB`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else if v >= 100.0 {
        format!("{v:.0} {}", UNITS[u])
    } else if v >= 10.0 {
        format!("{v:.1} {}", UNITS[u])
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_binary_decimal_and_bare_sizes() {
        assert_eq!(
            parse_size("1.67GiB").unwrap(),
            (1.67 * 1073741824.0f64).round() as u64
        );
        assert_eq!(parse_size("512 MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("2GB").unwrap(), 2_000_000_000);
        assert_eq!(parse_size("1e9").unwrap(), 1_000_000_000);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("1.5 parsecs").is_err());
        let e = parse_size("-3GiB").unwrap_err().to_string();
        assert!(e.contains("`-3GiB` is negative"), "{e}");
        for huge in ["1e30", "99999999999999999999", "1e400"] {
            let e = parse_size(huge).unwrap_err().to_string();
            assert!(e.contains("more bytes than can be counted"), "{huge}: {e}");
        }
        let e = parse_size("1.5").unwrap_err().to_string();
        assert!(e.contains("fraction of a byte"), "{e}");
        assert!(parse_size("0.5B").is_err());
        assert_eq!(parse_size("1.5KiB").unwrap(), 1536);
    }

    #[test]
    fn formats_three_digits() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(1536), "1.50 KiB");
        assert_eq!(format_bytes(200_000_000), "191 MiB");
        assert_eq!(format_bytes((1.67 * 1073741824.0) as u64), "1.67 GiB");
    }
}
