//! An archive run's originals: each checked unchanged, then unlinked in inode order (a
//! contiguous run of inodes per thread, a few threads at once), as `rm -r` does in a big
//! folder: on ext4 consecutive unlinks then touch neighbouring inode-table blocks (measured
//! here on a copy of 100,000 messages in LOGS: 10.9 s in inode order, 43.7 s in name order).

use std::io;
use std::path::{Path, PathBuf};

use super::archive_segment::sha256_file;
use super::atomic;
use crate::archive::Entry;
use crate::error::{Error, Result};
use crate::fault::crash_point;

/// Files at most this many are held before they are unlinked (memory stays flat: about
/// 130 bytes each).
const LIMIT: usize = 50_000;

/// Threads unlinking at once. On ext4 mounted with `discard` each unlink waits for the
/// device to trim the file's blocks; a few unlinks under way at once overlap those waits
/// (BENCHMARKS.md, "Archive at the full size": 200,000 messages in LOGS, `rm -r` 23.7 s,
/// four `rm` processes at once 10.8 s).
const THREADS: usize = 4;

/// Remove `path`; gone already is fine (a rerun finishing an interrupted removal).
pub(super) fn remove_file(path: &Path) -> Result<()> {
    match atomic::remove(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("cannot remove", path, e)),
    }
}

/// Originals checked unchanged and due to go: unlinked by inode, a batch at a time.
#[derive(Default)]
pub(super) struct Doomed {
    files: Vec<(u64, PathBuf, &'static str)>,
}

impl Doomed {
    /// `point` is the crash point reached after it is unlinked.
    pub(super) fn push(&mut self, ino: u64, path: PathBuf, point: &'static str) -> Result<()> {
        self.files.push((ino, path, point));
        if self.files.len() >= LIMIT { self.flush() } else { Ok(()) }
    }

    /// Unlinks the batch in inode order, a contiguous run of inodes per thread.
    pub(super) fn flush(&mut self) -> Result<()> {
        let mut files = std::mem::take(&mut self.files);
        files.sort_unstable_by_key(|f| f.0);
        let part = files.len().div_ceil(THREADS).max(1);
        let runs: Vec<&[(u64, PathBuf, &str)]> = files.chunks(part).collect();
        in_parallel(&runs, |run| {
            for (_, path, point) in *run {
                remove_file(path)?;
                crash_point(point);
            }
            Ok(())
        })
        .map(|_| ())
    }
}

/// `work` for each item, the items split into `THREADS` contiguous runs done at once; the
/// results in the items' order. Every run finishes; the first error is the one told.
pub(super) fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    work: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let part = items.len().div_ceil(THREADS).max(1);
    let work = &work;
    std::thread::scope(|s| {
        // A run whose thread cannot be made (a process limit, `ulimit -u` or a container's
        // pids limit) is done on this one.
        let runs: Vec<_> = items
            .chunks(part)
            .map(|run| {
                let each = move || run.iter().map(work).collect::<Vec<Result<R>>>();
                std::thread::Builder::new().spawn_scoped(s, each).map_err(|_| run)
            })
            .collect();
        let mut out = Vec::with_capacity(items.len());
        let mut first = None;
        for r in runs {
            let done = match r {
                Ok(t) => t.join().unwrap_or_else(|_| {
                    vec![Err(Error::internal("an archive removal thread panicked")
                        .hint("run `circe archive` again: it finishes the removal"))]
                }),
                Err(run) => run.iter().map(work).collect(),
            };
            for d in done {
                match d {
                    Ok(v) => out.push(v),
                    Err(e) => {
                        first.get_or_insert(e);
                    }
                }
            }
        }
        first.map_or(Ok(out), Err)
    })
}

/// Does the original still hold what was archived (`None`: it is gone already), and its
/// inode (0 when unknown)? Its size and modification time as read when it was archived (one
/// `stat`: circe never rewrites a message in place, and any write changes them), else its
/// checksum.
pub(super) fn unchanged(path: &Path, e: &Entry) -> Result<Option<(bool, u64)>> {
    use std::os::unix::fs::MetadataExt;
    if let Some(mtime) = e.mtime_ns {
        return match std::fs::symlink_metadata(path) {
            Ok(m) => {
                let t =
                    m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
                let same = m.is_file()
                    && m.len() == e.bytes
                    && t.and_then(|d| u64::try_from(d.as_nanos()).ok()) == Some(mtime);
                Ok(Some((same, m.ino())))
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(Error::io("cannot stat", path, err)),
        };
    }
    Ok(sha256_file(path)?.map(|(s, _)| (s == e.sha256, 0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_parallel_keeps_the_order_and_tells_the_first_error() {
        let items: Vec<u32> = (0..1001).collect();
        let doubled = in_parallel(&items, |i| Ok(i * 2)).unwrap();
        assert_eq!(doubled, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        let seen = std::sync::atomic::AtomicUsize::new(0);
        let e = in_parallel(&items, |i| {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if *i == 300 || *i == 700 { Err(Error::internal(format!("item {i}"))) } else { Ok(()) }
        })
        .unwrap_err();
        assert_eq!(e.message, "item 300");
        // Every run went on to its end: nothing is left half done by another's error.
        assert_eq!(seen.into_inner(), items.len());
        assert!(in_parallel(&[] as &[u32], |_| Ok(())).unwrap().is_empty());
    }
}
