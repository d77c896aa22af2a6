//! The chat channel (PROTOCOLS.md "The chat channel"): one append-only Markdown file of
//! `[sender-to-recipient] @ [a, b]: text` lines, read by the reference's grammar.
//!
//! Pure: `grammar` (the reference regex, hand-written), `line`, `message` (the JSON line),
//! `render`, `scanner` (bytes in, whole messages out), `cursor` (a watcher's saved place).
//! Operations over the store: `say`, `follow` (`circe chat watch`), `archive`.

pub mod grammar;
pub mod line;
pub mod message;
pub mod render;
pub mod scanner;

#[cfg(test)]
mod tests;

pub use line::{ChatLine, LineKind, classify, parse_line};
pub use message::ChatMessage;
pub use scanner::{Found, Position, Scanner};
