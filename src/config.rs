//! `circe.yaml`: the root's configuration (PROTOCOLS.md "Configuration").

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::local::Durability;
use crate::error::{Error, Result};
use crate::registry::RegistryConfig;
use crate::yaml;

/// What `circe init` writes. Comments are kept because init never rewrites an existing file.
pub const DEFAULT_CONFIG: &str = "\
# circe configuration (PROTOCOLS.md, version 1). Edit freely: `circe init` never overwrites it.
version: 1
# How long a claim holds a task without a heartbeat (units: s, m, h, d).
lease: 30m
# After this many claims whose lease ran out, a task is parked for the coordinator.
max_attempts: 3
# full: fsync every change (survives power loss). relaxed: leave it to the page cache.
durability: full
# How lifecycle changes reach the coordinator: events (LOGS/events.jsonl only) or inbox
# (also a claim_task / release_task / status_update message in each coordinator's INBOX).
announce: events
# Who hears of a parked task (agents or roles): circe sends them an `escalate` message.
escalation: [coordinator, rooster]
# Add roles and intents, or narrow the built-in rules (see `circe registry`).
registry:
  roles: []
  intents: {}
";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Announce {
    Events,
    Inbox,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub version: u32,
    #[serde(default = "default_lease")]
    pub lease: String,
    #[serde(default = "default_attempts")]
    pub max_attempts: u32,
    #[serde(default = "default_durability")]
    pub durability: String,
    #[serde(default = "default_announce")]
    pub announce: Announce,
    #[serde(default = "default_escalation")]
    pub escalation: Vec<String>,
    #[serde(default)]
    pub registry: RegistryConfig,
    /// Where the root is kept when it is not this folder: `engine: {kind: postgres, url,
    /// schema}`. A circe.yaml with an engine holds only `version` and `engine`; the other
    /// settings live with the root (PROTOCOLS.md section 13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineConfig>,
}

/// `engine:` in circe.yaml.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    /// `postgres` (the only kind besides the folder itself).
    pub kind: String,
    /// `postgres://host[:port]/db[?param=value...]`, without a password.
    pub url: String,
    /// The schema holding the root's tables (default `circe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
}

fn default_lease() -> String {
    "30m".into()
}
fn default_attempts() -> u32 {
    3
}
fn default_durability() -> String {
    "full".into()
}
fn default_announce() -> Announce {
    Announce::Events
}
fn default_escalation() -> Vec<String> {
    vec!["coordinator".into(), "rooster".into()]
}

impl Config {
    pub fn parse(text: &str) -> Result<Config> {
        /// A circe.yaml naming an engine: nothing else is allowed in it.
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code, reason = "parsed only to refuse other keys")]
        struct Pointer {
            version: u32,
            engine: EngineConfig,
        }
        let c: Config = yaml::from_str(text).map_err(|e| {
            Error::refused(format!("circe.yaml: {e}"))
                .hint("compare with PROTOCOLS.md \"Configuration\"")
        })?;
        if c.version != 1 {
            return Err(Error::refused(format!(
                "circe.yaml: version {} is not supported",
                c.version
            ))
            .hint("this circe reads version 1"));
        }
        parse_duration(&c.lease)
            .map_err(|e| Error::refused(format!("circe.yaml: lease: {}", e.message)))?;
        c.durability()?;
        if c.max_attempts == 0 {
            return Err(Error::refused("circe.yaml: max_attempts must be at least 1"));
        }
        if let Some(e) = &c.engine {
            if e.kind != "postgres" {
                return Err(Error::refused(format!(
                    "circe.yaml: engine kind `{}` is not known",
                    e.kind
                ))
                .hint(
                    "the one engine kind is `postgres`; without `engine:` the root is this folder",
                ));
            }
            if yaml::from_str::<Pointer>(text).is_err() {
                return Err(Error::refused(
                    "circe.yaml: a file naming an engine holds only `version` and `engine`",
                )
                .hint("the other settings live with the root: `circe config` shows them, `circe config --set FILE` changes them"));
            }
        }
        Ok(c)
    }

    pub fn lease(&self) -> Duration {
        parse_duration(&self.lease).unwrap_or(Duration::from_secs(1800))
    }

    /// `CIRCE_DURABILITY` overrides the file (benchmarks and tests).
    pub fn durability(&self) -> Result<Durability> {
        let v = std::env::var("CIRCE_DURABILITY").unwrap_or_else(|_| self.durability.clone());
        match v.as_str() {
            "full" => Ok(Durability::Full),
            "relaxed" => Ok(Durability::Relaxed),
            other => {
                Err(Error::refused(format!("durability `{other}` is neither full nor relaxed")))
            }
        }
    }
}

/// `90s`, `30m`, `2h`, `1d`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let s = s.trim();
    let (num, unit) = s.find(|c: char| !c.is_ascii_digit()).map_or((s, "s"), |i| s.split_at(i));
    let n: u64 = num.parse().map_err(|_| {
        Error::usage(format!("`{s}` is not a duration")).hint("write e.g. 90s, 30m, 2h or 1d")
    })?;
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(Error::usage(format!("`{s}` has an unknown unit `{unit}`"))
                .hint("units are s, m, h and d"));
        }
    };
    Ok(Duration::from_secs(n.saturating_mul(mult)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_parses() {
        let c = Config::parse(DEFAULT_CONFIG).unwrap();
        assert_eq!(c.lease(), Duration::from_secs(1800));
        assert_eq!(c.max_attempts, 3);
        assert_eq!(c.announce, Announce::Events);
    }

    #[test]
    fn bad_configs_are_refused() {
        assert!(Config::parse("version: 2\n").is_err());
        assert!(Config::parse("version: 1\nlease: soon\n").is_err());
        assert!(Config::parse("version: 1\ncolour: red\n").is_err());
        assert!(Config::parse("version: 1\ndurability: maybe\n").is_err());
        let pointer = "version: 1\nengine:\n  kind: postgres\n  url: postgres://db/x\n";
        assert_eq!(Config::parse(pointer).unwrap().engine.unwrap().url, "postgres://db/x");
        assert!(Config::parse(&pointer.replace("postgres\n", "mysql\n")).is_err());
        assert!(Config::parse(&format!("{pointer}lease: 1m\n")).is_err(), "pointer only");
        assert!(Config::parse(&format!("{pointer}  colour: red\n")).is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert!(parse_duration("2w").is_err());
        assert!(parse_duration("").is_err());
    }
}
