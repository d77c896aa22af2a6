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
    Err(Error::internal(format!("{open} violation(s):\n{}", human.trim_end()))
        .hint(next_step(&found, open, a.repair)))
}

/// What the closing hint of a run that left `open` violations says: run `--repair` when it
/// acts on some of them (naming their invariants), else that each line says what to do.
fn next_step(found: &[crate::engine::Violation], open: usize, repair: bool) -> String {
    if repair {
        return "what is left is beyond --repair: each line above says what to do".into();
    }
    let mut invariants: Vec<u8> =
        found.iter().filter(|v| v.repairable).map(|v| v.invariant).collect();
    invariants.sort_unstable();
    invariants.dedup();
    let n = found.iter().filter(|v| v.repairable).count();
    let which = match invariants.as_slice() {
        [one] => format!("invariant {one}"),
        many => {
            format!("invariants {}", many.iter().map(u8::to_string).collect::<Vec<_>>().join(", "))
        }
    };
    match n {
        0 => "none of these is for `--repair` to mend: each line above says what to do".into(),
        1 if open == 1 => format!("run `circe doctor --repair` to mend it ({which})"),
        n if n == open => format!("run `circe doctor --repair` to mend them ({which})"),
        n => {
            let others = if open - n == 1 { "the other line says" } else { "the other lines say" };
            format!(
                "run `circe doctor --repair` to mend {n} of them ({which}); {others} what to do"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::next_step;
    use crate::engine::{Fix, Violation};

    fn found(fixes: &[(u8, Fix)]) -> Vec<Violation> {
        fixes.iter().map(|(i, f)| Violation::new(*i, format!("v{i}"), *f, false)).collect()
    }

    #[test]
    fn the_closing_hint_sends_to_repair_only_what_it_mends() {
        let hand = found(&[(4, Fix::Hand), (7, Fix::Hand)]);
        assert_eq!(
            next_step(&hand, 2, false),
            "none of these is for `--repair` to mend: each line above says what to do"
        );
        let all = found(&[(6, Fix::Repair), (2, Fix::Repair), (6, Fix::Repair)]);
        assert_eq!(
            next_step(&all, 3, false),
            "run `circe doctor --repair` to mend them (invariants 2, 6)"
        );
        let one = found(&[(1, Fix::Repair)]);
        assert_eq!(
            next_step(&one, 1, false),
            "run `circe doctor --repair` to mend it (invariant 1)"
        );
        let some = found(&[(6, Fix::Repair), (4, Fix::Hand), (3, Fix::Hand)]);
        assert_eq!(
            next_step(&some, 3, false),
            "run `circe doctor --repair` to mend 1 of them (invariant 6); the other lines say what to do"
        );
        assert!(next_step(&some, 3, true).starts_with("what is left is beyond --repair"));
    }

    #[test]
    fn a_repair_run_leaves_nothing_marked_repairable() {
        let v = Violation::new(1, "x".into(), Fix::Repair, true);
        assert!(!v.repaired && !v.repairable);
        let v = Violation::new(1, "x".into(), Fix::Done, true);
        assert!(v.repaired && !v.repairable);
        let v = Violation::new(1, "x".into(), Fix::done_if(false), false);
        assert!(!v.repaired && v.repairable);
    }
}
