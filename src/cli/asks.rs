//! `circe asks`.

use clap::Args;
use serde_json::json;

use super::output::table;
use super::tasks::short;
use super::{Ctx, Report};
use crate::error::Result;
use crate::ops::asks;

/// The asks waiting for their answer (TX `ask`, `ask-human`): who asked whom, how long ago,
/// and until when. An `ask-response` with `in-reply-to` closes one.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe asks\n  circe asks --for brain\n  circe asks --all --json"
)]
pub struct AsksArgs {
    /// Also list answered and expired asks.
    #[arg(long)]
    pub all: bool,
    /// Only asks addressed to this agent.
    #[arg(long = "for", value_name = "AGENT")]
    pub for_agent: Option<String>,
    /// Only asks this agent made.
    #[arg(long, value_name = "AGENT")]
    pub from: Option<String>,
}

pub fn run(ctx: &Ctx, a: &AsksArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    // A name that is no agent of the root is a typo, not an empty answer (exit 5).
    for name in [&a.for_agent, &a.from].into_iter().flatten() {
        ws.known_agent(name)?;
    }
    let rows: Vec<asks::AskRow> = asks::list(&ws, a.all)?
        .into_iter()
        .filter(|r| {
            a.for_agent.as_deref().is_none_or(|f| r.ask.recipients.iter().any(|x| x.as_str() == f))
        })
        .filter(|r| a.from.as_deref().is_none_or(|f| r.ask.from.as_str() == f))
        .collect();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let k = &r.ask;
            vec![
                k.msg_id.to_string(),
                k.from.to_string(),
                k.recipients.iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
                short(r.age_seconds),
                k.state.as_str().to_string(),
                k.deadline.clone().unwrap_or_else(|| "-".into()),
                k.headline
                    .clone()
                    .or_else(|| k.task.as_ref().map(|t| format!("task {t}")))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let human = if rows.is_empty() {
        if a.all { "no asks\n".to_string() } else { "no open asks\n".to_string() }
    } else {
        table(&["ASK", "FROM", "TO", "AGE", "STATE", "DEADLINE", "ABOUT"], &cells)
    };
    // One vocabulary: the ask's task is `task_id`, its time `created_at`, and what an ask lacks is `null` (the
    // record's file leaves it out).
    let asks: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let mut v = json!(r);
            if let Some(o) = v.as_object_mut() {
                let t = o.remove("task").unwrap_or(serde_json::Value::Null);
                o.insert("task_id".into(), t);
                let s = o.remove("headline").unwrap_or(serde_json::Value::Null);
                o.insert("summary".into(), s);
                // When it was asked: `created_at`, as every command names a message's time.
                let at = o.remove("asked_at").unwrap_or(serde_json::Value::Null);
                o.insert("created_at".into(), at);
                for k in ["summary", "deadline", "answer", "answered_by", "answered_at"] {
                    o.entry(k).or_insert(serde_json::Value::Null);
                }
            }
            v
        })
        .collect();
    Ok(Report::new(human, json!({ "asks": asks })))
}
