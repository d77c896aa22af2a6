//! Exclusive locks on dedicated lock files in `locks/` (flock via std `File::lock`).
//!
//! Lock files are created on first use and never renamed or deleted (FS_RULES 5): replacing
//! one would let two holders in. A lock dies with its process, so a crash never leaves one.
//! A task's lock file is empty but for the journal of a change under way, which only its
//! holder writes (`task_journal.rs`).

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// An exclusive lock, released on drop.
#[derive(Debug)]
pub struct Lock {
    file: File,
}

/// How long a command waits for a lock before giving up (a holder may be stopped).
const WAIT: Duration = Duration::from_secs(10);

/// Never through a symlink (a planted link must not create or lock a file outside the
/// root): that is refused with an error naming it.
fn open(path: &Path) -> Result<File> {
    open_as(path, true).map_err(|e| open_error(path, e))
}

/// A lock file that may not be written (a root read-only to this user, or on a read-only
/// mount) is opened to read: `flock` works on such a handle, so reading commands still
/// read under their locks, and a writing command fails where it writes, with that cause.
fn open_as(path: &Path, create: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let open = |write: bool| {
        OpenOptions::new()
            .read(true)
            .write(write)
            .create(create && write)
            .truncate(false)
            .custom_flags(super::atomic::NOFOLLOW_NONBLOCK)
            .open(path)
    };
    match open(true) {
        Err(e)
            if e.kind() == std::io::ErrorKind::PermissionDenied
                || e.raw_os_error() == Some(rustix::io::Errno::ROFS.raw_os_error()) =>
        {
            open(false).map_err(|_| e)
        }
        r => r,
    }
}

fn open_error(path: &Path, e: std::io::Error) -> Error {
    let planted = e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error());
    let err = Error::io("cannot open lock file", path, e);
    if planted {
        err.hint("a symlink stands where circe keeps a lock file: remove it")
    } else {
        err
    }
}

/// A lock that could not be taken. On a handle opened to read (a lock file this user may
/// not write), NFS's emulated `flock` refuses an exclusive lock with EBADF: said as the
/// permission it lacks.
fn lock_error(path: &Path, e: std::io::Error) -> Error {
    let e = if e.raw_os_error() == Some(rustix::io::Errno::BADF.raw_os_error()) {
        std::io::Error::from(std::io::ErrorKind::PermissionDenied)
    } else {
        e
    };
    Error::io("cannot lock", path, e)
}

/// A lock tried without waiting on a lock file that may not exist.
#[derive(Debug)]
pub(super) enum Tried {
    Got(Lock),
    /// Another holder has it.
    Held,
    /// No such lock file: nobody holds it, and none is made.
    Missing,
}

impl Lock {
    /// The lock if it is free right now; `None` when another holder has it.
    pub(super) fn try_acquire(path: &Path) -> Result<Option<Lock>> {
        Self::try_file(path, open(path)?)
    }

    /// The lock if it is free right now, without making its file.
    pub(super) fn try_existing(path: &Path) -> Result<Tried> {
        let file = match open_as(path, false) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Tried::Missing),
            Err(e) => return Err(open_error(path, e)),
        };
        Ok(Self::try_file(path, file)?.map_or(Tried::Held, Tried::Got))
    }

    fn try_file(path: &Path, file: File) -> Result<Option<Lock>> {
        // TEST BUILDS ONLY (CIRCE_TEST_BREAK=clobber): every lock is had, none is held.
        if super::fault::test_break("clobber") {
            return Ok(Some(Lock { file }));
        }
        match file.try_lock() {
            Ok(()) => Ok(Some(Lock { file })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(lock_error(path, e)),
        }
    }

    /// A shared lock if no exclusive holder has it right now.
    pub(super) fn try_acquire_shared(path: &Path) -> Result<Option<Lock>> {
        let file = open(path)?;
        match file.try_lock_shared() {
            Ok(()) => Ok(Some(Lock { file })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(lock_error(path, e)),
        }
    }

    /// The lock file itself, for what its holder keeps in it (a task's lock file holds the
    /// journal of a change under way: `task_journal.rs`).
    pub(super) fn file(&self) -> &File {
        &self.file
    }

    pub(super) fn acquire(path: &Path, what: &str) -> Result<Lock> {
        Self::acquire_mode(path, what, false)
    }

    /// A shared lock: any number of shared holders, but none while an exclusive one holds it.
    pub(super) fn acquire_shared(path: &Path, what: &str) -> Result<Lock> {
        Self::acquire_mode(path, what, true)
    }

    fn acquire_mode(path: &Path, what: &str, shared: bool) -> Result<Lock> {
        let file = open(path)?;
        if super::fault::test_break("clobber") {
            return Ok(Lock { file });
        }
        let start = Instant::now();
        let mut pause = Duration::from_micros(50);
        loop {
            let got = if shared { file.try_lock_shared() } else { file.try_lock() };
            match got {
                Ok(()) => return Ok(Lock { file }),
                Err(TryLockError::WouldBlock) => {
                    if start.elapsed() > WAIT {
                        return Err(Error::conflict(format!(
                            "{what} is locked by another circe process for over {}s",
                            WAIT.as_secs()
                        ))
                        .hint("a circe process may be stopped (SIGSTOP) while holding it; resume or kill it and retry"));
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(5));
                }
                Err(TryLockError::Error(e)) => return Err(lock_error(path, e)),
            }
        }
    }
}
