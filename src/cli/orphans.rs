//! `circe orphans` and `circe orphans redeliver`.

use clap::{Args, Subcommand};
use serde_json::json;

use super::output::table;
use super::{Ctx, Report};
use crate::error::Result;
use crate::names::AgentName;
use crate::ops::orphans;

/// What retired agents left: messages kept in their boxes (and any that reached them later),
/// and waiting tasks addressed to them by name. A coordinator hands each on.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe orphans\n  circe --agent coordinator orphans redeliver AUTH-12 --to engineer-2"
)]
pub struct OrphansArgs {
    #[command(subcommand)]
    pub cmd: Option<OrphansCommand>,
}

#[derive(Debug, Subcommand)]
pub enum OrphansCommand {
    /// Hand an orphan to an active agent (as a coordinator): a message moves into its INBOX,
    /// a task is addressed to it.
    Redeliver(RedeliverArgs),
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe --agent coordinator orphans redeliver AUTH-12 --to engineer-2"
)]
pub struct RedeliverArgs {
    /// The orphan: a message's msg id or file name, or a task id.
    pub key: String,
    /// The agent that takes it on.
    #[arg(long)]
    pub to: String,
}

pub fn run(ctx: &Ctx, a: &OrphansArgs) -> Result<Report> {
    match &a.cmd {
        Some(OrphansCommand::Redeliver(r)) => {
            let (ws, me, _) = ctx.acting()?;
            let to = AgentName::new(r.to.as_str())?;
            let done = orphans::redeliver(&ws, &me, &r.key, &to)?;
            let human = match (done.kind, &done.held) {
                ("task", _) => format!("task {} is now addressed to {}\n", r.key, done.to),
                (_, Some(held)) => format!(
                    "{to} holds this message already ({held}): nothing delivered; the orphan copy is filed into LOGS as the duplicate it is ({} {})\n",
                    done.mailbox, done.file
                ),
                _ => format!("{} -> {} {}\n", r.key, done.mailbox, done.file),
            };
            Ok(Report::new(human, done))
        }
        None => {
            let ws = ctx.workspace()?;
            let o = orphans::list(&ws)?;
            if o.is_empty() {
                return Ok(Report::new("no orphans\n", json!(o)));
            }
            let mut human = String::new();
            if !o.messages.is_empty() {
                let rows: Vec<Vec<String>> = o
                    .messages
                    .iter()
                    .map(|m| {
                        let d = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
                        vec![
                            m.agent.to_string(),
                            d(&m.msg_id),
                            d(&m.from),
                            d(&m.intent),
                            d(&m.created_at),
                            m.file.clone(),
                        ]
                    })
                    .collect();
                human.push_str(&table(
                    &["RETIRED", "MSG", "FROM", "INTENT", "CREATED", "FILE"],
                    &rows,
                ));
            }
            if !o.tasks.is_empty() {
                let rows: Vec<Vec<String>> = o
                    .tasks
                    .iter()
                    .map(|t| {
                        vec![
                            t.task.to_string(),
                            t.status.as_str().to_string(),
                            t.to.clone(),
                            t.intent.clone(),
                        ]
                    })
                    .collect();
                human.push_str(&table(&["TASK", "STATUS", "ADDRESSED TO", "INTENT"], &rows));
            }
            Ok(Report::new(human, json!(o)))
        }
    }
}
