//! `circe board`: the live board for the human: tasks, each agent's inbox, the latest
//! events, updated as the event log grows. On a terminal it is a full-screen view
//! (`tui`, the only user of ratatui and its crossterm); otherwise it prints the board once.

mod model;
mod tui;

use std::io::IsTerminal;

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::output::table;
use super::schema_defs::{EventDef, RowDef};
use super::tasks::{DUE, cells_with_due};
use super::{Ctx, Report};
use crate::error::Result;
use crate::event::Event;
use crate::task::Row;

pub use model::Model;

/// The live board: every task (status, owner, priority, lease left, time left before its
/// deadline, checks), each agent's inbox counts (new, and stale apart) and the latest
/// events, updated as things change. Keys: ↑/↓ (or j/k) select, Enter opens the task, Esc
/// goes back, / filters (task, owner, intent), s cycles the status shown, q quits. When stdout is not a terminal (a pipe, a file, --json) it prints
/// the board once and exits.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe board\n  circe board --once            # the one-shot table, even on a terminal\n  circe board --json | jq '.agents'"
)]
pub struct BoardArgs {
    /// Print the board once and exit, even on a terminal.
    #[arg(long)]
    pub once: bool,
}

/// `circe board --json` (and what the one-shot table shows).
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BoardJson {
    #[schemars(with = "Vec<RowDef>")]
    pub tasks: Vec<Row<'static>>,
    pub agents: Vec<AgentInbox>,
    /// The latest events, oldest first.
    #[schemars(with = "Vec<EventDef>")]
    pub events: Vec<Event>,
}

#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentInbox {
    pub agent: String,
    pub role: String,
    /// New messages in its INBOX, as `prime --json` counts them (stale ones apart, in
    /// `stale_count`); `null` when it cannot be read (a link or a file stands where its
    /// folder belongs: `circe doctor` says what to do).
    pub inbox_count: Option<usize>,
    /// Stale messages in its INBOX (numbered at or below what the agent has seen of their
    /// sender: kept, not new), as `inbox` lists them under `stale`; `null` as `inbox_count`.
    pub stale_count: Option<usize>,
    /// Retired (`circe agent retire`): it takes no new work.
    pub retired: bool,
}

/// An agent as the board names it: a retired one marked so (it takes no new work).
pub(super) fn agent_cell(agent: &str, retired: bool) -> String {
    if retired { format!("{agent} (retired)") } else { agent.to_string() }
}

/// An INBOX count as the board shows it: `?` when the box cannot be read.
pub(super) fn count(n: Option<usize>) -> String {
    n.map_or_else(|| "?".to_string(), |n| n.to_string())
}

/// Whether an agent's INBOX holds a stale message: the tables show a STALE column then.
pub(super) fn any_stale(agents: &[AgentInbox]) -> bool {
    agents.iter().any(|a| a.stale_count.is_some_and(|n| n > 0))
}

pub fn run(ctx: &Ctx, a: &BoardArgs) -> Result<Report> {
    let live = !a.once && !ctx.json && std::io::stdout().is_terminal();
    // The live board, like a follower, waits for a root it cannot reach yet.
    let ws = if live { ctx.workspace_following(&|| false)? } else { ctx.workspace()? };
    let model = Model::load(&ws)?;
    if live {
        tui::run(ctx, ws, model)?;
        return Ok(Report::streamed());
    }
    let now = model.now().timestamp();
    // DUE (the time left before a deadline) when a task has one.
    let due = model.tasks.values().any(|r| r.deadline.is_some());
    let keep = |(i, _): &(usize, String)| due || i != &DUE;
    let rows: Vec<Vec<String>> = model
        .tasks
        .values()
        .map(|r| {
            cells_with_due(r, now).into_iter().enumerate().filter(keep).map(|(_, c)| c).collect()
        })
        .collect();
    let header = ["TASK", "STATUS", "OWNER", "PRI", "AGE", "LEASE", "DUE", "CHECKS", "INTENT"];
    let header: Vec<&str> =
        header.into_iter().enumerate().filter(|(i, _)| due || *i != DUE).map(|(_, h)| h).collect();
    let mut human = if rows.is_empty() { "no tasks\n".to_string() } else { table(&header, &rows) };
    human.push('\n');
    // STALE (the INBOX's stale messages, apart from the new ones) when an agent has one.
    let stale = any_stale(&model.agents);
    let agents: Vec<Vec<String>> = model
        .agents
        .iter()
        .map(|a| {
            let mut row =
                vec![agent_cell(&a.agent, a.retired), a.role.clone(), count(a.inbox_count)];
            if stale {
                row.push(count(a.stale_count));
            }
            row
        })
        .collect();
    let header: &[&str] =
        if stale { &["AGENT", "ROLE", "INBOX", "STALE"] } else { &["AGENT", "ROLE", "INBOX"] };
    human.push_str(&table(header, &agents));
    if model.agents.iter().any(|a| a.inbox_count.is_none()) {
        human.push_str("(?: the INBOX cannot be read; `circe doctor` says why)\n");
    }
    human.push_str("\nlatest events\n");
    for e in &model.events {
        human.push_str(&format!("  {}\n", model::event_line(e)));
    }
    let out = BoardJson {
        tasks: model.tasks.into_values().collect(),
        agents: model.agents,
        events: model.events.into_iter().collect(),
    };
    Ok(Report::new(human, out).warnings(super::passed_over_warnings(&ws)))
}
