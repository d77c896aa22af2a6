//! The chat channel beside a local root, read whole (with its archives) for `circe migrate`
//! into an engine that keeps the channel itself.

use std::path::Path;

use super::chat_file::ChatFile;
use super::root::list_names;
use crate::chat::archive::records;
use crate::engine::ChatCopy;
use crate::error::Result;

/// The channel of the root in `root` (at `path`, `chat: path:` of its circe.yaml, relative
/// to the folder holding the root; else `chat.md` in it) and every archive in `LOGS/chat/`,
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
    // Every `.md` in LOGS/chat/, in the order its record says it was made (one without a
    // record, as a mirror writes them: first, by name).
    let recs = records(&chat.archive_records()?);
    let mut names: Vec<(String, String)> = list_names(&chat.logs)?
        .into_iter()
        .filter_map(|n| n.strip_suffix(".md").map(str::to_string))
        .map(|stem| {
            let at = recs.iter().find(|r| r.archive == stem).map(|r| r.archived_at.clone());
            (at.unwrap_or_default(), stem)
        })
        .collect();
    names.sort();
    let mut archives = Vec::new();
    for (_, stem) in names {
        if let Some(reader) = chat.open_archive(&stem)? {
            let mut data = Vec::new();
            reader.read_to_end_from(0, &mut data)?;
            archives.push((format!("{stem}.md"), data));
        }
    }
    if channel.is_none() && archives.is_empty() {
        return Ok(None);
    }
    Ok(Some(ChatCopy { channel: channel.unwrap_or_default(), archives }))
}

/// A root just written from a snapshot holds its channel at `chat.md`: where its
/// configuration names another file (`chat: path:`), the channel goes there, and a file
/// already there (the channel as it was before the root moved into a database) is set
/// aside as `<file>.before-migrate`, which is returned.
pub fn place_channel(root: &Path, path: Option<&str>) -> Result<Option<std::path::PathBuf>> {
    let from = root.join("chat.md");
    let Some(p) = path.filter(|_| from.exists()) else { return Ok(None) };
    let to = root.parent().unwrap_or(root).join(p);
    if to == from {
        return Ok(None);
    }
    let aside = match std::fs::symlink_metadata(&to) {
        Ok(_) => Some(super::retire::set_aside(&to, "before-migrate")?),
        Err(_) => None,
    };
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(super::root::io_err("cannot create", dir))?;
    }
    // Another filesystem than the root's: copied, then removed here.
    if std::fs::rename(&from, &to).is_err() {
        std::fs::copy(&from, &to).map_err(super::root::io_err("cannot write", &to))?;
        std::fs::remove_file(&from).map_err(super::root::io_err("cannot remove", &from))?;
    }
    Ok(aside)
}
