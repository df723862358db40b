//! Human-friendly durations (`250ms`, `5s`, `2m`) and sizes (`64B`, `16KiB`).

use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration written with a unit: `ns`, `us`, `ms`, `s`, `m`, `h`; parts may be
/// combined (`1m30s`) and the number may have a fraction (`1.5s`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Duration);

/// A byte size written with a unit: `B`, `KiB`, `MiB`, `GiB` (powers of 1024) or
/// `KB`, `MB`, `GB` (powers of 1000).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Size(pub u64);

/// The longest duration a spec may write: a year, far past any campaign, and
/// small enough that sums of a plan's durations and instants offset by them
/// never overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// The largest size a spec may write, 1 PiB: every size then fits the signed
/// 64-bit fields (Docker's memory limit) it ends up in.
pub const MAX_SIZE: u64 = 1 << 50;

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration: write e.g. 250ms, 5s or 2m".into());
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if num_len == 0 {
            return Err(format!("invalid duration `{s}`: expected a number, e.g. 250ms, 5s, 2m"));
        }
        let number: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("invalid duration `{s}`: `{}` is not a number", &rest[..num_len]))?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let seconds_per_unit = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("duration `{s}` has no unit: write e.g. `{s}s` or `{s}ms`")),
            other => return Err(format!("invalid duration `{s}`: unknown unit `{other}` (use ns, us, ms, s, m or h)")),
        };
        total += number * seconds_per_unit;
        rest = &rest[unit_len..];
    }
    // Checked here, so no caller can overflow (or panic converting) later.
    match Duration::try_from_secs_f64(total) {
        Ok(d) if d <= MAX_DURATION => Ok(d),
        _ => Err(format!("duration `{s}` is too large (at most 8760h, a year)")),
    }
}

pub fn parse_size(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let num_len = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    if num_len == 0 {
        return Err(format!("invalid size `{s}`: expected a number with a unit, e.g. 64B or 16KiB"));
    }
    let number: f64 =
        s[..num_len].parse().map_err(|_| format!("invalid size `{s}`: `{}` is not a number", &s[..num_len]))?;
    let multiplier: u64 = match s[num_len..].trim() {
        "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "" => return Err(format!("size `{s}` has no unit: write e.g. `{s}B` or `{s}KiB`")),
        other => {
            return Err(format!("invalid size `{s}`: unknown unit `{other}` (use B, KiB, MiB, GiB, KB, MB or GB)"))
        }
    };
    let bytes = (number * multiplier as f64).round();
    // Compared as a float: a cast would clamp an absurd size to u64::MAX.
    if bytes.is_nan() || bytes > MAX_SIZE as f64 {
        return Err(format!("size `{s}` is too large (at most 1048576GiB)"));
    }
    Ok(bytes as u64)
}

/// Formats a duration the way a person reads a latency table.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 1.0 {
        format!("{:.0}us", ms * 1e3)
    } else if ms < 1000.0 {
        format!("{}ms", trim_float(ms))
    } else {
        format!("{}s", trim_float(ms / 1e3))
    }
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = StringOrNumber::deserialize(d)?.into_string();
        parse_duration(&text).map(Dur).map_err(serde::de::Error::custom)
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(self.0))
    }
}

impl JsonSchema for Dur {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^([0-9.]+(ns|us|µs|ms|s|m|min|h))+$",
            "description": "A duration with a unit, e.g. 250ms, 5s, 2m, 1m30s",
        })
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = StringOrNumber::deserialize(d)?.into_string();
        parse_size(&text).map(Size).map_err(serde::de::Error::custom)
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}B", self.0))
    }
}

impl JsonSchema for Size {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Size".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[0-9.]+ ?(B|KiB|MiB|GiB|KB|kB|MB|GB)$",
            "description": "A size with a unit, e.g. 64B, 16KiB, 768MiB",
        })
    }
}

/// YAML turns `5` into a number; accept it here so the unit check can name the
/// value in its message instead of failing with a type error.
#[derive(Deserialize)]
#[serde(untagged)]
enum StringOrNumber {
    S(String),
    N(f64),
}

impl StringOrNumber {
    fn into_string(self) -> String {
        match self {
            StringOrNumber::S(s) => s,
            StringOrNumber::N(n) => n.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_compounds() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("5").unwrap_err().contains("no unit"));
        assert!(parse_duration("5 parsecs").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn absurd_durations_and_sizes_are_errors_not_panics() {
        let overflowing = format!("1{}s", "0".repeat(400));
        for huge in ["99999999999999999999999h", "10000000000000000000s", "9223372036854775807s", "8761h", &overflowing]
        {
            assert!(parse_duration(huge).unwrap_err().contains("too large (at most 8760h"), "{huge}");
        }
        assert_eq!(parse_duration("8760h").unwrap(), MAX_DURATION);
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        for huge in ["99999999999999999999999GiB", "1048577GiB"] {
            assert!(parse_size(huge).unwrap_err().contains("too large"), "{huge}");
        }
        assert_eq!(parse_size("1048576GiB").unwrap(), MAX_SIZE);
    }

    #[test]
    fn sizes_parse_binary_and_decimal_units() {
        assert_eq!(parse_size("64B").unwrap(), 64);
        assert_eq!(parse_size("16KiB").unwrap(), 16 * 1024);
        assert_eq!(parse_size("768MiB").unwrap(), 768 << 20);
        assert_eq!(parse_size("1KB").unwrap(), 1000);
        assert!(parse_size("64").unwrap_err().contains("no unit"));
        assert!(parse_size("64 bytes").unwrap_err().contains("unknown unit"));
    }

    #[test]
    fn durations_format_for_tables() {
        assert_eq!(format_duration(Duration::from_micros(250)), "250us");
        assert_eq!(format_duration(Duration::from_micros(5_860)), "5.86ms");
        assert_eq!(format_duration(Duration::from_secs(12)), "12s");
    }
}
