//! `circe tasks`: the board.

use clap::Args;
use serde_json::json;

use super::output::table;
use super::{Ctx, Report};
use crate::clock;
use crate::error::{Error, Result};
use crate::task::{Status, StatusRecord, record};

/// The board: every task with status, owner, age, lease left and checks passed/total.
#[derive(Debug, Args)]
pub struct TasksArgs {
    /// Only tasks with this status.
    #[arg(long)]
    pub status: Option<String>,
    /// Only tasks held by this agent.
    #[arg(long)]
    pub owner: Option<String>,
}

/// `95s` -> `1m35s`-style short durations (negative: `-`).
pub fn short(secs: i64) -> String {
    if secs < 0 {
        return "expired".into();
    }
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60),
        _ => format!("{}d{:02}h", secs / 86_400, (secs % 86_400) / 3600),
    }
}

pub fn run(ctx: &Ctx, a: &TasksArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    let want = match &a.status {
        Some(s) => Some(Status::parse(s).ok_or_else(|| {
            Error::usage(format!("unknown status `{s}`"))
                .hint("new, claimed, in_progress, blocked, completed, failed, parked")
        })?),
        None => None,
    };
    let now = clock::now();
    let mut rows = Vec::new();
    let mut list = Vec::new();
    for id in ws.store.list_tasks()? {
        let Some(text) = ws.store.read_record(&id, "status")? else { continue };
        let Ok(rec) = StatusRecord::parse(&id, &text) else {
            rows.push(vec![
                id.clone(),
                "DAMAGED".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]);
            continue;
        };
        if want.is_some_and(|w| w != rec.status)
            || a.owner.as_deref().is_some_and(|o| rec.owner.as_deref() != Some(o))
        {
            continue;
        }
        let checks = ws
            .store
            .read_record(&id, "checks")?
            .and_then(|t| record::parse_checks(&id, &t).ok())
            .unwrap_or_default();
        let passed = checks.values().filter(|v| **v).count();
        let age =
            clock::parse(&rec.created_at).map_or("-".into(), |t| short((now - t).num_seconds()));
        let lease = match (&rec.lease_expires_at, rec.status.is_owned()) {
            (Some(l), true) => {
                clock::parse(l).map_or("-".into(), |t| short((t - now).num_seconds()))
            }
            _ => "-".into(),
        };
        rows.push(vec![
            id.clone(),
            rec.status.as_str().into(),
            rec.owner.clone().unwrap_or_else(|| "-".into()),
            age,
            lease,
            format!("{passed}/{}", checks.len()),
            format!("{} -> {}", rec.intent, rec.to),
        ]);
        if ctx.json {
            // Building a JSON value per task costs as much as reading it: only for --json.
            list.push(json!({"task": rec, "checks": checks}));
        }
    }
    let human = if ctx.json {
        String::new()
    } else if rows.is_empty() {
        "no tasks\n".to_string()
    } else {
        table(&["TASK", "STATUS", "OWNER", "AGE", "LEASE", "CHECKS", "INTENT"], &rows)
    };
    Ok(Report::new(human, json!({"tasks": list})))
}
