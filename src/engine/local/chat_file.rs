//! The chat channel file (PROTOCOLS.md "The chat channel"): appends under `locks/chat.lock`
//! with one `write` on an `O_APPEND` handle, never through a symlink; readers by file
//! descriptor, with the identity (device, inode) that tells a replaced file.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::atomic::{self, NOFOLLOW_NONBLOCK};
use super::lock::Lock;
use super::root::io_err;
use crate::error::{Error, Result};
use crate::fault::io_step;

/// Which file: device and inode. A file replaced by rename has another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    pub(super) fn of(m: &std::fs::Metadata) -> FileId {
        FileId { dev: m.dev(), ino: m.ino() }
    }
}

/// The channel file of a root, and the lock its writers share.
#[derive(Debug, Clone)]
pub struct ChatFile {
    pub(super) root: PathBuf,
    pub(super) path: PathBuf,
    pub(super) lock: PathBuf,
    pub(super) logs: PathBuf,
    pub(super) sync: bool,
}

/// Where an append landed.
#[derive(Debug, Clone, Copy)]
pub struct Appended {
    /// Byte offset of the message's first byte.
    pub offset: u64,
    /// A newline was written first because the file did not end with one.
    pub prefixed: bool,
    /// Lines before the message (when asked for): its first line is this + 1.
    pub lines_before: Option<u64>,
}

/// Filesystems where `O_APPEND` is not atomic across hosts and flock may be lost (FS_RULES
/// 19): a name for the error, from `statfs`'s `f_type`.
/// The filesystem's name when `dir` is on one where change notification and appends from
/// several hosts cannot be trusted (NFS, FUSE, ...).
pub fn remote_fs_at(dir: &Path) -> Option<&'static str> {
    let magic = rustix::fs::statfs(dir).ok()?.f_type;
    remote_fs(u64::try_from(magic).unwrap_or(0))
}

pub fn remote_fs(magic: u64) -> Option<&'static str> {
    match magic {
        0x6969 => Some("NFS"),
        0x6573_5546 => Some("FUSE"),
        0xff53_4d42 => Some("CIFS"),
        0xfe53_4d42 => Some("SMB2"),
        0x00c3_6400 => Some("CephFS"),
        _ => None,
    }
}

impl ChatFile {
    /// The channel at `path` (absolute, or relative to the current folder) of the root kept
    /// in the folder `root` (its lock and archive records live there); fsynced when `sync`.
    pub fn new(root: &Path, path: PathBuf, sync: bool) -> ChatFile {
        ChatFile {
            root: root.to_path_buf(),
            path,
            lock: root.join("locks").join("chat.lock"),
            logs: root.join("LOGS").join("chat"),
            sync,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// Make the folder that holds the channel (`.workplace/` for the reference's layout).
    pub fn ensure_dir(&self) -> Result<()> {
        std::fs::create_dir_all(self.dir()).map_err(|e| {
            // Something that is no folder stands where the channel's folder goes (a file, a
            // FIFO), there or above it: said as such, with the way out, not as an OS error.
            let in_the_way = e.kind() == std::io::ErrorKind::AlreadyExists
                || e.kind() == std::io::ErrorKind::NotADirectory;
            if in_the_way {
                Error::refused(format!(
                    "{} (or a folder above it) is not a folder, so the chat channel {} cannot be there",
                    self.dir().display(),
                    self.path.display()
                ))
                .hint("move what stands there aside, or point `chat: path:` in circe.yaml elsewhere (`circe config`, then `circe config --set`)")
            } else {
                io_err("cannot create", self.dir())(e)
            }
        })
    }

    /// The filesystem's name when it is one where appends from several hosts may tear.
    pub fn remote_fs(&self) -> Option<&'static str> {
        let magic = rustix::fs::statfs(self.dir()).ok()?.f_type;
        remote_fs(u64::try_from(magic).unwrap_or(0))
    }

    /// Append one whole message: under the chat lock, one `write` on an `O_APPEND` handle
    /// opened without following a symlink; a newline first when the file does not end with
    /// one. The file is opened only once the lock is held, so a concurrent `chat archive`
    /// (which renames the file under the same lock) never receives the message.
    pub fn append(&self, message: &[u8], count_lines: bool) -> Result<Appended> {
        #[cfg(feature = "test-break")]
        if crate::fault::test_break("chat-split-write") {
            return self.append_split(message);
        }
        let lock = Lock::acquire(&self.lock, "the chat channel")?;
        let f = self.open_append()?;
        let len = f.metadata().map_err(io_err("cannot stat", &self.path))?.len();
        let prefixed = len > 0 && self.last_byte(&f, len)? != b'\n';
        let mut buf = Vec::with_capacity(message.len() + 1);
        if prefixed {
            buf.push(b'\n');
        }
        buf.extend_from_slice(message);
        // A write that fails part-way is cut off again: no reader ever sees half a message.
        super::atomic::append_whole(&f, len, &buf, true)
            .map_err(io_err("cannot append to", &self.path))?;
        drop(lock);
        if self.sync {
            io_step().and_then(|()| f.sync_data()).map_err(io_err("cannot sync", &self.path))?;
        }
        let offset = len + u64::from(prefixed);
        let lines_before =
            if count_lines { Some(count_newlines(&f, offset, &self.path)?) } else { None };
        Ok(Appended { offset, prefixed, lines_before })
    }

    /// TEST ONLY (`CIRCE_TEST_BREAK=chat-split-write`, debug builds): no lock, one write per
    /// line with a pause between, so that the torture suite can show its checker catching
    /// torn and interleaved messages.
    #[cfg(feature = "test-break")]
    fn append_split(&self, message: &[u8]) -> Result<Appended> {
        let f = self.open_append()?;
        for part in message.split_inclusive(|&b| b == b'\n') {
            std::io::Write::write_all(&mut &f, part)
                .map_err(io_err("cannot append to", &self.path))?;
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        Ok(Appended { offset: 0, prefixed: false, lines_before: None })
    }

    pub(super) fn open_append(&self) -> Result<File> {
        io_step().map_err(io_err("cannot open", &self.path))?;
        let f = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(atomic::FILE_MODE)
            .custom_flags(NOFOLLOW_NONBLOCK)
            .open(&self.path)
            .map_err(|e| self.open_error(e))?;
        let meta = f.metadata().map_err(io_err("cannot stat", &self.path))?;
        if !meta.is_file() {
            return Err(no_plain_file(&self.path));
        }
        Ok(f)
    }

    fn open_error(&self, e: io::Error) -> Error {
        match e.raw_os_error() {
            Some(40) => Error::refused(format!(
                "{} is a symbolic link; circe does not follow links",
                self.path.display()
            ))
            .hint("make the chat channel a plain file, or point `chat: path:` in circe.yaml at the file itself"),
            Some(6) => no_plain_file(&self.path),
            Some(21) => folder_channel(&self.path),
            _ => Error::io("cannot open", &self.path, e),
        }
    }

    pub(super) fn last_byte(&self, f: &File, len: u64) -> Result<u8> {
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, len - 1).map_err(io_err("cannot read", &self.path))?;
        Ok(b[0])
    }

    /// Open the channel for reading; `None` while it does not exist.
    pub fn open(&self) -> Result<Option<ChatReader>> {
        open_reader(&self.path).map_err(|e| {
            if super::files::special_file(&self.path).is_some() {
                no_plain_file(&self.path)
            } else {
                e
            }
        })
    }

    /// The identity of whatever stands at the channel's path now (a symlink is not
    /// followed); `None` when nothing does.
    pub fn id_now(&self) -> Result<Option<FileId>> {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) => Ok(Some(FileId::of(&m))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("cannot stat", &self.path, e)),
        }
    }

    /// The writers' lock in shared mode, if no writer holds it right now: while it is held,
    /// no `chat say` is half-way through its write.
    pub fn try_lock_shared(&self) -> Result<Option<Lock>> {
        Lock::try_acquire_shared(&self.lock)
    }

    /// The writers' lock, exclusively (`chat archive`).
    pub fn lock(&self) -> Result<Lock> {
        Lock::acquire(&self.lock, "the chat channel")
    }
}

/// Open a regular file for reading without following a symlink; `None` when missing.
pub(super) fn open_reader(path: &Path) -> Result<Option<ChatReader>> {
    match atomic::open_regular(path) {
        Ok((file, _)) => {
            let meta = file.metadata().map_err(io_err("cannot stat", path))?;
            Ok(Some(ChatReader { file, id: FileId::of(&meta), path: path.to_path_buf() }))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.raw_os_error() == Some(40) => Err(Error::refused(format!(
            "{} is a symbolic link; circe does not follow links",
            path.display()
        ))
        .hint("make the chat channel a plain file")),
        Err(_) if super::files::is_folder(path) == Some(true) => Err(folder_channel(path)),
        Err(e) => Err(Error::io("cannot open", path, e)),
    }
}

/// The channel's path names a device, a pipe or a socket. `doctor --repair` does not touch
/// the channel's path (it may lie outside the root), and a device is no file to move away:
/// a pipe or a socket may be moved away, else the path is what changes.
fn no_plain_file(path: &Path) -> Error {
    let what = super::files::special_file(path).unwrap_or("no plain file");
    let e = Error::refused(format!("{} is {what}, not the chat channel's file", path.display()));
    if what == "a device" {
        e.hint(crate::chat::PLAIN_FILE)
    } else {
        e.hint(format!(
            "move it away (the next `chat say` starts the channel anew), or {}",
            crate::chat::PLAIN_FILE
        ))
    }
}

/// The channel's path names a folder.
fn folder_channel(path: &Path) -> Error {
    Error::refused(format!("{} is a folder, not the chat channel's file", path.display())).hint(
        "point `chat: path:` in circe.yaml at a file (`circe config`, then `circe config --set`)",
    )
}

/// An open channel file (or archive), read by offset.
#[derive(Debug)]
pub struct ChatReader {
    file: File,
    id: FileId,
    path: PathBuf,
}

impl ChatReader {
    pub fn id(&self) -> FileId {
        self.id
    }

    /// Its size now (through the descriptor: the file it was opened as, even if renamed).
    pub fn size(&self) -> Result<u64> {
        Ok(self.file.metadata().map_err(io_err("cannot stat", &self.path))?.len())
    }

    /// When the file was made: its birth time where the filesystem keeps one, else the
    /// last time it was written (never earlier than the birth).
    pub fn started(&self) -> Result<std::time::SystemTime> {
        let m = self.file.metadata().map_err(io_err("cannot stat", &self.path))?;
        m.created().or_else(|_| m.modified()).map_err(io_err("cannot stat", &self.path))
    }

    /// Append everything from `offset` to the end of the file onto `buf`; returns how many
    /// bytes were read.
    pub fn read_to_end_from(&self, offset: u64, buf: &mut Vec<u8>) -> Result<usize> {
        let mut total = 0;
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            match self.file.read_at(&mut chunk, offset + total as u64) {
                Ok(0) => return Ok(total),
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    total += n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("cannot read", &self.path, e)),
            }
        }
    }

    /// The bytes `[from, to)` (fewer if the file is shorter).
    pub fn read_range(&self, from: u64, to: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; usize::try_from(to.saturating_sub(from)).unwrap_or(0)];
        let mut n = 0;
        while n < buf.len() {
            match self.file.read_at(&mut buf[n..], from + n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("cannot read", &self.path, e)),
            }
        }
        buf.truncate(n);
        Ok(buf)
    }
}

/// Newlines in the first `upto` bytes of `f`.
#[expect(clippy::naive_bytecount, reason = "one loop; no crate for it")]
pub(super) fn count_newlines(f: &File, upto: u64, path: &Path) -> Result<u64> {
    let mut chunk = vec![0u8; 64 * 1024];
    let (mut at, mut lines) = (0u64, 0u64);
    while at < upto {
        let want = usize::try_from((upto - at).min(chunk.len() as u64)).unwrap_or(chunk.len());
        let n = match f.read_at(&mut chunk[..want], at) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io("cannot read", path, e)),
        };
        lines += chunk[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        at += n as u64;
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    #[test]
    fn remote_filesystems_are_named() {
        assert_eq!(super::remote_fs(0x6969), Some("NFS"));
        assert_eq!(super::remote_fs(0x6573_5546), Some("FUSE"));
        assert_eq!(super::remote_fs(0xef53), None); // ext4
        assert_eq!(super::remote_fs(0x0102_1994), None); // tmpfs
    }
}
