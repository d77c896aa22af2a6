//! `circe wait`.

use clap::Args;
use serde_json::json;

use super::{Ctx, Report, parse_interval};
use crate::error::{Error, Result};
use crate::ops::hook;
use crate::ops::stream::human_line;
use crate::ops::wait::{self, Condition};

/// Block until something happens, then print it and exit 0 (exit 7 when --timeout passes
/// first, exit 3 at once when it can never happen).
///
/// What to wait for: `inbox` (a message in my INBOX), `claimable` (a waiting task I may
/// take; with --claim, claim it in the same call), `reply:MSGID` (an answer to that
/// message), `status:TASK=STATUS` (the task reaching that status). A condition that already
/// holds answers at once; --new waits for a fresh event.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe --agent engineer-2 wait --for claimable --claim --timeout 10m\n  circe --agent engineer-2 wait --for inbox --timeout 30s"
)]
pub struct WaitArgs {
    /// inbox, claimable, reply:MSGID or status:TASK=STATUS.
    #[arg(long = "for", value_name = "WHAT")]
    pub what: String,
    /// Only an event after the wait began counts, not what holds already.
    #[arg(long)]
    pub new: bool,
    /// With --for claimable: claim the task (a race lost to another agent waits on).
    #[arg(long)]
    pub claim: bool,
    /// Give up after this long (e.g. 30s, 500ms, 10m): exit 7.
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Run CMD (with sh -c) with what happened, in CIRCE_* variables and as JSON on its
    /// standard input (never in the command line); circe exits 0 when it exits 0, else 1.
    #[arg(long, value_parser = clap::builder::NonEmptyStringValueParser::new(), value_name = "CMD")]
    pub exec: Option<String>,
    /// With --exec: end the hook when it lasts longer than this (its process group is
    /// killed) and exit 1. --timeout bounds the wait, not the hook.
    #[arg(long, value_name = "DURATION", requires = "exec")]
    pub exec_timeout: Option<String>,
    /// Check every INTERVAL instead of being told by inotify (NFS, FUSE).
    #[arg(long, value_name = "INTERVAL")]
    pub poll: Option<String>,
}

pub fn run(ctx: &Ctx, a: &WaitArgs) -> Result<Report> {
    // What needs no root is checked before the root is reached (a wait may wait for it).
    let cond = Condition::parse(&a.what)?;
    let timeout = a.timeout.as_deref().map(parse_interval).transpose()?;
    if a.claim && cond != Condition::Claimable {
        return Err(Error::usage(format!(
            "--claim goes with --for claimable, not --for {}",
            a.what
        ))
        .hint(format!(
            "circe --agent {} wait --for claimable --claim takes the task it waited for",
            ctx.agent.as_deref().unwrap_or("NAME")
        )));
    }
    let exec_timeout = a.exec_timeout.as_deref().map(parse_interval).transpose()?;
    let poll = a.poll.as_deref().map(parse_interval).transpose()?;
    // Its --timeout counts from here, a root not reached yet included.
    let deadline = timeout.map(|t| std::time::Instant::now() + t);
    let over = || deadline.is_some_and(|d| std::time::Instant::now() >= d);
    let ws = ctx
        .workspace_following(&over)
        .map_err(|e| if e.is_transient() { lost_at_timeout(&e, timeout, None) } else { e })?;
    let (me, role) = ctx.acting_agent(&ws)?;
    // Waiting on an INBOX nothing can be delivered to would wait for nothing.
    if cond == Condition::Inbox {
        ws.engine.check_box(&crate::boxes::Mailbox::Inbox(me.clone()), "list")?;
    }
    let opts = wait::Options { fresh: a.new, claim: a.claim, timeout, poll };
    // A wait outlives a database server's restart: it connects again and goes on after the
    // last event it read (a claim cut off before its reply is retried by its request id).
    let (mut ws, mut resume) = (ws, wait::Resume { deadline, ..wait::Resume::default() });
    // A claim whose reply was lost is retried too (by its request id).
    let again = |e: &Error| {
        e.is_transient() || e.details.iter().any(|(k, v)| *k == "outcome" && *v == "unknown")
    };
    let met = match super::retrying(ctx, &mut ws, &again, &over, &mut |ws| {
        wait::wait(ws, &me, &role, &cond, opts, &mut resume)
    })? {
        super::Retried::Done(met) => met,
        super::Retried::Stopped(e) => {
            let claim = resume.request.as_deref().map(|r| (&me, r));
            return Err(lost_at_timeout(&e, timeout, claim));
        }
    };
    if let Some(cmd) = &a.exec {
        use crate::event::{Event, EventKind};
        // The hook is told what the wait did: the claim it made, else the event that met
        // the condition, else (it held already) an event made for it.
        let e = match (&met.claimed, &met.event) {
            (Some(c), _) => {
                let mut e = Event::now(EventKind::Claim, me.as_str()).task(&c.task);
                e.to = Some(c.status);
                e.epoch = Some(c.epoch);
                e.file(c.location.clone(), c.message.clone())
            }
            (None, Some(e)) => e.clone(),
            (None, None) => {
                let mut e = Event::now(EventKind::Other, crate::event::CIRCE);
                e.task.clone_from(&met.task_id);
                if let (Some(b), Some(f)) = (&met.mailbox, &met.file) {
                    e = e.file(b.clone(), f.clone());
                }
                e
            }
        };
        // SIGINT or SIGTERM ends the hook too (its process group), as a failed run.
        let stop = super::stop::Stop::install()?;
        let ran =
            hook::run_once(&ws, cmd, &e, Some(me.as_str()), exec_timeout, &|| stop.requested())?;
        let failed = match ran {
            hook::Ran::Ok => None,
            hook::Ran::Failed(why) => Some(why),
            hook::Ran::Stopped => Some("ended: circe was told to stop".to_string()),
        };
        if let Some(why) = failed {
            let what = met
                .event
                .as_ref()
                .map_or_else(|| "it held already".to_string(), |e| format!("event {}", e.id));
            let err = Error::internal(format!(
                "the --exec hook failed ({why}); what was awaited happened ({what})"
            ))
            .detail("already", met.already)
            .detail("hook", why);
            return Err(match &met.claimed {
                Some(c) => err
                    .detail("task_id", c.task.to_string())
                    .detail("epoch", c.epoch)
                    .hint(format!(
                        "you hold {} now (claimed by this wait): work on it, or `circe --agent {me} release {}`",
                        c.task, c.task
                    )),
                None => err.hint(
                    "what the hook printed, if anything, is above on stderr; nothing was marked seen, so the same wait finds it again",
                ),
            });
        }
        seen(&ws, &me, &met);
        return Ok(Report::new(human(&ws, &me, &cond, &met), met_json(&ws, &met)));
    }
    // Printed here, so that lastSeen moves only once the message was handed on.
    Report::new(human(&ws, &me, &cond, &met), met_json(&ws, &met)).print(ctx.json);
    seen(&ws, &me, &met);
    Ok(Report::streamed())
}

/// The wait's time ran out while it could not reach the root: exit 7, saying why, and
/// how to learn whether a claim cut off before its reply got a task.
fn lost_at_timeout(
    lost: &Error,
    timeout: Option<std::time::Duration>,
    claim: Option<(&crate::names::AgentName, &str)>,
) -> Error {
    let secs = timeout.map_or(0.0, |t| t.as_secs_f64());
    let e = Error::timed_out(format!(
        "nothing came within {secs:.1}s: the root could not be reached ({})",
        lost.message
    ));
    match claim {
        Some((me, r)) => e.detail("request_id", r).hint(format!(
            "a claim's reply was lost: `circe tasks --owner {me}` shows whether it got a task (`circe --agent {me} claim --next --request-id {r}` returns that task, or else claims one)"
        )),
        None => e.hint("wait again once the root can be reached"),
    }
}

/// What the wait met, in a line (a claim as `circe claim` says it).
fn human(
    ws: &crate::workspace::Workspace,
    me: &crate::names::AgentName,
    cond: &Condition,
    met: &wait::Met,
) -> String {
    match (&met.event, &met.claimed) {
        (_, Some(c)) => {
            let j = super::claim::to_json(ws, c.clone());
            let lease = j.lease_expires_at.clone().unwrap_or_default();
            let first = format!("claimed {} (epoch {}, lease until {lease})\n", c.task, c.epoch);
            first + &super::claim::details(me, &j)
        }
        (Some(e), None) => format!("{}\n", human_line(e)),
        (None, None) => {
            // What held when the wait began, said as what was awaited.
            // "already" when it held as the wait began; else a later look found it.
            let mut s = if met.already { "already: ".to_string() } else { String::new() };
            s.push_str(&match cond {
                Condition::Status(t, st) => format!("{t} is {}", st.as_str()),
                Condition::Claimable if met.mailbox.as_deref().is_some_and(|b| b != "new") => {
                    "a task you may take over: its lease ran out".to_string()
                }
                Condition::Claimable => "a task you may take is waiting".to_string(),
                Condition::Inbox => "a message is in your INBOX".to_string(),
                Condition::Reply(id) => format!("{id} was answered"),
            });
            if let (Condition::Claimable, Some(t)) = (cond, &met.task_id) {
                s.push_str(&format!(" ({t})"));
            }
            if let (Some(b), Some(f)) = (&met.mailbox, &met.file) {
                s.push_str(&format!(": {b}/{f}"));
            }
            s + "\n"
        }
    }
}

/// The message in my INBOX that the wait handed on moves my lastSeen, as `take` does, and
/// says so as `take` does: unread messages it made stale, or a failure to record it (which
/// only shows the message as new again).
fn seen(ws: &crate::workspace::Workspace, me: &crate::names::AgentName, met: &wait::Met) {
    let inbox = crate::boxes::Mailbox::Inbox(me.clone());
    if let (Some(b), Some(f)) = (&met.mailbox, &met.file)
        && *b == inbox.label()
    {
        let moved = crate::ops::seq::handed_on(ws, me, &[(inbox, f.clone())]);
        for w in super::move_msg::not_seen(me, moved) {
            crate::error::warn(&w);
        }
    }
}

/// What met the condition as JSON, its claim as `circe claim --json` prints one.
fn met_json(ws: &crate::workspace::Workspace, met: &wait::Met) -> serde_json::Value {
    let mut v = json!(met);
    if let Some(c) = &met.claimed {
        v["claimed"] = json!(super::claim::to_json(ws, c.clone()));
    }
    v
}
