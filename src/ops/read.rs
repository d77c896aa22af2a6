//! Reading one message from a box within the root's limits (`limits:` in circe.yaml): at
//! most `message_bytes + 1` bytes are read and nothing past a limit is parsed, so one huge
//! or planted file cannot stall a listing.

use crate::boxes::Mailbox;
use crate::message::{self, Message, Mode, Problem};
use crate::workspace::Workspace;

/// Message `name` of `mbox`, parsed as a draft (what every reader needs), or why not: the
/// parse problems, one problem tagged with the limit it is over, or the read error.
pub fn read(ws: &Workspace, mbox: &Mailbox, name: &str) -> Read {
    let limits = &ws.config.limits;
    let c =
        ws.engine.read_message_capped(mbox, name, limits.message_bytes).map_err(|e| unread(&e))?;
    message::parse_limited(&c.bytes, c.size, Mode::Draft, limits)
}

/// A message as `read` answers it.
pub type Read = Result<Message, Vec<Problem>>;

/// `read` of each of `files` of `mbox`, handed to `each` in their order; a database reads
/// them in a few statements, not one each (`Engine::read_messages_capped`). An error
/// returned is of the whole read, not of one message.
pub fn read_each(
    ws: &Workspace,
    mbox: &Mailbox,
    files: &[String],
    each: &mut dyn FnMut(&str, Read),
) -> crate::error::Result<()> {
    let limits = &ws.config.limits;
    ws.engine.read_messages_capped(mbox, files, limits.message_bytes, &mut |f, read| {
        let m = read
            .map_err(|e| unread(&e))
            .and_then(|c| message::parse_limited(&c.bytes, c.size, Mode::Draft, limits));
        each(f, m);
    })
}

/// A read error as the one problem of a message: its hint (a planted link, the
/// permissions) goes along with it.
fn unread(e: &crate::error::Error) -> Vec<Problem> {
    let text = match &e.hint {
        Some(h) => format!("{} ({h})", e.chain()),
        None => e.chain(),
    };
    vec![Problem::new(None, None, text)]
}

/// The problem to show for a message that did not read: the first one.
pub fn first_problem(problems: &[Problem]) -> String {
    problems.first().map_or_else(|| "does not parse".into(), ToString::to_string)
}
