//! `circe replay`.

use clap::Args;
use schemars::JsonSchema;
use serde_json::json;

use super::output::Out;
use super::{Ctx, Report};
use crate::engine::local::{ScratchDir, copy_tree, read_input_file};
use crate::error::{Error, Result};
use crate::fixture::{self, Outcome, Step};

/// Replay a fixture (fixtures/<case>/steps) in a fresh temporary root, printing each step
/// and what it printed. The same runner the snapshot tests use.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  circe replay race-lost\n  circe replay lease-expiry --json")]
pub struct ReplayArgs {
    /// A fixture folder, a case name under ./fixtures, or a built-in case (reference-flow,
    /// race-lost, lease-expiry, parked, release-reclaim, refused-completion, agent-onboarding).
    pub fixture: String,
    /// Keep the temporary root and print its path.
    #[arg(long)]
    pub keep: bool,
}

/// One line of `replay --json` / `demo --json`: a narration, a step, or the totals (last).
#[derive(JsonSchema)]
#[serde(untagged)]
#[expect(dead_code, reason = "a schema: the lines are written with json!")]
pub enum ReplayLine {
    Say {
        say: String,
    },
    Step {
        step: usize,
        agent: Option<String>,
        args: Vec<String>,
        exit_code: i32,
        stdout: String,
        stderr: String,
    },
    Totals {
        step_count: usize,
        failed_count: usize,
        root: Option<String>,
    },
}

pub fn run(ctx: &Ctx, a: &ReplayArgs) -> Result<Report> {
    // A folder first; else one of circe's own, built in.
    let (dir, text) = match (fixture::locate(&a.fixture), fixture::built_in(&a.fixture)) {
        (Ok(dir), _) => {
            let steps_file = dir.join("steps");
            let text = String::from_utf8(read_input_file(&steps_file)?)
                .map_err(|_| Error::refused(format!("{} is not UTF-8", steps_file.display())))?;
            (Some(dir), text)
        }
        (Err(_), Some(text)) => (None, text.to_string()),
        (Err(e), None) => return Err(e),
    };
    let steps = fixture::parse_steps(&text)?;
    let mut root = ScratchDir::new("circe-replay")?;
    if a.keep {
        root.keep();
    }
    if let Some(tree) = dir.map(|d| d.join("tree")).filter(|t| t.is_dir()) {
        copy_tree(&tree, root.path())?;
    }
    narrate(root.path(), &steps, a.keep, ctx.json, chrono::TimeDelta::zero())
}

/// Run `steps` in `root`, printing as it goes: the transcript, or with `--json` one JSON line
/// per narration and step and a last one with the totals.
/// `shift` moves every pinned time of the scenario (the demo runs at today's times).
pub fn narrate(
    root: &std::path::Path,
    steps: &[Step],
    keep: bool,
    json: bool,
    shift: chrono::TimeDelta,
) -> Result<Report> {
    let exe =
        std::env::current_exe().map_err(|e| Error::io("cannot find", "the circe executable", e))?;
    let mut out = Out::new(json);
    let mut n = 0;
    let mut print = |step: &Step, o: Option<&Outcome>| match (step, o) {
        (Step::Say(s), _) => {
            out.item(&format!("\n== {s}"), &json!({"say": s}));
        }
        (_, Some(o)) => {
            n += 1;
            let mut s = fixture::command_line(o.agent.as_deref(), &o.args);
            for l in o.stdout.lines().chain(o.stderr.lines()) {
                s.push_str(&format!("\n  {l}"));
            }
            if o.code != 0 {
                s.push_str(&format!("\n  (exit {})", o.code));
            }
            out.item(
                &s,
                &json!({"step": n, "agent": o.agent, "args": o.args, "exit_code": o.code, "stdout": o.stdout, "stderr": o.stderr}),
            );
        }
        _ => {}
    };
    let outcomes = fixture::run_shifted(&exe, root, steps, shift, &mut print)?;
    let failed = outcomes.iter().filter(|o| o.code != 0).count();
    let kept = keep.then(|| root.join(".circe").display().to_string());
    let mut human = format!("\n{} steps, {failed} with a non-zero exit", outcomes.len());
    if let Some(k) = &kept {
        human.push_str(&format!("\nroot kept at {k}"));
    }
    let mut out = Out::new(json);
    out.item(&human, &json!({"step_count": outcomes.len(), "failed_count": failed, "root": kept}));
    Ok(Report::streamed())
}
