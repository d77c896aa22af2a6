//! `archive:` in circe.yaml: `after` (how long a finished task, an old message or an event
//! stays in the hot folders; default 7d) and `keep` (how long segments are kept; default
//! forever).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The default `archive.after`.
pub const DEFAULT_AFTER: Duration = Duration::from_secs(7 * 86_400);

/// The longest `archive.keep`: a hundred years (36500d).
pub const MAX_KEEP: Duration = Duration::from_secs(36_500 * 86_400);

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveConfig {
    /// `7d`, `12h`, ... (1s to 365d).
    pub after: Option<String>,
    /// `forever` (the default) or a duration up to 36500d.
    pub keep: Option<String>,
}

impl ArchiveConfig {
    /// `archive.after`, or the default.
    pub fn after(&self) -> Duration {
        self.after
            .as_deref()
            .and_then(|a| crate::config::parse_duration(a).ok())
            .unwrap_or(DEFAULT_AFTER)
    }

    /// `archive.keep`; `None` is forever.
    pub fn keep(&self) -> Option<Duration> {
        self.keep.as_deref().and_then(|k| parse_keep(k).ok()).flatten()
    }

    pub fn check(&self) -> Result<()> {
        if let Some(a) = &self.after {
            crate::config::parse_duration(a).map_err(|e| {
                Error::refused(format!("circe.yaml: archive.after: {}", e.message))
                    .hint("write e.g. 7d or 12h; at most 365d")
            })?;
        }
        if let Some(k) = &self.keep {
            parse_keep(k).map_err(|e| {
                Error::refused(format!("circe.yaml: archive.keep: {}", e.message))
                    .hint("write `forever` or e.g. 730d (at most 36500d)")
            })?;
        }
        Ok(())
    }
}

/// `forever` (`None`), or `N` with a unit `s`, `m`, `h`, `d`, from 1d to 36500d.
pub fn parse_keep(s: &str) -> Result<Option<Duration>> {
    let s = s.trim();
    if s == "forever" {
        return Ok(None);
    }
    let (num, unit) = s.find(|c: char| !c.is_ascii_digit()).map_or((s, "s"), |i| s.split_at(i));
    let mult: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(Error::usage(format!("`{s}` is not `forever` or a duration"))),
    };
    let secs = num
        .parse::<u64>()
        .map_err(|_| Error::usage(format!("`{s}` is not `forever` or a duration")))?
        .saturating_mul(mult);
    let d = Duration::from_secs(secs);
    if d < Duration::from_secs(86_400) || d > MAX_KEEP {
        return Err(Error::usage(format!("`{s}` is out of range: from 1d to 36500d")));
    }
    Ok(Some(d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn after_and_keep() {
        let c = Config::parse("version: 1\n").unwrap();
        assert_eq!(c.archive.after(), DEFAULT_AFTER);
        assert_eq!(c.archive.keep(), None);
        let c = Config::parse("version: 1\narchive: {after: 12h, keep: 730d}\n").unwrap();
        assert_eq!(c.archive.after(), Duration::from_secs(12 * 3600));
        assert_eq!(c.archive.keep(), Some(Duration::from_secs(730 * 86_400)));
        assert_eq!(
            Config::parse("version: 1\narchive: {keep: forever}\n").unwrap().archive.keep(),
            None
        );
        for bad in [
            "{after: 0s}",
            "{after: 400d}",
            "{keep: 2h}",
            "{keep: 40000d}",
            "{keep: never}",
            "{colour: red}",
        ] {
            let e = Config::parse(&format!("version: 1\narchive: {bad}\n")).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::Refused, "{bad}");
        }
    }
}
