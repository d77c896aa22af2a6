//! Messages in boxes: delivery (one box, or several all or none), moves between boxes,
//! reading and listing.

use std::io;
use std::path::{Path, PathBuf};

use super::atomic::{self, TempFile};
use super::root::{Store, io_err, is_message_name, is_real_dir, list_names, list_typed};
use crate::boxes::Mailbox;
use crate::error::{Error, Result};
use crate::fault::crash_point;

/// Said of a copy a box refused after its message's commit point (the other copies landed),
/// which waits in `place`.
pub(super) fn copy_waits(place: &str) -> String {
    format!(
        "the other boxes have their copies; this one's waits in {place} until the box takes it: mend its permissions, then `circe doctor --repair` delivers it"
    )
}

/// One copy of a batch delivery: its box, its name (given the collision counter), its text.
pub type Copy<'a> = (Mailbox, &'a dyn Fn(u32) -> String, &'a [u8]);

/// A folder of an agent's that is not what it should be (`Store::missing_agent_boxes`).
pub struct BoxFault {
    /// Its path under the root.
    pub path: String,
    /// What stands there (`a link`, `a file`); `None`: nothing.
    pub stands: Option<String>,
    /// It is the agent's own folder (`AGENTS/<agent>`), not one of its boxes: nothing is
    /// made through it.
    pub agent_folder: bool,
    /// It was made again.
    pub made: bool,
}

/// What keeps a box from being used, and what mends it.
struct Fault {
    what: String,
    /// Nothing stands there (a missing box holds nothing: it may be read as empty).
    missing: bool,
    hint: &'static str,
}

/// What stands where a folder should be: `None` when nothing does.
fn what_stands(p: &Path) -> Option<&'static str> {
    let m = std::fs::symlink_metadata(p).ok()?;
    Some(if m.file_type().is_symlink() { "a link" } else { "a file" })
}

impl Store {
    /// Is the box a folder circe may list and deliver into? An agent's box must be a folder
    /// itself, inside the agent's own folder that is a folder itself (a link at either
    /// place would take messages out of the root, or bring foreign files in); the root's
    /// own (NEW_MESSAGES, LOGS) may be links a person set up.
    fn box_is_sound(&self, b: &Mailbox) -> bool {
        let dir = self.box_dir(b);
        match dir.parent() {
            Some(home) if b.agent().is_some() => is_real_dir(home) && is_real_dir(&dir),
            _ => dir.is_dir(),
        }
    }

    /// Why a box cannot be used: `None` when it is sound.
    fn box_fault(&self, b: &Mailbox) -> Option<Fault> {
        if self.box_is_sound(b) {
            return None;
        }
        let dir = self.box_dir(b);
        let at = |p: &Path| p.strip_prefix(&self.root).unwrap_or(p).display().to_string();
        let home = dir.parent().filter(|h| b.agent().is_some() && !is_real_dir(h));
        let place = home.unwrap_or(&dir);
        let stands = what_stands(place);
        let (what, hint) = match (stands, home.is_some()) {
            (None, _) => (
                format!("{} is missing", at(place)),
                "`circe init` (or `circe doctor --repair`) makes missing boxes again and keeps your config",
            ),
            (Some(s), true) => (
                format!("{} is {s}, not a folder", at(place)),
                "put the agent's folder itself there in place of what stands there (`circe doctor` lists what is wrong)",
            ),
            (Some(s), false) => (
                format!("{} is {s}, not a folder", at(place)),
                "`circe doctor --repair` moves what stands there into LOGS/quarantine/ and makes the box again",
            ),
        };
        Some(Fault { what, missing: stands.is_none(), hint })
    }

    /// Refuse to `doing` a box that is not sound, before anything is written.
    pub fn check_box(&self, b: &Mailbox, doing: &str) -> Result<()> {
        let Some(f) = self.box_fault(b) else { return Ok(()) };
        Err(Error::internal(format!(
            "cannot {doing} {b} of the circe root {}: {}",
            self.root.display(),
            f.what
        ))
        .hint(if doing == "list" {
            f.hint.to_string()
        } else {
            format!("nothing was written there; {}", f.hint)
        }))
    }

    /// An agent's box behind a link or a file (at the box, or at the agent's folder). A
    /// missing box is not: it holds nothing.
    fn unsound(&self, b: &Mailbox) -> Option<Fault> {
        b.agent()?;
        self.box_fault(b).filter(|f| !f.missing)
    }

    /// Refuse to `doing` an agent's own files (agent.yaml, prompt.md) while its folder, or
    /// one of its boxes, is a link or a file: nothing is written (or read) through one,
    /// and a change to the agent is not half made while its boxes cannot be used.
    pub fn check_agent(&self, agent: &crate::names::AgentName, doing: &str) -> Result<()> {
        for b in [Mailbox::Inbox(agent.clone()), Mailbox::Workspace(agent.clone())] {
            if let Some(f) = self.unsound(&b) {
                return Err(Error::refused(format!(
                    "cannot {doing} agent {agent}: {} in the circe root {}",
                    f.what,
                    self.root.display()
                ))
                .hint(format!("nothing was changed; {}", f.hint)));
            }
        }
        Ok(())
    }

    /// What keeps `agent`'s boxes from being read (its folder or a box a link or a file),
    /// or `None`.
    pub fn unreadable_agent(&self, agent: &crate::names::AgentName) -> Option<String> {
        [Mailbox::Inbox(agent.clone()), Mailbox::Workspace(agent.clone())]
            .iter()
            .find_map(|b| self.unsound(b))
            .map(|f| f.what)
    }

    /// Is `b` an agent's box behind a link or a file (never read through)?
    pub(super) fn behind_link(&self, b: &Mailbox) -> bool {
        self.unsound(b).is_some()
    }

    /// Refuse to read or list through an agent's box that is a link or a file.
    fn readable(&self, b: &Mailbox) -> Result<()> {
        let Some(f) = self.unsound(b) else { return Ok(()) };
        Err(Error::internal(format!(
            "cannot read {b} of the circe root {}: {}, and circe never reads through one",
            self.root.display(),
            f.what
        ))
        .hint(f.hint))
    }

    /// Message `p` of `mbox` read by `read` once opened. In an agent's box the file is first
    /// opened through no link at all (`atomic::open_unlinked`, one call): the box is sound
    /// then, and the looks at its folders (`readable`, two `stat` calls) are not needed.
    /// Otherwise the box is looked at (it says what is wrong), then the file opened the
    /// usual way; when that works where a link stopped the first open, the link lies above
    /// the box and this process opens the usual way from then on.
    fn read_box_file<T>(
        &self,
        mbox: &Mailbox,
        p: &Path,
        read: impl FnOnce((std::fs::File, u64)) -> io::Result<T>,
    ) -> Result<io::Result<T>> {
        let first =
            if mbox.agent().is_some() { atomic::open_unlinked(p) } else { atomic::Unlinked::Other };
        if let atomic::Unlinked::Opened(f, len) = first {
            return Ok(read((f, len)));
        }
        self.readable(mbox)?;
        let opened = atomic::open_regular(p);
        if opened.is_ok() && matches!(first, atomic::Unlinked::Link) {
            atomic::no_unlinked();
        }
        Ok(opened.and_then(read))
    }

    /// Deliver `content` into `mbox` under the first free name `name(n)`, n = 1, 2, ... 16,
    /// then spread (`counter`).
    /// Returns the name used. The rename is the commit point; nothing is ever replaced.
    pub fn put_message(
        &self,
        mbox: &Mailbox,
        name: &dyn Fn(u32) -> String,
        content: &[u8],
    ) -> Result<String> {
        self.boxes_present([mbox])?;
        // A numbered send held on this thread: this delivery is its message.
        if let Some(r) = self.route_numbered(&[(mbox.clone(), name, content)]) {
            return r.and_then(|v| v.into_iter().next().ok_or_else(|| Error::internal("no copy")));
        }
        let dir = self.box_dir(mbox);
        let mut t = TempFile::write(&self.tmp_dir(), content, self.sync)
            .map_err(io_err("cannot write", &self.tmp_dir()))?;
        crash_point("send.staged");
        let seed = seed_of(content);
        for n in (0..TRIES).map(|i| counter(i, seed)) {
            let candidate = name(n);
            match atomic::rename_noclobber(&t.path, &dir.join(&candidate)) {
                Ok(()) => {
                    t.disarm();
                    crash_point("send.delivered");
                    self.sync_dir(&dir)?;
                    return Ok(candidate);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io("cannot deliver into", &dir, e)),
            }
        }
        Err(no_free_name(&dir))
    }

    /// Every box in `boxes` is there, checked before anything is written, so a delivery is
    /// never cut half-way by one that is not (a clone of a committed root lacks the empty
    /// folders: `circe init` makes them again). An `lstat` per box, two for an agent's.
    fn boxes_present<'b>(&self, boxes: impl IntoIterator<Item = &'b Mailbox>) -> Result<()> {
        boxes.into_iter().try_for_each(|b| self.check_box(b, "deliver into"))
    }

    /// Each agent's INBOX and WORKSPACE that is missing, or where something else stands (a
    /// file, a link, which circe never follows out of the root), and each agent folder that
    /// is not a folder itself. Boxes are made again when `make` (what stood there moved
    /// into `LOGS/quarantine/`); nothing is made in an agent folder that is a link or a
    /// file (it would land out of the root: a person puts the folder itself there).
    pub fn missing_agent_boxes(&self, make: bool) -> Result<Vec<BoxFault>> {
        let mut missing = Vec::new();
        for (agent, _) in self.list_agents()? {
            let home = self.root.join("AGENTS").join(agent.as_str());
            if !is_real_dir(&home) {
                // Nothing is made inside a link: it would land out of the root.
                let stands = what_stands(&home).map(String::from);
                missing.push(BoxFault {
                    path: format!("AGENTS/{agent}"),
                    stands,
                    agent_folder: true,
                    made: false,
                });
                continue;
            }
            for b in [Mailbox::Inbox(agent.clone()), Mailbox::Workspace(agent)] {
                let dir = self.box_dir(&b);
                if is_real_dir(&dir) {
                    continue;
                }
                let rel = b.rel_path();
                let stands = std::fs::symlink_metadata(&dir).ok().map(|m| {
                    if m.file_type().is_symlink() { "a link" } else { "a file" }.to_string()
                });
                if make {
                    if stands.is_some() {
                        self.quarantine_from(&dir, "own", &rel.replace('/', "~"))?;
                    }
                    std::fs::create_dir(&dir).map_err(io_err("cannot create", &dir))?;
                    self.sync_dir(dir.parent().unwrap_or(&self.root))?;
                }
                missing.push(BoxFault { path: rel, stands, agent_folder: false, made: make });
            }
        }
        Ok(missing)
    }

    /// Deliver copies of one message to several boxes, all or none across a crash (one box
    /// takes the `put_message` path): every
    /// copy is written and synced into `tmp/batch-<id>.part/`, the folder is renamed to
    /// `tmp/batch-<id>/` (the commit point), then each copy is renamed into its box and the
    /// folder removed. `finish_batch` completes a committed batch a crash interrupted.
    pub fn put_messages(
        &self,
        targets: &[(Mailbox, &dyn Fn(u32) -> String)],
        content: &[u8],
    ) -> Result<Vec<String>> {
        let each: Vec<Copy<'_>> = targets.iter().map(|(b, n)| (b.clone(), *n, content)).collect();
        self.put_each(&each)
    }

    /// `put_messages` with a content per box: several messages (a message and what a routing
    /// rule sends with it) land all or none.
    pub fn put_each(&self, targets: &[Copy<'_>]) -> Result<Vec<String>> {
        // One box: one no-clobber rename is already all or nothing (`put_message` checks
        // the box and routes a numbered send as this would).
        if let [(mbox, name, content)] = targets {
            return self.put_message(mbox, *name, content).map(|n| vec![n]);
        }
        self.boxes_present(targets.iter().map(|(b, _, _)| b))?;
        // A numbered send held on this thread: this delivery is its message.
        if let Some(r) = self.route_numbered(targets) {
            return r;
        }
        let id = format!("{}-{}", super::repair::stager(), crate::clock::random_suffix());
        let part = self.tmp_dir().join(format!("batch-{id}.part"));
        let ready = self.tmp_dir().join(format!("batch-{id}"));
        let stage = || -> io::Result<Vec<String>> {
            std::fs::create_dir(&part)?;
            let mut files = Vec::with_capacity(targets.len());
            for (i, (mbox, name, content)) in targets.iter().enumerate() {
                let file = format!("{i:05}~{}~{}", mbox.rel_path().replace('/', "+"), name(1));
                atomic::write_new(&part.join(&file), content, self.sync)?;
                files.push(file);
            }
            if self.sync {
                atomic::sync_dir(&part)?;
            }
            atomic::rename_noclobber(&part, &ready)?;
            Ok(files)
        };
        let files = stage().map_err(|e| {
            let _ = std::fs::remove_dir_all(&part);
            Error::io("cannot stage the message in", self.tmp_dir(), e)
        })?;
        self.sync_dir(&self.tmp_dir())?;
        crash_point("send.fanout.committed");
        let mut names = Vec::with_capacity(files.len());
        // Past the commit point a box that refuses its copy (made read-only by hand) keeps
        // no other box from its own: the refused copy waits in the batch.
        let mut refused = None;
        for f in &files {
            match self.deliver_staged(&ready, f) {
                Ok(name) => names.push(name),
                Err(e) => {
                    refused.get_or_insert(e);
                }
            }
            crash_point("send.fanout");
        }
        let mut dirs: Vec<PathBuf> = targets.iter().map(|(m, _, _)| self.box_dir(m)).collect();
        dirs.sort();
        dirs.dedup();
        for d in dirs {
            self.sync_dir(&d)?;
        }
        if let Some(e) = refused {
            return Err(e.hint_more(copy_waits("tmp/")));
        }
        std::fs::remove_dir(&ready).map_err(io_err("cannot remove", &ready))?;
        Ok(names)
    }

    /// Rename one staged copy `<i>~<box>~<name>` into its box under the first free name.
    pub(super) fn deliver_staged(&self, batch: &Path, file: &str) -> Result<String> {
        let (dir, base, stem) = self.staged_target(batch, file)?;
        let seed = seed_of(batch.join(file).as_os_str().as_encoded_bytes());
        for n in (0..TRIES).map(|i| counter(i, seed)) {
            let candidate = if n == 1 { base.clone() } else { format!("{stem}.{n}.md") };
            match atomic::rename_noclobber(&batch.join(file), &dir.join(&candidate)) {
                Ok(()) => return Ok(candidate),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io("cannot deliver into", &dir, e)),
            }
        }
        Err(no_free_name(&dir))
    }

    /// Where staged copy `<i>~<box>~<name>` goes: its box's folder, its name and the name's
    /// stem. Refused as it would be delivered (nothing moves): a file that is no copy circe
    /// staged (a stray), or a box behind a link.
    pub(super) fn staged_target(
        &self,
        batch: &Path,
        file: &str,
    ) -> Result<(std::path::PathBuf, String, String)> {
        let mut parts = file.splitn(3, '~');
        let (Some(_), Some(boxpath), Some(base)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(stray(batch, file));
        };
        let boxpath = boxpath.replace('+', "/");
        let valid_box = matches!(boxpath.as_str(), "NEW_MESSAGES" | "LOGS")
            || boxpath.strip_prefix("AGENTS/").and_then(|r| r.split_once('/')).is_some_and(
                |(agent, b)| {
                    crate::names::check_agent(agent).is_ok() && matches!(b, "INBOX" | "WORKSPACE")
                },
            );
        let stem = base.strip_suffix(".md").filter(|_| valid_box && !base.contains('/'));
        let Some(stem) = stem else {
            return Err(stray(batch, file));
        };
        // A box behind a link takes nothing, even the rest of a committed delivery: the copy
        // waits here until the box is mended.
        if let Some((agent, b)) = boxpath.strip_prefix("AGENTS/").and_then(|r| r.split_once('/')) {
            let agent = crate::names::AgentName::new(agent)?;
            let mbox = if b == "INBOX" { Mailbox::Inbox(agent) } else { Mailbox::Workspace(agent) };
            self.check_box(&mbox, "deliver into")?;
        }
        Ok((self.root.join(&boxpath), base.to_string(), stem.to_string()))
    }

    /// Finish a committed fan-out batch (`tmp/batch-<id>/`): deliver every copy still in it,
    /// then remove it. Returns the names delivered.
    pub fn finish_batch(&self, batch: &str) -> Result<Vec<String>> {
        let dir = self.tmp_dir().join(batch);
        let mut out = Vec::new();
        let mut boxes = Vec::new();
        // A copy a box refuses (behind a link) waits here; the others go on.
        let mut refused = None;
        for f in list_names(&dir)? {
            match self.deliver_staged(&dir, &f) {
                Ok(name) => out.push(name),
                Err(e) => {
                    refused.get_or_insert(e);
                    continue;
                }
            }
            if let Some(b) = f.split('~').nth(1) {
                boxes.push(self.root.join(b.replace('+', "/")));
            }
        }
        boxes.sort();
        boxes.dedup();
        for b in boxes {
            self.sync_dir(&b)?;
        }
        if let Some(e) = refused {
            return Err(e);
        }
        std::fs::remove_dir(&dir).map_err(io_err("cannot remove", &dir))?;
        Ok(out)
    }

    /// A move of `name` neither takes a message out through a link nor puts one in through
    /// one (an agent's box or folder that is a link or a file), checked before it is made.
    fn movable(&self, from: &Mailbox, to: &Mailbox, name: &str) -> Result<()> {
        self.readable(from)?;
        if to.agent().is_some() {
            self.check_box(to, &format!("move {name} into"))?;
        }
        Ok(())
    }

    /// Move message `name` from one box to another with one no-clobber rename.
    /// `Ok(false)` when the source is gone (someone else moved it: FS_RULES 1).
    pub fn move_message(&self, from: &Mailbox, to: &Mailbox, name: &str) -> Result<bool> {
        self.movable(from, to, name)?;
        let src = self.box_dir(from).join(name);
        let dst = self.box_dir(to).join(name);
        match atomic::rename_noclobber(&src, &dst) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if !self.box_dir(to).is_dir() {
                    return Err(Error::not_found(format!("box {to} does not exist")));
                }
                return Ok(false);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(Error::conflict(format!(
                    "{to}/{name} exists already; not replacing it"
                ))
                .hint("run `circe doctor` to see how the same message came to be in two boxes"));
            }
            Err(e) => return Err(move_error(&src, &self.box_dir(to), e)),
        }
        crash_point("move.renamed");
        self.sync_moved(from, to)?;
        Ok(true)
    }

    /// Sync both folders of a move made: a failure here is past the move (it stands, detail
    /// `committed`), only not yet sure to survive a power cut.
    fn sync_moved(&self, from: &Mailbox, to: &Mailbox) -> Result<()> {
        self.sync_dir(&self.box_dir(to))
            .and_then(|()| self.sync_dir(&self.box_dir(from)))
            .map_err(|e| {
                e.detail("committed", true).hint_more(
                    "the message moved and the move stands (a task's records follow with its next command, or `circe doctor --repair`); only its folder's sync to disk failed",
                )
            })
    }

    /// `move_message` to the first free name among `name`, `name.2.md`, ... in `to`.
    pub fn file_message(&self, from: &Mailbox, to: &Mailbox, name: &str) -> Result<Option<String>> {
        self.movable(from, to, name)?;
        let src = self.box_dir(from).join(name);
        for n in 1..10_000 {
            let used = crate::message::numbered(name, n);
            match atomic::rename_noclobber(&src, &self.box_dir(to).join(&used)) {
                Ok(()) => {
                    crash_point("move.renamed");
                    self.sync_moved(from, to)?;
                    return Ok(Some(used));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if !self.box_dir(to).is_dir() {
                        return Err(Error::not_found(format!("box {to} does not exist")));
                    }
                    return Ok(None);
                }
                Err(e) => return Err(move_error(&src, &self.box_dir(to), e)),
            }
        }
        Err(Error::conflict(format!("{to} holds 9,999 copies named like {name}"))
            .hint("run `circe doctor` to see how so many copies came to be"))
    }

    /// The name under which a message with msg id `id` lies in `mbox`: `base` or one of its
    /// numbered names (`base.2.md`, ...), looked at in order until a name is free.
    pub fn find_numbered_with_id(&self, mbox: &Mailbox, base: &str, id: &str) -> Option<String> {
        if crate::fault::test_break("outbox-dup") {
            return None;
        }
        for n in 1..10_000 {
            let name = crate::message::numbered(base, n);
            if !self.has_message(mbox, &name) {
                return None;
            }
            let bytes = self.read_message(mbox, &name).ok()?;
            if crate::task::outbox::has_msg_id(&bytes, id) {
                return Some(name);
            }
        }
        None
    }

    /// `find_numbered_with_id` over every numbered name of `base` in `mbox`, whether or not
    /// the names before it are taken (one listing of the box): for a copy other commands may
    /// have moved around since it landed (`base.md` taken on, `base.2.md` still there).
    pub(super) fn find_any_numbered_with_id(
        &self,
        mbox: &Mailbox,
        base: &str,
        id: &str,
    ) -> Option<String> {
        if crate::fault::test_break("outbox-dup") {
            return None;
        }
        let stem = base.strip_suffix(".md")?;
        let numbered = |n: &str| {
            n.strip_prefix(stem)
                .and_then(|r| r.strip_prefix('.'))
                .and_then(|r| r.strip_suffix(".md"))
                .is_some_and(|k| !k.is_empty() && k.bytes().all(|c| c.is_ascii_digit()))
        };
        let mut names: Vec<String> =
            self.list_box(mbox).ok()?.into_iter().filter(|n| n == base || numbered(n)).collect();
        // The name itself first: it sorts after its numbered names (`x.2.md` < `x.md`), and
        // two receivers' copies of one message filed into LOGS both hold its id.
        names.sort_by_key(|n| n != base);
        names.into_iter().find(|n| {
            self.read_message(mbox, n).is_ok_and(|b| crate::task::outbox::has_msg_id(&b, id))
        })
    }

    /// The path of message `name` in `mbox` (whether or not it is there).
    pub fn message_path(&self, mbox: &Mailbox, name: &str) -> PathBuf {
        self.box_dir(mbox).join(name)
    }

    /// Does message `name` lie in `mbox`? (lstat: a planted symlink does not count)
    pub fn has_message(&self, mbox: &Mailbox, name: &str) -> bool {
        // Behind a link nothing is there for circe (reading it is refused).
        self.unsound(mbox).is_none()
            && std::fs::symlink_metadata(self.box_dir(mbox).join(name)).is_ok_and(|m| m.is_file())
    }

    /// Read a message file; symlinks, FIFOs and devices are refused.
    pub fn read_message(&self, mbox: &Mailbox, name: &str) -> Result<Vec<u8>> {
        let p = self.box_dir(mbox).join(name);
        self.read_box_file(mbox, &p, atomic::read_opened)?.map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::not_found(format!("no message {name} in {mbox}")),
            _ => Error::io("cannot read message", &p, e),
        })
    }

    /// Read at most `cap + 1` bytes of a message file (a listing never reads a huge file
    /// whole), with the file's size; symlinks, FIFOs and devices are refused.
    pub fn read_message_capped(
        &self,
        mbox: &Mailbox,
        name: &str,
        cap: usize,
    ) -> Result<crate::engine::Capped> {
        let p = self.box_dir(mbox).join(name);
        self.read_box_file(mbox, &p, |opened| atomic::read_opened_capped(opened, cap))?
            .map(|(bytes, len)| crate::engine::Capped { bytes, size: Some(len) })
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => Error::not_found(format!("no message {name} in {mbox}")),
                _ => Error::io("cannot read message", &p, e),
            })
    }

    /// Message file names (`*.md`, not hidden, not a folder: doctor names a folder so named)
    /// in a box, sorted (FS_RULES 8). A link or a pipe so named is listed: reading it says
    /// what it is and what mends it.
    /// An agent's box behind a link or a file is refused (circe never reads through one,
    /// and a scan that passed it over would miss what lies there); a missing one holds
    /// nothing.
    /// An agent's box is first opened through no link at all (`atomic::open_unlinked_dir`,
    /// one call) and listed from there: it is sound then, and the looks at its folders
    /// (`readable`, two `stat` calls) are not needed. Otherwise the box is looked at (it
    /// says what is wrong, a missing box holds nothing), then listed the usual way; when
    /// that passes where a link stopped the first open, the link lies above the box and
    /// this process opens the usual way from then on.
    pub fn list_box(&self, mbox: &Mailbox) -> Result<Vec<String>> {
        self.list_box_open(mbox).map(|(names, _)| names)
    }

    /// `list_box`, and the box as it was listed when it was opened through no link (an
    /// agent's box, the first way): what its names are looked up in afterwards (a `stat`
    /// of each) without opening it again.
    pub fn list_box_open(&self, mbox: &Mailbox) -> Result<(Vec<String>, Option<rustix::fs::Dir>)> {
        let dir = self.box_dir(mbox);
        let first = mbox.agent().map(|_| atomic::open_unlinked_dir(&dir));
        if let Some(atomic::UnlinkedDir::Opened(fd)) = first {
            let mut rd =
                rustix::fs::Dir::new(fd).map_err(|e| Error::io("cannot list", &dir, e.into()))?;
            return Ok((list_messages_of(&mut rd, &dir)?, Some(rd)));
        }
        self.readable(mbox)?;
        if matches!(first, Some(atomic::UnlinkedDir::Link)) {
            atomic::no_unlinked();
        }
        let mut names = list_typed(&dir)?;
        names.retain(|(n, regular)| {
            let folder = || std::fs::symlink_metadata(dir.join(n)).is_ok_and(|m| m.is_dir());
            !n.starts_with('.') && is_message_name(n) && (*regular || !folder())
        });
        Ok((names.into_iter().map(|(n, _)| n).collect(), None))
    }

    /// A hidden entry of a box (its name starts with `.`, which every listing passes over)
    /// that is `task`'s message under a hidden name: `ticket` or a message name of `task`
    /// behind one or more dots (a person "put it aside" with `mv X.md .X.md`). LOGS is not
    /// looked in. Returns its box and name.
    pub fn hidden_message_of(&self, task: &str, ticket: &str) -> Result<Option<(Mailbox, String)>> {
        let mut boxes = vec![Mailbox::NewMessages];
        for (a, _) in self.list_agents()? {
            boxes.push(Mailbox::Inbox(a.clone()));
            boxes.push(Mailbox::Workspace(a));
        }
        for b in boxes {
            if self.unsound(&b).is_some() {
                continue;
            }
            for n in super::root::list_all_names(&self.box_dir(&b))? {
                let shown = n.trim_start_matches('.');
                if shown.len() == n.len() || !is_message_name(shown) {
                    continue;
                }
                let names_task = crate::message::parse_file_name(shown)
                    .and_then(|f| f.task_id)
                    .is_some_and(|t| t == task);
                if shown == ticket || names_task {
                    return Ok(Some((b, n)));
                }
            }
        }
        Ok(None)
    }

    /// Every entry of a box but hidden ones, sorted, with whether it is a regular file: the
    /// one listing doctor reads each box with (a folder that once held many files costs a
    /// listing however few it holds now, so it is listed once).
    pub fn list_box_typed(&self, mbox: &Mailbox) -> Result<Vec<(String, bool)>> {
        let dir = self.box_dir(mbox);
        let mut names = if *mbox == Mailbox::Logs {
            // LOGS only grows on disk (ext4 never shrinks a folder): once it held a million
            // messages, its listing is remembered while it stays as it is.
            super::dir_stamp::cached_listing(self, &dir, "logs")?
        } else if self.behind_link(mbox) {
            Vec::new()
        } else {
            list_typed(&dir)?
        };
        names.retain(|(n, _)| !n.starts_with('.'));
        Ok(names)
    }

    /// Names in a box's listing that are not message files (planted or foreign), for doctor.
    pub fn foreign_in(&self, mbox: &Mailbox, listing: &[(String, bool)]) -> Vec<String> {
        let dir = self.box_dir(mbox);
        listing
            .iter()
            .filter(|(n, regular)| {
                // LOGS/ keeps the event log, doctor's quarantine and the chat archives.
                let keep_log = *mbox == Mailbox::Logs
                    && (n == "events.jsonl"
                        || is_log_segment(n) && *regular
                        || (n == "quarantine" || n == "chat")
                            && std::fs::symlink_metadata(dir.join(n)).is_ok_and(|m| m.is_dir()));
                !(keep_log || is_message_name(n) && *regular)
            })
            .map(|(n, _)| n.clone())
            .collect()
    }
}

/// `Store::list_box` of the box `dir`, open as `rd`: its message names (a folder so named
/// passed over), sorted.
fn list_messages_of(rd: &mut rustix::fs::Dir, dir: &Path) -> Result<Vec<String>> {
    use rustix::fs::FileType;
    let mut names = Vec::new();
    while let Some(entry) = rd.read() {
        let entry = entry.map_err(|e| Error::io("cannot list", dir, e.into()))?;
        let Ok(n) = entry.file_name().to_str() else { continue };
        if n.starts_with('.') || !is_message_name(n) {
            continue;
        }
        let folder = match entry.file_type() {
            FileType::Directory => true,
            // A filesystem that does not say: looked at, as `list_typed` would.
            FileType::Unknown => std::fs::symlink_metadata(dir.join(n)).is_ok_and(|m| m.is_dir()),
            _ => false,
        };
        if !folder {
            names.push(n.to_string());
        }
    }
    names.sort_unstable();
    Ok(names)
}

/// A file in a staging folder that is no copy circe staged (a person put it there).
fn stray(batch: &Path, file: &str) -> Error {
    Error::internal(format!("{} holds a stray file {file}", batch.display())).hint(format!(
        "it is no copy circe staged: move it out of that folder (`mv {} .`, it may be someone's)",
        batch.join(file).display()
    ))
}

/// A rotated segment of the event log (`events-<first>-<last>.jsonl`, 20-digit ids).
fn is_log_segment(n: &str) -> bool {
    n.strip_prefix("events-").and_then(|r| r.strip_suffix(".jsonl")).is_some_and(|ids| {
        ids.len() == 41
            && ids.as_bytes()[20] == b'-'
            && ids.bytes().enumerate().all(|(i, b)| i == 20 || b.is_ascii_digit())
    })
}

/// A move of `src` into the folder `into` that failed: a refusal may come from either
/// folder, so both are named.
fn move_error(src: &Path, into: &Path, e: io::Error) -> Error {
    let denied = e.kind() == io::ErrorKind::PermissionDenied;
    let err =
        Error::io("cannot move", src, e).map_message(|m| format!("{m} into {}", into.display()));
    if denied {
        let from = src.parent().unwrap_or(src);
        err.hint(format!(
            "check this user's permissions on {} (where it goes) and {} (where it is): a move needs to write both",
            into.display(),
            from.display()
        ))
    } else {
        err
    }
}

/// How many names a delivery tries before it gives up: the counters 1 to `IN_ORDER`, then
/// counters spread over a wide range.
const TRIES: u32 = 64;
const IN_ORDER: u32 = 16;

/// The collision counter of a delivery's `i`th try: 1, 2, ... up to `IN_ORDER` (a person
/// reads `x.2.md` as the second of that name), then one drawn from a wide range by the
/// message's own `seed`. Counted on from 1 every time, the thousandth message of one name
/// (an import of a thousand TX files stamped in one second) tried a thousand names, and the
/// ten-thousandth found none.
fn counter(i: u32, seed: u64) -> u32 {
    if i < IN_ORDER {
        return i + 1;
    }
    let h = (seed ^ u64::from(i)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    IN_ORDER + 1 + u32::try_from((h >> 32) % 999_999_000).unwrap_or(0)
}

/// FNV-1a of `bytes`: what spreads one message's counters from another's.
fn seed_of(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn no_free_name(dir: &Path) -> Error {
    Error::internal(format!("no free message name in {}", dir.display())).hint(format!(
        "every name tried was taken ({TRIES}: the counters 1 to {IN_ORDER} and more drawn at random); a folder that full of one name holds what circe did not put there: `circe doctor` names it"
    ))
}

#[cfg(test)]
mod counter_tests {
    use super::*;

    #[test]
    fn counters_go_in_order_then_spread_by_the_message() {
        let a: Vec<u32> = (0..TRIES).map(|i| counter(i, seed_of(b"one"))).collect();
        let b: Vec<u32> = (0..TRIES).map(|i| counter(i, seed_of(b"two"))).collect();
        assert_eq!(a[..16], (1..=16).collect::<Vec<u32>>()[..]);
        assert_eq!(a[..16], b[..16]);
        assert!(a[16..].iter().all(|n| *n > IN_ORDER), "{a:?}");
        assert_ne!(a[16..], b[16..]);
        let mut spread = a[16..].to_vec();
        spread.sort_unstable();
        spread.dedup();
        assert_eq!(spread.len(), a.len() - 16, "no counter tried twice: {a:?}");
    }
}
