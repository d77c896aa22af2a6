//! Sequence numbers (PROTOCOLS.md "Sequence numbers", shared/reference 003): the
//! `(ROLE #N): text` line form, the sender's counter and the receiver's rules, all pure
//! (but for `numbered_again`'s warning on stderr).
//! Where counters and `lastSeen` are stored comes with the engine; `state_file` is the
//! reference's `message-state.json` shape.

pub mod counter;
pub mod line;
pub mod receiver;
pub mod state_file;

#[cfg(test)]
mod tests;

pub use counter::Counter;
pub use line::{SeqLine, parse_line, render_line, render_numbered};
pub use receiver::{Receiver, Seen, Verdict};
pub use state_file::MessageState;

use crate::error::{Error, Result};

/// The detail that marks a numbered send refused because its sender's counter moved while
/// it held it (an engine whose counter write compares what the hold read: nothing was
/// stored, and the send can be numbered again).
const COUNTER_MOVED: &str = "counter_moved";

/// How many times a numbered send is tried in all when its counter keeps moving.
pub const TRIES: usize = 3;

/// The refusal of a numbered send by `agent` whose counter moved while it held it (the
/// detail names the agent).
pub fn counter_moved(agent: &str) -> Error {
    Error::conflict(format!(
        "the sequence counter of {agent} moved while this send held it; nothing was delivered"
    ))
    .detail(COUNTER_MOVED, agent.to_string())
    .hint("send again: the message takes the next number (another circe process lost its hold on the counter mid-send)")
}

/// Whether `e` is `counter_moved`'s refusal of a send by `agent`.
pub fn is_counter_moved(e: &Error, agent: &str) -> bool {
    e.details.iter().any(|(k, v)| *k == COUNTER_MOVED && *v == agent)
}

/// Run `attempt` (which takes `agent`'s hold, numbers and delivers) again while it is
/// refused because that counter moved meanwhile, `TRIES` times in all; each retry says so
/// on stderr. A refusal of another sender's send made inside the attempt (circe's notice
/// after a change that committed) is not a reason to run it again.
pub fn numbered_again<T>(agent: &str, mut attempt: impl FnMut() -> Result<T>) -> Result<T> {
    let mut tries = 1;
    loop {
        match attempt() {
            Err(e) if is_counter_moved(&e, agent) && tries < TRIES => {
                crate::error::warn(&format!("{}; numbering it again", e.message));
                tries += 1;
            }
            r => return r,
        }
    }
}
