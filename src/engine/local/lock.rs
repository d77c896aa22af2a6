//! Exclusive locks on dedicated lock files in `locks/` (flock via std `File::lock`).
//!
//! Lock files are created on first use and never renamed or deleted (FS_RULES 5): replacing
//! one would let two holders in. A task's lock file is the one exception: its holder removes
//! it when the task has no records, and a task's lock is that of the file at its path
//! (`Store::lock_task`). A lock dies with its process, so a crash never leaves one.
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

/// How long a lock is polled for before the wait moves into the kernel's queue.
const POLL: Duration = Duration::from_millis(20);

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
        if crate::fault::test_break("clobber") {
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
        Self::acquire_mode(path, what, false, WAIT)
    }

    /// A shared lock: any number of shared holders, but none while an exclusive one holds it.
    pub(super) fn acquire_shared(path: &Path, what: &str) -> Result<Lock> {
        Self::acquire_mode(path, what, true, WAIT)
    }

    /// Polled for `POLL` (most waits are a few small writes long), then waited for in the
    /// kernel: `flock` wakes its waiters the moment the holder lets go, where a poller
    /// asleep between tries can lose every turn to the others for the whole wait. Polled
    /// to the end when no thread can be started to wait (a process limit). Given up after
    /// `wait`.
    fn acquire_mode(path: &Path, what: &str, shared: bool, wait: Duration) -> Result<Lock> {
        let file = open(path)?;
        if crate::fault::test_break("clobber") {
            return Ok(Lock { file });
        }
        let start = Instant::now();
        let mut pause = Duration::from_micros(50);
        let mut queued = false;
        loop {
            let got = if shared { file.try_lock_shared() } else { file.try_lock() };
            match got {
                Ok(()) => return Ok(Lock { file }),
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Error(e)) => return Err(lock_error(path, e)),
            }
            let left = wait.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(Error::conflict(format!(
                    "{what} is locked by another circe process for over {}s",
                    wait.as_secs()
                ))
                .hint("a circe process may be stopped (SIGSTOP) while holding it; resume or kill it and retry"));
            }
            if !queued && start.elapsed() >= POLL {
                queued = true;
                match wait_in_kernel(&file, shared, left) {
                    Some(Ok(true)) => return Ok(Lock { file }),
                    // The time ran out: the loop says so.
                    Some(Ok(false)) => continue,
                    Some(Err(e)) => return Err(lock_error(path, e)),
                    None => {}
                }
            }
            std::thread::sleep(pause.min(left));
            pause = (pause * 2).min(Duration::from_millis(5));
        }
    }
}

/// Wait up to `limit` for the lock on `file` in a blocking `flock` on a second handle of
/// the same open file (the lock is the open file's, so it is `file`'s once taken). `None`:
/// no thread could be started. When the time runs out first, the thread goes on waiting
/// and lets the lock go the moment it gets it (its handle is the open file's last).
fn wait_in_kernel(file: &File, shared: bool, limit: Duration) -> Option<std::io::Result<bool>> {
    let twin = file.try_clone().ok()?;
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("circe-lock-wait".into())
        .spawn(move || {
            let got = loop {
                match if shared { twin.lock_shared() } else { twin.lock() } {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    r => break r,
                }
            };
            // Sent back with the handle, so that the lock is let go where the waiter is:
            // with the waiter gone, the send fails and both are dropped here.
            let _ = tx.send((got, twin));
        })
        .ok()?;
    match rx.recv_timeout(limit) {
        Ok((got, _twin)) => Some(got.map(|()| true)),
        Err(_) => Some(Ok(false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn other_handle(path: &Path) -> File {
        OpenOptions::new().read(true).write(true).open(path).unwrap()
    }

    #[test]
    fn a_lock_let_go_during_the_kernel_wait_is_the_waiters() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lock");
        let held = Lock::acquire(&path, "t").unwrap();
        let start = Instant::now();
        let letting_go = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(60));
            drop(held);
        });
        let got = Lock::acquire(&path, "t").unwrap();
        assert!(start.elapsed() > POLL, "the wait went past polling into the kernel");
        letting_go.join().unwrap();
        // Taken by the waiting thread's handle, and held by the waiter's own.
        assert!(matches!(other_handle(&path).try_lock(), Err(TryLockError::WouldBlock)));
        drop(got);
        assert!(other_handle(&path).try_lock().is_ok());
    }

    #[test]
    fn a_waiter_that_gave_up_leaves_no_lock_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lock");
        let held = Lock::acquire(&path, "t").unwrap();
        let err = Lock::acquire_mode(&path, "task T", false, Duration::from_millis(50));
        assert_eq!(err.unwrap_err().kind, crate::error::Kind::Conflict);
        drop(held);
        // The thread still waiting takes the lock and lets it go at once.
        let other = other_handle(&path);
        let start = Instant::now();
        while other.try_lock().is_err() {
            assert!(start.elapsed() < Duration::from_secs(5), "the given-up wait kept the lock");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
