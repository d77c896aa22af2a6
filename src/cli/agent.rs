//! `circe agent add|list`.

use clap::{Args, Subcommand};
use serde_json::json;

use super::output::table;
use super::{Ctx, Report};
use crate::error::{Error, Result};
use crate::names;

/// Manage agents: each has a role and its own INBOX/ and WORKSPACE/.
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Add an agent with a role (AGENTS/<name>/ with INBOX, WORKSPACE and agent.yaml).
    Add(AddArgs),
    /// List the agents and their roles.
    List,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The agent's name: a-z, 0-9 and '-'.
    pub name: String,
    /// One of the registry's roles (`circe registry` lists them).
    #[arg(long)]
    pub role: String,
}

pub fn run(ctx: &Ctx, cmd: &AgentCommand) -> Result<Report> {
    let ws = ctx.workspace()?;
    match cmd {
        AgentCommand::Add(a) => {
            names::check_agent(&a.name)?;
            if !ws.registry.is_role(&a.role) {
                let roles: Vec<&str> = ws.registry.roles.iter().map(String::as_str).collect();
                return Err(Error::refused(format!("unknown role `{}`", a.role))
                    .hint(format!("roles: {}", roles.join(", "))));
            }
            if let Some(existing) = ws.role_of(&a.name) {
                if existing != a.role {
                    return Err(Error::conflict(format!(
                        "agent {} exists with role {existing}",
                        a.name
                    )));
                }
                return Ok(Report::new(
                    format!("agent {} exists already ({existing})", a.name),
                    json!({"agent": a.name, "role": existing, "created": false}),
                ));
            }
            let created = ws.store.create_agent(&a.name, &format!("role: {}\n", a.role))?;
            Ok(Report::new(
                format!("agent {} added ({})", a.name, a.role),
                json!({"agent": a.name, "role": a.role, "created": created}),
            ))
        }
        AgentCommand::List => {
            let rows: Vec<Vec<String>> =
                ws.agents.iter().map(|(a, r)| vec![a.clone(), r.clone()]).collect();
            let list: Vec<_> =
                ws.agents.iter().map(|(a, r)| json!({"agent": a, "role": r})).collect();
            Ok(Report::new(table(&["AGENT", "ROLE"], &rows), list))
        }
    }
}
