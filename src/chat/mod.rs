//! The chat channel (PROTOCOLS.md "The chat channel"): one append-only Markdown file of
//! `[sender-to-recipient] @ [a, b]: text` lines, read by the reference's grammar.
//!
//! Pure: `grammar` (the reference regex, hand-written), `line`, `message` (the JSON line),
//! `render`, `scanner` (bytes in, whole messages out), `cursor` (a watcher's saved place).
//! Operations over the store: `say`, `follow` (`circe chat watch`), `archive`; `seq` applies
//! the sequence rules to numbered lines.

pub mod archive;
pub mod cursor;
pub mod follow;
pub mod grammar;
pub mod line;
pub mod message;
pub mod render;
pub mod say;
pub mod scanner;
pub mod seq;

#[cfg(test)]
mod tests;

pub use line::{ChatLine, LineKind, classify, parse_line};
pub use message::ChatMessage;
pub use scanner::{Found, Position, Scanner};

/// The channel file of `ws`: `chat: path:` of circe.yaml (relative to the folder holding
/// `.circe`), else `.circe/chat.md`. The channel is a file beside the root: a root kept
/// elsewhere than in a local folder has none.
pub fn channel(ws: &crate::workspace::Workspace) -> crate::error::Result<ChatFile> {
    let root = ws.engine.local_folder().ok_or_else(|| {
        crate::error::Error::usage(
            "the chat channel is a file beside a local root; this root has no local folder",
        )
        .hint("run chat commands on a host with the team's .circe folder (or its mirror)")
    })?;
    let path = match ws.config.chat.path.as_deref() {
        None => root.join("chat.md"),
        Some(p) => root.parent().unwrap_or(&root).join(p),
    };
    let sync = ws.config.durability()? == crate::engine::local::Durability::Full;
    Ok(ChatFile::new(&root, path, sync))
}

use crate::engine::local::ChatFile;
