//! Folders outside the root that `circe import tx` reads and `circe export tx` writes (a TX
//! `.ai/tx/msgs/` folder): its `*.md` files, read capped; new files written without ever
//! replacing one.

use std::io;
use std::path::Path;

use super::atomic;
use crate::engine::Capped;
use crate::error::{Error, Result};

/// The `*.md` files of `dir`, sorted by name, each read at most `cap + 1` bytes, or why it
/// could not be read (a name that is not UTF-8, a link, a FIFO).
pub fn read_message_dir(
    dir: &Path,
    cap: usize,
) -> Result<Vec<(String, std::result::Result<Capped, String>)>> {
    let rd = std::fs::read_dir(dir).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::not_found(format!("no folder {}", dir.display()))
            .hint("name the folder that holds the messages (TX keeps them in .ai/tx/msgs)"),
        // The file on the way is named (`file/sub`: `file`).
        io::ErrorKind::NotADirectory => super::files::folder_can_be(dir)
            .err()
            .unwrap_or_else(|| Error::usage(format!("{} is a file, not a folder", dir.display())))
            .hint("name the folder that holds the messages (TX keeps them in .ai/tx/msgs)"),
        _ => Error::io("cannot list", dir, e),
    })?;
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| Error::io("cannot list", dir, e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            out.push((
                entry.file_name().to_string_lossy().into_owned(),
                Err("the name is not UTF-8".into()),
            ));
            continue;
        };
        let md = Path::new(&name).extension().is_some_and(|e| e.eq_ignore_ascii_case("md"));
        if !md || name.starts_with('.') {
            continue;
        }
        let read = atomic::read_regular_capped(&dir.join(&name), cap)
            .map(|(bytes, len)| Capped { bytes, size: Some(len) })
            .map_err(|e| match e.raw_os_error() {
                Some(40) => "a symbolic link (not followed)".to_string(),
                _ if e.kind() == io::ErrorKind::InvalidInput => "not a regular file".to_string(),
                _ => e.to_string(),
            });
        out.push((name, read));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// What writing one file did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    New,
    /// The same bytes were there already.
    Same,
    /// Another file holds the name: left as it is.
    Kept,
}

/// Write `bytes` as `dir/name` (the folder is made when missing), never replacing a file.
pub fn write_new_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<Written> {
    if name.contains('/') || name.starts_with('.') {
        return Err(Error::internal(format!("`{name}` is no file name")));
    }
    super::files::make_folder(dir)?;
    let path = dir.join(name);
    match atomic::write_new(&path, bytes, false) {
        Ok(()) => Ok(Written::New),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let same = atomic::read_regular(&path).is_ok_and(|b| b == bytes);
            Ok(if same { Written::Same } else { Written::Kept })
        }
        Err(e) => Err(Error::io("cannot write", &path, e)),
    }
}

/// Write `bytes` over `dir/name`, a file the caller wrote itself a moment ago (an export
/// that meets a later message under a name it wrote already, and writes that one as it
/// would have alone): a temp file in `dir` renamed over it.
pub fn replace_own_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    if name.contains('/') || name.starts_with('.') {
        return Err(Error::internal(format!("`{name}` is no file name")));
    }
    let path = dir.join(name);
    let mut t = atomic::TempFile::write(dir, bytes, false)
        .map_err(|e| Error::io("cannot write", dir, e))?;
    atomic::rename_replace(&t.path, &path).map_err(|e| Error::io("cannot write", &path, e))?;
    t.disarm();
    Ok(())
}
