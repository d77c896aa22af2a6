//! `circe send`.

use std::path::PathBuf;

use clap::Args;

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
pub struct SendArgs {
    /// Recipient: an agent, a role, or `all`.
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
    /// Markdown file appended to the body.
    #[arg(long)]
    pub body_file: Option<PathBuf>,
    /// high, normal or low.
    #[arg(long)]
    pub priority: Option<String>,
    /// The msg_id this message answers.
    #[arg(long)]
    pub in_reply_to: Option<String>,
    /// A whole message written by hand (`-` for standard input).
    #[arg(long, conflicts_with_all = ["to", "intent", "task", "summary", "body_file"])]
    pub file: Option<PathBuf>,
    /// The message's id (default: a new one). A message with an id already delivered is
    /// not delivered again: after an unknown outcome, send again with the id circe printed.
    #[arg(long, value_name = "ID", conflicts_with = "file")]
    pub msg_id: Option<String>,
    /// Print the template for INTENT and exit (a starting point for --file).
    #[arg(long, value_name = "INTENT")]
    pub template: Option<String>,
}

pub fn run(ctx: &Ctx, a: &SendArgs) -> Result<Report> {
    if let Some(intent) = &a.template {
        let t = registry::template(intent).ok_or_else(|| {
            Error::not_found(format!("no template for intent `{intent}`"))
                .hint("`circe registry` lists the intents")
        })?;
        return Ok(Report::new(t, serde_json::json!({"intent": intent, "template": t})));
    }
    let (ws, me, _role) = ctx.acting()?;
    let limits = ws.config.limits;
    let msg = match &a.file {
        Some(path) => {
            // Read at most the size limit (and one byte more to tell it is over).
            let (c, label) = if path.as_os_str() == "-" {
                (read_stdin_capped(limits.message_bytes)?, "standard input".to_string())
            } else {
                (read_input_file_capped(path, limits.message_bytes)?, path.display().to_string())
            };
            message::parse_limited(&c.bytes, c.size, Mode::Draft, &limits)
                .map_err(|p| with_file(&label, &p))?
        }
        None => from_flags(a, &limits)?,
    };
    let d = ops::send(&ws, &me, msg)?;
    let mut human = if d.already_delivered {
        format!("{} was delivered before: nothing sent again\n", d.msg_id)
    } else {
        format!("sent {} ({})\n", d.msg_id, d.intent)
    };
    for c in &d.delivered {
        human.push_str(&format!("  -> {} {}\n", c.mailbox, c.file));
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
    }
    Ok(Report::new(human, d))
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

fn from_flags(a: &SendArgs, limits: &Limits) -> Result<Message> {
    let to = a.to.clone().ok_or_else(|| {
        Error::usage("--to is required").hint("or send a whole message with --file")
    })?;
    let intent = a.intent.clone().ok_or_else(|| {
        Error::usage("--intent is required").hint("`circe registry` lists the intents")
    })?;
    // Name the flag, not a line of a file nobody wrote.
    let flag = |f: &str, e: Error| Error { message: format!("--{f}: {}", e.message), ..e };
    if to != "all" {
        for part in to.split('/') {
            crate::names::check_agent(part).map_err(|e| flag("to", e))?;
        }
    }
    crate::names::check_intent(&intent).map_err(|e| flag("intent", e))?;
    if let Some(t) = &a.task {
        crate::names::check_task_id(t).map_err(|e| flag("task", e))?;
    }
    if let Some(r) = &a.in_reply_to {
        crate::names::check_msg_id(r).map_err(|e| flag("in-reply-to", e))?;
    }
    let mut m = Message::new(Format::Circe);
    m.to = Some(to);
    m.intent = Some(intent);
    m.task_id.clone_from(&a.task);
    m.in_reply_to.clone_from(&a.in_reply_to);
    if let Some(id) = &a.msg_id {
        crate::names::check_msg_id(id).map_err(|e| flag("msg-id", e))?;
        m.msg_id = Some(id.clone());
    }
    if let Some(p) = &a.priority {
        m.priority = Some(Priority::parse(p).ok_or_else(|| {
            Error::usage(format!("unknown priority `{p}`")).hint("use high, normal or low")
        })?);
    }
    let mut body = String::new();
    if let Some(s) = &a.summary {
        body.push_str(&format!("## Summary\n{s}\n"));
    }
    if let Some(f) = &a.body_file {
        let c = read_input_file_capped(f, limits.message_bytes)?;
        if let Some(p) = limits.size_problem(c.size.unwrap_or(0), true) {
            return Err(with_file(&format!("--body-file {}", f.display()), &[p]));
        }
        let text = String::from_utf8(c.bytes)
            .map_err(|_| Error::refused(format!("{} is not UTF-8", f.display())))?;
        if !body.is_empty() {
            body.push('\n');
        }
        body.push_str(&text);
    }
    m.body = body;
    // Check the fields the way a file would be checked: one grammar for both.
    m.created_at = Some(clock::now());
    let text = message::render(&m);
    message::parse(&text, Mode::Draft).map_err(|p| with_file("the command line", &p))
}
