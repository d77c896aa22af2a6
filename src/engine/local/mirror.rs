//! A root written out as plain files in the local layout: `circe mirror` (read-only, for
//! ls/cat/grep on a root kept elsewhere) and `circe migrate --to-local` (a working root).
//!
//! The folder is brought in line with a `Snapshot`: files that differ are replaced (temp
//! file + rename, so a reader never sees half a file), files the snapshot lacks are removed,
//! and the event log is appended to when it only grew. A mirror holds `.circe-mirror` naming
//! the root it mirrors, and no `tmp/`, `locks/` or `queue/`: circe refuses it as a root.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::atomic::{self, TempFile};
use super::root::{CONFIG_FILE, GITIGNORE, GITIGNORE_TEXT, agent_yaml, io_err};
use crate::engine::Snapshot;
use crate::error::{Error, Result};
use crate::task::record;

/// The file that marks a mirror (and names its root).
pub const MARKER: &str = ".circe-mirror";
/// The mode of every file of a mirror, its marker too: read-only. Each sync sets it again
/// on a file whose mode was changed by hand.
const MIRROR_MODE: u32 = 0o444;
const EVENTS: &str = "LOGS/events.jsonl";

/// What a sync changed.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct Synced {
    pub written: usize,
    pub removed: usize,
    pub unchanged: usize,
}

/// The root a mirror copies: `identity` (`Engine::identity`) tells it from any other
/// root; `root` (`Engine::root_to_pass`) is how its marker names it, as `--root` takes it.
pub struct MirrorOf<'a> {
    pub identity: &'a str,
    pub root: &'a str,
}

/// Does a mirror's marker (`mirror of ROOT`) name the root whose identity is `want`? A
/// marker names it as `--root` takes it (a path, a URL); one an older circe wrote, by its
/// identity, or as it was reached.
fn same_root(held: &str, want: &str) -> bool {
    let named = held.trim().strip_prefix("mirror of ").unwrap_or(held.trim());
    if named == want {
        return true;
    }
    if crate::engine::postgres::is_url(named) {
        return crate::engine::postgres::Target::from_url(named)
            .is_ok_and(|t| t.identity() == want);
    }
    std::fs::canonicalize(named).is_ok_and(|p| p.display().to_string() == want)
}

/// A name the snapshot brings for a file of its own (a message, an ask, a chat archive):
/// one plain path component, so nothing is written outside its folder, whatever a
/// database row holds.
fn plain<'n>(name: &'n str, folder: &str) -> Result<&'n str> {
    let bad = name.is_empty()
        || name == "."
        || name == ".."
        || name.contains(['/', '\0'])
        || name.starts_with('.');
    if bad {
        return Err(Error::refused(format!(
            "the root holds `{}` in {folder}, which is no file name: nothing was written",
            crate::error::one_line(name)
        ))
        .hint("rename or remove it where the root is kept (`circe doctor` there names it)"));
    }
    Ok(name)
}

/// Every file of the snapshot (path relative to the root -> bytes) and every folder.
type Layout = (BTreeMap<String, Vec<u8>>, BTreeSet<String>);

fn layout(snap: &Snapshot) -> Result<Layout> {
    let mut files = BTreeMap::new();
    let mut dirs: BTreeSet<String> =
        ["NEW_MESSAGES", "AGENTS", "LOGS", "TASKS"].into_iter().map(String::from).collect();
    files.insert(CONFIG_FILE.to_string(), snap.config.clone().into_bytes());
    files.insert(GITIGNORE.to_string(), GITIGNORE_TEXT.as_bytes().to_vec());
    for (a, role) in &snap.agents {
        dirs.insert(format!("AGENTS/{a}"));
        dirs.insert(format!("AGENTS/{a}/INBOX"));
        dirs.insert(format!("AGENTS/{a}/WORKSPACE"));
        let retired = snap.retired.iter().find(|(r, _)| r == a).map(|(_, at)| at.as_str());
        files.insert(format!("AGENTS/{a}/agent.yaml"), agent_yaml(role, retired).into_bytes());
    }
    for (a, prompt) in &snap.prompts {
        files.insert(format!("AGENTS/{a}/prompt.md"), prompt.clone());
    }
    for ask in &snap.asks {
        dirs.insert("ASKS".into());
        let id = plain(&ask.msg_id, "ASKS")?;
        files.insert(format!("ASKS/{id}.ask"), ask.render().into_bytes());
    }
    for (b, msgs) in &snap.boxes {
        let rel = b.rel_path();
        dirs.insert(rel.clone());
        for (name, bytes) in msgs {
            files.insert(format!("{rel}/{}", plain(name, &rel)?), bytes.clone());
        }
    }
    for st in &snap.tasks {
        let t = &st.rec.task_id;
        files.insert(format!("TASKS/{t}.status"), st.rec.render().into_bytes());
        if let Some(o) = &st.owner {
            files.insert(format!("TASKS/{t}.owner"), o.render().into_bytes());
        }
        files.insert(format!("TASKS/{t}.checks"), record::render_checks(&st.checks).into_bytes());
    }
    for (a, c) in &snap.counters {
        let rel = super::seq_store::counter_rel(a, *c);
        dirs.insert("seq".into());
        dirs.insert(format!("seq/{a}"));
        dirs.insert(rel);
    }
    for (a, r) in &snap.receivers {
        dirs.insert("seen".into());
        files.insert(format!("seen/{a}.json"), super::seen_file::seen_text(r));
    }
    if let Some(chat) = &snap.chat {
        files.insert("chat.md".to_string(), chat.channel.clone());
        for (name, text) in &chat.archives {
            dirs.insert("LOGS/chat".into());
            files.insert(format!("LOGS/chat/{}", plain(name, "LOGS/chat")?), text.clone());
        }
    }
    for (name, value) in &snap.cursors {
        dirs.insert("cursors".into());
        dirs.insert("cursors/events".into());
        files.insert(format!("cursors/events/{name}"), value.clone());
    }
    for t in &snap.tombstones {
        dirs.insert("ARCHIVE".into());
        dirs.insert("ARCHIVE/tombstones".into());
        files.insert(format!("ARCHIVE/tombstones/{}", t.task), t.to_text().into_bytes());
    }
    for (name, events) in &snap.dead_letters {
        dirs.insert("dead".into());
        let lines: String = events.iter().map(|e| format!("{}\n", e.to_line())).collect();
        files.insert(format!("dead/{name}.jsonl"), lines.into_bytes());
    }
    if !snap.events.is_empty() {
        let mut log = String::new();
        for e in &snap.events {
            log.push_str(&e.to_line());
            log.push('\n');
        }
        files.insert(EVENTS.to_string(), log.into_bytes());
    }
    Ok((files, dirs))
}

/// What a folder holds (paths relative to it): its files, its folders, and its links,
/// never followed.
#[derive(Default)]
struct Held {
    files: BTreeSet<String>,
    dirs: BTreeSet<String>,
    links: BTreeSet<String>,
}

/// Everything under `dir`, the marker and `skip` left out.
fn existing(dir: &Path, skip: &[&str]) -> Result<Held> {
    let mut held = Held::default();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let here = dir.join(&rel);
        let rd = match std::fs::read_dir(&here) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("cannot list", &here, e)),
        };
        for entry in rd {
            let entry = entry.map_err(io_err("cannot list", &here))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let r = rel.join(&name);
            let rs = r.to_string_lossy().into_owned();
            if rel.as_os_str().is_empty() && (name == MARKER || skip.contains(&name.as_str())) {
                continue;
            }
            let ty = entry.file_type().map_err(io_err("cannot stat", &dir.join(&r)))?;
            if ty.is_symlink() {
                held.links.insert(rs);
            } else if ty.is_dir() {
                held.dirs.insert(rs);
                stack.push(r);
            } else {
                held.files.insert(rs);
            }
        }
    }
    Ok(held)
}

/// Bring `dir` in line with `snap`. `mirror_of`: write a read-only mirror of that root
/// (every file mode 0444, the marker too, set again on one changed by hand); `None`: a working local root (with tmp/, locks/, queue/).
pub fn sync(dir: &Path, snap: &Snapshot, mirror_of: Option<&MirrorOf<'_>>) -> Result<Synced> {
    // Every name checked before anything is written.
    let (want, want_dirs) = layout(snap)?;
    super::files::make_folder(dir)?;
    let marker = dir.join(MARKER);
    match mirror_of {
        Some(of) => {
            let root = of.root;
            let has_root = dir.join(CONFIG_FILE).exists() && !marker.exists();
            if has_root {
                return Err(Error::refused(format!(
                    "{} holds a circe root, not a mirror: not writing over it",
                    dir.display()
                ))
                .hint("mirror into an empty folder"));
            }
            // A mirror makes DIR the root's copy, removing what the root does not hold: only
            // into a folder that is empty, or a mirror already (its marker).
            let mut entries = std::fs::read_dir(dir).map_err(io_err("cannot read", dir))?;
            if !marker.exists() && entries.next().is_some() {
                return Err(Error::refused(format!(
                    "{} is not empty and is no mirror: a mirror would remove what it holds",
                    dir.display()
                ))
                .hint(format!(
                    "mirror into a new or empty folder (a mirror keeps a {MARKER} file, and is then kept up to date in place)"
                )));
            }
            // A mirror of another root is that root's copy: not replaced by this one's.
            let said = format!("mirror of {root}\n");
            if let Ok(held) = std::fs::read_to_string(&marker)
                && !same_root(&held, of.identity)
            {
                return Err(Error::refused(format!(
                    "{} is the {}, not of {root}",
                    dir.display(),
                    held.trim()
                ))
                .hint("mirror each root into a folder of its own; remove that folder first to reuse it"));
            }
            write_file(dir, MARKER, said.as_bytes(), true)?;
        }
        None => {
            for d in ["tmp", "locks", "queue"] {
                let p = dir.join(d);
                std::fs::create_dir_all(&p).map_err(io_err("cannot create", &p))?;
            }
        }
    }
    let read_only = mirror_of.is_some();
    // A mirror holds nothing but the root's files: a `tmp/` added by hand goes too.
    let skip: &[&str] = if read_only { &[] } else { &["tmp", "locks", "queue"] };
    let Held { files: have, dirs: have_dirs, links } = existing(dir, skip)?;
    let mut done = Synced::default();
    // No snapshot holds a link, and one where a folder or file of the root belongs would
    // have it written (or its mode set) outside `dir`: each goes first, never followed.
    for rel in &links {
        let p = dir.join(rel);
        atomic::remove(&p).map_err(io_err("cannot remove", &p))?;
        done.removed += 1;
    }
    for d in &want_dirs {
        let p = dir.join(d);
        std::fs::create_dir_all(&p).map_err(io_err("cannot create", &p))?;
    }
    for (rel, bytes) in &want {
        let p = dir.join(rel);
        let old = if have.contains(rel) { std::fs::read(&p).ok() } else { None };
        match old {
            Some(o) if o == *bytes => {
                if read_only {
                    read_only_again(&p);
                }
                done.unchanged += 1;
            }
            Some(o) if rel == EVENTS && read_only && bytes.starts_with(&o) => {
                // The log only grew: append what is new (writable for that moment: a
                // read-only file refuses its owner's append unless it is root).
                let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644));
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&p)
                    .map_err(io_err("cannot append to", &p))?;
                f.write_all(&bytes[o.len()..]).map_err(io_err("cannot append to", &p))?;
                drop(f);
                read_only_again(&p);
                done.written += 1;
            }
            _ => {
                write_file(dir, rel, bytes, read_only)?;
                done.written += 1;
            }
        }
    }
    for rel in have.iter().filter(|r| !want.contains_key(*r)) {
        let p = dir.join(rel);
        atomic::remove(&p).map_err(io_err("cannot remove", &p))?;
        done.removed += 1;
    }
    // Folders the root no longer has (an agent removed by hand), deepest first.
    for rel in have_dirs.iter().rev().filter(|d| !want_dirs.contains(*d)) {
        let p = dir.join(rel);
        if std::fs::remove_dir(&p).is_ok() {
            done.removed += 1;
        }
    }
    Ok(done)
}

/// A mirror's file kept as it is: its mode set back to the mirror's when it was changed
/// (by hand). Best effort, as for a new file: a file system without modes has none to keep.
fn read_only_again(p: &Path) {
    if std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o7777 != MIRROR_MODE) {
        let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(MIRROR_MODE));
    }
}

/// Replace `dir/rel` with `bytes` (temp file in `dir`, rename).
fn write_file(dir: &Path, rel: &str, bytes: &[u8], read_only: bool) -> Result<()> {
    let dst = dir.join(rel);
    let parent = dst.parent().unwrap_or(dir);
    let mut t = TempFile::write(parent, bytes, false).map_err(io_err("cannot write", &dst))?;
    if read_only {
        let _ = std::fs::set_permissions(&t.path, std::fs::Permissions::from_mode(MIRROR_MODE));
    }
    atomic::rename_replace(&t.path, &dst).map_err(io_err("cannot write", &dst))?;
    t.disarm();
    Ok(())
}
