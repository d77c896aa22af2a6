//! `circe replay`.

use clap::Args;
use serde_json::json;

use super::{Ctx, Report};
use crate::engine::local::{ScratchDir, copy_tree, read_input_file};
use crate::error::{Error, Result};
use crate::fixture::{self, Outcome, Step};

/// Replay a fixture (fixtures/<case>/steps) in a fresh temporary root, printing each step
/// and what it printed. The same runner the snapshot tests use.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A fixture folder, or a case name under ./fixtures.
    pub fixture: String,
    /// Keep the temporary root and print its path.
    #[arg(long)]
    pub keep: bool,
}

pub fn run(_ctx: &Ctx, a: &ReplayArgs) -> Result<Report> {
    let dir = fixture::locate(&a.fixture)?;
    let steps_file = dir.join("steps");
    let text = String::from_utf8(read_input_file(&steps_file)?)
        .map_err(|_| Error::refused(format!("{} is not UTF-8", steps_file.display())))?;
    let steps = fixture::parse_steps(&text)?;
    let mut root = ScratchDir::new("circe-replay")?;
    if a.keep {
        root.keep();
    }
    if dir.join("tree").is_dir() {
        copy_tree(&dir.join("tree"), root.path())?;
    }
    narrate(root.path(), &steps, a.keep)
}

/// Run `steps` in `root`, printing as it goes (stderr narration, stdout transcript).
pub fn narrate(root: &std::path::Path, steps: &[Step], keep: bool) -> Result<Report> {
    let exe =
        std::env::current_exe().map_err(|e| Error::io("cannot find", "the circe executable", e))?;
    let mut print = |step: &Step, o: Option<&Outcome>| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = match (step, o) {
            (Step::Say(s), _) => writeln!(out, "\n== {s}"),
            (_, Some(o)) => {
                let mut s = format!("{}\n", fixture::command_line(o.agent.as_deref(), &o.args));
                for l in o.stdout.lines().chain(o.stderr.lines()) {
                    s.push_str(&format!("  {l}\n"));
                }
                if o.code != 0 {
                    s.push_str(&format!("  (exit {})\n", o.code));
                }
                out.write_all(s.as_bytes())
            }
            _ => Ok(()),
        };
    };
    let outcomes = fixture::run(&exe, root, steps, &mut print)?;
    let failed = outcomes.iter().filter(|o| o.code != 0).count();
    let mut human = format!("\n{} steps, {failed} with a non-zero exit\n", outcomes.len());
    if keep {
        human.push_str(&format!("root kept at {}\n", root.join(".circe").display()));
    }
    let list: Vec<_> = outcomes.iter().map(|o| json!({"agent": o.agent, "args": o.args, "exit_code": o.code, "stdout": o.stdout, "stderr": o.stderr})).collect();
    Ok(Report::new(human, json!({"steps": list})))
}
