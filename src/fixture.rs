//! Fixture runs: a scenario folder replayed step by step against a fresh root.
//!
//! `fixtures/<case>/steps` is the whole scenario; an optional `fixtures/<case>/tree/` is
//! copied into the project folder first. Step grammar, one per line:
//!
//! ```text
//! # a comment (not shown)
//! ## narration (shown by `circe replay` and `circe demo`)
//! @now 2025-11-21T17:05:00Z        pin the clock for the following steps
//! engineer: claim AUTH-012          run `circe claim AUTH-012` as agent engineer
//! -: tasks                          run `circe tasks` with no acting agent
//! ```
//! Arguments split on spaces, with "double quotes" grouping. The clock starts pinned at
//! 2025-11-21T17:00:00Z so runs repeat exactly.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

pub const START: &str = "2025-11-21T17:00:00Z";

/// One line of a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Say(String),
    Now(String),
    Run { agent: Option<String>, args: Vec<String> },
}

/// What one step printed.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub agent: Option<String>,
    pub args: Vec<String>,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn parse_steps(text: &str) -> Result<Vec<Step>> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || (line.starts_with('#') && !line.starts_with("##")) {
            continue;
        }
        if let Some(s) = line.strip_prefix("##") {
            out.push(Step::Say(s.trim().to_string()));
        } else if let Some(t) = line.strip_prefix("@now") {
            out.push(Step::Now(t.trim().to_string()));
        } else if let Some((who, rest)) = line.split_once(':') {
            let agent = (who.trim() != "-").then(|| who.trim().to_string());
            out.push(Step::Run {
                agent,
                args: split_args(rest)
                    .map_err(|e| Error::usage(format!("steps line {}: {e}", i + 1)))?,
            });
        } else {
            return Err(Error::usage(format!(
                "steps line {}: expected `agent: command`, `## text` or `@now TIME`",
                i + 1
            )));
        }
    }
    Ok(out)
}

fn split_args(s: &str) -> std::result::Result<Vec<String>, String> {
    let mut args = Vec::new();
    let mut cur = String::new();
    let (mut quoted, mut any) = (false, false);
    for c in s.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    args.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if quoted {
        return Err("unclosed quote".into());
    }
    if any {
        args.push(cur);
    }
    Ok(args)
}

/// Run `steps` with the circe binary `exe` in project folder `dir` (made fresh by the
/// caller). `each` sees every narration line and outcome as it happens.
pub fn run(
    exe: &Path,
    dir: &Path,
    steps: &[Step],
    each: &mut dyn FnMut(&Step, Option<&Outcome>),
) -> Result<Vec<Outcome>> {
    run_shifted(exe, dir, steps, chrono::TimeDelta::zero(), each)
}

/// `run`, with every pinned time moved by `shift` (the demo shows today's times: the
/// scenario's start becomes now).
pub fn run_shifted(
    exe: &Path,
    dir: &Path,
    steps: &[Step],
    shift: chrono::TimeDelta,
    each: &mut dyn FnMut(&Step, Option<&Outcome>),
) -> Result<Vec<Outcome>> {
    let moved = |t: &str| {
        crate::clock::parse(t)
            .and_then(|t| t.checked_add_signed(shift))
            .map_or_else(|| t.to_string(), crate::clock::stamp)
    };
    let mut now = moved(START);
    let mut outcomes = Vec::new();
    let init = circe(exe, dir, None, &now, &["init".to_string()])?;
    if init.code != 0 {
        return Err(Error::internal(format!("circe init failed: {}", init.stderr)));
    }
    for step in steps {
        match step {
            Step::Say(_) => each(step, None),
            Step::Now(t) => now = moved(t),
            Step::Run { agent, args } => {
                let o = circe(exe, dir, agent.as_deref(), &now, args)?;
                each(step, Some(&o));
                outcomes.push(o);
            }
        }
    }
    Ok(outcomes)
}

fn circe(
    exe: &Path,
    dir: &Path,
    agent: Option<&str>,
    now: &str,
    args: &[String],
) -> Result<Outcome> {
    let mut cmd = Command::new(exe);
    // A cleared environment: a scenario runs the same whatever the caller has set.
    cmd.args(args).current_dir(dir).env_clear().env("CIRCE_NOW", now);
    for keep in ["PATH", "HOME", "TMPDIR"] {
        if let Some(v) = std::env::var_os(keep) {
            cmd.env(keep, v);
        }
    }
    if let Some(a) = agent {
        cmd.env("CIRCE_AGENT", a);
    }
    let out = cmd.output().map_err(|e| Error::io("cannot run", exe, e))?;
    Ok(Outcome {
        agent: agent.map(str::to_string),
        args: args.to_vec(),
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// `$ [agent] circe args` for transcripts.
pub fn command_line(agent: Option<&str>, args: &[String]) -> String {
    let shown: Vec<String> = args
        .iter()
        .map(|a| if a.contains(' ') || a.is_empty() { format!("\"{a}\"") } else { a.clone() })
        .collect();
    match agent {
        Some(a) => format!("$ circe --agent {a} {}", shown.join(" ")),
        None => format!("$ circe {}", shown.join(" ")),
    }
}

/// The fixtures of circe's own source tree, built in: `circe replay CASE` runs them
/// anywhere (a folder named so, or `fixtures/CASE` here, goes first).
const BUILT_IN: &[(&str, &str)] = &[
    ("agent-onboarding", include_str!("../fixtures/agent-onboarding/steps")),
    ("lease-expiry", include_str!("../fixtures/lease-expiry/steps")),
    ("parked", include_str!("../fixtures/parked/steps")),
    ("race-lost", include_str!("../fixtures/race-lost/steps")),
    ("reference-flow", include_str!("../fixtures/reference-flow/steps")),
    ("refused-completion", include_str!("../fixtures/refused-completion/steps")),
    ("release-reclaim", include_str!("../fixtures/release-reclaim/steps")),
];

/// The steps of built-in fixture `name`.
pub fn built_in(name: &str) -> Option<&'static str> {
    BUILT_IN.iter().find(|(n, _)| *n == name).map(|(_, steps)| *steps)
}

/// The names of the built-in fixtures.
pub fn built_in_names() -> impl Iterator<Item = &'static str> {
    BUILT_IN.iter().map(|(n, _)| *n)
}

/// The fixture folder named `name`: a path, or a case under ./fixtures.
pub fn locate(name: &str) -> Result<PathBuf> {
    let p = PathBuf::from(name);
    for cand in [p.clone(), PathBuf::from("fixtures").join(name)] {
        if cand.join("steps").is_file() {
            return Ok(cand);
        }
    }
    let known: Vec<&str> = built_in_names().collect();
    Err(Error::not_found(format!("no fixture `{name}` (a folder with a `steps` file)"))
        .hint(format!("fixtures live in fixtures/<case>/steps; built in: {}", known.join(", "))))
}
