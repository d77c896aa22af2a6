//! A folder's stamp, and what may be remembered of a folder while its stamp holds.
//!
//! On ext4 (and every Linux filesystem circe runs on) making, renaming or removing an entry
//! sets the folder's mtime and ctime, so a folder whose stamp is unchanged holds the same
//! names. A stamp is trusted only when the folder had been left alone for a while before
//! it was taken (`settled`): a change made in the same clock tick as the stamp would
//! otherwise leave it as it was.
//!
//! Two users: the archive's quiet run (`archive_scan::quiet_logs`) and doctor's listing of
//! LOGS (`cached_listing`). ext4 never shrinks a folder, so once LOGS has held a million
//! messages, listing it reads ~90 MB of empty blocks (20-50 ms) however few it holds now.

use std::path::Path;

use super::atomic;
use super::root::{Store, io_err, list_typed};
use crate::error::Result;

/// A folder as `stat` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct DirStamp {
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

/// How long a folder must have been left alone before its stamp is trusted: well over the
/// coarsest timestamp a Linux filesystem keeps (2 s).
pub(super) const SETTLED_NS: i128 = 3_000_000_000;

/// Folders smaller than this are listed every time (a listing is cheaper than the cache).
const WORTH_CACHING: u64 = 1024 * 1024;

/// The wall clock in ns (never `CIRCE_NOW`: stamps are the filesystem's times).
pub(super) fn wall_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(0))
}

impl DirStamp {
    pub(super) fn of(path: &Path) -> Result<DirStamp> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(path).map_err(io_err("cannot stat", path))?;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Ok(DirStamp {
            ino: m.ino(),
            size: m.size(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: ns(m.ctime(), m.ctime_nsec()),
        })
    }

    /// Was the folder's last change long enough before `wall_ns` (the time it was stamped)?
    /// Then any later change gives it a later mtime.
    pub(super) fn settled(&self, wall_ns: i128) -> bool {
        wall_ns - self.mtime_ns > SETTLED_NS
    }
}

/// A folder's listing as remembered (`locks/<name>.list`).
#[derive(serde::Serialize, serde::Deserialize)]
struct Listing {
    v: u32,
    stamp: DirStamp,
    names: Vec<(String, bool)>,
}

const LISTING_VERSION: u32 = 1;

/// `list_typed(dir)`, from `locks/<name>.list` when the folder is large (a folder that once
/// held many entries) and its stamp is the one remembered; a fresh listing is remembered when
/// the folder had settled and did not change while it was read. A missing or unreadable
/// cache costs one listing.
pub(super) fn cached_listing(store: &Store, dir: &Path, name: &str) -> Result<Vec<(String, bool)>> {
    let wall = wall_ns();
    let Ok(before) = DirStamp::of(dir) else { return list_typed(dir) };
    if before.size < WORTH_CACHING {
        return list_typed(dir);
    }
    let path = store.root.join("locks").join(format!("{name}.list"));
    // TEST BUILDS ONLY: `listing-trust-cache` trusts the remembered listing whatever changed.
    let trust = crate::fault::test_break("listing-trust-cache");
    if let Ok(bytes) = atomic::read_regular(&path)
        && let Ok(l) = serde_json::from_slice::<Listing>(&bytes)
        && l.v == LISTING_VERSION
        && (trust || l.stamp == before)
    {
        return Ok(l.names);
    }
    let names = list_typed(dir)?;
    if before.settled(wall) && DirStamp::of(dir).is_ok_and(|after| after == before) {
        let l = Listing { v: LISTING_VERSION, stamp: before, names };
        let text = serde_json::to_string(&l).unwrap_or_default();
        let _ = store.archive_replace(&path, text.as_bytes(), false);
        return Ok(l.names);
    }
    Ok(names)
}
