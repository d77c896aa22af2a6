//! `circe tasks`: the board.

use clap::Args;
use serde_json::json;

use super::{Ctx, Report};
use crate::clock;
use crate::error::Result;
use crate::task::Row;

/// The board: every task with status, priority, owner, age, lease left and checks
/// passed/total.
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
        Some(s) => Some(super::status::status_word(
            s,
            "new, claimed, in_progress, blocked, completed, failed, parked, expired",
        )?),
        None => None,
    };
    let now = clock::now().timestamp();
    // The engine's board index: one read for the whole board, not two per task.
    let mut rows: Vec<Row<'static>> = Vec::new();
    ws.engine.board(&mut |r| {
        if want.is_none_or(|w| w == r.status)
            && a.owner.as_deref().is_none_or(|o| r.owner.as_deref() == Some(o))
        {
            rows.push(r.into_owned());
        }
        Ok(())
    })?;
    if ctx.json {
        return Ok(Report::new(String::new(), json!({"tasks": rows})));
    }
    if rows.is_empty() {
        return Ok(Report::new("no tasks\n", json!({"tasks": rows})));
    }
    let cells: Vec<[String; 4]> = rows
        .iter()
        .map(|r| {
            let age =
                clock::epoch_secs(&r.created_at).map_or_else(|| "-".into(), |t| short(now - t));
            let lease = match (&r.lease_expires_at, r.status.is_owned()) {
                (Some(l), true) => {
                    clock::epoch_secs(l).map_or_else(|| "-".into(), |t| short(t - now))
                }
                _ => "-".into(),
            };
            [age, lease, format!("{}/{}", r.checks_passed, r.checks_total), r.priority.to_string()]
        })
        .collect();
    let header = ["TASK", "STATUS", "PRI", "OWNER", "AGE", "LEASE", "CHECKS", "INTENT"];
    let mut w: [usize; 7] = std::array::from_fn(|i| header[i].len());
    for (r, c) in rows.iter().zip(&cells) {
        let lens = [
            r.task.len(),
            r.status.as_str().len(),
            c[3].len(),
            r.owner.as_deref().map_or(1, str::len),
            c[0].len(),
            c[1].len(),
            c[2].len(),
        ];
        for (wi, l) in w.iter_mut().zip(lens) {
            *wi = (*wi).max(l);
        }
    }
    let mut human = String::with_capacity(rows.len() * 96);
    let mut line = |f: [&str; 7], last: &str, last2: Option<&str>| {
        for (i, s) in f.iter().enumerate() {
            human.push_str(s);
            human.extend(std::iter::repeat_n(' ', w[i] - s.len() + 2));
        }
        human.push_str(last);
        if let Some(t) = last2 {
            human.push_str(" -> ");
            human.push_str(t);
        }
        human.push('\n');
    };
    line(
        [header[0], header[1], header[2], header[3], header[4], header[5], header[6]],
        header[7],
        None,
    );
    for (r, c) in rows.iter().zip(&cells) {
        line(
            [
                &r.task,
                r.status.as_str(),
                &c[3],
                r.owner.as_deref().unwrap_or("-"),
                &c[0],
                &c[1],
                &c[2],
            ],
            &r.intent,
            Some(&r.to),
        );
    }
    Ok(Report::new(human, serde_json::Value::Null))
}
