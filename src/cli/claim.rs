//! `circe claim`.

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::schema_defs::StatusDef;
use super::vocab::BoxFile;
use super::{Ctx, Report, ttl};
use crate::boxes::Mailbox;
use crate::error::{Error, Kind, Result};
use crate::ops::{self, ClaimOutcome};
use crate::workspace::Workspace;

/// Take a task: its message moves from NEW_MESSAGES into your INBOX with one rename, and
/// TASKS/<id>.owner records you with a lease. Exactly one of several racing agents wins;
/// the others get exit 4 and the winner's name. `--next` takes the best waiting task you
/// may take (priority, then deadline, then time waiting); none is exit 6 ("nothing to claim", not an
/// error). `--dry-run` says what you would get and changes nothing. The task's summary is
/// printed, and its message's path: read it there.
#[derive(Debug, Args)]
#[command(
    override_usage = "circe claim <TASK> [OPTIONS]\n       circe claim --next [OPTIONS]",
    after_help = "Examples:\n  circe --agent engineer claim --next --dry-run   # what would I get? nothing changes\n  circe --agent engineer claim --next\n  circe --agent engineer claim AUTH-012 --ttl 2h"
)]
pub struct ClaimArgs {
    /// The task id (as `circe tasks` lists it), e.g. AUTH-012.
    #[arg(required_unless_present = "next", conflicts_with = "next")]
    pub task: Option<String>,
    /// Take the best waiting task this agent may take.
    #[arg(long)]
    pub next: bool,
    /// Say what the claim would take, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Lease length for this claim (e.g. 90s, 30m); default from circe.yaml.
    #[arg(long)]
    pub ttl: Option<String>,
    /// Names this claim: run again with the same id after an unknown outcome (a broken
    /// connection), it returns the task the first run got instead of taking another.
    #[arg(long, env = "CIRCE_REQUEST_ID", value_name = "ID")]
    pub request_id: Option<String>,
}

/// `circe claim --json`: the claim, or (exit 6) that there was nothing to claim.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ClaimOutput {
    Claimed(Box<ClaimJson>),
    Nothing(NothingJson),
}

#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimJson {
    pub task_id: String,
    pub owner: String,
    #[schemars(with = "StatusDef")]
    pub status: crate::task::Status,
    pub epoch: u64,
    pub attempts: u32,
    pub lease_expires_at: Option<String>,
    /// Where the task's message is (in your INBOX once claimed).
    pub message: BoxFile,
    /// The message's path on this host, when the root is a folder.
    pub path: Option<String>,
    /// What the task is about (the message's summary).
    pub summary: Option<String>,
    /// You held it already: nothing changed but the lease, renewed as `heartbeat` renews it
    /// when it had run out or `--ttl` was given.
    pub already_held: bool,
    /// The previous owner, when its lease had run out and you took the task over.
    pub expired_owner: Option<String>,
    /// `--dry-run`: what the claim would be; nothing changed.
    pub dry_run: bool,
    /// The task's note before this claim (why it was blocked, released, readdressed);
    /// null when it had none.
    pub note: Option<String>,
}

/// Exit 6: no waiting task this agent may take.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NothingJson {
    /// Always true.
    pub nothing_to_claim: bool,
    pub agent: String,
    pub role: String,
    pub message: String,
}

/// A claim as `circe claim --json` prints it (`wait --claim` too).
pub(super) fn to_json(ws: &Workspace, o: ClaimOutcome) -> ClaimJson {
    let mailbox = Mailbox::from_label(&o.location).unwrap_or(Mailbox::NewMessages);
    let summary = ops::read(ws, &mailbox, &o.message).ok().and_then(|m| m.summary());
    let path = ws
        .engine
        .local_folder()
        .map(|root| root.join(mailbox.rel_path()).join(&o.message).display().to_string());
    ClaimJson {
        task_id: o.task.to_string(),
        owner: o.owner.to_string(),
        status: o.status,
        epoch: o.epoch,
        attempts: o.attempts,
        lease_expires_at: o.lease_expires_at,
        message: BoxFile { mailbox: o.location, file: o.message },
        path,
        summary,
        already_held: o.already_held,
        expired_owner: o.expired_owner,
        dry_run: o.dry_run,
        note: o.note,
    }
}

pub fn run(ctx: &Ctx, a: &ClaimArgs) -> Result<Report> {
    let (ws, me, role) = ctx.acting()?;
    let ttl = ttl(a.ttl.as_deref())?;
    let task = match &a.task {
        Some(t) => Some(super::task_id(t)?),
        None if a.next => None,
        None => return Err(Error::usage("name a task or pass --next")),
    };
    let got = if a.dry_run {
        ops::claim_dry(&ws, &me, &role, task.as_ref(), ttl)
    } else {
        ops::claim_with(&ws, &me, &role, task.as_ref(), ttl, a.request_id.as_deref())
    };
    let got = match &task {
        Some(t) => got.map_err(|e| e.about_task(t.as_str())),
        None => got,
    };
    let o = match got {
        Ok(o) => o,
        // Nothing to claim is an answer, not a failure (exit 6).
        Err(e) if e.kind == Kind::NothingToClaim => {
            let mut human = format!("nothing to claim: {}\n", e.message);
            if let Some(h) = &e.hint {
                human.push_str(&format!("{h}\n"));
            }
            let out = ClaimOutput::Nothing(NothingJson {
                nothing_to_claim: true,
                agent: me.to_string(),
                role,
                message: e.message,
            });
            return Ok(Report::new(human, out).code(crate::exit_code::NOTHING_TO_CLAIM));
        }
        Err(e) => return Err(e),
    };
    let j = to_json(&ws, o);
    let lease = j.lease_expires_at.clone().unwrap_or_default();
    let mut human = if j.already_held {
        format!("{} already held by {me} (epoch {}, lease until {lease})\n", j.task_id, j.epoch)
    } else if j.dry_run {
        format!(
            "would claim {} (epoch {}, lease until {lease}); nothing changed\n",
            j.task_id, j.epoch
        )
    } else {
        format!("claimed {} (epoch {}, lease until {lease})\n", j.task_id, j.epoch)
    };
    human.push_str(&details(&me, &j));
    Ok(Report::new(human, ClaimOutput::Claimed(Box::new(j))))
}

/// The lines under a claim's first: its summary, whom it was taken over from, where its
/// message is, and what to run next (`claim`, and `wait --claim`).
pub(super) fn details(me: &crate::names::AgentName, j: &ClaimJson) -> String {
    let mut human = String::new();
    if let Some(s) = &j.summary {
        human.push_str(&format!("  summary: {s}\n"));
    }
    if let Some(n) = &j.note {
        human.push_str(&format!("  note: {n}\n"));
    }
    if let Some(prev) = &j.expired_owner {
        human.push_str(&format!(
            "  taken over from {prev}, whose lease had run out; its checks stay as {prev} recorded them (`circe show {}` lists them): run them again if in doubt\n",
            j.task_id
        ));
    }
    // Where the message is in the root's layout (the same for every engine; `--json` adds
    // the path on this host when the root is a folder).
    let mailbox = Mailbox::from_label(&j.message.mailbox).unwrap_or(Mailbox::NewMessages);
    human.push_str(&format!(
        "  message: {}/{} (read it: circe show {})\n",
        mailbox.rel_path(),
        j.message.file,
        j.message.file
    ));
    if !j.dry_run && !j.already_held {
        human.push_str(&format!("  next: circe --agent {me} status {} in_progress\n", j.task_id));
    }
    human
}
