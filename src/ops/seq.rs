//! Sequence numbers in the operations (PROTOCOLS.md section 14, shared/reference 003):
//! numbering what a sender sends, moving a receiver's `lastSeen` once it has handed a
//! message on, telling stale messages apart, and the one-line `(ROLE #N): text` form.

use crate::boxes::Mailbox;
use crate::engine::SeqHold;
use crate::error::{Error, Result};
use crate::event::{Event, EventKind};
use crate::message::{self, Message};
use crate::names::AgentName;
use crate::seq::{Receiver, Verdict, render_numbered};
use crate::workspace::Workspace;

/// Number `msg` as `me`'s next message: `seq` (and `seq_epoch` after a reset). The number
/// is used only when the message is delivered while the returned hold lives (its number and
/// its delivery commit together); keep it until then.
pub fn number<'a>(
    ws: &'a Workspace,
    me: &AgentName,
    msg: &mut Message,
) -> Result<Box<dyn SeqHold + 'a>> {
    if msg.seq.is_some() || msg.seq_epoch.is_some() {
        return Err(Error::refused("the message brings its own sequence number")
            .hint("remove the seq (and seq_epoch) line: circe numbers every message it sends"));
    }
    let hold = ws.engine.seq_hold(me)?;
    let next = hold.next();
    msg.seq = Some(next.last);
    msg.seq_epoch = (next.epoch > 0).then_some(next.epoch);
    Ok(hold)
}

/// Number `msg` as `me`'s next message and `deliver` it while the hold lives; numbered
/// again when the counter moved meanwhile (`crate::seq::numbered_again`).
pub fn deliver_numbered<T>(
    ws: &Workspace,
    me: &AgentName,
    msg: &mut Message,
    mut deliver: impl FnMut(&Message) -> Result<T>,
) -> Result<T> {
    let done = crate::seq::numbered_again(me.as_str(), || {
        (msg.seq, msg.seq_epoch) = (None, None);
        let _hold = number(ws, me, msg)?;
        deliver(msg)
    });
    // Out of tries: said as what it is to the command that sent it (whose own change may
    // have committed before), not as a refusal it could retry.
    done.map_err(|e| {
        if !crate::seq::is_counter_moved(&e, me.as_str()) {
            return e;
        }
        Error::conflict(format!(
            "{me}'s message was not delivered: its sequence counter kept moving under it ({} tries)",
            crate::seq::TRIES
        ))
        .hint("what the command changed before it stands; another circe process keeps losing its hold on the counter mid-send (a pooler between circe and the server? `circe help protocols`, section 18)")
    })
}

/// What decides a message's fate: its sender, number, epoch and id.
struct Numbered {
    sender: String,
    seq: Option<u64>,
    epoch: u64,
    msg_id: Option<String>,
}

fn numbered(m: &Message) -> Option<Numbered> {
    Some(Numbered {
        sender: m.from_agent()?.to_string(),
        seq: m.seq,
        epoch: m.seq_epoch.unwrap_or(0),
        msg_id: m.msg_id.clone(),
    })
}

/// Was `m` meant for `me`: addressed to it, to its role, or to `all`, however the address
/// is written (`agent:NAME`, `role:NAME`, bare), and not its own?
fn meant_for(ws: &Workspace, me: &AgentName, m: &Message) -> bool {
    let to = m.to.as_deref().unwrap_or_default();
    m.from_agent() != Some(me.as_str()) && ws.reach(to).is_ok_and(|(agents, _)| agents.contains(me))
}

/// `me` handed these messages on (took them, filed them, or a consumer of its own passed
/// them on): each moves `lastSeen` of its sender (never back). Stale messages of those
/// senders in `me`'s INBOX are logged as skipped, each once; how many became stale is
/// returned. A task's current message is no receipt: it reached `me` by a claim (no
/// delivery, fenced by the task's epoch), so taking or filing it moves nothing.
pub fn handed_on(ws: &Workspace, me: &AgentName, messages: &[(Mailbox, String)]) -> Result<usize> {
    let (mut moves, mut left) = (Vec::new(), Vec::new());
    // A box's messages are read together (one statement on a database), in their order;
    // of each, what decides its fate, if it was meant for `me`, and its task.
    let mut read = Vec::with_capacity(messages.len());
    for run in messages.chunk_by(|x, y| x.0 == y.0) {
        let b = &run[0].0;
        let files: Vec<String> = run.iter().map(|(_, f)| f.clone()).collect();
        super::read::read_each(ws, b, &files, &mut |f, m| {
            if let Ok(m) = m.as_ref()
                && meant_for(ws, me, m)
            {
                read.push((b, f.to_string(), numbered(m), m.task_id.clone()));
            }
        })?;
    }
    for (b, f, n, task) in read {
        if ticket_of(ws, task.as_deref(), &f)? {
            continue;
        }
        if let Some(mut n) = n.filter(|n| n.seq.is_some_and(|s| s > 0)) {
            // Handed on from the INBOX (a watcher, a wait), the message is still there and is
            // not stale; taken or filed, it has left, and a copy arriving again is.
            if !matches!(b, Mailbox::Inbox(_)) {
                left.extend(n.msg_id.take());
            }
            moves.push(n);
        }
    }
    if moves.is_empty() {
        return Ok(0);
    }
    let senders: Vec<String> = moves.iter().map(|n| n.sender.to_ascii_uppercase()).collect();
    let candidates = inbox_from(ws, me, Some(&senders))?;
    // The handed-on messages of these senders still in the INBOX (the rest have left).
    let still: std::collections::HashSet<&str> =
        candidates.iter().filter_map(|c| c.n.msg_id.as_deref()).collect();
    see_and_log(ws, me, &candidates, None, &mut |r| {
        for s in &senders {
            r.keep_handed(Some(s), &|id| still.contains(id) && !left.iter().any(|l| l == id));
        }
        for n in &moves {
            match n.msg_id.as_deref() {
                Some(id) => r.hand_on(&n.sender, n.seq, n.epoch, id),
                None => r.receive_msg(&n.sender, n.seq, n.epoch, None),
            };
        }
    })
}

/// Message `m` was just redelivered into `to`'s INBOX (an orphan): it reaches `to` for the
/// first time, however far `to`'s lastSeen of its sender went meanwhile, so it is marked
/// as not stale for `to` (kept with the handed-on ones until it leaves the INBOX), and
/// `inbox`, `wait --for inbox` and `watch` hand it on as new.
pub fn redelivered(ws: &Workspace, to: &AgentName, m: &Message) -> Result<()> {
    let Some(n) = numbered(m).filter(|n| n.seq.is_some_and(|s| s > 0)) else { return Ok(()) };
    let Some(id) = n.msg_id.as_deref() else { return Ok(()) };
    ws.engine.seq_see(to, &mut |r| {
        r.redelivered(&n.sender, id);
        Ok(())
    })?;
    Ok(())
}

/// Is message `name` its task's current message (a task's ticket)?
pub(super) fn is_ticket(ws: &Workspace, m: &Message, name: &str) -> Result<bool> {
    ticket_of(ws, m.task_id.as_deref(), name)
}

/// Is file `name`, a message of task `task`, that task's current message?
fn ticket_of(ws: &Workspace, task: Option<&str>, name: &str) -> Result<bool> {
    let Some(t) = task.and_then(|t| crate::names::TaskId::new(t).ok()) else { return Ok(false) };
    Ok(ws.engine.peek(&t)?.is_some_and(|st| st.rec.message == name))
}

/// `ticket_of`, where a task that cannot be read counts as not (the message is judged by
/// its number).
fn ticket_named(ws: &Workspace, task: Option<&str>, name: &str) -> bool {
    ticket_of(ws, task, name).unwrap_or(false)
}

/// An event a consumer acting as `me` handed on: the messages it put in `me`'s INBOX.
pub fn handed_event(ws: &Workspace, me: &AgentName, e: &Event) -> Result<()> {
    let inbox = Mailbox::Inbox(me.clone());
    let label = inbox.label();
    let files: Vec<(Mailbox, String)> = e
        .files
        .iter()
        .filter(|f| f.mailbox == label)
        .map(|f| (inbox.clone(), f.file.clone()))
        .collect();
    if files.is_empty() { Ok(()) } else { handed_on(ws, me, &files).map(|_| ()) }
}

/// Does event `e` deliver into `me`'s INBOX only messages that are stale for `me` (numbered
/// at or below what it has seen of their sender)? Such an event is handed to no consumer of
/// `me`'s stream: stale messages are kept and shown apart, never as new (one that is gone
/// from the INBOX, or does not read, is no reason to hold an event back). Only deliveries
/// are judged: a claim moves the agent's own ticket into its INBOX, fenced by the task's
/// epoch, not by its number.
pub fn only_stale(ws: &Workspace, me: &AgentName, e: &Event) -> Result<bool> {
    let delivery = matches!(
        e.event,
        EventKind::Send | EventKind::Notify | EventKind::Route | EventKind::Redeliver
    );
    if !delivery {
        return Ok(false);
    }
    let inbox = Mailbox::Inbox(me.clone());
    let label = inbox.label();
    let mut files = e.files.iter().filter(|f| f.mailbox == label).peekable();
    if files.peek().is_none() {
        return Ok(false);
    }
    let judge = Staleness::of(ws, me)?;
    for f in files {
        match super::read(ws, &inbox, &f.file) {
            Ok(m) if judge.stale(ws, &m, &f.file).is_some() => {}
            _ => return Ok(false),
        }
    }
    Ok(true)
}

/// How old a message is, to order an INBOX: its time (seconds, nanoseconds), then its
/// sender's number.
type Age = (Option<(i64, u32)>, u64);

/// The oldest message in `me`'s INBOX that is not stale for it, judged by the gists of
/// its messages (`inbox_gists`: a file that stayed the same is not read again).
pub fn first_fresh(ws: &Workspace, me: &AgentName) -> Result<Option<String>> {
    let mut judge = None;
    // The oldest (by its time, then its sender's number), as `inbox` lists them: handing on
    // a later one first would make an earlier one of the same sender stale unseen.
    let mut oldest: Option<(Age, String)> = None;
    for (f, g) in inbox_gists(ws, me)? {
        // One that does not read is said at once (`inbox` warns of it), but a link or a
        // pipe so named is no message at all: doctor's to name, never a wake-up (a loop of
        // `wait --for inbox` would find it again and again).
        let Some(g) = g else { continue };
        if !g.read {
            return Ok(Some(f));
        }
        let fresh = match &g.fate {
            None => true,
            Some(n) => {
                if judge.is_none() {
                    judge = Some(Staleness::of(ws, me)?);
                }
                let task = n.3.as_deref();
                judge
                    .as_ref()
                    .is_some_and(|j| !j.stale_numbered(ws, &n.numbered(g.id.as_deref()), task, &f))
            }
        };
        let key = (g.at, g.seq);
        if fresh && oldest.as_ref().is_none_or(|(k, _)| key < *k) {
            oldest = Some((key, f));
        }
    }
    Ok(oldest.map(|(_, f)| f))
}

/// A message in an INBOX: its file and what decides its fate.
pub struct InInbox {
    file: String,
    n: Numbered,
    /// The message's task, if it names one (its current message is never stale).
    task: Option<String>,
}

impl InInbox {
    /// The key a skipped message is remembered by: its id, else its file name.
    fn key(&self) -> String {
        self.n.msg_id.clone().unwrap_or_else(|| format!("file:{}", self.file))
    }
}

/// The numbered messages in `me`'s INBOX (only those from `senders`, upper case, when given:
/// circe's file names say the sender, so others are not read).
fn inbox_from(ws: &Workspace, me: &AgentName, senders: Option<&[String]>) -> Result<Vec<InInbox>> {
    let inbox = Mailbox::Inbox(me.clone());
    let mut files = ws.engine.list_box(&inbox)?;
    files.retain(|file| {
        let by_name = message::parse_file_name(file).map(|f| f.from.to_ascii_uppercase());
        senders.zip(by_name).is_none_or(|(s, from)| s.contains(&from))
    });
    let mut out = Vec::new();
    super::read::read_each(ws, &inbox, &files, &mut |file, m| {
        let Ok(m) = m else { return };
        if let Some(n) = numbered(&m).filter(|n| n.seq.is_some_and(|s| s > 0)) {
            out.push(InInbox { file: file.to_string(), n, task: m.task_id.clone() });
        }
    })?;
    Ok(out)
}

/// Change `me`'s lastSeen with `change`, and in the same step pick the `candidates` that are
/// stale afterwards and were never logged: remember them, then log each as a `skip`. With
/// `present` (every key of the INBOX), forget remembered messages no longer there.
fn see_and_log(
    ws: &Workspace,
    me: &AgentName,
    candidates: &[InInbox],
    present: Option<&std::collections::HashSet<String>>,
    change: &mut dyn FnMut(&mut Receiver),
) -> Result<usize> {
    let mut events = Vec::new();
    ws.engine.seq_see(me, &mut |r| {
        change(r);
        events.clear();
        if let Some(p) = present {
            r.skipped.retain(|k| p.contains(k));
            r.keep_handed(None, &|k| p.contains(k));
        }
        for c in candidates {
            let n = &c.n;
            let verdict = r.judge(&n.sender, n.seq, n.epoch, n.msg_id.as_deref());
            if let Verdict::Stale { last_seen } = verdict
                && !ticket_named(ws, c.task.as_deref(), &c.file)
                && r.skipped.insert(c.key())
            {
                let mut e = Event::now(EventKind::Skip, me)
                    .file(Mailbox::Inbox(me.clone()).label(), c.file.clone());
                e.msg_id.clone_from(&n.msg_id);
                e.sender = Some(n.sender.clone());
                e.seq = n.seq;
                e.seq_epoch = (n.epoch > 0).then_some(n.epoch);
                e.last_seen = Some(last_seen);
                events.push(e);
            }
        }
        Ok(())
    })?;
    let n = events.len();
    if n > 0 {
        ws.engine.append_events(events)?;
    }
    Ok(n)
}

/// Log as skipped, once, every stale message of `inbox` (all of `me`'s INBOX: file names
/// and messages) that was not logged yet: one that arrived stale (a copy put there by hand,
/// or after an import). `circe inbox` calls this with what it listed.
pub fn log_stale(ws: &Workspace, me: &AgentName, inbox: &[(&str, &Message)]) -> Result<()> {
    let all: Vec<InInbox> = inbox
        .iter()
        .filter_map(|(f, m)| {
            let n = numbered(m).filter(|n| n.seq.is_some_and(|s| s > 0))?;
            Some(InInbox { file: (*f).to_string(), n, task: m.task_id.clone() })
        })
        .collect();
    let present = all.iter().map(InInbox::key).collect();
    see_and_log(ws, me, &all, Some(&present), &mut |_| {}).map(|_| ())
}

/// After an import changed `me`'s lastSeen: log what it made stale.
pub fn log_after_import(ws: &Workspace, me: &AgentName) -> Result<()> {
    let all = inbox_from(ws, me, None)?;
    see_and_log(ws, me, &all, None, &mut |_| {}).map(|_| ())
}

/// Tells which messages of an INBOX are stale for its agent.
pub struct Staleness {
    receiver: Receiver,
}

impl Staleness {
    /// `me`'s lastSeen as it stands.
    pub fn of(ws: &Workspace, me: &AgentName) -> Result<Staleness> {
        Ok(Staleness { receiver: ws.engine.seq_seen(me)? })
    }

    /// `Some(lastSeen)` when `m` (the INBOX's file `name`) is stale: numbered at or below
    /// what its agent has seen of its sender (not the very message that set it), or of an
    /// older epoch; never a task's current message (it came by a claim, fenced by the
    /// task's epoch).
    pub fn stale(&self, ws: &Workspace, m: &Message, name: &str) -> Option<u64> {
        self.stale_by(ws, &numbered(m)?, m.task_id.as_deref(), name)
    }

    /// `stale`, of what decides a message's fate: `n`, of task `task`.
    fn stale_by(
        &self,
        ws: &Workspace,
        n: &Numbered,
        task: Option<&str>,
        name: &str,
    ) -> Option<u64> {
        match self.receiver.judge(&n.sender, n.seq, n.epoch, n.msg_id.as_deref()) {
            Verdict::Stale { .. } if ticket_named(ws, task, name) => None,
            Verdict::Stale { last_seen } => Some(last_seen),
            Verdict::Process => None,
        }
    }

    /// Is the message of fate `n` (of task `task`), the INBOX's file `name`, stale?
    fn stale_numbered(&self, ws: &Workspace, n: &Numbered, task: Option<&str>, name: &str) -> bool {
        self.stale_by(ws, n, task, name).is_some()
    }
}

/// How many messages of `me`'s INBOX are new and how many stale, sorted as `inbox` sorts
/// them (its `messages` and its `stale`): stale when it reads and is numbered at or below
/// what `me` has seen of its sender; new otherwise, one that does not read included.
/// Nothing is logged or moved. An agent that has seen no numbered message has none stale:
/// its INBOX is only listed, every name counted; else each is judged by its gist
/// (`inbox_gists`), and a link or a pipe under a message's name is no message, as `wait`
/// takes it (doctor names such a file).
pub fn inbox_counts(ws: &Workspace, me: &AgentName) -> Result<(usize, usize)> {
    let judge = Staleness::of(ws, me)?;
    if judge.receiver.senders.is_empty() {
        return Ok((ws.engine.list_box(&Mailbox::Inbox(me.clone()))?.len(), 0));
    }
    Ok(counts_by(ws, &judge, &inbox_gists(ws, me)?))
}

/// `inbox_counts`, of gists taken already (`inbox_gists`).
pub fn counts_of(ws: &Workspace, me: &AgentName, gists: &Gists) -> Result<(usize, usize)> {
    let judge = Staleness::of(ws, me)?;
    if judge.receiver.senders.is_empty() {
        return Ok((gists.len(), 0));
    }
    Ok(counts_by(ws, &judge, gists))
}

fn counts_by(ws: &Workspace, judge: &Staleness, gists: &Gists) -> (usize, usize) {
    let (mut new, mut stale) = (0, 0);
    for (f, g) in gists {
        let id = g.as_ref().and_then(|g| g.id.as_deref());
        match g.as_ref().and_then(|g| g.fate.as_ref()) {
            None if g.is_none() => {}
            Some(n) if judge.stale_numbered(ws, &n.numbered(id), n.3.as_deref(), f) => stale += 1,
            _ => new += 1,
        }
    }
    (new, stale)
}

/// Each message of an INBOX (by name) with its gist; `None`: no message (a link or a pipe
/// under its name).
pub type Gists = Vec<(String, Option<Gist>)>;

/// What the readers of a whole INBOX (`inbox_counts`, the open questions, `wait --for
/// inbox`, `wait --for reply:`) need of a message, made of its bytes alone, so that the
/// engine may remember it of a file that did not change (`Engine::box_digests`).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Gist {
    /// It read and parsed (as `ops::read`).
    pub read: bool,
    /// What decides its fate; `None` when it is never stale (it does not read, or carries
    /// no number).
    fate: Fate,
    /// Its time (seconds, nanoseconds) and number, by which an INBOX is sorted.
    at: Option<(i64, u32)>,
    seq: u64,
    /// Its id.
    pub id: Option<String>,
    /// Its intent, when it has an id (a question's copy is one of these).
    pub asks: Option<String>,
    /// The id it replies to.
    pub reply_to: Option<String>,
}

/// What a gist is made of (`Engine::box_digests`' `kind`): this circe's parser and gist,
/// under these limits. A gist of another shape is another kind: a cache of it is read as
/// none.
fn gist_kind(limits: &message::Limits) -> String {
    format!("gist 2 circe {} {limits:?}", env!("CARGO_PKG_VERSION"))
}

/// The gist of each message of `me`'s INBOX, sorted by name: remembered by the engine of
/// a file that stayed the same (the local engine's `locks/inbox-<agent>.digests`), the
/// rest read.
pub fn inbox_gists(ws: &Workspace, me: &AgentName) -> Result<Gists> {
    gists_keeping(ws, me, &mut |_, _, _| {})
}

/// `inbox_gists`, handing `keep` each message read meanwhile (its name, its gist and the
/// message): a file the engine remembered is not read, and not handed.
fn gists_keeping(
    ws: &Workspace,
    me: &AgentName,
    keep: &mut dyn FnMut(&str, &Gist, Message),
) -> Result<Gists> {
    let inbox = Mailbox::Inbox(me.clone());
    let limits = ws.config.limits;
    let kind = gist_kind(&limits);
    let digests =
        ws.engine.box_digests(&inbox, limits.message_bytes, &kind, &mut |name, read| {
            let (g, m) = gist_of(read, &limits);
            if let (Some(g), Some(m)) = (&g, m) {
                keep(name, g, m);
            }
            serde_json::value::to_raw_value(&g?).ok()
        })?;
    let out = digests.into_iter().map(|(f, d)| {
        // One the engine remembered in another shape (a hand-edited cache) is read again.
        let g = match d.map(|d| serde_json::from_str::<Gist>(d.get())) {
            None => None,
            Some(Ok(g)) => Some(g),
            Some(Err(_)) => {
                gist_of(ws.engine.read_message_capped(&inbox, &f, limits.message_bytes), &limits).0
            }
        };
        (f, g)
    });
    Ok(out.collect())
}

/// Each message of box `b` that reads, in name order, handed to `each` with its gist and,
/// wherever it was read, the message itself (what the gist was made of): always where
/// `whole` asks for it by the gist. An INBOX whose gists the engine remembers
/// (`Engine::remembers_digests`) is read by them (`known`: taken already by this process,
/// `inbox_gists`), a file that stayed the same read again only when `whole` asks for it;
/// any other box has each message read in turn, and none after `each` breaks. What `each`
/// breaks with is returned.
pub fn each_message<T>(
    ws: &Workspace,
    b: &Mailbox,
    known: Option<&Gists>,
    whole: &dyn Fn(&Gist) -> bool,
    mut each: impl FnMut(&str, &Gist, Option<Message>) -> std::ops::ControlFlow<T>,
) -> Result<Option<T>> {
    use std::ops::ControlFlow::Break;
    let limits = ws.config.limits;
    let read =
        |name: &str| gist_of(ws.engine.read_message_capped(b, name, limits.message_bytes), &limits);
    let me = match b {
        Mailbox::Inbox(me) if ws.engine.remembers_digests() => me,
        _ => {
            for name in ws.engine.list_box(b)? {
                if let (Some(g), Some(m)) = read(&name)
                    && let Break(t) = each(&name, &g, Some(m))
                {
                    return Ok(Some(t));
                }
            }
            return Ok(None);
        }
    };
    let mut kept = std::collections::HashMap::new();
    let taken;
    let gists = if let Some(gists) = known {
        gists
    } else {
        taken = gists_keeping(ws, me, &mut |name, g, m| {
            if whole(g) {
                kept.insert(name.to_string(), m);
            }
        })?;
        &taken
    };
    for (name, g) in gists {
        let Some(g) = g.as_ref().filter(|g| g.read) else { continue };
        let reread;
        let (g, m) = match kept.remove(name) {
            Some(m) => (g, Some(m)),
            None if !whole(g) => (g, None),
            // Remembered: read now (what it holds now is what counts).
            None => match read(name) {
                (Some(g), Some(m)) => {
                    reread = g;
                    (&reread, Some(m))
                }
                _ => continue,
            },
        };
        if let Break(t) = each(name, g, m) {
            return Ok(Some(t));
        }
    }
    Ok(None)
}

/// A message's gist, and the message, of its capped read (`Engine::box_digests`): no
/// gist for no message (a link or a pipe under its name), no message for one that does
/// not read.
fn gist_of(
    read: Result<crate::engine::Capped>,
    limits: &message::Limits,
) -> (Option<Gist>, Option<Message>) {
    let c = match read {
        Err(e) if e.details.iter().any(|(k, _)| *k == "planted") => return (None, None),
        Err(_) => return (Some(Gist::default()), None),
        Ok(c) => c,
    };
    let Ok(m) = message::parse_limited(&c.bytes, c.size, message::Mode::Draft, limits) else {
        return (Some(Gist::default()), None);
    };
    let fate = numbered(&m)
        .filter(|n| n.seq.is_some_and(|s| s > 0))
        .map(|n| FateOf(n.sender, n.seq.unwrap_or_default(), n.epoch, m.task_id.clone()));
    let g = Gist {
        read: true,
        fate,
        at: m.created_at.map(|t| (t.timestamp(), t.timestamp_subsec_nanos())),
        seq: m.seq.unwrap_or(0),
        id: m.msg_id.clone(),
        asks: m.msg_id.as_ref().and(m.intent.clone()),
        reply_to: m.in_reply_to.clone(),
    };
    (Some(g), Some(m))
}

/// A message's fate: `None` when it is never stale.
type Fate = Option<FateOf>;

/// What decides a numbered message's fate (with its id, the gist's): its sender, number,
/// epoch and task.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct FateOf(String, u64, u64, Option<String>);

impl FateOf {
    fn numbered(&self, id: Option<&str>) -> Numbered {
        let msg_id = id.map(str::to_string);
        Numbered { sender: self.0.clone(), seq: Some(self.1), epoch: self.2, msg_id }
    }
}

/// The text of the one-line form: the headline, else the first line of the `## Summary`
/// section, else the body's first line that is not a heading; whitespace runs become one
/// space.
pub fn summary(m: &Message) -> String {
    let pick = crate::message::summary_of(m.headline.as_deref(), &m.body);
    pick.unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `(ROLE #N): text`: the sender in upper case (its counter is the agent's), the number
/// (with ` eE` after a reset), and `summary`.
pub fn oneline(m: &Message) -> String {
    let role = m.from_agent().unwrap_or("?").to_ascii_uppercase();
    render_numbered(&role, m.seq, m.seq_epoch.unwrap_or(0), &summary(m))
}
