//! `circe init`.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::{Ctx, Report};
use crate::config::DEFAULT_CONFIG;
use crate::engine::local;
use crate::error::Result;
use crate::names::AgentName;
use crate::registry::BUILTIN_ROLES;

/// Make DIR/.circe with circe.yaml and the boxes, and one agent per built-in role, named
/// after it. Safe to run again: it adds what is missing and never overwrites the config.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Where to make .circe (default: the current folder).
    pub dir: Option<PathBuf>,
}

pub fn run(_ctx: &Ctx, args: &InitArgs) -> Result<Report> {
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let (root, wrote_config) = local::init(&dir, DEFAULT_CONFIG)?;
    let ws = crate::workspace::Workspace::open(&crate::engine::RootSpec::Path(root.clone()))?;
    let mut added = Vec::new();
    for role in BUILTIN_ROLES {
        if ws.engine.add_agent(&AgentName::new(role)?, role)? {
            added.push(role);
        }
    }
    let root = root.display().to_string();
    let human = format!(
        "circe root: {root}\nconfig: {}\nagents added: {}\n",
        if wrote_config { "circe.yaml written" } else { "circe.yaml kept as it was" },
        if added.is_empty() { "none (all present)".to_string() } else { added.join(", ") }
    );
    Ok(Report::new(
        human,
        json!({"root": root, "config_written": wrote_config, "agents_added": added}),
    ))
}
