//! The chat channel (PROTOCOLS.md "The chat channel"): one append-only Markdown file of
//! `[sender-to-recipient] @ [a, b]: text` lines, read by the reference's grammar.
//!
//! Pure: `grammar` (the reference regex, hand-written), `line`, `message` (the JSON line),
//! `render`, `scanner` (bytes in, whole messages out), `cursor` (a watcher's saved place).
//! Operations over the store: `say`, `follow` (`circe chat watch` on the file beside a local
//! root), `follow_log` (on a channel the engine keeps, `Engine::chat_log`), `archive`; `seq`
//! applies the sequence rules to numbered lines.

pub mod archive;
pub mod cursor;
pub mod follow;
pub mod follow_log;
pub mod grammar;
pub mod line;
pub mod message;
pub mod render;
pub mod say;
pub mod scanner;
pub mod seq;

#[cfg(test)]
mod seam_tests;
#[cfg(test)]
mod tests;

pub use line::{ChatLine, LineKind, classify, parse_line};
pub use message::ChatMessage;
pub use scanner::{Found, Position, Scanner};

/// Where the channel of `ws` is kept, for people: the file, or the root that keeps it.
pub fn place(ws: &crate::workspace::Workspace) -> crate::error::Result<String> {
    if ws.engine.chat_log().is_some() {
        return Ok(format!("the chat channel of {}", ws.engine.location()));
    }
    Ok(channel(ws)?.path().display().to_string())
}

/// The channel file of `ws`: `chat: path:` of circe.yaml (relative to the folder holding
/// `.circe`), else `.circe/chat.md`: the channel of a root whose engine keeps none itself
/// (`Engine::chat_log`).
pub fn channel(ws: &crate::workspace::Workspace) -> crate::error::Result<ChatFile> {
    let root = ws.engine.local_folder().ok_or_else(|| {
        crate::error::Error::usage(
            "the chat channel is a file beside a local root; this root has no local folder",
        )
        .hint("run chat commands on a host with the team's .circe folder (or its mirror)")
    })?;
    let path = match ws.config.chat.path.as_deref() {
        None => root.join("chat.md"),
        Some(p) => {
            path_fits(&root, p)?;
            root.parent().unwrap_or(&root).join(p)
        }
    };
    let sync = ws.config.durability()? == crate::config::Durability::Full;
    Ok(ChatFile::new(&root, path, sync))
}

use crate::engine::local::ChatFile;

/// `chat: path:` names a file outside the root's folders: beside the root's own files
/// (`.circe/<name>.md`) or anywhere outside the root, never in a box or circe's own folders,
/// and not a folder.
pub fn path_fits(root: &std::path::Path, chat: &str) -> crate::error::Result<()> {
    // A path that ends in a folder's way (`dir/`, `dir/.`, `..`) names no file to write.
    let trimmed = chat.trim_end_matches('/');
    if chat.ends_with('/')
        || std::path::Path::new(trimmed).file_name().is_none()
        || trimmed.ends_with("/.")
        || trimmed == "."
    {
        return Err(crate::error::Error::refused(format!(
            "chat: path `{chat}` names a folder, not a file"
        ))
        .hint("name the channel's file, e.g. `.workplace/chat.md`"));
    }
    let path = root.parent().unwrap_or(root).join(chat);
    let at = crate::engine::local::resolved(&path);
    let root = crate::engine::local::resolved(root);
    let beside = at.parent() == Some(root.as_path())
        && at.extension().is_some_and(|e| e == "md")
        && at.file_name().is_some_and(|n| n != "circe.yaml");
    if at.starts_with(&root) && !beside {
        return Err(crate::error::Error::refused(format!(
            "chat: path `{chat}` names {} inside the root, where circe keeps its own files",
            at.display()
        ))
        .hint("name a file outside the root (e.g. `.workplace/chat.md`), or leave the key out for .circe/chat.md"));
    }
    if crate::engine::local::is_folder(&at) == Some(true) {
        return Err(crate::error::Error::refused(format!(
            "chat: path `{chat}` is a folder ({})",
            at.display()
        ))
        .hint("name the channel's file, e.g. `.workplace/chat.md`"));
    }
    // A device (`/dev/null`), a pipe or a socket takes no channel, and circe moves nothing
    // outside the root away: the path is what changes.
    if let Some(what) = crate::engine::local::special_file(&at) {
        return Err(crate::error::Error::refused(format!(
            "chat: path `{chat}` names {what} ({}), not a file",
            at.display()
        ))
        .hint(PLAIN_FILE));
    }
    Ok(())
}

/// The way out when `chat: path:` names no plain file.
pub const PLAIN_FILE: &str = "name a plain file for the channel (made when missing), e.g. `.workplace/chat.md`, in circe.yaml's `chat: path:` (`circe config`, then `circe config --set`)";
