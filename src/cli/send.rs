//! `circe send`.

use std::path::PathBuf;

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::schema_defs::StatusRecordDef;
use super::vocab::BoxFile;
use super::{Ctx, Report};
use crate::clock;
use crate::engine::local::{read_input_file_capped, read_stdin_capped};
use crate::error::{Error, Result};
use crate::message::{self, Format, Limits, Message, Mode, Priority, Problem};
use crate::ops;
use crate::registry;

/// Send a message. Task intents (implement_feature, fix_bug, test, ...) go to NEW_MESSAGES
/// and open a task to be claimed; other intents go to each recipient's INBOX. The intent
/// registry is enforced: a refused message writes nothing.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe --agent coordinator send --to role:engineer --intent implement_feature \\\n      --task AUTH-012 --priority high --summary \"Implement JWT auth\" --body-file spec.md\n  circe --agent engineer send --to coordinator --intent question --summary \"which DB?\"\n  circe --agent coordinator send --to agent:engineer --intent answer --in-reply-to MSG_ID --summary \"postgres\"\n  circe send --template test > draft.md && circe --agent engineer send --file draft.md"
)]
pub struct SendArgs {
    /// Recipient: `role:NAME` (every agent of the role; for a task, any of them may claim
    /// it), `agent:NAME`, `all`, or a bare NAME (the role when a role has that name, else
    /// the agent). A reply (--in-reply-to) that is no task message may leave it out: it
    /// goes to the agent that sent what it answers.
    #[arg(long)]
    pub to: Option<String>,
    /// The intent (`circe registry` lists them).
    #[arg(long)]
    pub intent: Option<String>,
    /// The task id (required for task intents).
    #[arg(long = "task")]
    pub task: Option<String>,
    /// One-line summary: becomes the `## Summary` section.
    #[arg(long)]
    pub summary: Option<String>,
    /// Markdown file appended to the body (`-` for standard input).
    #[arg(long)]
    pub body_file: Option<PathBuf>,
    /// high, normal or low.
    #[arg(long)]
    pub priority: Option<String>,
    /// When it must be done by: an RFC 3339 time, a date (midnight UTC), or a duration from
    /// now (90m, 2h, 3d). Past it a task is not claimed and `circe reap` expires it; an
    /// unread message is filed into LOGS; an ask expires and its asker is told.
    #[arg(long, value_name = "WHEN")]
    pub deadline: Option<String>,
    /// The msg_id this message answers (a message here or in the archive, else exit 5);
    /// without --task it belongs to that message's task.
    #[arg(long)]
    pub in_reply_to: Option<String>,
    /// A whole message written by hand (`-` for standard input).
    #[arg(long, conflicts_with_all = ["to", "intent", "task", "summary", "body_file", "priority", "deadline"])]
    pub file: Option<PathBuf>,
    /// The message's id (default: a new one). A message with an id already delivered is
    /// not delivered again: after an unknown outcome, send again with the id circe printed.
    #[arg(long, value_name = "ID", conflicts_with = "file")]
    pub msg_id: Option<String>,
    /// Print the template for INTENT and exit (a starting point for --file).
    #[arg(long, value_name = "INTENT")]
    pub template: Option<String>,
}

/// `circe send --json`: a delivery, or with --template the template.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum SendOutput {
    Sent(Box<SendJson>),
    Template(TemplateJson),
}

/// What a send delivered.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendJson {
    pub msg_id: String,
    pub intent: String,
    /// The task the message is about (written, or inherited from the message it answers).
    pub task_id: Option<String>,
    pub in_reply_to: Option<String>,
    /// The task id came from the message answered (`in_reply_to`).
    pub task_inherited: bool,
    /// Each copy (`new` for a task message).
    pub delivered: Vec<BoxFile>,
    /// The very same message was delivered before: nothing was sent again.
    pub already_delivered: bool,
    /// For a task message: the task's record after the send.
    #[schemars(with = "Option<StatusRecordDef>")]
    pub task: Option<crate::task::StatusRecord>,
    /// For a handoff: the previous owner.
    pub handoff_from: Option<String>,
    /// For a handoff: the checks set back to false (the next holder passes them again).
    pub checks_reset: Vec<String>,
}

/// `circe send --template INTENT --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TemplateJson {
    pub intent: String,
    pub template: String,
}

/// `circe send --template INTENT`: the template, from the acting agent when there is one.
fn template(ctx: &Ctx, intent: &str) -> Result<Report> {
    let t = registry::template(intent).ok_or_else(|| {
        let known = registry::templates().map(|(n, _)| n);
        let e = Error::not_found(format!("no template for intent `{intent}`"));
        match crate::suggest::closest(intent, known) {
            Some(c) => e.hint(format!("did you mean `{c}`? `circe registry` lists the intents")),
            None => e.hint("`circe registry` lists the intents"),
        }
    })?;
    // From the acting agent, when there is one: the draft then sends as written.
    let me = ctx.agent.as_deref().filter(|a| crate::names::AgentName::new(*a).is_ok());
    let t = me.map_or_else(|| t.to_string(), |me| from_line(t, me));
    let out =
        SendOutput::Template(TemplateJson { intent: intent.to_string(), template: t.clone() });
    Ok(Report::new(t, out))
}

/// A template with its header's `from:` line naming `me`.
fn from_line(template: &str, me: &str) -> String {
    let Some(at) = template.find("\nfrom: ") else { return template.to_string() };
    let end = template[at + 1..].find('\n').map_or(template.len(), |n| at + 1 + n);
    format!("{}\nfrom: {me}{}", &template[..at], &template[end..])
}

pub fn run(ctx: &Ctx, a: &SendArgs) -> Result<Report> {
    if let Some(intent) = &a.template {
        return template(ctx, intent);
    }
    let (ws, me, _role) = ctx.acting()?;
    let limits = ws.config.limits;
    let label = a.file.as_ref().map(|path| {
        if path.as_os_str() == "-" {
            "standard input".to_string()
        } else {
            path.display().to_string()
        }
    });
    let msg = match (&a.file, &label) {
        (Some(path), Some(label)) => {
            // Read at most the size limit (and one byte more to tell it is over).
            let c = if path.as_os_str() == "-" {
                read_stdin_capped(limits.message_bytes)?
            } else {
                read_input_file_capped(path, limits.message_bytes)?
            };
            let m = message::parse_limited(&c.bytes, c.size, Mode::Draft, &limits)
                .map_err(|p| with_file(label, &p))?;
            not_filled_in(&ws, label, &m, &c.bytes)?;
            m
        }
        _ => from_flags(a, &limits, &ws)?,
    };
    // A message refused for what it says names the file that says it.
    let d = ops::send(&ws, &me, msg).map_err(|e| match &label {
        Some(l) if e.kind == crate::error::Kind::Refused && !e.is_committed() => {
            e.map_message(|m| format!("{l}: {m}"))
        }
        _ => e,
    })?;
    let mut human = if d.already_delivered {
        format!("{} was delivered before: nothing sent again\n", d.msg_id)
    } else {
        format!("sent {} ({})\n", d.msg_id, d.intent)
    };
    let d_boxes: Vec<String> = d.delivered.iter().map(|c| c.mailbox.clone()).collect();
    for c in &d.delivered {
        human.push_str(&format!("  -> {} {}\n", c.mailbox, c.file));
    }
    if d.task_inherited {
        human.push_str(&format!(
            "  task {} (from the message it answers)\n",
            d.task_id.as_deref().unwrap_or_default()
        ));
    }
    if let Some(t) = &d.task {
        match &t.handoff_from {
            Some(o) => human.push_str(&format!(
                "task {} handed on by {o}: waiting to be claimed\n",
                t.record.task_id
            )),
            None => human
                .push_str(&format!("task {} opened: waiting to be claimed\n", t.record.task_id)),
        }
        if !t.checks_reset.is_empty() {
            let names: Vec<&str> =
                t.checks_reset.iter().map(crate::names::CheckName::as_str).collect();
            human.push_str(&format!(
                "checks reset to false: {} (the next holder passes them again)\n",
                names.join(", ")
            ));
        }
    }
    let out = SendJson {
        msg_id: d.msg_id,
        intent: d.intent,
        task_id: d.task_id,
        in_reply_to: d.in_reply_to,
        task_inherited: d.task_inherited,
        delivered: d
            .delivered
            .into_iter()
            .map(|c| BoxFile { mailbox: c.mailbox, file: c.file })
            .collect(),
        already_delivered: d.already_delivered,
        handoff_from: d
            .task
            .as_ref()
            .and_then(|t| t.handoff_from.as_ref())
            .map(ToString::to_string),
        checks_reset: d
            .task
            .as_ref()
            .map(|t| t.checks_reset.iter().map(ToString::to_string).collect())
            .unwrap_or_default(),
        task: d.task.map(|t| t.record),
    };
    let mut warnings = to_the_retired(&ws, &d_boxes);
    warnings.extend(task_for_the_retired(&ws, out.task.as_ref()));
    Ok(Report::new(human, SendOutput::Sent(Box::new(out))).warnings(warnings))
}

/// A task opened (or handed on) to a retired agent waits for no one who will claim it: an
/// orphan (`circe orphans` lists it), said as a copy delivered to one is.
fn task_for_the_retired(
    ws: &crate::workspace::Workspace,
    task: Option<&crate::task::StatusRecord>,
) -> Option<String> {
    let rec = task?;
    if rec.status != crate::task::Status::New {
        return None;
    }
    let a = crate::ops::orphans::retired_addressee(ws, &rec.to)?;
    let t = &rec.task_id;
    Some(format!(
        "agent {a} is retired: no one will claim task {t} (`circe orphans` lists it; `circe orphans redeliver {t} --to AGENT` addresses it to an active agent)"
    ))
}

/// A copy delivered into a retired agent's INBOX is kept, and no one reads it (`circe
/// orphans` lists it): said, so that the sender is not left thinking it reached someone.
fn to_the_retired(ws: &crate::workspace::Workspace, boxes: &[String]) -> Vec<String> {
    boxes
        .iter()
        .filter_map(|b| b.strip_prefix("inbox:"))
        .filter_map(|a| crate::names::AgentName::new(a).ok())
        .filter(|a| ws.is_retired(a))
        .map(|a| {
            format!(
                "agent {a} is retired: no one reads the copy in its INBOX (`circe orphans` lists it; `circe orphans redeliver` hands such copies on)"
            )
        })
        .collect()
}

fn with_file(label: &str, problems: &[Problem]) -> Error {
    let e = Problem::into_error(problems);
    let msg = format!("{label}: {}", e.message);
    let hint = e.hint.clone();
    let mut out = Error::refused(msg);
    out.hint = hint
        .or_else(|| Some("`circe send --template INTENT` prints a valid starting point".into()));
    out
}

/// A template copied and sent without being filled in (`registry::not_filled_in`, the check
/// `validate --draft` makes too): refused, nothing sent.
fn not_filled_in(
    ws: &crate::workspace::Workspace,
    label: &str,
    m: &Message,
    bytes: &[u8],
) -> Result<()> {
    let text = String::from_utf8_lossy(bytes);
    let left = crate::registry::not_filled_in(&ws.registry, m, &text);
    let Some(p) = left.first() else { return Ok(()) };
    let lists = if label == "standard input" {
        "saved to a file, `circe validate --draft FILE` lists them".to_string()
    } else {
        format!("`circe validate --draft {label}` lists them")
    };
    let more = match left.len() {
        1 => String::new(),
        n => format!(" (and {} more: {lists})", n - 1),
    };
    Err(Error::refused(format!("{label}: {p}{more}: nothing was sent"))
        .hint(format!("{}, then send it again", p.hint.clone().unwrap_or_default())))
}

/// `--deadline`: a time (RFC 3339, or a date: midnight UTC), or a duration from `now` (to
/// the second).
fn deadline(
    s: &str,
    now: &dyn Fn() -> Result<chrono::DateTime<chrono::Utc>>,
) -> Result<chrono::DateTime<chrono::Utc>> {
    if let Some(t) = clock::parse(s) {
        return Ok(t);
    }
    let d = crate::config::parse_duration(s).map_err(|e| {
        // A duration's shape (a number and a unit) out of its range is said as such.
        let shaped = s.trim_end_matches(['s', 'm', 'h', 'd']).bytes().all(|b| b.is_ascii_digit());
        if shaped && !s.is_empty() {
            return Error::usage(format!("--deadline {}", e.message)).hint(
                "a deadline from now is 1s to 365d away; one further away is written as a date, e.g. 2027-12-01",
            );
        }
        Error::usage(format!("--deadline `{s}` is neither a time nor a duration"))
            .hint("write e.g. 2h, 3d, 2026-12-01 or 2026-12-01T17:00:00Z")
    })?;
    // To the second, as a deadline a person writes.
    Ok(chrono::SubsecRound::trunc_subsecs(
        now()? + chrono::Duration::from_std(d).unwrap_or_default(),
        0,
    ))
}

fn from_flags(a: &SendArgs, limits: &Limits, ws: &crate::workspace::Workspace) -> Result<Message> {
    // A reply may leave --to out: it goes back to the sender of what it answers.
    if a.to.is_none() && a.in_reply_to.is_none() {
        return Err(Error::usage("--to is required").hint(
            "name who gets it: agent:NAME, role:NAME or all (`circe agent list`); or send a whole message with --file",
        ));
    }
    let intent = a.intent.clone().ok_or_else(|| {
        Error::usage("--intent is required").hint("`circe registry` lists the intents")
    })?;
    // Name the flag, not a line of a file nobody wrote.
    let flag = |f: &str, e: Error| Error { message: format!("--{f}: {}", e.message), ..e };
    if let Some(to) = &a.to {
        crate::address::check(to).map_err(|e| flag("to", e))?;
    }
    crate::names::check_intent(&intent).map_err(|e| flag("intent", e))?;
    if let Some(t) = &a.task {
        crate::names::check_task_id(t).map_err(|e| flag("task", e))?;
    }
    if let Some(r) = &a.in_reply_to {
        crate::names::check_msg_id(r).map_err(|e| flag("in-reply-to", e))?;
    }
    let mut m = Message::new(Format::Circe);
    m.to.clone_from(&a.to);
    m.intent = Some(intent);
    m.task_id.clone_from(&a.task);
    m.in_reply_to.clone_from(&a.in_reply_to);
    if let Some(id) = &a.msg_id {
        crate::names::check_msg_id(id).map_err(|e| {
            flag("msg-id", e.hint_more("or leave --msg-id out and circe makes one"))
        })?;
        m.msg_id = Some(id.clone());
    }
    if let Some(p) = &a.priority {
        m.priority = Some(Priority::parse(p).ok_or_else(|| {
            Error::usage(format!("unknown priority `{p}`")).hint("use high, normal or low")
        })?);
    }
    let now = clock::now();
    if let Some(d) = &a.deadline {
        // From now by the clock that judges deadlines (a database server's), as it will be.
        m.deadline = Some(deadline(d, &|| ws.root_now())?);
    }
    let mut body = String::new();
    if let Some(s) = &a.summary {
        body.push_str(&format!("## Summary\n{s}\n"));
    }
    if let Some(f) = &a.body_file {
        let c = if f.as_os_str() == "-" {
            read_stdin_capped(limits.message_bytes)?
        } else {
            read_input_file_capped(f, limits.message_bytes)?
        };
        // A file's size is known; of standard input only that it passed the cap.
        let size = c.size.unwrap_or(c.bytes.len() as u64);
        if let Some(p) = limits.size_problem(size, c.size.is_some()) {
            return Err(with_file(&format!("--body-file {}", f.display()), &[p]));
        }
        let text = String::from_utf8(c.bytes).map_err(|e| {
            Error::refused(format!(
                "--body-file {} is not UTF-8 at byte offset {}",
                f.display(),
                e.utf8_error().valid_up_to()
            ))
            .hint(format!("convert it first (`iconv -f LATIN1 -t UTF-8 {}`), or send a text file; nothing was sent", f.display()))
        })?;
        if !body.is_empty() {
            body.push('\n');
        }
        body.push_str(&text);
    }
    m.body = body;
    // Check the fields the way a file would be checked: one grammar for both.
    m.created_at = Some(now);
    // A reply without --to is checked with a stand-in address; `send` addresses it to the
    // sender of what it answers.
    let to_later = m.to.is_none();
    if to_later {
        m.to = Some(crate::registry::BROADCAST.to_string());
    }
    let text = message::render(&m);
    let mut parsed =
        message::parse(&text, Mode::Draft).map_err(|p| with_file("the command line", &p))?;
    if to_later {
        parsed.to = None;
    }
    Ok(parsed)
}
