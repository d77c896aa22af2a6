//! `circe doctor`.

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::{Ctx, Report};
use crate::error::{Error, Result};

/// Check every invariant of the root (messages in exactly one box, records agreeing with
/// them, nothing half-written or planted). Exit 1 while any violation remains. With
/// --repair, finish or undo what crashed commands left, quarantine strays into
/// LOGS/quarantine/, and rebuild the claim --next index.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  circe doctor\n  circe doctor --repair")]
pub struct DoctorArgs {
    /// Mend what can be mended: finish or undo crashed work, move strays and unreadable
    /// files to LOGS/quarantine/, rebuild the derived indexes.
    #[arg(long)]
    pub repair: bool,
}

/// `circe doctor --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DoctorJson {
    /// What was found, repaired or not.
    #[schemars(with = "Vec<super::schema_defs::ViolationDef>")]
    pub violations: Vec<crate::engine::Violation>,
    /// How many are still violated (exit 1 when more than 0).
    pub open: usize,
    /// Orphans of retired agents waiting for a coordinator (`circe orphans`).
    pub orphans: OrphanCounts,
    /// Routing loops with no terminal state, each as its members in order.
    pub routing_loops: Vec<Vec<String>>,
}

#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrphanCounts {
    pub message_count: usize,
    pub task_count: usize,
}

pub fn run(ctx: &Ctx, a: &DoctorArgs) -> Result<Report> {
    let ws = ctx.workspace_for_setup()?;
    let found = crate::ops::doctor::run(&ws, a.repair)?;
    // Not violations, but a coordinator's to-do: orphans of retired agents, routing loops.
    // A box that cannot be read (reported above) leaves the orphans uncounted, not doctor.
    let mut notes = Vec::new();
    let orphans = crate::ops::orphans::list(&ws).unwrap_or_else(|e| {
        notes.push(format!("orphans not counted: {}", e.message));
        crate::ops::orphans::Orphans::default()
    });
    let loops = crate::ops::route::report(&ws).closed_loops;
    if !orphans.is_empty() {
        notes.push(format!(
            "{} orphaned messages and {} orphaned tasks wait for a coordinator (`circe orphans`)",
            orphans.messages.len(),
            orphans.tasks.len()
        ));
    }
    for l in &loops {
        notes.push(format!("routing loop with no terminal state: {}", l.join(" -> ")));
    }
    let open = found.iter().filter(|v| !v.repaired).count();
    let mut human = String::new();
    for v in &found {
        human.push_str(&format!(
            "[{}] invariant {}: {}\n",
            if v.repaired { "repaired" } else { "VIOLATED" },
            v.invariant,
            v.what
        ));
    }
    let extra =
        OrphanCounts { message_count: orphans.messages.len(), task_count: orphans.tasks.len() };
    if open == 0 {
        human.push_str(&format!("ok: {} repaired, 0 violations\n", found.len()));
        return Ok(Report::new(
            human,
            DoctorJson { violations: found, open: 0, orphans: extra, routing_loops: loops },
        )
        .warnings(notes));
    }
    if ctx.json {
        return Ok(Report::new(
            human,
            DoctorJson { violations: found, open, orphans: extra, routing_loops: loops },
        )
        .code(crate::exit_code::INTERNAL)
        .warnings(notes));
    }
    // A database root is never left half-done but for the journals of sends and moves cut
    // off (invariant 1): only those are --repair's to finish there.
    let hint = if a.repair {
        "what is left is beyond --repair: each line above says what to do"
    } else if ws.engine.local_folder().is_none()
        && !found.iter().any(|v| v.invariant == 1 && !v.repaired)
    {
        "this engine has nothing for --repair to finish: each line above says what is wrong"
    } else {
        "run `circe doctor --repair` to mend what can be mended"
    };
    Err(Error::internal(format!("{open} violation(s):\n{}", human.trim_end())).hint(hint))
}
