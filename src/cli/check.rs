//! `circe check`.

use std::collections::BTreeMap;

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::{Ctx, Report};
use crate::error::{Error, Result};
use crate::exit_code;
use crate::names::CheckName;
use crate::ops;
use crate::task::Checks;

/// Record one of a task's checks (`completed` waits until all of them passed). `--run NAME
/// -- CMD` runs CMD and records its exit status (pass = 0), with the command in the event
/// log; a check declared in circe.yaml (`checks: {NAME: {run: CMD}}`) runs its declared
/// command (`--run NAME`, nothing after it) and can be recorded no other way, except by a
/// coordinator asserting it with --reason. `NAME=true|false` asserts an undeclared check:
/// the board and `show` mark it asserted, not run. Only the holder records checks; a name
/// the task does not have is refused, listing its checks. If the task changed hands while
/// CMD ran, the result is refused (exit 4).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe --agent engineer check AUTH-012 --run tests_passed -- cargo test\n  circe --agent engineer check AUTH-012 --run tests_passed     # the command circe.yaml declares\n  circe --agent coordinator check REVIEW-7 peer_reviewed=true --reason \"reviewed in the call\"   # a review_code task"
)]
pub struct CheckArgs {
    /// The task id (as `circe tasks` lists it), e.g. AUTH-012.
    pub task: String,
    /// NAME=true or NAME=false: assert a check without running anything.
    #[arg(conflicts_with = "run")]
    pub assignment: Option<String>,
    /// Run the command after `--` (or the one circe.yaml declares) and record NAME from its
    /// exit status.
    #[arg(long, value_name = "NAME")]
    pub run: Option<String>,
    /// Why a coordinator asserts a check (recorded in the event log); lets a coordinator
    /// assert a declared check, or a check of a task it does not hold.
    #[arg(long, conflicts_with = "run")]
    pub reason: Option<String>,
    /// Fencing: refuse unless the task is still at this epoch.
    #[arg(long, env = "CIRCE_EPOCH")]
    pub epoch: Option<u64>,
    /// The command (after --).
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// `circe check --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckJson {
    pub task_id: String,
    pub check: String,
    pub passed: bool,
    #[schemars(with = "super::schema_defs::HowDef")]
    pub how: String,
    /// For `run`: the command, its exit code (null: killed by a signal) and its duration.
    pub command: Option<Vec<String>>,
    pub exit_code: Option<i32>,
    pub seconds: Option<f64>,
    /// For an assertion with --reason.
    pub reason: Option<String>,
    /// Every check of the task after this one.
    pub checks: BTreeMap<String, bool>,
}

fn names(c: &Checks) -> BTreeMap<String, bool> {
    c.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

pub fn run(ctx: &Ctx, a: &CheckArgs) -> Result<Report> {
    let (ws, me, _) = ctx.acting()?;
    let task = super::task_id(&a.task)?;
    // Every refusal from here on is about this task (a check name it cannot have too), so
    // each names it in `details.task_id`, as the other commands on one task do.
    record(&ws, &me, &task, a).map_err(|e| e.about_task(task.as_str()))
}

fn record(
    ws: &crate::workspace::Workspace,
    me: &crate::names::AgentName,
    task: &crate::names::TaskId,
    a: &CheckArgs,
) -> Result<Report> {
    if let Some(name) = &a.run {
        let name = CheckName::new(name.as_str())?;
        let r = ops::check_run(ws, me, task, &name, &a.command, a.epoch)?;
        let human = format!(
            "{} {}: {} (exit {}, {:.2}s)\n",
            r.task,
            r.check,
            if r.passed { "passed" } else { "FAILED" },
            r.exit_code.map_or("signal".into(), |c| c.to_string()),
            r.seconds
        );
        let code = if r.passed { exit_code::OK } else { exit_code::REFUSED };
        let out = CheckJson {
            task_id: r.task.to_string(),
            check: r.check.to_string(),
            passed: r.passed,
            how: "run".into(),
            command: Some(r.command),
            exit_code: r.exit_code,
            seconds: Some(r.seconds),
            reason: None,
            checks: names(&r.checks),
        };
        return Ok(Report::new(human, out).code(code));
    }
    // The hints name the form that runs: `--run NAME` alone for a check circe.yaml declares
    // (the completion refusal's rule), never an assertion (PROTOCOLS.md section 7, Checks).
    let Some(assign) = &a.assignment else {
        let hint = match ops::check_to_run(ws, task) {
            Some(c) => {
                format!(
                    "run what proves it: {}",
                    ops::run_check_hint(ws, me, task.as_str(), c.as_str())
                )
            }
            None => format!(
                "run what proves it: circe --agent {me} check {task} --run NAME -- COMMAND (`--run NAME` alone for a check circe.yaml declares; `circe show {task}` lists its checks)"
            ),
        };
        return Err(Error::usage("give --run NAME [-- CMD] or NAME=true|false").hint(hint));
    };
    let (name, value) = assign.split_once('=').ok_or_else(|| {
        Error::usage(format!("`{assign}` is not NAME=true|false")).hint(format!(
            "run what proves it: {}",
            ops::run_check_hint(ws, me, task.as_str(), assign)
        ))
    })?;
    let name = CheckName::new(name)?;
    let value = match value {
        "true" | "yes" | "pass" => true,
        "false" | "no" | "fail" => false,
        v => {
            return Err(Error::usage(format!("`{v}` is not true or false"))
                .hint("write NAME=true or NAME=false (yes/no and pass/fail are read too)"));
        }
    };
    let checks = ops::check_assert(ws, me, task, &name, value, a.reason.as_deref(), a.epoch)?;
    let passed = checks.values().filter(|v| **v).count();
    let out = CheckJson {
        task_id: task.to_string(),
        check: name.to_string(),
        passed: value,
        how: "asserted".into(),
        command: None,
        exit_code: None,
        seconds: None,
        reason: a.reason.clone(),
        checks: names(&checks),
    };
    Ok(Report::new(
        format!("{} {name}={value}, asserted ({passed}/{} checks passed)\n", a.task, checks.len()),
        out,
    ))
}
