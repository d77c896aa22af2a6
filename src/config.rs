//! `circe.yaml`: the root's configuration (PROTOCOLS.md "Configuration").

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::message::Limits;
use crate::registry::RegistryConfig;
use crate::yaml;

/// Whether writes are fsynced (`full`, the default) or left to the page cache (`relaxed`):
/// a folder root's setting (a database server keeps each commit durable itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Full,
    Relaxed,
}

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
# (also a status_update message in each coordinator's INBOX for each status and release).
announce: events
# Who hears of a parked task (agents or roles): circe sends them an `escalate` message.
escalation: [coordinator, rooster]
# The largest message circe accepts and reads: bytes of the whole file (1 KiB to 64 MiB),
# and lines of its header block (16 to 10000).
limits:
  message_bytes: 1048576
  header_lines: 200
# Checks that only their command may record (`circe check TASK --run NAME`), e.g.
# checks:
#   tests_passed: {run: cargo test}
# `circe archive` (under cron) moves finished work into ARCHIVE/; its defaults:
# archive:
#   after: 7d      # what finished longer ago leaves the hot folders
#   keep: forever  # how long archive segments are kept (or 1d to 36500d)
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
    pub limits: Limits,
    #[serde(default)]
    pub registry: RegistryConfig,
    #[serde(default)]
    pub chat: ChatConfig,
    #[serde(default)]
    pub archive: crate::archive::config::ArchiveConfig,
    /// Where the root is kept when it is not this folder: `engine: {kind: postgres, url,
    /// schema}`. A circe.yaml with an engine holds only `version` and `engine`; the other
    /// settings live with the root (PROTOCOLS.md section 18).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineConfig>,
    /// TX addresses (PROTOCOLS.md section 16).
    #[serde(default)]
    pub tx: crate::tx::TxConfig,
    /// TX routing rules: agent or role -> status -> target -> text (section 16).
    #[serde(default)]
    pub routing: crate::tx::Routing,
    /// Checks declared with the command that proves them (PROTOCOLS.md "For agents").
    #[serde(default)]
    pub checks: std::collections::BTreeMap<String, CheckDecl>,
}

/// `checks: {NAME: {run: "cmd"}}`: a check that only its command may record.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckDecl {
    /// Run with `sh -c` by `circe check TASK --run NAME`.
    pub run: String,
}

/// `chat:` (PROTOCOLS.md "The chat channel").
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatConfig {
    /// The channel file, relative to the folder holding `.circe` (or absolute). Default
    /// `.circe/chat.md`.
    pub path: Option<String>,
    /// `chat say` numbers its lines `(ME #N): text` with the sender's counter (PROTOCOLS.md
    /// section 14). Default off: the reference's lines carry no number.
    #[serde(default)]
    pub seq: bool,
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
            let e = e.to_string();
            let guess =
                meant_field(&e).map(|k| format!("did you mean `{k}`? ")).unwrap_or_default();
            Error::refused(format!("circe.yaml: {e}")).hint(format!(
                "{guess}compare with \"Configuration\" in `circe help protocols` (PROTOCOLS.md)"
            ))
        })?;
        if c.version != 1 {
            return Err(Error::refused(format!(
                "circe.yaml: version {} is not supported",
                c.version
            ))
            .hint("this circe reads version 1"));
        }
        parse_duration(&c.lease).map_err(|e| {
            let hint = e.hint.unwrap_or_default();
            Error::refused(format!("circe.yaml: lease: {}", e.message)).hint(hint)
        })?;
        c.durability()?;
        if let Some(what) = c.limits.out_of_range() {
            return Err(Error::refused(format!("circe.yaml: {what}"))
                .hint("compare with \"Configuration\" in `circe help protocols` (PROTOCOLS.md)"));
        }
        if c.chat.path.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(Error::refused("circe.yaml: chat: path is empty")
                .hint("name a file, e.g. `chat: {path: .workplace/chat.md}`, or remove the key"));
        }
        c.archive.check()?;
        for (name, d) in &c.checks {
            crate::names::check_check(name).map_err(|e| {
                Error::refused(format!("circe.yaml: checks: {}", e.message))
                    .hint(e.hint.unwrap_or_default())
            })?;
            if d.run.trim().is_empty() {
                return Err(Error::refused(format!("circe.yaml: checks: {name}: run is empty"))
                    .hint("give the command that proves the check, e.g. `run: cargo test`"));
            }
        }
        if c.max_attempts == 0 {
            return Err(Error::refused("circe.yaml: max_attempts must be at least 1")
                .hint("it is how many claims whose lease ran out park a task (the default is 3)"));
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
        c.tx.check()?;
        crate::tx::routing::check_shape(&c.routing)?;
        Ok(c)
    }

    pub fn lease(&self) -> Duration {
        parse_duration(&self.lease).unwrap_or(Duration::from_secs(1800))
    }

    /// `CIRCE_DURABILITY` overrides the file (benchmarks and tests).
    pub fn durability(&self) -> Result<Durability> {
        let from_env = std::env::var("CIRCE_DURABILITY").ok();
        let (v, source) = match &from_env {
            Some(v) => (v.as_str(), "CIRCE_DURABILITY"),
            None => (self.durability.as_str(), "circe.yaml: durability"),
        };
        match v {
            "full" => Ok(Durability::Full),
            "relaxed" => Ok(Durability::Relaxed),
            other => Err(Error::refused(format!("{source}: `{other}` is neither full nor relaxed"))
                .hint("full: fsync every change (survives power loss); relaxed: leave it to the page cache")),
        }
    }
}

/// The shortest duration circe accepts (`--ttl`, `lease`).
pub const MIN_DURATION: Duration = Duration::from_secs(1);
/// The longest: a year. Longer leases are a mistake, and every lease end stays far inside
/// what a time stamp can hold.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 86_400);

/// The key an "unknown field `X`, expected one of a, b" error most likely meant.
fn meant_field(error: &str) -> Option<String> {
    let rest = error.split_once("unknown field `")?.1;
    let (name, rest) = rest.split_once('`')?;
    let expected = rest.split_once("expected one of ")?.1;
    let keys: Vec<&str> = expected
        .split(',')
        .map(|k| k.trim().trim_matches('`'))
        .map(|k| k.split_whitespace().next().unwrap_or(k))
        .collect();
    crate::suggest::closest(name, keys).map(str::to_string)
}

/// `90s`, `30m`, `2h`, `1d`, or plain seconds; from `MIN_DURATION` (1s) to `MAX_DURATION`
/// (365d). A usage error otherwise; circe.yaml turns it into a refusal.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let s = s.trim();
    let (num, unit) = s.find(|c: char| !c.is_ascii_digit()).map_or((s, "s"), |i| s.split_at(i));
    if num.is_empty() {
        return Err(
            Error::usage(format!("`{s}` is not a duration")).hint("write e.g. 90s, 30m, 2h or 1d")
        );
    }
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ if unit.starts_with(['.', ',']) => {
            return Err(Error::usage(format!("`{s}` is not a whole number of one unit"))
                .hint("write it in a smaller unit: 90m, not 1.5h (units are s, m, h and d)"));
        }
        _ => {
            return Err(Error::usage(format!("`{s}` has an unknown unit `{unit}`"))
                .hint("units are s, m, h and d"));
        }
    };
    // All digits: only a number too long for u64 fails to parse, and it is out of range.
    let secs = num.parse::<u64>().map_or(u64::MAX, |n| n.saturating_mul(mult));
    let d = Duration::from_secs(secs);
    if !(MIN_DURATION..=MAX_DURATION).contains(&d) {
        return Err(Error::usage(format!(
            "duration `{s}` is out of range: it must be from 1s to 365d"
        ))
        .hint("write e.g. 90s, 30m, 2h or 1d; at most 365d"));
    }
    Ok(d)
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
        assert_eq!(c.limits, Limits::DEFAULT);
        assert_eq!(Config::parse("version: 1\n").unwrap().limits, Limits::DEFAULT);
    }

    #[test]
    fn limits_are_read_and_checked() {
        let c = Config::parse("version: 1\nlimits: {message_bytes: 4096}\n").unwrap();
        assert_eq!(c.limits, Limits { message_bytes: 4096, header_lines: 200 });
        for bad in ["{message_bytes: 10}", "{header_lines: 15}", "{header_lines: 10001}"] {
            let e = Config::parse(&format!("version: 1\nlimits: {bad}\n")).unwrap_err();
            assert!(e.message.starts_with("circe.yaml: limits."), "{bad}: {}", e.message);
        }
        assert!(Config::parse("version: 1\nlimits: {colour: red}\n").is_err());
        assert!(Config::parse("version: 1\nlimits: {message_bytes: -1}\n").is_err());
        assert_eq!(c.chat.path, None);
        let c = Config::parse("version: 1\nchat: {path: .workplace/chat.md}\n").unwrap();
        assert_eq!(c.chat.path.as_deref(), Some(".workplace/chat.md"));
    }

    #[test]
    fn checks_are_declared_with_their_command() {
        let c = Config::parse("version: 1\nchecks: {tests_passed: {run: cargo test}}\n").unwrap();
        assert_eq!(c.checks["tests_passed"].run, "cargo test");
        assert!(Config::parse("version: 1\nchecks: {Tests: {run: x}}\n").is_err());
        assert!(Config::parse("version: 1\nchecks: {t: {run: ''}}\n").is_err());
        assert!(Config::parse("version: 1\nchecks: {t: {cmd: x}}\n").is_err());
    }

    #[test]
    fn bad_configs_are_refused() {
        assert!(Config::parse("version: 2\n").is_err());
        assert!(Config::parse("version: 1\nlease: soon\n").is_err());
        assert!(Config::parse("version: 1\ncolour: red\n").is_err());
        assert!(Config::parse("version: 1\ndurability: maybe\n").is_err());
        assert!(Config::parse("version: 1\nchat: {path: ''}\n").is_err());
        assert!(Config::parse("version: 1\nchat: {file: x}\n").is_err());
        assert!(Config::parse("version: 1\nchat: {seq: true}\n").unwrap().chat.seq);
        let pointer = "version: 1\nengine:\n  kind: postgres\n  url: postgres://db/x\n";
        assert_eq!(Config::parse(pointer).unwrap().engine.unwrap().url, "postgres://db/x");
        assert!(Config::parse(&pointer.replace("postgres\n", "mysql\n")).is_err());
        assert!(Config::parse(&format!("{pointer}lease: 1m\n")).is_err(), "pointer only");
        assert!(Config::parse(&format!("{pointer}  colour: red\n")).is_err());
        assert!(Config::parse("version: 1\ntx: {mesh: Bad}\n").is_err());
        assert!(Config::parse("version: 1\nrouting: {a: {done: {b: x}}}\n").is_err());
        let c =
            Config::parse("version: 1\ntx: {aliases: [core]}\nrouting: {a: {complete: {b: x}}}\n");
        assert_eq!(c.unwrap().tx.aliases, ["core"]);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert!(parse_duration("2w").is_err());
        let e = parse_duration("1.5h").unwrap_err();
        assert!(
            e.message.contains("whole number") && e.hint.unwrap().contains("90m"),
            "{}",
            e.message
        );
        assert!(parse_duration("").is_err());
        assert_eq!(parse_duration("1s").unwrap(), MIN_DURATION);
        assert_eq!(parse_duration("365d").unwrap(), MAX_DURATION);
        assert_eq!(parse_duration("31536000").unwrap(), MAX_DURATION);
        for out in ["0", "0s", "366d", "31536001s", "8761h", "999999999d", "99999999999999999999d"]
        {
            let e = parse_duration(out).unwrap_err();
            assert_eq!(e.kind, crate::error::Kind::Usage, "{out}");
            assert!(e.message.contains("from 1s to 365d"), "{out}: {}", e.message);
        }
    }

    #[test]
    fn a_lease_out_of_range_is_refused_naming_the_range() {
        let e = Config::parse("version: 1\nlease: 999999999d\n").unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::Refused);
        assert!(e.message.contains("circe.yaml: lease") && e.message.contains("365d"), "{e:?}");
        assert!(e.hint.is_some_and(|h| h.contains("365d")));
        assert!(Config::parse("version: 1\nlease: 365d\n").is_ok());
    }

    proptest::proptest! {
        /// Any text: never a panic, and whatever is accepted lies in the range.
        #[test]
        fn parse_duration_never_panics_and_stays_in_range(s in "\\PC{0,24}", n in proptest::num::u64::ANY, unit in "[smhdx]?") {
            for text in [s, format!("{n}{unit}")] {
                if let Ok(d) = parse_duration(&text) {
                    proptest::prop_assert!((MIN_DURATION..=MAX_DURATION).contains(&d), "{text}");
                }
            }
        }
    }
}
