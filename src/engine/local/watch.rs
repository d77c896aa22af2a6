//! `Waker`: sleep until a file may have changed. inotify (through `notify`) on the file's
//! folder, because editors and `chat archive` replace files by rename; or plain polling for
//! filesystems where inotify sees nothing (NFS, some FUSE mounts).
//!
//! Events are hints (FS_RULES 10, 15): every event for the file, every event without a
//! path, every overflow (`Rescan`) and every watcher error wakes the caller, who then
//! re-reads from where it stands. Nothing is decided from the event itself.

use std::ffi::OsString;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError, channel};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};

use crate::error::{Error, Result};

/// Why `wait` returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Something may have changed (or the poll interval passed): read again.
    Woke,
    /// The timeout passed with no event.
    Timeout,
}

/// notify watches on a thread of its own, and when that thread cannot start (a process
/// limit: `ulimit -u`, a container's pids.max) it panics at the first watch: a thread is
/// started here first to see, and once it has ended, and the kernel has let its place go
/// (a few milliseconds at most), notify's may take it.
fn thread_room() -> std::io::Result<()> {
    let tasks = || std::fs::read_dir("/proc/self/task").map_or(0, Iterator::count);
    let before = tasks();
    let probe = std::thread::Builder::new().spawn(|| {})?;
    probe.join().map_err(|_| std::io::Error::other("a thread that does nothing failed"))?;
    for _ in 0..50 {
        if tasks() <= before {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

pub struct Waker {
    rx: Option<Receiver<()>>,
    poll: Option<Duration>,
    _watcher: Option<RecommendedWatcher>,
}

/// Does this notification wake the reader? Every event for the file (or, without a name,
/// for anything in the folder), every event without a path, every overflow (`Rescan`: the
/// kernel queue lost events, FS_RULES 15) and every watcher error: a reader that is woken
/// for nothing only reads again from its cursor.
fn wakes(res: &notify::Result<notify::Event>, name: Option<&OsString>) -> bool {
    match res {
        // Reading a file (open, read, close without writing) changes nothing, and the
        // reader's own reads would otherwise wake it for ever.
        Ok(ev) if matches!(ev.kind, notify::EventKind::Access(_)) && !ev.need_rescan() => false,
        Ok(ev) => {
            ev.need_rescan()
                || ev.paths.is_empty()
                || name
                    .is_none_or(|n| ev.paths.iter().any(|p| p.file_name() == Some(n.as_os_str())))
        }
        Err(_) => true,
    }
}

impl Waker {
    /// Wake on changes to the file `name` in folder `dir` (or to anything in `dir` when
    /// `name` is `None`). The folder must exist; it is watched, not the file.
    pub fn watch(dir: &Path, name: Option<OsString>) -> Result<Waker> {
        let (tx, rx) = channel();
        let handler = move |res: notify::Result<notify::Event>| {
            if wakes(&res, name.as_ref()) {
                let _ = tx.send(());
            }
        };
        let fail = |e: notify::Error| {
            let hint = match &e.kind {
                notify::ErrorKind::MaxFilesWatch => {
                    "inotify limits reached (fs.inotify.max_user_instances / max_user_watches): raise them, or pass --poll"
                }
                notify::ErrorKind::Io(io) if io.raw_os_error() == Some(24) => {
                    "too many open files: this process's limit (`ulimit -n`) or the inotify instances (fs.inotify.max_user_instances, 128 by default): raise the one that is low, or pass --poll"
                }
                _ => "pass --poll INTERVAL to watch without inotify",
            };
            Error::internal(format!("cannot watch {}: {e}", dir.display())).hint(hint)
        };
        thread_room().map_err(|e| {
            Error::internal(format!("cannot start the thread that watches {}: {e}", dir.display()))
                .hint("this user's process limit is reached (`ulimit -u`, or a container's pids.max): raise it, or pass --poll INTERVAL to watch without a thread")
        })?;
        let mut w = notify::recommended_watcher(handler).map_err(fail)?;
        w.watch(dir, RecursiveMode::NonRecursive).map_err(fail)?;
        Ok(Waker { rx: Some(rx), poll: None, _watcher: Some(w) })
    }

    /// Wake every `interval` (no inotify).
    pub fn polling(interval: Duration) -> Waker {
        Waker { rx: None, poll: Some(interval), _watcher: None }
    }

    /// Sleep until an event (all queued events are taken at once) or `timeout` (`None`:
    /// no limit). Polling wakes after the interval or the timeout, whichever is first.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<Wake> {
        if let Some(every) = self.poll {
            let t = timeout.map_or(every, |t| t.min(every));
            std::thread::sleep(t);
            return Ok(if t < every { Wake::Timeout } else { Wake::Woke });
        }
        let Some(rx) = &self.rx else { return Ok(Wake::Woke) };
        let got = match timeout {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(t) => rx.recv_timeout(t),
        };
        match got {
            Ok(()) => {}
            Err(RecvTimeoutError::Timeout) => return Ok(Wake::Timeout),
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Error::internal("the file watcher stopped")
                    .hint("run the command again, or pass --poll INTERVAL"));
            }
        }
        loop {
            match rx.try_recv() {
                Ok(()) => {}
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return Ok(Wake::Woke),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use notify::event::{EventKind, Flag, ModifyKind};

    use super::*;

    fn ev(paths: &[&str]) -> notify::Event {
        let mut e = notify::Event::new(EventKind::Modify(ModifyKind::Any));
        for p in paths {
            e = e.add_path(p.into());
        }
        e
    }

    /// An overflow (the kernel dropped events) and a pathless event wake the reader, who
    /// reads again from its cursor: nothing is lost with the dropped notifications.
    #[test]
    fn overflows_and_pathless_events_wake() {
        let log = OsString::from("events.jsonl");
        assert!(wakes(&Ok(ev(&["/r/LOGS/events.jsonl"])), Some(&log)));
        assert!(!wakes(&Ok(ev(&["/r/LOGS/other.md"])), Some(&log)), "another file");
        assert!(wakes(&Ok(ev(&["/r/LOGS/other.md"])), None), "anything, when no name");
        assert!(wakes(&Ok(ev(&[]).set_flag(Flag::Rescan)), Some(&log)), "overflow");
        assert!(wakes(&Ok(ev(&[])), Some(&log)), "pathless");
        assert!(wakes(&Err(notify::Error::generic("gone")), Some(&log)), "a watcher error");
        let read = notify::Event::new(EventKind::Access(notify::event::AccessKind::Open(
            notify::event::AccessMode::Read,
        )))
        .add_path("/r/LOGS/events.jsonl".into());
        assert!(!wakes(&Ok(read), Some(&log)), "a read is no change: the reader's own reads");
    }
}
