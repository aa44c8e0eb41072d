//! Durations in the config's human form: `"500ms"`, `"60s"`, `"5m"`, `"1h"`, `"1d"`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A positive whole number of milliseconds, written as `"<n><unit>"` with unit
/// one of `ms`, `s`, `m`, `h`, `d` (fractions allowed when they come out to
/// whole milliseconds: `"1.5s"`). Serializes back in the largest exact unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DurationMs(pub u64);

impl DurationMs {
    /// The duration in milliseconds as `f64`, the unit of core's time arithmetic.
    pub fn as_f64(self) -> f64 {
        self.0 as f64
    }
}

/// Why a duration string could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseDurationError(String);

impl fmt::Display for ParseDurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseDurationError {}

impl FromStr for DurationMs {
    type Err = ParseDurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| {
            ParseDurationError(format!(
                "{s:?} is not a duration: {why} (examples: \"500ms\", \"60s\", \"5m\", \"1h\", \"1d\")"
            ))
        };
        let t = s.trim();
        let split = t.find(|c: char| c.is_ascii_alphabetic()).ok_or_else(|| bad("missing unit"))?;
        let (num, unit) = t.split_at(split);
        let scale: f64 = match unit {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "d" => 86_400_000.0,
            _ => return Err(bad("unknown unit")),
        };
        let n: f64 = num.trim().parse().map_err(|_| bad("not a number"))?;
        if !n.is_finite() || n < 0.0 {
            return Err(bad("must be a non-negative number"));
        }
        let ms = n * scale;
        if ms.fract() != 0.0 || ms > crate::MAX_UNITS as f64 {
            return Err(bad("must be a whole number of milliseconds"));
        }
        Ok(DurationMs(ms as u64))
    }
}

impl fmt::Display for DurationMs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 4] = [(86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1_000, "s")];
        for (scale, unit) in UNITS {
            if self.0 != 0 && self.0.is_multiple_of(scale) {
                return write!(f, "{}{unit}", self.0 / scale);
            }
        }
        write!(f, "{}ms", self.0)
    }
}

impl Serialize for DurationMs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DurationMs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit_and_prints_the_largest_exact_one() {
        let cases = [
            ("500ms", 500, "500ms"),
            ("60s", 60_000, "1m"),
            ("1.5s", 1_500, "1500ms"),
            ("5m", 300_000, "5m"),
            ("1h", 3_600_000, "1h"),
            ("2d", 172_800_000, "2d"),
            (" 7s ", 7_000, "7s"),
        ];
        for (input, ms, shown) in cases {
            let d: DurationMs = input.parse().unwrap();
            assert_eq!(d.0, ms, "{input}");
            assert_eq!(d.to_string(), shown, "{input}");
        }
    }

    #[test]
    fn rejects_what_it_cannot_read_and_says_why() {
        for (input, why) in [
            ("60", "missing unit"),
            ("5 weeks", "unknown unit"),
            ("1.2.3s", "not a number"),
            ("-1s", "non-negative"),
            ("0.5ms", "whole number"),
        ] {
            let err = input.parse::<DurationMs>().unwrap_err().to_string();
            assert!(err.contains(why), "{input}: {err}");
        }
    }
}
