//! `circe claim`.

use clap::Args;

use super::{Ctx, Report, ttl};
use crate::error::{Error, Result};
use crate::ops;

/// Take a task: its message moves from NEW_MESSAGES into your INBOX with one rename, and
/// TASKS/<id>.owner records you with a lease. Exactly one of several racing agents wins;
/// the others get exit 4 and the winner's name. `--next` takes the best waiting task you
/// may take (priority, then time waiting); none is exit 6.
#[derive(Debug, Args)]
pub struct ClaimArgs {
    /// The task id.
    #[arg(required_unless_present = "next", conflicts_with = "next")]
    pub task: Option<String>,
    /// Take the best waiting task this agent may take.
    #[arg(long)]
    pub next: bool,
    /// Lease length for this claim (e.g. 90s, 30m); default from circe.yaml.
    #[arg(long)]
    pub ttl: Option<String>,
    /// Names this claim: run again with the same id after an unknown outcome (a broken
    /// connection), it returns the task the first run got instead of taking another.
    #[arg(long, env = "CIRCE_REQUEST_ID", value_name = "ID")]
    pub request_id: Option<String>,
}

pub fn run(ctx: &Ctx, a: &ClaimArgs) -> Result<Report> {
    let (ws, me, role) = ctx.acting()?;
    let ttl = ttl(a.ttl.as_deref())?;
    let task = match &a.task {
        Some(t) => Some(super::task_id(t)?),
        None if a.next => None,
        None => return Err(Error::usage("name a task or pass --next")),
    };
    let o = ops::claim_with(&ws, &me, &role, task.as_ref(), ttl, a.request_id.as_deref())?;
    let human = if o.already_held {
        format!(
            "{} already held by {me} (epoch {}, lease until {})\n",
            o.task,
            o.epoch,
            o.lease_expires_at.clone().unwrap_or_default()
        )
    } else {
        let mut s = format!(
            "claimed {} (epoch {}, lease until {})\n",
            o.task,
            o.epoch,
            o.lease_expires_at.clone().unwrap_or_default()
        );
        if let Some(prev) = &o.expired_owner {
            s.push_str(&format!("  taken over from {prev}, whose lease had run out\n"));
        }
        s.push_str(&format!("  message: AGENTS/{me}/INBOX/{}\n", o.message));
        s
    };
    Ok(Report::new(human, o))
}
