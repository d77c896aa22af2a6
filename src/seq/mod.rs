//! Sequence numbers (PROTOCOLS.md "Sequence numbers", shared/reference 003): the
//! `(ROLE #N): text` line form, the sender's counter and the receiver's rules, all pure.
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
