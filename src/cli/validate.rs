//! `circe validate`.

use std::path::PathBuf;

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::{Ctx, Report};
use crate::engine::local::read_input_file_capped;
use crate::error::{Error, Result};
use crate::exit_code;
use crate::message::{self, Limits, Mode, Problem};
use crate::registry::Registry;

/// Check message files without delivering anything: the grammar (every problem, with its
/// line), and the registry (intent known, task_id where needed). Exit 3 if any is invalid.
/// `--config` checks the root's circe.yaml instead: routing rules name known agents, roles
/// and statuses, and no set of agents routes only among itself (a loop with no terminal
/// state).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe validate .circe/NEW_MESSAGES/*.md\n  circe validate --draft draft.md"
)]
pub struct ValidateArgs {
    /// Message files.
    #[arg(required_unless_present = "config")]
    pub files: Vec<PathBuf>,
    /// Check circe.yaml (its routing rules) instead of messages.
    #[arg(long, conflicts_with_all = ["files", "draft"])]
    pub config: bool,
    /// Check as a draft for `send --file` (from, status, created_at may be missing): also its
    /// address in this root, and with --agent its sender's right to send it.
    #[arg(long)]
    pub draft: bool,
}

/// `validate --config`: circe.yaml loads (its shape was checked then), the rules' names are
/// this root's, and no loop is closed. Exit 3 naming the first problem.
fn config(ctx: &Ctx) -> Result<Report> {
    let ws = ctx.workspace_for_setup()?;
    crate::ops::route::check_names(&ws)?;
    crate::ops::check_escalation(&ws)?;
    let r = crate::ops::route::report(&ws);
    if let Some(l) = r.closed_loops.first() {
        return Err(Error::refused(format!(
            "circe.yaml: routing: {} route only among themselves: a loop with no terminal state",
            l.join(", ")
        ))
        .detail("loop", l.clone())
        .hint("give one of them a rule that leaves the loop (e.g. `blocked` to a coordinator), or end it"));
    }
    Ok(Report::new(format!("circe.yaml: ok ({} routing rules)\n", r.rules), r))
}

/// `circe validate --json` (exit 3 when any file is invalid).
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidateJson {
    pub files: Vec<FileCheck>,
    /// How many files are invalid.
    pub invalid: usize,
}

#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileCheck {
    pub file: String,
    pub valid: bool,
    #[schemars(with = "Vec<super::schema_defs::ProblemDef>")]
    pub problems: Vec<Problem>,
}

pub fn run(ctx: &Ctx, a: &ValidateArgs) -> Result<Report> {
    if a.config {
        return config(ctx);
    }
    // The root's registry and limits when inside one, else the built-in ones; a root whose
    // circe.yaml is broken is an error, not a reason to check against other rules.
    let ws = match ctx.workspace_for_setup() {
        Ok(ws) => Some(ws),
        Err(e) if e.kind == crate::error::Kind::Usage && ctx.root.is_none() => None,
        Err(e) => return Err(e),
    };
    let builtin = Registry::builtin();
    let registry = ws.as_ref().map_or(&builtin, |root| &root.registry);
    let limits = ws.as_ref().map_or(Limits::DEFAULT, |root| root.config.limits);
    // A draft's sender, when named: `send --file` checks that its role may send the intent.
    let sender = match (&ws, a.draft, ctx.agent.as_deref()) {
        (Some(root), true, Some(_)) => Some(ctx.acting_agent(root)?.0),
        _ => None,
    };
    let mode = if a.draft { Mode::Draft } else { Mode::Stored };
    let mut human = String::new();
    let mut results = Vec::new();
    let mut bad = 0;
    for f in &a.files {
        let label = f.display().to_string();
        let problems: Vec<Problem> = match read_input_file_capped(f, limits.message_bytes) {
            // A file that is not there is a mistyped path, not an invalid message.
            Err(e) if e.kind == crate::error::Kind::NotFound => {
                return Err(e
                    .map_message(|m| format!("{m} (nothing was checked)"))
                    .hint("name the message files to check (`circe validate FILE...`)"));
            }
            Err(e) => vec![Problem::new(None, None, e.message.clone())],
            Ok(c) => match message::parse_limited(&c.bytes, c.size, mode, &limits) {
                Err(p) if !a.draft && reads_as_draft(&c.bytes, c.size, &limits) => {
                    as_draft(p, &label)
                }
                Err(p) => p,
                Ok(m) => {
                    let mut p = registry_problems(registry, &m, &c.bytes);
                    // What `send --file` refuses of a draft, refused here too: what it
                    // leaves unfilled, and its address (in a root: its agents and roles).
                    if a.draft {
                        let text = String::from_utf8_lossy(&c.bytes);
                        p.extend(crate::registry::not_filled_in(registry, &m, &text));
                        if let Some(root) = &ws
                            && p.is_empty()
                            && let Err((field, refused)) =
                                crate::ops::check_draft_routing(root, sender.as_ref(), &m)
                        {
                            let line = header_line(&text, field);
                            let problem = Problem::new(line, Some(field), refused.message);
                            p.push(match refused.hint {
                                Some(hint) => problem.hint(hint),
                                None => problem,
                            });
                        }
                    }
                    p
                }
            },
        };
        if problems.is_empty() {
            human.push_str(&format!("{label}: ok\n"));
        } else {
            bad += 1;
            for p in &problems {
                human.push_str(&format!("{label}: {p}\n"));
                if let Some(h) = &p.hint {
                    human.push_str(&format!("  hint: {h}\n"));
                }
            }
        }
        results.push(FileCheck { file: label, valid: problems.is_empty(), problems });
    }
    let report = Report::new(human, ValidateJson { files: results, invalid: bad });
    if bad > 0 {
        if ctx.json {
            return Ok(report.code(exit_code::REFUSED));
        }
        // Problems go to stderr with the error; stdout stays for data.
        return Err(Error::refused(format!(
            "{bad} of {} files invalid:\n{}",
            a.files.len(),
            report.human.trim_end()
        )));
    }
    Ok(report)
}

/// Whether a file that is no stored message parses as a draft: it lacks only what `send`
/// fills in (from, status, the time).
fn reads_as_draft(bytes: &[u8], size: Option<u64>, limits: &Limits) -> bool {
    message::parse_limited(bytes, size, Mode::Draft, limits).is_ok()
}

/// The problems of a draft checked as a stored message: the hint points at `--draft`
/// (once, on the first) rather than at adding the lines `send --file` fills in.
fn as_draft(problems: Vec<Problem>, label: &str) -> Vec<Problem> {
    let hint = format!(
        "it reads as a draft for `circe send --file`, which fills these in: check it with `circe validate --draft {label}`"
    );
    problems
        .into_iter()
        .enumerate()
        .map(|(i, mut p)| {
            p.hint = (i == 0).then(|| hint.clone());
            p
        })
        .collect()
}

/// The 1-based line of header `field` in `text` (`intent` is TX's `type:` too).
fn header_line(text: &str, field: &str) -> Option<usize> {
    let key = format!("{field}:");
    let tx = (field == "intent").then_some("type:");
    let at = |l: &str| l.starts_with(&key) || tx.is_some_and(|t| l.starts_with(t));
    text.lines().position(at).map(|n| n + 1)
}

/// What the registry says of a message that parses, with the line of the header at fault
/// (`intent:`, or TX's `type:`; for a missing task id, the intent's line too).
fn registry_problems(reg: &Registry, m: &message::Message, bytes: &[u8]) -> Vec<Problem> {
    let mut out = Vec::new();
    let Some(intent) = m.intent.as_deref() else { return out };
    let text = String::from_utf8_lossy(bytes);
    let line = header_line(&text, "intent");
    match reg.intent(intent) {
        None => {
            let e = reg.unknown_intent(intent);
            let p = Problem::new(line, Some("intent"), e.message);
            out.push(match e.hint {
                Some(h) => p.hint(h),
                None => p,
            });
        }
        Some(i) => {
            // As `send` fills it: a TX `task` is its own msg-id's task, a reply the task of
            // the message it answers (which a file alone cannot show: taken as given).
            let opens = crate::tx::semantics(intent) == crate::tx::Semantics::OpensTask;
            if opens
                && m.task_id.is_none()
                && let Some(id) = m.msg_id.as_deref()
                && crate::names::check_task_id(id).is_err()
            {
                out.push(
                    Problem::new(
                        line,
                        Some("task_id"),
                        format!("a task needs a task id, and its msg-id `{id}` is not one"),
                    )
                    .hint("add a `task-id:` line (A-Z a-z 0-9 - _), or give it such a msg-id"),
                );
            } else if i.needs_task_id && m.task_id.is_none() && !opens && m.in_reply_to.is_none() {
                out.push(
                    Problem::new(line, Some("task_id"), format!("intent {intent} needs a task_id"))
                        .hint("add a `task_id:` line naming the task"),
                );
            }
        }
    }
    out
}
