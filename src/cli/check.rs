//! `circe check`.

use clap::Args;
use serde_json::json;

use super::{Ctx, Report};
use crate::error::{Error, Result};
use crate::exit_code;
use crate::names::CheckName;
use crate::ops;

/// Record a check on a task you hold. `NAME=true|false` asserts it; `--run NAME -- CMD`
/// runs CMD and records its exit status (pass = 0), with the command in the event log. If
/// the task changed hands while CMD ran, the result is refused (exit 4).
#[derive(Debug, Args)]
pub struct CheckArgs {
    pub task: String,
    /// NAME=true or NAME=false.
    #[arg(conflicts_with = "run")]
    pub assignment: Option<String>,
    /// Run the command after `--` and record NAME from its exit status.
    #[arg(long, value_name = "NAME")]
    pub run: Option<String>,
    /// Fencing: refuse unless the task is still at this epoch.
    #[arg(long, env = "CIRCE_EPOCH")]
    pub epoch: Option<u64>,
    /// The command (after --).
    #[arg(last = true)]
    pub command: Vec<String>,
}

pub fn run(ctx: &Ctx, a: &CheckArgs) -> Result<Report> {
    let (ws, me, _) = ctx.acting()?;
    let task = super::task_id(&a.task)?;
    if let Some(name) = &a.run {
        let name = CheckName::new(name.as_str())?;
        if a.command.is_empty() {
            return Err(Error::usage("--run needs a command after --")
                .hint(format!("circe check {} --run {name} -- cargo test", a.task)));
        }
        let r = ops::check_run(&ws, &me, &task, &name, &a.command, a.epoch)?;
        let human = format!(
            "{} {}: {} (exit {}, {:.2}s)\n",
            r.task,
            r.check,
            if r.passed { "passed" } else { "FAILED" },
            r.exit_code.map_or("signal".into(), |c| c.to_string()),
            r.seconds
        );
        let code = if r.passed { exit_code::OK } else { exit_code::REFUSED };
        return Ok(Report::new(human, r).code(code));
    }
    let Some(assign) = &a.assignment else {
        return Err(Error::usage("give NAME=true|false or --run NAME -- CMD"));
    };
    let (name, value) = assign
        .split_once('=')
        .ok_or_else(|| Error::usage(format!("`{assign}` is not NAME=true|false")))?;
    let name = CheckName::new(name)?;
    let value = match value {
        "true" | "yes" | "pass" => true,
        "false" | "no" | "fail" => false,
        v => return Err(Error::usage(format!("`{v}` is not true or false"))),
    };
    let checks = ops::check_set(&ws, &me, &task, &name, value, a.epoch)?;
    let passed = checks.values().filter(|v| **v).count();
    Ok(Report::new(
        format!("{} {name}={value} ({passed}/{} checks passed)\n", a.task, checks.len()),
        json!({"task": a.task, "checks": checks}),
    ))
}
