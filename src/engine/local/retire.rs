//! Retiring a root folder whose root moved into a database (`circe migrate --to URL`).
//!
//! The folder is first renamed aside (one rename: a command that opened the root before it
//! fails on its next path instead of writing where nobody reads), read and imported; then
//! it gets its final name `<root>.migrated` with `circe.yaml` renamed to
//! `circe.yaml.migrated` (so circe no longer finds a root there) and a note saying where
//! the root went; and a circe.yaml naming the database takes the old root's place.

use std::path::{Path, PathBuf};

use super::root::{CONFIG_FILE, io_err};
use crate::error::{Error, Result};

/// The name a root folder has while it is being moved.
fn staged_name(root: &Path) -> PathBuf {
    let mut s = root.as_os_str().to_owned();
    s.push(".moving");
    PathBuf::from(s)
}

/// The lock a move holds while it runs, in the root's `locks/` (it goes along with the
/// rename): a command that finds the root renamed aside tells a move under way from one
/// that was cut off by it.
fn move_lock(root: &Path) -> PathBuf {
    root.join("locks").join("migrate.lock")
}

/// A move under way: held until dropped (after `finish` or `unstage`).
pub struct Moving(#[allow(dead_code, reason = "held for its lock")] super::lock::Lock);

/// Rename `root` aside, holding the move's lock; returns where it is now.
pub fn stage(root: &Path) -> Result<(PathBuf, Moving)> {
    let staged = staged_name(root);
    if staged.exists() {
        return Err(Error::conflict(format!(
            "{} exists: another move is under way or was interrupted",
            staged.display()
        ))
        .hint("if no `circe migrate` runs, rename it back to the root's name and try again"));
    }
    let Some(held) = super::lock::Lock::try_acquire(&move_lock(root))? else {
        return Err(Error::conflict("another `circe migrate` is moving this root")
            .hint("wait for it to end, then look where the root went (`circe tasks`)"));
    };
    super::atomic::rename_noclobber(root, &staged).map_err(io_err("cannot rename", root))?;
    Ok((staged, Moving(held)))
}

/// Wait (at most `budget`) for the commands still at work on the root staged at `staged` to
/// end: one that opened the root before it was renamed aside may hold a send's staging or
/// the journal of its events in tmp/, which the move would carry without its events (its
/// process then fails to log them where the root was). Refused (exit 4) when one is still
/// at work: the caller puts the root back.
pub fn wait_for_commands(
    staged: &Path,
    budget: std::time::Duration,
    stopped: &dyn Fn() -> bool,
    waiting: &dyn Fn(usize),
) -> Result<()> {
    let store = super::root::Store::at(staged, false);
    let until = std::time::Instant::now() + budget;
    let mut said = false;
    loop {
        let files = store.tmp_writers()?;
        if files.is_empty() {
            return Ok(());
        }
        if stopped() {
            return Err(interrupted());
        }
        if !said {
            said = true;
            waiting(files.len());
        }
        if std::time::Instant::now() >= until {
            let list: Vec<String> =
                files.iter().map(|(f, who)| format!("tmp/{f} ({who})")).collect();
            return Err(Error::conflict(format!(
                "commands are still at work on the root: {}; nothing was moved",
                list.join(", ")
            ))
            .hint("stop the agents before a move (those in containers too), then run it again; a file whose pid in this namespace runs no circe command (a number given again) is a leftover: move it out of tmp/; one of another namespace is left alone until it is 10 minutes old"));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A move stopped by a signal before its commit: the caller puts the root back.
pub fn interrupted() -> Error {
    Error::internal("interrupted (a signal) before the move committed; nothing was moved")
        .hint("the root is back where it was; run the move again when you are ready")
}

/// Is a move of the root staged at `staged` under way right now (its lock held)?
pub fn under_way(staged: &Path) -> bool {
    matches!(super::lock::Lock::try_existing(&move_lock(staged)), Ok(super::lock::Tried::Held))
}

/// Put a staged root back (the move failed).
pub fn unstage(staged: &Path, root: &Path) -> Result<()> {
    super::atomic::rename_noclobber(staged, root).map_err(io_err("cannot rename back", staged))
}

/// Finish the move: the staged folder becomes `<root>.migrated` (with its note), and
/// `root/circe.yaml` names the new place (`pointer`). Returns the retired folder's path.
pub fn finish(staged: &Path, root: &Path, note: &str, pointer: &str) -> Result<PathBuf> {
    let cfg = staged.join(CONFIG_FILE);
    let mut old = cfg.as_os_str().to_owned();
    old.push(".migrated");
    std::fs::rename(&cfg, PathBuf::from(old)).map_err(io_err("cannot rename", &cfg))?;
    let note_path = staged.join("MIGRATED.txt");
    std::fs::write(&note_path, note).map_err(io_err("cannot write", &note_path))?;
    // The pointer first: from here on the root's place names the database, whatever
    // becomes of the old folder's last rename.
    std::fs::create_dir_all(root).map_err(io_err("cannot create", root))?;
    let p = root.join(CONFIG_FILE);
    super::atomic::write_new(&p, pointer.as_bytes(), true).map_err(io_err("cannot write", &p))?;
    // An earlier move from the same place left `<root>.migrated`: the next free name.
    rename_aside(staged, root, "migrated")
}

/// Move a folder aside under a free `<path>.<suffix>[.N]` name; returns the new path.
pub fn set_aside(path: &Path, suffix: &str) -> Result<PathBuf> {
    rename_aside(path, path, suffix)
}

/// Rename `path` to a free `<base>.<suffix>[.N]`; returns the new path.
fn rename_aside(path: &Path, base: &Path, suffix: &str) -> Result<PathBuf> {
    for n in 1..100 {
        let mut s = base.as_os_str().to_owned();
        s.push(if n == 1 { format!(".{suffix}") } else { format!(".{suffix}.{n}") });
        let dest = PathBuf::from(s);
        match super::atomic::rename_noclobber(path, &dest) {
            Ok(()) => return Ok(dest),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io("cannot rename", path, e)),
        }
    }
    Err(Error::conflict(format!("no free name to set {} aside", path.display())))
}
