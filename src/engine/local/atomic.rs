//! Atomic file operations: create, replace, move without clobbering, append, fsync.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::{CWD, RenameFlags, renameat_with};

use crate::fault::{io_step, test_break};

/// The mode every file circe makes asks for: the umask decides what is kept, as for any
/// tool's files (a team of users sharing a root through a group sets umask 002; the usual
/// 022 gives 0644).
pub const FILE_MODE: u32 = 0o666;

/// A temp file that is removed on drop unless it was renamed into place.
pub struct TempFile {
    pub path: PathBuf,
    armed: bool,
}

impl TempFile {
    /// Create a new temp file in `dir` with `content`, fsynced when `sync`.
    pub fn write(dir: &Path, content: &[u8], sync: bool) -> io::Result<TempFile> {
        io_step()?;
        let mut last = None;
        for _ in 0..16 {
            let path = dir.join(format!(
                ".tmp-{}-{}",
                super::repair::stager(),
                crate::clock::random_suffix()
            ));
            match OpenOptions::new().write(true).create_new(true).mode(FILE_MODE).open(&path) {
                Ok(mut f) => {
                    let mut t = TempFile { path, armed: true };
                    f.write_all(content)?;
                    if sync {
                        io_step()?;
                        f.sync_all()?;
                    }
                    drop(f);
                    t.armed = true;
                    return Ok(t);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free temp name")))
    }

    /// Create a new, empty temp file in `dir`, open for writing (a derived file written as
    /// a stream: no fsync).
    pub fn create(dir: &Path) -> io::Result<(TempFile, File)> {
        io_step()?;
        let mut last = None;
        for _ in 0..16 {
            let path = dir.join(format!(
                ".tmp-{}-{}",
                super::repair::stager(),
                crate::clock::random_suffix()
            ));
            match OpenOptions::new().write(true).create_new(true).mode(FILE_MODE).open(&path) {
                Ok(f) => return Ok((TempFile { path, armed: true }, f)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free temp name")))
    }

    /// The file now lives elsewhere; do not remove it on drop.
    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if self.armed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Create `path` (it must not exist) with `content`, fsynced when `sync`.
pub fn write_new(path: &Path, content: &[u8], sync: bool) -> io::Result<()> {
    io_step()?;
    let mut f = OpenOptions::new().write(true).create_new(true).mode(FILE_MODE).open(path)?;
    f.write_all(content)?;
    if sync {
        io_step()?;
        f.sync_all()?;
    }
    Ok(())
}

/// Rename `from` to `to`, failing with `AlreadyExists` instead of replacing (FS_RULES 2).
pub fn rename_noclobber(from: &Path, to: &Path) -> io::Result<()> {
    io_step()?;
    if test_break("clobber") {
        return std::fs::rename(from, to);
    }
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {
            // No RENAME_NOREPLACE here (NFS): link (fails on EEXIST) then unlink the source.
            // A source that cannot be unlinked, and still stands as the same file, takes its
            // new name back: the move failed whole (a caller told "failed" must not find it
            // made). One gone meanwhile (an unlink NFS retransmitted, said as ENOENT) moved.
            std::fs::hard_link(from, to)?;
            match std::fs::remove_file(from) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => {
                    if same_file(from, to) {
                        let _ = std::fs::remove_file(to);
                    }
                    Err(e)
                }
                Ok(()) => Ok(()),
            }
        }
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Are `a` and `b` one file (two links to one inode)?
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::symlink_metadata(a), std::fs::symlink_metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Rename `from` over `to` (replacing it): for records, never for messages.
pub fn rename_replace(from: &Path, to: &Path) -> io::Result<()> {
    io_step()?;
    std::fs::rename(from, to)
}

pub fn remove(path: &Path) -> io::Result<()> {
    io_step()?;
    std::fs::remove_file(path)
}

/// fsync a directory so the renames into or out of it survive power loss.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    io_step()?;
    File::open(dir)?.sync_all()
}

/// Open (or create) `path` for appending: O_APPEND, never through a symlink (ELOOP), never
/// a FIFO or device (refused). Counts as a store mutation for fault injection.
pub fn append_open(path: &Path) -> io::Result<File> {
    io_step()?;
    let f = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(FILE_MODE)
        .custom_flags(NOFOLLOW_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    Ok(f)
}

/// Append one whole line on an O_APPEND handle (FS_RULES 7), on a line of its own: after a
/// newline when the file does not end with one, so a line a failed write cut (a full disk)
/// stays a line of its own, never glued to the next. It is not cut off again: other
/// writers of these files append at the same time (under a shared lock, or each task's
/// own). Never follows a symlink (ELOOP) or writes into a FIFO or device (refused).
pub fn append_line(path: &Path, line: &[u8], sync: bool) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = append_open(path)?;
    let len = f.metadata()?.len();
    let mut last = [b'\n'];
    if len > 0 {
        f.read_exact_at(&mut last, len - 1)?;
    }
    if last[0] == b'\n' {
        append_whole(&f, len, line, false)?;
    } else {
        append_whole(&f, len, &[b"\n", line].concat(), false)?;
    }
    if sync {
        io_step()?;
        f.sync_data()?;
    }
    Ok(())
}

/// Write `buf` at the end of `f` (opened O_APPEND, `len` bytes long before). With `cut`
/// (for a caller whose exclusive lock every circe writer of the file takes), a write that
/// fails part-way (a full disk) is cut off again, so that none of it lands, unless the file
/// grew by more meanwhile (a hand append, whose text is never cut). Counts as a store
/// mutation for fault injection, which fails it after half of `buf` landed. (TEST BUILDS
/// ONLY: `append-keep-torn` leaves the half.)
pub fn append_whole(f: &File, len: u64, buf: &[u8], cut: bool) -> io::Result<()> {
    let mut done = 0;
    let mut write = || -> io::Result<()> {
        if let Err(e) = io_step() {
            done = (&*f).write(&buf[..buf.len() / 2])?;
            return Err(e);
        }
        while done < buf.len() {
            match (&*f).write(&buf[done..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    };
    let r = write();
    if r.is_err()
        && cut
        && done > 0
        && !test_break("append-keep-torn")
        && f.metadata().is_ok_and(|m| m.len() == len + done as u64)
    {
        let _ = f.set_len(len);
    }
    r
}

/// Overwrite the start of a small derived file in place (one `pwrite`, no truncate),
/// creating it when missing. Never follows a symlink: a name that is not a regular file
/// (a planted link, FIFO or device) is removed and made again as a regular file.
pub fn overwrite_in_place(path: &Path, content: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    io_step()?;
    let open = |create_new: bool| {
        let mut o = OpenOptions::new();
        o.write(true).mode(FILE_MODE).custom_flags(NOFOLLOW_NONBLOCK);
        if create_new {
            o.create_new(true)
        } else {
            o.create(true).truncate(false)
        };
        o.open(path)
    };
    let f = match open(false) {
        Ok(f) if f.metadata()?.is_file() => f,
        // ELOOP (a symlink), ENXIO (a FIFO nobody reads), or opened but not a regular file.
        Ok(_) => replace_planted(path, open)?,
        Err(_) if is_planted(path) => replace_planted(path, open)?,
        Err(e) => return Err(e),
    };
    f.write_all_at(content, 0)
}

fn replace_planted(path: &Path, open: impl Fn(bool) -> io::Result<File>) -> io::Result<File> {
    remove(path)?;
    open(true)
}

/// `append_line` for a derived file: a planted link, FIFO or device in its place is removed
/// (never followed) and the line goes into a new regular file.
pub fn append_derived(path: &Path, line: &[u8]) -> io::Result<()> {
    match append_line(path, line, false) {
        Err(_) if is_planted(path) => {
            remove(path)?;
            append_line(path, line, false)
        }
        r => r,
    }
}

/// Is `path` a regular file (not following a symlink)?
pub fn is_regular(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// Does something other than a regular file (a link, FIFO, device, folder) stand at `path`?
fn is_planted(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file())
}

/// Open a regular file for reading without following a symlink; FIFOs, devices and
/// folders are refused (`InvalidInput`), a symlink fails with ELOOP.
/// Returns the file and its length.
pub fn open_regular(path: &Path) -> io::Result<(File, u64)> {
    let f = OpenOptions::new().read(true).custom_flags(NOFOLLOW_NONBLOCK).open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    Ok((f, meta.len()))
}

/// Can `open_unlinked` be tried? Not after openat2 was refused (an old kernel, a sandbox),
/// nor after it met a link the slow way passed (one above the root: `no_unlinked`).
static UNLINKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// What `open_unlinked` found.
pub enum Unlinked {
    /// The regular file, and its length.
    Opened(File, u64),
    /// A link somewhere on the path.
    Link,
    /// Anything else: missing, no regular file, an error, no openat2.
    Other,
}

/// Open a regular file whose path holds no symbolic link anywhere, in one call (openat2
/// with `RESOLVE_NO_SYMLINKS`): the path's folders are real folders when it is opened,
/// which looks before an open (`is_real_dir`) only say of the moment they looked. Anything
/// else is for the caller to open its usual way, which says what is wrong.
pub fn open_unlinked(path: &Path) -> Unlinked {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use rustix::io::Errno;
    use std::sync::atomic::Ordering;
    if !UNLINKED.load(Ordering::Relaxed) {
        return Unlinked::Other;
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat2(CWD, path, flags, Mode::empty(), ResolveFlags::NO_SYMLINKS) {
        Ok(fd) => fd,
        Err(Errno::LOOP) => return Unlinked::Link,
        Err(e) => {
            if [Errno::NOSYS, Errno::PERM, Errno::INVAL].contains(&e) {
                UNLINKED.store(false, Ordering::Relaxed);
            }
            return Unlinked::Other;
        }
    };
    let f = File::from(fd);
    match f.metadata() {
        Ok(m) if m.is_file() => Unlinked::Opened(f, m.len()),
        _ => Unlinked::Other,
    }
}

/// What `open_unlinked_dir` found.
pub enum UnlinkedDir {
    /// The folder, open for listing.
    Opened(std::os::fd::OwnedFd),
    /// A link somewhere on the path.
    Link,
    /// Anything else: missing, no folder, an error, no openat2.
    Other,
}

/// Open a folder whose path holds no symbolic link anywhere, in one call (as
/// `open_unlinked` opens a file): opened, it and every folder above it are real folders.
pub fn open_unlinked_dir(path: &Path) -> UnlinkedDir {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use rustix::io::Errno;
    use std::sync::atomic::Ordering;
    if !UNLINKED.load(Ordering::Relaxed) {
        return UnlinkedDir::Other;
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat2(CWD, path, flags, Mode::empty(), ResolveFlags::NO_SYMLINKS) {
        Ok(fd) => UnlinkedDir::Opened(fd),
        Err(Errno::LOOP) => UnlinkedDir::Link,
        Err(e) => {
            if [Errno::NOSYS, Errno::PERM, Errno::INVAL].contains(&e) {
                UNLINKED.store(false, Ordering::Relaxed);
            }
            UnlinkedDir::Other
        }
    }
}

/// `open_unlinked` met a link that the usual way found to be no fault (one above the root,
/// or the root's own `AGENTS/`): this process opens the usual way from now on.
pub fn no_unlinked() {
    UNLINKED.store(false, std::sync::atomic::Ordering::Relaxed);
}

/// Read a regular file without following a symlink; FIFOs, devices and folders are refused.
pub fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    read_opened(open_regular(path)?)
}

/// The whole of a file opened by `open_regular` (or `open_unlinked`), given its length.
pub fn read_opened((f, len): (File, u64)) -> io::Result<Vec<u8>> {
    use std::io::Read;
    // Read straight into a buffer one byte longer than the file (std's read_to_end would
    // stat and seek again for its size hint): usually one read, then the 0 of end of file.
    let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0) + 1];
    let mut n = 0;
    loop {
        if n == buf.len() {
            buf.resize(n * 2, 0);
        }
        match (&f).read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(n);
    Ok(buf)
}

/// Read at most `cap + 1` bytes of a regular file (enough to tell that it is over `cap`),
/// without following a symlink; also returns the file's size when opened.
pub fn read_regular_capped(path: &Path, cap: usize) -> io::Result<(Vec<u8>, u64)> {
    read_opened_capped(open_regular(path)?, cap)
}

/// At most `cap + 1` bytes of a file opened by `open_regular` (or `open_unlinked`), and
/// its length.
pub fn read_opened_capped((f, len): (File, u64), cap: usize) -> io::Result<(Vec<u8>, u64)> {
    use std::io::Read;
    let max = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    let mut buf = Vec::with_capacity(usize::try_from(len.min(max)).unwrap_or(0) + 1);
    (&f).take(max).read_to_end(&mut buf)?;
    Ok((buf, len))
}

/// The two open(2) flags we need, without a libc dependency.
mod libc_flags {
    pub const O_NOFOLLOW: i32 = rustix::fs::OFlags::NOFOLLOW.bits().cast_signed();
    pub const O_NONBLOCK: i32 = rustix::fs::OFlags::NONBLOCK.bits().cast_signed();
}

/// `O_NOFOLLOW | O_NONBLOCK`: never through a symlink, never blocked by a FIFO.
pub const NOFOLLOW_NONBLOCK: i32 = libc_flags::O_NOFOLLOW | libc_flags::O_NONBLOCK;

#[cfg(test)]
mod tests {
    /// A line a failed write left without its end is ended by the next append, which starts
    /// on a line of its own: a torn lane entry never glues itself to the next task's.
    #[test]
    fn an_append_after_a_torn_line_starts_on_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.lane");
        std::fs::write(&p, "a 1\nb 2 cut").unwrap();
        super::append_line(&p, b"c 3\n", false).unwrap();
        super::append_line(&p, b"d 4\n", false).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a 1\nb 2 cut\nc 3\nd 4\n");
    }
}
