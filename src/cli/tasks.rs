//! `circe tasks`: the board, streamed: rows go to stdout as the engine hands them over, so
//! memory stays flat at any number of tasks.

use std::io::Write;

use clap::Args;
use schemars::JsonSchema;

use super::schema_defs::RowDef;
use super::{Ctx, Report};
use crate::clock;
use crate::error::{Error, Kind, Result};
use crate::task::{Row, Status};

/// The board: every task with status, owner, priority, age, lease left, time left before
/// its deadline (DUE, when a task shown has one) and checks passed/total (`*`: a passed
/// check was asserted, not run).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe tasks\n  circe tasks --status new --json\n  circe tasks --owner engineer-2"
)]
pub struct TasksArgs {
    /// Only tasks with this status.
    #[arg(long)]
    pub status: Option<String>,
    /// Only tasks whose owner is this agent: those it holds, and those that were completed,
    /// failed or expired while it held them (the record keeps who held it last; add
    /// --status in_progress, say, for the ones it holds).
    #[arg(long, value_name = "AGENT")]
    pub owner: Option<String>,
}

/// `circe tasks --json` (written as a stream, row by row).
#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema: the rows are streamed")]
pub struct TasksJson {
    /// One row per task, in task id order.
    tasks: Vec<RowDef>,
}

/// `95s` -> `1m35s`-style short durations of an age (one stamped ahead of this clock, by a
/// host whose clock runs ahead: `0s`).
pub fn short(secs: i64) -> String {
    let secs = secs.max(0);
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60),
        _ => format!("{}d{:02}h", secs / 86_400, (secs % 86_400) / 3600),
    }
}

/// The cells of one row as the table shows them.
pub fn cells(r: &Row<'_>, now: i64) -> [String; 8] {
    let age = clock::epoch_secs(&r.created_at).map_or_else(|| "-".into(), |t| short(now - t));
    let lease = match (&r.lease_expires_at, r.status.is_owned()) {
        // A lease runs out at its very second (as a claim decides: `<=`).
        (Some(l), true) => clock::epoch_secs(l).map_or_else(
            || "-".into(),
            |t| if t <= now { "expired".into() } else { short(t - now) },
        ),
        _ => "-".into(),
    };
    let star = if r.checks_asserted > 0 { "*" } else { "" };
    [
        r.task.to_string(),
        r.status.as_str().to_string(),
        r.owner.as_deref().unwrap_or("-").to_string(),
        r.priority.to_string(),
        age,
        lease,
        format!("{}/{}{star}", r.checks_passed, r.checks_total),
        format!("{} -> {}", r.intent, r.to),
    ]
}

/// The time left before a task's deadline (`passed` once it is), `-` for none.
pub fn due_cell(r: &Row<'_>, now: i64) -> String {
    r.deadline
        .as_deref()
        .and_then(clock::epoch_secs)
        .map_or_else(|| "-".into(), |t| if t <= now { "passed".into() } else { short(t - now) })
}

/// The cells of one row with its deadline (`DUE`) after LEASE: the table shows that column
/// when a task it measured has a deadline.
pub fn cells_with_due(r: &Row<'_>, now: i64) -> [String; 9] {
    let [task, status, owner, pri, age, lease, checks, intent] = cells(r, now);
    [task, status, owner, pri, age, lease, due_cell(r, now), checks, intent]
}

/// The DUE column's place in `cells_with_due`.
pub const DUE: usize = 6;

const HEADER: [&str; 9] =
    ["TASK", "STATUS", "OWNER", "PRI", "AGE", "LEASE", "DUE", "CHECKS", "INTENT"];
/// Rows read before the column widths are fixed: a board this small is aligned exactly; a
/// bigger one streams on with these widths (a longer cell pushes only its own line).
const MEASURE: usize = 1000;

/// Stdout closed under us: stop quietly.
const CLOSED: &str = "stdout closed";

/// A failed write: the listing ends (a full disk is noted for the exit code).
fn closed(e: &std::io::Error) -> Error {
    super::output::stdout_failed(e);
    Error::internal(CLOSED)
}

/// Widths of the columns, and whether DUE is one of them.
type Widths = ([usize; 9], bool);

fn write_line(out: &mut impl Write, (widths, due): &Widths, c: &[String; 9]) -> Result<()> {
    let mut line = String::with_capacity(128);
    for (i, cell) in c.iter().enumerate() {
        if i == DUE && !due {
            continue;
        }
        line.push_str(cell);
        if i + 1 < c.len() {
            let pad = widths[i].saturating_sub(cell.chars().count()) + 2;
            line.extend(std::iter::repeat_n(' ', pad));
        }
    }
    line.push('\n');
    out.write_all(line.as_bytes()).map_err(|e| closed(&e))
}

pub fn run(ctx: &Ctx, a: &TasksArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    // An owner that is no agent of the root is a typo, not an empty answer (exit 5).
    if let Some(o) = &a.owner {
        ws.known_agent(o)?;
    }
    let want = match &a.status {
        Some(s) => Some(super::status::status_word(
            s,
            "new, claimed, in_progress, blocked, completed, failed, parked, expired",
        )?),
        None => None,
    };
    let keep = |r: &Row<'_>| {
        want.is_none_or(|w: Status| w == r.status)
            && a.owner.as_deref().is_none_or(|o| r.owner.as_deref() == Some(o))
    };
    let now = ws.root_now()?.timestamp();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut n = 0usize;
    let mut asserted = false;
    let result = if ctx.json {
        // Kept until the board is read whole: a read that fails prints the error document
        // alone, never after half a list (stdout is one JSON document either way).
        let mut doc: Vec<u8> = b"{\n  \"tasks\": [".to_vec();
        ws.engine.board(&mut |r| {
            if !keep(&r) {
                return Ok(());
            }
            let r = ws.demanded_row(r);
            doc.extend_from_slice(if n == 0 { b"\n    " } else { b",\n    " });
            n += 1;
            serde_json::to_writer(&mut doc, &r).map_err(|e| Error::internal(e.to_string()))
        })?;
        doc.extend_from_slice(if n == 0 { b"]\n}\n" } else { b"\n  ]\n}\n" });
        out.write_all(&doc).map_err(|e| closed(&e))
    } else {
        let mut first: Vec<[String; 9]> = Vec::new();
        let mut widths: Option<Widths> = None;
        let r = ws.engine.board(&mut |r| {
            if !keep(&r) {
                return Ok(());
            }
            n += 1;
            let row = ws.demanded_row(r);
            asserted |= row.checks_asserted > 0;
            let c = cells_with_due(&row, now);
            if let Some(w) = &widths {
                return write_line(&mut out, w, &c);
            }
            first.push(c);
            if first.len() >= MEASURE {
                let w = measure(&first);
                flush_first(&mut out, &w, &mut first)?;
                widths = Some(w);
            }
            Ok(())
        });
        r.and_then(|()| {
            if widths.is_none() && !first.is_empty() {
                let w = measure(&first);
                flush_first(&mut out, &w, &mut first)?;
            }
            let tail = if n == 0 {
                "no tasks\n"
            } else if asserted {
                "* a passed check was asserted, not run: `circe show TASK` says by whom\n"
            } else {
                ""
            };
            out.write_all(tail.as_bytes()).map_err(|e| closed(&e))
        })
    };
    match result.and_then(|()| out.flush().map_err(|e| closed(&e))) {
        Err(e) if e.kind == Kind::Internal && e.message == CLOSED => Ok(Report::streamed()),
        Err(e) => Err(e),
        Ok(()) => Ok(Report::streamed().warnings(super::passed_over_warnings(&ws))),
    }
}

/// The column widths of the rows measured, with DUE only when one of them has a deadline.
fn measure(rows: &[[String; 9]]) -> Widths {
    let mut w: [usize; 9] = std::array::from_fn(|i| HEADER[i].len());
    for c in rows {
        for (wi, cell) in w.iter_mut().zip(c) {
            *wi = (*wi).max(cell.chars().count());
        }
    }
    (w, rows.iter().any(|c| c[DUE] != "-"))
}

fn flush_first(out: &mut impl Write, w: &Widths, first: &mut Vec<[String; 9]>) -> Result<()> {
    write_line(out, w, &HEADER.map(str::to_string))?;
    for c in first.drain(..) {
        write_line(out, w, &c)?;
    }
    Ok(())
}
