//! `circe agent add|list`.

use clap::{Args, Subcommand};
use schemars::JsonSchema;
use serde::Serialize;

use super::output::table;
use super::vocab::AgentRole;
use super::{Ctx, Report};
use crate::error::{Error, Result};
use crate::names;

/// Manage agents: each has a role and its own INBOX/ and WORKSPACE/.
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Add an agent with a role (AGENTS/<name>/ with INBOX, WORKSPACE and agent.yaml).
    Add(AddArgs),
    /// List the agents and their roles.
    #[command(after_help = "Examples:\n  circe agent list\n  circe agent list --json")]
    List,
    /// Retire an agent (as a coordinator): its held tasks go back to the queue, and what lies
    /// in its boxes, or reaches it later, is kept as orphans (`circe orphans`).
    Retire(RetireArgs),
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  circe --agent coordinator agent retire brain")]
pub struct RetireArgs {
    /// The agent to retire.
    pub name: String,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe agent add engineer-2 --role engineer\n  circe agent add alice --role rooster     # a human"
)]
pub struct AddArgs {
    /// The agent's name: a-z, 0-9 and '-'.
    pub name: std::ffi::OsString,
    /// One of the registry's roles (`circe registry` lists them).
    #[arg(long)]
    pub role: String,
}

/// `circe agent add --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentAddJson {
    pub agent: String,
    pub role: String,
    /// false: the agent was there already (with this role).
    pub created: bool,
}

/// `circe agent list --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentListJson {
    pub agents: Vec<AgentRole>,
}

pub fn run(ctx: &Ctx, cmd: &AgentCommand) -> Result<Report> {
    if let AgentCommand::Retire(r) = cmd {
        return retire(ctx, r);
    }
    let ws = ctx.workspace_for_setup()?;
    match cmd {
        AgentCommand::Add(a) => {
            // A name that is not UTF-8 breaks the name rule (exit 3), not the command line.
            let name = a.name.to_str().ok_or_else(|| {
                Error::refused(format!("agent name `{}` is not UTF-8", a.name.display()))
                    .hint("agent names use a-z, 0-9 and '-'")
            })?;
            let name = names::AgentName::new(name)?;
            if name == crate::event::CIRCE {
                return Err(Error::refused("`circe` is circe's own name: no agent may use it")
                    .hint("pick another name"));
            }
            // `all` and `any` are words of addresses and rules: `--to all` is everyone.
            if name == crate::registry::BROADCAST || name == "any" {
                return Err(Error::refused(format!(
                    "`{name}` is a word of addresses and rules (everyone, any role): no agent may use it"
                ))
                .hint("pick another name"));
            }
            ws.registry.known_role(&a.role, "--role")?;
            if ws.is_retired(&name) {
                return Err(Error::refused(format!(
                    "agent {name} is retired: retirement is final, and its name is not used again"
                ))
                .hint("add the new agent under another name (`circe agent list` shows the names taken)"));
            }
            if let Some(existing) = ws.role_of(&name) {
                if existing != a.role {
                    return Err(Error::conflict(format!(
                        "agent {name} exists with role {existing}"
                    ))
                    .hint(
                        "an agent keeps its role: add the new one under another name (`circe agent list` shows the names taken)",
                    ));
                }
                return Ok(Report::new(
                    format!("agent {name} exists already ({existing})"),
                    AgentAddJson { agent: name.to_string(), role: existing, created: false },
                ));
            }
            let created = ws.engine.add_agent(&name, &a.role)?;
            if created {
                let mut ev = crate::event::Event::now(crate::event::EventKind::AgentAdd, &name);
                ev.note = Some(format!("role {}", a.role));
                ws.engine.append_events(vec![ev])?;
            }
            Ok(Report::new(
                format!("agent {name} added ({})", a.role),
                AgentAddJson { agent: name.to_string(), role: a.role.clone(), created },
            ))
        }
        AgentCommand::List => {
            let state = |a| if ws.is_retired(a) { "retired" } else { "active" };
            let rows: Vec<Vec<String>> = ws
                .agents()
                .iter()
                .map(|(a, r)| vec![a.to_string(), r.clone(), state(a).to_string()])
                .collect();
            let agents = ws
                .agents()
                .iter()
                .map(|(a, r)| AgentRole {
                    agent: a.to_string(),
                    role: r.clone(),
                    retired: ws.is_retired(a),
                })
                .collect();
            // An agent whose role the registry does not know is listed, and said to wait for
            // nothing (doctor reports it too).
            let mut warnings: Vec<String> = ws
                .agents_with_unknown_role()
                .into_iter()
                .map(|e| format!("{} ({})", e.message, e.hint.unwrap_or_default()))
                .collect();
            // An agent whose record does not read is in no list: said, not left out silently.
            for a in ws.engine.damaged_agents()? {
                warnings.push(format!(
                    "AGENTS/{a}/agent.yaml is missing or damaged: {a} is left out of this list (`circe doctor` says how to mend it)"
                ));
            }
            Ok(Report::new(table(&["AGENT", "ROLE", "STATE"], &rows), AgentListJson { agents })
                .warnings(warnings))
        }
        AgentCommand::Retire(_) => unreachable!("handled above"),
    }
}

/// `circe agent retire NAME`.
fn retire(ctx: &Ctx, r: &RetireArgs) -> Result<Report> {
    let (ws, me, _) = ctx.acting()?;
    let agent = names::AgentName::new(r.name.as_str())?;
    let done = crate::ops::orphans::retire(&ws, &me, &agent)?;
    let counted = crate::ops::orphans::counted;
    let human = if done.retired {
        format!(
            "agent {agent} retired: {} back in the queue, {} (`circe orphans`)\n",
            counted(done.released.len(), "held task", "held tasks"),
            counted(done.orphans, "orphan", "orphans")
        )
    } else if done.released.is_empty() {
        format!("agent {agent} was retired already\n")
    } else {
        format!(
            "agent {agent} was retired already; {} it kept {} back in the queue now\n",
            counted(done.released.len(), "held task", "held tasks"),
            if done.released.len() == 1 { "is" } else { "are" }
        )
    };
    // One vocabulary: `retired` is the agent's state (as `agent list` says it), and
    // `already` says nothing was to change.
    let doc = serde_json::json!({
        "agent": done.agent,
        "retired": true,
        "already": !done.retired,
        "released": done.released,
        "orphan_count": done.orphans,
    });
    Ok(Report::new(human, doc))
}
