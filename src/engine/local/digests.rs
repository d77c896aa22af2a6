//! What a reader made of each message of an INBOX, remembered by the file's identity
//! (`Engine::box_digests`) in `locks/inbox-<agent>.digests`: `board` and `prime` count every
//! agent's stale messages, `prime` and `questions` the open questions, `wait --for inbox`
//! finds its oldest new message and `wait --for reply:` a reply, and a file that stayed the
//! same is not read again.
//!
//! A file's stamp is its inode, size, mtime and ctime, taken (without following a link)
//! before it is read. Writing a file sets its mtime and ctime, and renaming it, linking it
//! or changing its mode sets its ctime; a file made in its place gets the ctime of its
//! making. So a stamp names the same bytes as long as no change can share its ctime: a
//! digest is remembered only of a file whose ctime was over 3 s old when it was stamped
//! (longer than the coarsest timestamp a Linux filesystem keeps), so any later change
//! gives a later ctime. A file changed between its stamp and its read is read again next
//! time (its stamp is new). The file is a cache: missing, unreadable, of another `kind` or
//! version, it costs one read of each message; `rm` is always safe.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd};

use rustix::fs::{Mode, OFlags};

use serde_json::value::RawValue;

use super::dir_stamp::{SETTLED_NS, wall_ns};
use super::root::Store;
use crate::boxes::Mailbox;
use crate::engine::{Capped, Digest};
use crate::error::Result;

/// A regular file as `lstat` sees it: inode, size, mtime and ctime (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct FileStamp(u64, u64, i128, i128);

impl FileStamp {
    /// The stamp of the regular file `name` of the folder open as `dir` (one lookup of the
    /// name, not of the whole path); `None` for anything else (a link, a pipe, nothing):
    /// such a name is read each time, and its read says what it is.
    fn of(dir: BorrowedFd<'_>, name: &str) -> Option<FileStamp> {
        use rustix::fs::{AtFlags, FileType, StatxFlags, statx};
        let want = StatxFlags::TYPE
            | StatxFlags::INO
            | StatxFlags::SIZE
            | StatxFlags::MTIME
            | StatxFlags::CTIME;
        let st = statx(dir, name, AtFlags::SYMLINK_NOFOLLOW, want).ok()?;
        let regular = FileType::from_raw_mode(u32::from(st.stx_mode)) == FileType::RegularFile;
        if !regular || !StatxFlags::from_bits_retain(st.stx_mask).contains(want) {
            return None;
        }
        let ns = |t: rustix::fs::StatxTimestamp| {
            i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec)
        };
        Some(FileStamp(st.stx_ino, st.stx_size, ns(st.stx_mtime), ns(st.stx_ctime)))
    }
}

/// `locks/inbox-<agent>.digests` as read.
#[derive(serde::Deserialize)]
struct Digests {
    v: u32,
    /// The caller's name for its digest and how it is made.
    kind: String,
    files: BTreeMap<String, (FileStamp, Digest)>,
}

/// `Digests` as written.
#[derive(serde::Serialize)]
struct DigestsOut<'a> {
    v: u32,
    kind: &'a str,
    files: BTreeMap<&'a str, (FileStamp, &'a RawValue)>,
}

const VERSION: u32 = 1;

/// `Engine::box_digests`: an INBOX's from its remembered digests where a file's stamp is
/// the one remembered, the rest read; any other box read whole.
pub(super) fn box_digests(
    store: &Store,
    mbox: &Mailbox,
    cap: usize,
    kind: &str,
    digest: &mut dyn FnMut(&str, Result<Capped>) -> Option<Digest>,
) -> Result<Vec<(String, Option<Digest>)>> {
    let (names, listed) = store.list_box_open(mbox)?;
    let Mailbox::Inbox(agent) = mbox else {
        let read = |n: String| {
            let d = digest(&n, store.read_message_capped(mbox, &n, cap));
            (n, d)
        };
        return Ok(names.into_iter().map(read).collect());
    };
    let path = store.root.join("locks").join(format!("inbox-{agent}.digests"));
    let mut kept = super::atomic::read_regular(&path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Digests>(&b).ok())
        .filter(|d| d.v == VERSION && d.kind == kind)
        .map(|d| d.files)
        .unwrap_or_default();
    // The box as listed, for the stamps: opened through no link, the listing's own; else
    // opened again (it was checked to be no link; if it is one now, nothing is stamped:
    // each message is read, and its read refuses the link).
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let reopened = match &listed {
        Some(_) => None,
        None => rustix::fs::open(store.box_dir(mbox), flags, Mode::empty()).ok(),
    };
    let fd = match (&listed, &reopened) {
        (Some(rd), _) => rd.fd().ok(),
        (None, fd) => fd.as_ref().map(AsFd::as_fd),
    };
    let wall = wall_ns();
    let mut changed = false;
    let mut out = Vec::with_capacity(names.len());
    // The stamp each of `out` is remembered by, if it is.
    let mut stamps = Vec::with_capacity(names.len());
    for n in names {
        let stamp = fd.and_then(|fd| FileStamp::of(fd, &n));
        match (stamp, kept.remove(&n)) {
            (Some(s), Some((was, d))) if s == was => {
                stamps.push(Some(s));
                out.push((n, Some(d)));
                continue;
            }
            (_, Some(_)) => changed = true,
            (_, None) => {}
        }
        let read = store.read_message_capped(mbox, &n, cap);
        let worked = read.is_ok();
        let d = digest(&n, read);
        let settled = stamp.filter(|s| worked && d.is_some() && wall - s.3 > SETTLED_NS);
        changed |= settled.is_some();
        stamps.push(settled);
        out.push((n, d));
    }
    if changed || !kept.is_empty() {
        let files = out
            .iter()
            .zip(&stamps)
            .filter_map(|((n, d), s)| Some((n.as_str(), ((*s)?, d.as_deref()?))));
        let text = DigestsOut { v: VERSION, kind, files: files.collect() };
        // A cache: a root this user cannot write into is read the long way next time.
        let _ = store.archive_replace(&path, &serde_json::to_vec(&text).unwrap_or_default(), false);
    }
    Ok(out)
}
