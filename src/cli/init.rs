//! `circe init`.

use std::path::PathBuf;

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::vocab::AgentRole;
use super::{Ctx, Report};
use crate::config::DEFAULT_CONFIG;
use crate::engine::local;
use crate::error::Result;
use crate::names::AgentName;
use crate::registry::BUILTIN_ROLES;

/// Make DIR/.circe with circe.yaml and the boxes, and one agent per built-in role, named
/// after it (coordinator, engineer, qa, scribe, eagle, rooster: the human). Safe to run
/// again: it adds what is missing and never overwrites the config. A task sent to a role
/// (`--to engineer` or `--to role:engineer`) stays claimable by every agent of that role,
/// however many are added later.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe init                  # ./.circe with one agent per built-in role\n  circe init ~/team           # ~/team/.circe"
)]
pub struct InitArgs {
    /// Where to make .circe (default: the current folder).
    pub dir: Option<PathBuf>,
}

/// `circe init --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InitJson {
    /// The root's folder (`.circe`).
    pub root: String,
    /// circe.yaml was written (false: one was there and was kept).
    pub config_written: bool,
    /// The agents this run added (none when all were there).
    pub agents_added: Vec<AgentRole>,
}

pub fn run(_ctx: &Ctx, args: &InitArgs) -> Result<Report> {
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let (root, wrote_config) = local::init(&dir, DEFAULT_CONFIG)?;
    let ws = crate::workspace::Workspace::open(&crate::engine::RootSpec::Path(root.clone()))?;
    let mut added = Vec::new();
    for role in BUILTIN_ROLES {
        if ws.engine.add_agent(&AgentName::new(role)?, role)? {
            added.push(AgentRole { agent: (*role).to_string(), role: (*role).to_string() });
        }
    }
    let root = root.display().to_string();
    let mut human = format!(
        "circe root: {root}\nconfig: {}\n",
        if wrote_config { "circe.yaml written" } else { "circe.yaml kept as it was" }
    );
    if added.is_empty() {
        human.push_str("agents: all present\n");
    } else {
        human.push_str("agents added, one per built-in role (rooster is the human):\n");
        for a in &added {
            human.push_str(&format!("  {} ({})\n", a.agent, a.role));
        }
    }
    human.push_str(
        "next: `circe agent add NAME --role ROLE` for more agents; each agent starts with \
         `circe --agent NAME prime`\n",
    );
    Ok(Report::new(human, InitJson { root, config_written: wrote_config, agents_added: added }))
}
