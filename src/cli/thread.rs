//! `circe thread`.

use clap::Args;

use super::{Ctx, Report};
use crate::error::Result;
use crate::ops::thread;

/// A whole conversation as a tree: the message MSGID belongs to, from its first message down
/// through every reply (`in_reply_to`): who, to whom, intent, when, and a summary.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe thread ask-001\n  circe thread 20261123T0723abcd --json"
)]
pub struct ThreadArgs {
    /// A msg id (or a unique prefix of 8 characters or more) of any message of the thread.
    pub msg_id: String,
}

pub fn run(ctx: &Ctx, a: &ThreadArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    let root = thread::thread(&ws, &a.msg_id)?;
    Ok(Report::new(thread::render(&root), root))
}
