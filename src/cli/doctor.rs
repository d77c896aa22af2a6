//! `circe doctor`.

use clap::Args;
use serde_json::json;

use super::{Ctx, Report};
use crate::error::{Error, Result};

/// Check every invariant of the root (messages in exactly one box, records agreeing with
/// them, nothing half-written or planted). Exit 1 while any violation remains. With
/// --repair, finish or undo what crashed commands left, quarantine strays into
/// LOGS/quarantine/, and rebuild the claim --next index.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[arg(long)]
    pub repair: bool,
}

pub fn run(ctx: &Ctx, a: &DoctorArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    let found = crate::ops::doctor::run(&ws, a.repair)?;
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
    if open == 0 {
        human.push_str(&format!("ok: {} repaired, 0 violations\n", found.len()));
        return Ok(Report::new(human, json!({"violations": found, "open": 0})));
    }
    if ctx.json {
        return Ok(Report::new(human, json!({"violations": found, "open": open}))
            .code(crate::exit_code::INTERNAL));
    }
    Err(Error::internal(format!("{open} violation(s):\n{}", human.trim_end()))
        .hint("run `circe doctor --repair` to mend what can be mended"))
}
