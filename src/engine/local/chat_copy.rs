//! The chat channel beside a local root, read whole (with its archives) for `circe migrate`
//! into an engine that keeps the channel itself.

use std::path::Path;

use super::chat_file::ChatFile;
use crate::chat::archive::records;
use crate::engine::ChatCopy;
use crate::error::Result;

/// The channel of the root in `root` (at `path`, `chat: path:` of its circe.yaml, relative
/// to the folder holding the root; else `chat.md` in it) and every archive its records name,
/// oldest first. `None` when there is neither.
pub fn chat_copy(root: &Path, path: Option<&str>) -> Result<Option<ChatCopy>> {
    let file = match path {
        None => root.join("chat.md"),
        Some(p) => root.parent().unwrap_or(root).join(p),
    };
    let chat = ChatFile::new(root, file, false);
    let channel = match chat.open()? {
        Some(r) => {
            let mut data = Vec::new();
            r.read_to_end_from(0, &mut data)?;
            Some(data)
        }
        None => None,
    };
    let mut recs = records(&chat.archive_records()?);
    recs.sort_by(|a, b| (&a.archived_at, &a.archive).cmp(&(&b.archived_at, &b.archive)));
    let mut archives = Vec::new();
    for r in recs {
        if let Some(reader) = chat.open_archive(&r.archive)? {
            let mut data = Vec::new();
            reader.read_to_end_from(0, &mut data)?;
            archives.push((format!("{}.md", r.archive), data));
        }
    }
    if channel.is_none() && archives.is_empty() {
        return Ok(None);
    }
    Ok(Some(ChatCopy { channel: channel.unwrap_or_default(), archives }))
}
