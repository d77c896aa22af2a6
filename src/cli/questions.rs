//! `circe questions`: questions nobody has answered yet.

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::output::table;
use super::tasks::short;
use super::{Ctx, Report};
use crate::error::Result;
use crate::ops;

/// Questions without an answer, oldest first, with their age: those asked of you (a copy
/// is in your INBOX or WORKSPACE) and those you asked. A question is a message whose
/// intent expects a reply (question, request_help, escalate, approval_request, ask); it is
/// answered once any message names it in `in_reply_to` (`send --in-reply-to MSG_ID`; the
/// answer joins the question's task).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe --agent engineer questions\n  circe --agent engineer send --to coordinator --intent answer --in-reply-to MSG_ID --summary \"postgres\"\n  circe questions --all --json"
)]
pub struct QuestionsArgs {
    /// Every open question in the root, whoever asked (no acting agent needed).
    #[arg(long)]
    pub all: bool,
}

/// `circe questions --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuestionsJson {
    /// The acting agent (null with --all).
    pub agent: Option<String>,
    pub questions: Vec<QuestionJson>,
}

#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuestionJson {
    pub msg_id: String,
    pub intent: String,
    /// The intent an answer has (`answer`, `ask-response`); null for circe's escalation of a
    /// parked task, which takes no answer (a coordinator releases or readdresses the task).
    /// Named as the registry names it (`registry --json`: `expects_reply`).
    pub expects_reply: Option<String>,
    pub from: String,
    pub to: String,
    pub task_id: Option<String>,
    pub summary: Option<String>,
    pub created_at: Option<String>,
    pub age_seconds: Option<i64>,
    /// `to_me`, `from_me`, or `other` (with --all).
    pub direction: String,
    /// Agents holding a copy in their INBOX or WORKSPACE.
    pub holders: Vec<String>,
}

pub fn run(ctx: &Ctx, a: &QuestionsArgs) -> Result<Report> {
    let (ws, me) = if a.all {
        (ctx.workspace()?, None)
    } else {
        let (ws, me, _) = ctx.acting().map_err(|e| {
            if e.kind == crate::error::Kind::Usage {
                e.hint("pass --agent NAME (or set CIRCE_AGENT), or `circe questions --all` for every open question")
            } else {
                e
            }
        })?;
        (ws, Some(me))
    };
    let qs = ops::questions(&ws, me.as_ref())?;
    let rows: Vec<Vec<String>> = qs
        .iter()
        .map(|q| {
            vec![
                q.msg_id.clone(),
                q.age_seconds.map_or_else(|| "-".into(), short),
                match q.direction.as_str() {
                    "to_me" => format!("{} asks you", q.from),
                    "from_me" => format!("you asked {}", q.to),
                    _ => format!("{} -> {}", q.from, q.to),
                },
                q.intent.clone(),
                q.task_id.clone().unwrap_or_else(|| "-".into()),
                q.summary.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let human = if rows.is_empty() {
        "no open questions\n".to_string()
    } else {
        let mut t = table(&["MSG_ID", "AGE", "WHO", "INTENT", "TASK", "SUMMARY"], &rows);
        let who = me.as_ref().map_or_else(|| "ME".to_string(), ToString::to_string);
        // What this agent may answer: asked of it, by an agent (circe's own escalations
        // take no answer); the intent each expects (`answer`; an ask's `ask-response`).
        let asked: Vec<&ops::Question> = qs
            .iter()
            .filter(|q| q.direction != "from_me" && q.from != crate::event::CIRCE)
            .collect();
        let mut expects: Vec<&str> = asked.iter().map(|q| q.expects.as_str()).collect();
        expects.sort_unstable();
        expects.dedup();
        let intent = match expects.as_slice() {
            [one] => (*one).to_string(),
            _ => "EXPECTS".to_string(),
        };
        // One question to answer: its id filled in. A reply goes to the asker by itself.
        let id = match asked.as_slice() {
            [one] => one.msg_id.as_str(),
            _ => "MSG_ID",
        };
        if !asked.is_empty() {
            t.push_str(&format!("answer: circe --agent {who} send --intent {intent} --in-reply-to {id} --summary \"...\" (it goes to the asker)\n"));
        }
        if expects.len() > 1 {
            t.push_str(&format!(
                "  (EXPECTS: the intent the question expects, one of {}: `--json` gives each one's `expects`)\n",
                expects.join(", ")
            ));
        }
        let parked: Vec<&str> = qs
            .iter()
            .filter(|q| q.from == crate::event::CIRCE)
            .map(|q| q.task_id.as_deref().unwrap_or("TASK"))
            .collect();
        if !parked.is_empty() {
            t.push_str(&format!(
                "circe's own escalations (parked tasks: {}) take no answer: a coordinator puts each back (`circe --agent {who} release --force TASK`) or addresses it anew (`circe --agent {who} readdress TASK --to role:ROLE`), which closes it\n",
                parked.join(", ")
            ));
        }
        t
    };
    let questions = qs
        .into_iter()
        .map(|q| QuestionJson {
            msg_id: q.msg_id,
            intent: q.intent,
            // circe's escalation takes no answer: none is expected.
            expects_reply: (q.from != crate::event::CIRCE).then_some(q.expects),
            from: q.from,
            to: q.to,
            task_id: q.task_id,
            summary: q.summary,
            created_at: q.created_at,
            age_seconds: q.age_seconds,
            direction: q.direction,
            holders: q.holders,
        })
        .collect();
    Ok(Report::new(human, QuestionsJson { agent: me.map(|m| m.to_string()), questions }))
}
