//! `circe import tx` and `circe export tx`: a TX message folder in and out of a root
//! (PROTOCOLS.md section 16, "The bridge"). The pure half is `tx::bridge`.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::boxes::Mailbox;
use crate::clock;
use crate::error::{Error, Result};
use crate::event::{Event, EventKind};
use crate::message::{self, Format, Message, Mode, agent_of};
use crate::names::{AgentName, CheckName, TaskId};
use crate::tx::bridge::{self as pure, Imported, Landing};
use crate::tx::{AskState, tx_name};
use crate::workspace::Workspace;

use super::open::{TaskMessage, open_task};

/// A file that was not imported, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub file: String,
    pub reason: String,
}

/// An import's first pass: what each file says, to order them and know each message's
/// task. A file that cannot be read, or whose type the registry does not know (stored, it
/// would be a message no command understands, and `validate` refuses it), is skipped.
fn first_pass(
    ws: &Workspace,
    files: Vec<(String, std::result::Result<Vec<u8>, String>)>,
    now: chrono::DateTime<chrono::Utc>,
    report: &mut ImportReport,
) -> Vec<(String, Vec<u8>, Message)> {
    let mut firsts = Vec::new();
    for (name, bytes) in files {
        let read = bytes.and_then(|b| pure::import_file(&name, &b, now, &|_| None).map(|i| (b, i)));
        let (bytes, i) = match read {
            Ok(r) => r,
            Err(reason) => {
                report.skipped.push(Skipped { file: name, reason });
                continue;
            }
        };
        if let Some(intent) = i.message.intent.as_deref()
            && ws.registry.intent(intent).is_none()
        {
            let e = ws.registry.unknown_intent(intent);
            let near = e.hint.map(|h| format!(" ({h})")).unwrap_or_default();
            let reason = format!(
                "{}{near}: add it under `registry: intents:` in circe.yaml and import again",
                e.message
            );
            report.skipped.push(Skipped { file: name, reason });
            continue;
        }
        firsts.push((name, bytes, i.message));
    }
    firsts
}

/// An agent an import added, and its role.
#[derive(Debug, Clone, Serialize)]
pub struct NewAgent {
    pub agent: String,
    pub role: String,
    /// Always false (a new agent): the shape of `agents_added` everywhere (`init`).
    pub retired: bool,
}

/// What an import did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportReport {
    /// Of `skipped`, the files whose msg-id the root or its archive holds already (imported
    /// before): an import run again skips them all, and that is no failure.
    #[serde(skip)]
    pub there_already: usize,
    /// Messages filed as history into LOGS.
    pub history: usize,
    /// Asks still waiting: in their recipient's INBOX, with an open ask.
    pub open_asks: usize,
    /// Tasks nobody completed: waiting in NEW_MESSAGES.
    pub open_tasks: usize,
    /// Agents added, with their roles.
    pub agents_added: Vec<NewAgent>,
    /// Meshes the addresses named (`mesh/agent`).
    pub meshes: Vec<String>,
    pub skipped: Vec<Skipped>,
}

/// How the importer picks roles: `--role AGENT=ROLE`, else TX's `core` is the coordinator,
/// else `default`.
pub struct Roles {
    pub given: BTreeMap<String, String>,
    pub default: String,
}

impl Roles {
    fn of(&self, agent: &str) -> String {
        self.given.get(agent).cloned().unwrap_or_else(|| {
            if agent == "core" { "coordinator".into() } else { self.default.clone() }
        })
    }
}

/// Names that are no agent to add: circe itself, TX's `system`, `all`.
fn is_actor(name: &str) -> bool {
    !matches!(name, "circe" | "system" | "all")
}

/// Every msg id in the root, to tell an import already done.
fn ids_in_root(ws: &Workspace) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for b in ws.engine.boxes()? {
        for name in ws.engine.list_box(&b)? {
            if let Ok(m) = super::read(ws, &b, &name)
                && let Some(id) = m.msg_id
            {
                out.insert(id);
            }
        }
    }
    Ok(out)
}

/// Import the files of a TX folder (`files`: name and bytes, or why they could not be read).
pub fn import_tx(
    ws: &Workspace,
    files: Vec<(String, std::result::Result<Vec<u8>, String>)>,
    roles: &Roles,
) -> Result<ImportReport> {
    for (agent, r) in &roles.given {
        ws.registry.known_role(r, &format!("--role {agent}={r}"))?;
    }
    ws.registry.known_role(&roles.default, "--default-role")?;
    for agent in roles.given.keys() {
        AgentName::new(agent).map_err(|e| e.map_message(|m| format!("--role {agent}=...: {m}")))?;
    }
    let mut report = ImportReport::default();
    let now = ws.now();
    let mut firsts = first_pass(ws, files, now, &mut report);
    firsts.sort_by(|a, b| (a.2.created_at, &a.0).cmp(&(b.2.created_at, &b.0)));
    // One import at a time: the ids in the root are read under the hold, so a second import
    // of the same folder finds the first's messages and skips them.
    let Some(_import) = ws.engine.hold_import()? else {
        return Err(Error::conflict("another import into this root is running")
            .hint("wait for it to end, then run this one again: what it brought in is skipped"));
    };
    let taken = ids_in_root(ws)?;
    let tasks: RefCell<HashMap<String, String>> = RefCell::new(HashMap::new());
    let mut seen = BTreeSet::new();
    let mut imported: Vec<(String, Imported)> = Vec::new();
    for (name, bytes, first) in firsts {
        let id = first.msg_id.clone().unwrap_or_default();
        if taken.contains(&id) {
            report.there_already += 1;
            report.skipped.push(Skipped {
                file: name,
                reason: format!("msg-id {id} is in the root already (imported before?)"),
            });
            continue;
        }
        // Imported before and archived since (an import run again after `circe archive`
        // took its history): not brought back.
        if super::find::in_archive(ws, &id)? {
            report.there_already += 1;
            report.skipped.push(Skipped {
                file: name,
                reason: format!("msg-id {id} is in the archive (imported before?)"),
            });
            continue;
        }
        if !seen.insert(id.clone()) {
            report.skipped.push(Skipped {
                file: name,
                reason: format!("msg-id {id} is taken by an earlier file"),
            });
            continue;
        }
        let lookup = |parent: &str| tasks.borrow().get(parent).cloned();
        match pure::import_file(&name, &bytes, now, &lookup) {
            Ok(i) => {
                if let Some(t) = &i.message.task_id {
                    tasks.borrow_mut().insert(id, t.clone());
                }
                imported.push((name, i));
            }
            Err(reason) => report.skipped.push(Skipped { file: name, reason }),
        }
    }
    add_agents(ws, &imported, roles, &mut report)?;
    let msgs: Vec<&Message> = imported.iter().map(|(_, i)| &i.message).collect();
    let landings = pure::landings(&msgs, &|intent| opens_task(ws, intent));
    let answers: HashMap<String, (String, Option<String>)> = imported
        .iter()
        .filter(|(_, i)| i.message.intent.as_deref() == Some("ask-response"))
        .filter_map(|(_, i)| {
            let m = &i.message;
            Some((m.in_reply_to.clone()?, (m.msg_id.clone()?, m.from_agent().map(str::to_string))))
        })
        .collect();
    for ((orig, i), landing) in imported.iter().zip(landings) {
        match land(ws, orig, i, landing, &answers) {
            Ok(l) => match l {
                Landing::History => report.history += 1,
                Landing::OpenAsk => report.open_asks += 1,
                Landing::OpenTask => report.open_tasks += 1,
            },
            Err(e) => report.skipped.push(Skipped { file: orig.clone(), reason: e.chain() }),
        }
    }
    Ok(report)
}

/// Whether a message of `intent` opens a task: TX's `task`, and every intent the registry
/// says opens one (as `send` decides).
fn opens_task(ws: &Workspace, intent: &str) -> bool {
    crate::tx::semantics(intent) == crate::tx::Semantics::OpensTask
        || ws.registry.intent(intent).is_some_and(|i| i.opens_task)
}

/// Add the agents the messages name (mesh/agent -> agent), and note the meshes. A `--role`
/// that names no agent to add is refused before any is added (a mistyped name would give
/// the agent the default role for good).
fn add_agents(
    ws: &Workspace,
    imported: &[(String, Imported)],
    roles: &Roles,
    report: &mut ImportReport,
) -> Result<()> {
    let mut names = BTreeSet::new();
    let mut meshes = BTreeSet::new();
    for (_, i) in imported {
        for addr in [&i.message.from, &i.message.to].into_iter().flatten() {
            if let Some((mesh, _)) = addr.split_once('/') {
                meshes.insert(mesh.to_string());
            }
            names.insert(agent_of(addr).to_string());
        }
    }
    // A role's name that no agent has is an address to the role, not a new agent.
    let new: Vec<AgentName> = names
        .into_iter()
        .filter(|n| is_actor(n) && !ws.registry.is_role(n))
        .filter_map(|n| AgentName::new(&n).ok())
        .filter(|a| !ws.is_agent(a))
        .collect();
    for (given, role) in &roles.given {
        let existing = AgentName::new(given).ok().filter(|a| ws.is_agent(a));
        // An import run again with the same flags: that agent has that role already.
        if new.iter().any(|a| a.as_str() == given)
            || existing.as_ref().is_some_and(|a| ws.role_of(a).as_ref() == Some(role))
        {
            continue;
        }
        let why = if let Some(a) = existing {
            let has = ws.role_of(&a).unwrap_or_default();
            format!("`{given}` is an agent already, with role {has} (an agent keeps its role)")
        } else {
            format!("no message of the folder names an agent `{given}`")
        };
        let adds: Vec<&str> = new.iter().map(AgentName::as_str).collect();
        return Err(Error::refused(format!("--role {given}=...: {why}; nothing was imported"))
            .hint(if adds.is_empty() {
                "this import adds no agent: leave --role out".to_string()
            } else {
                format!("the agents this import adds: {}", adds.join(", "))
            }));
    }
    for agent in new {
        let n = agent.to_string();
        let role = roles.of(&n);
        if ws.engine.add_agent(&agent, &role)? {
            let mut ev = Event::now(EventKind::AgentAdd, &n);
            ev.note = Some(format!("role {role} (imported from TX)"));
            ws.engine.append_events(vec![ev])?;
            report.agents_added.push(NewAgent { agent: n, role, retired: false });
        }
    }
    // What was read of the agents before (that a name is no agent) no longer holds.
    ws.agents_changed();
    report.meshes = meshes.into_iter().collect();
    Ok(())
}

/// The agents an address reaches in this root.
fn reached(ws: &Workspace, to: &str) -> Vec<AgentName> {
    let t = agent_of(to);
    match AgentName::new(t) {
        Ok(a) if ws.is_agent(&a) => vec![a],
        _ => ws.agents_with_role(t),
    }
}

/// Put one imported message where it lands; returns where it went.
fn land(
    ws: &Workspace,
    orig: &str,
    i: &Imported,
    landing: Landing,
    answers: &HashMap<String, (String, Option<String>)>,
) -> Result<Landing> {
    let m = &i.message;
    let created = m.created_at.unwrap_or_else(|| ws.now());
    let from = m.from_agent().unwrap_or("system");
    let to = m.to.clone().unwrap_or_default();
    let intent = m.intent.clone().unwrap_or_default();
    // Named as `send` names it: the address's name, without `role:` or `agent:` (no `:` in a
    // file name).
    let label = crate::address::Address::parse(&to).name();
    let name = message::fit_name(message::file_name(
        created,
        from,
        label,
        &intent,
        m.task_id.as_deref(),
        1,
    ));
    let waiting_status =
        m.status.as_deref().is_none_or(|s| matches!(s, "new" | "start" | "pending"));
    // "Expired messages logged but not processed" (reference 000): an ask or task past its
    // deadline is history, as one that is no longer waiting is.
    let expired = m.deadline.is_some_and(|d| d <= ws.now());
    // TX's orphan (sent to a mesh that was gone, "can ignore or delete"): never delivered.
    let orphan = crate::tx::parse_tx_name(orig).is_some_and(|n| n.orphan);
    let landing = if (landing == Landing::OpenTask && !waiting_status) || expired || orphan {
        Landing::History
    } else {
        landing
    };
    let recipients = reached(ws, &to);
    let msg_id = m.msg_id.clone().unwrap_or_default();
    // The import's event, given the boxes and the names the copies got there.
    let events_of = |boxes: &[Mailbox], files: &[String]| {
        let mut ev = Event::now(EventKind::Import, from);
        ev.msg_id.clone_from(&m.msg_id);
        ev.intent = Some(intent.clone());
        ev.addressed_to = Some(to.clone());
        ev.in_reply_to.clone_from(&m.in_reply_to);
        ev.note = Some(format!("from TX file {orig}"));
        if let Some(t) = m.task_id.as_deref().and_then(|t| TaskId::new(t).ok()) {
            ev = ev.task(&t);
        }
        for (b, f) in boxes.iter().zip(files) {
            ev = ev.file(b.label(), f.clone());
        }
        vec![ev]
    };
    // A delivery keeps its event in a journal until it is logged (section 6, step 6).
    let deliver = |boxes: &[Mailbox], then: &dyn Fn() -> Result<()>| {
        let wanted = vec![name.clone(); boxes.len()];
        super::send::deliver_logged(
            ws,
            &msg_id,
            &wanted,
            |f| events_of(boxes, f),
            || {
                let files = ws.engine.deliver(&i.content, &name, boxes)?;
                then()?;
                Ok(files)
            },
        )
    };
    let opened = match landing {
        Landing::OpenTask => {
            let task = TaskId::new(m.task_id.clone().unwrap_or_default())?;
            let sender = AgentName::new(from)?;
            // The checks its intent asks for, as `send` gives them.
            let required: Vec<CheckName> = ws
                .registry
                .intent(&intent)
                .map(|i| i.required_checks.iter().map(CheckName::new).collect())
                .transpose()?
                .unwrap_or_default();
            let opened = open_task(
                ws,
                &TaskMessage {
                    task_id: &task,
                    intent: &intent,
                    to: agent_of(&to),
                    priority: m.priority.map(crate::message::Priority::as_str),
                    deadline: m.deadline.map(clock::stamp),
                    sender: &sender,
                    required_checks: &required,
                    name: name.clone(),
                    content: i.content.clone(),
                },
            )?;
            Some(opened.message)
        }
        Landing::OpenAsk if !recipients.is_empty() => {
            let boxes: Vec<Mailbox> =
                recipients.iter().map(|a| Mailbox::Inbox(a.clone())).collect();
            deliver(&boxes, &|| match AgentName::new(from) {
                Ok(asker) => super::asks::record(ws, &asker, m, &recipients).map(drop),
                Err(_) => Ok(()),
            })?;
            None
        }
        _ => {
            deliver(&[Mailbox::Logs], &|| Ok(()))?;
            None
        }
    };
    history_records(ws, m, &i.content, &recipients, answers)?;
    if let Some(ticket) = opened {
        ws.engine.append_events(events_of(&[Mailbox::NewMessages], &[ticket]))?;
    }
    Ok(landing)
}

/// What history keeps besides the message: an answered ask's record (closed), the latest
/// prompt of each agent.
fn history_records(
    ws: &Workspace,
    m: &Message,
    content: &[u8],
    recipients: &[AgentName],
    answers: &HashMap<String, (String, Option<String>)>,
) -> Result<()> {
    let id = m.msg_id.clone().unwrap_or_default();
    match m.intent.as_deref() {
        Some("prompt") => {
            for r in recipients {
                ws.engine.set_prompt(r, content)?;
            }
        }
        Some("ask" | "ask-human") => {
            let (Some((answer, by)), Ok(asker)) =
                (answers.get(&id), AgentName::new(m.from_agent().unwrap_or("")))
            else {
                return Ok(());
            };
            let rec = super::asks::record(ws, &asker, m, recipients)?;
            if rec.state == AskState::Open {
                let closed = crate::tx::AskRecord {
                    state: AskState::Answered,
                    answer: Some(answer.clone()),
                    answered_by: by.as_deref().and_then(|b| AgentName::new(b).ok()),
                    ..rec.clone()
                };
                ws.engine.put_ask(&closed, Some(rec.rev))?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// One file of an export.
#[derive(Debug, Clone)]
pub struct ExportFile {
    pub name: String,
    pub bytes: Vec<u8>,
    /// Written as imported, byte for byte (else: converted to TX front matter).
    pub original: bool,
    /// Read from the archive (its task, or the loose message, was archived).
    pub archived: bool,
}

/// A message status in TX's words (reference 000: start, in-progress, rejected, approved,
/// complete, blocked); a word TX lacks is kept.
fn tx_status<'a>(s: &'a str, intent: &str) -> &'a str {
    let report = matches!(
        crate::tx::semantics(intent),
        crate::tx::Semantics::ClosesAsk | crate::tx::Semantics::CompletesTask
    );
    match s {
        // A report is complete in TX (every `task-complete` and `ask-response` of reference
        // 000 says so, and TX routes on it); circe's `send` files it as `new`.
        "new" | "pending" if report => "complete",
        "new" | "pending" => "start",
        "in_progress" => "in-progress",
        "completed" => "complete",
        // Task statuses no message header has (TX has no word for them): a task whose
        // deadline passed ended undone; a parked one waits for a coordinator.
        "expired" => "failed",
        "parked" => "blocked",
        other => other,
    }
}

/// Every message of the root once (by msg id), those in the boxes and those in the archive,
/// as TX would have written it: an imported one byte for byte under its original name, any
/// other in TX front matter under TX's naming, handed to `each` as it is made (the boxes'
/// first, then the archive's, segment by segment): only the msg ids seen are kept, so an
/// export holds one message at a time however large the archive. Messages without a msg id
/// are left out (reported), as is an archive segment that cannot be read (named). An error
/// (`each`'s too) ends the walk: what `each` was handed before stays handed.
pub fn export_tx(
    ws: &Workspace,
    each: &mut dyn FnMut(ExportFile) -> Result<()>,
) -> Result<Vec<Skipped>> {
    let mut ids = BTreeSet::new();
    let mut skipped = Vec::new();
    let limits = &ws.config.limits;
    for b in ws.engine.boxes()? {
        for name in ws.engine.list_box(&b)? {
            let c = match ws.engine.read_message_capped(&b, &name, limits.message_bytes) {
                Ok(c) => c,
                Err(e) => {
                    skipped
                        .push(Skipped { file: format!("{}/{name}", b.label()), reason: e.chain() });
                    continue;
                }
            };
            // Parsed as `ops::read` parses it, from the bytes read once.
            let Ok(m) = message::parse_limited(&c.bytes, c.size, Mode::Draft, limits) else {
                skipped.push(Skipped {
                    file: format!("{}/{name}", b.label()),
                    reason: "does not parse".into(),
                });
                continue;
            };
            let Some(id) = m.msg_id.clone() else {
                skipped.push(Skipped {
                    file: format!("{}/{name}", b.label()),
                    reason: "no msg id".into(),
                });
                continue;
            };
            if !ids.insert(id.clone()) {
                continue; // a copy of a message sent to several agents
            }
            each(exported(ws, &m, c.bytes, &id)?)?;
        }
    }
    // The archive's messages after the boxes': a copy still in a box is the one exported.
    let mut failed = Ok(());
    let passed = ws.engine.archived_messages(&mut |entry, bytes| {
        let file = entry.origin.clone().unwrap_or_else(|| entry.member.clone());
        let file = format!("archived {file}");
        let size = Some(bytes.len() as u64);
        let m = match message::parse_limited(&bytes, size, Mode::Draft, limits) {
            Ok(m) => m,
            Err(p) => {
                skipped.push(Skipped { file, reason: super::first_problem(&p) });
                return Ok(true);
            }
        };
        let Some(id) = m.msg_id.clone() else {
            skipped.push(Skipped { file, reason: "no msg id".into() });
            return Ok(true);
        };
        if !ids.insert(id.clone()) {
            return Ok(true);
        }
        match exported(ws, &m, bytes, &id).and_then(|f| each(ExportFile { archived: true, ..f })) {
            Ok(()) => Ok(true),
            Err(e) => {
                failed = Err(e);
                Ok(false)
            }
        }
    })?;
    failed?;
    skipped.extend(passed.into_iter().map(|p| {
        let (file, why) = p.split_once(": ").unwrap_or((p.as_str(), "cannot be read"));
        Skipped { file: file.to_string(), reason: format!("archive segment not read: {why}") }
    }));
    Ok(skipped)
}

/// One message as its export file: as imported, byte for byte, else in TX front matter.
fn exported(ws: &Workspace, m: &Message, bytes: Vec<u8>, id: &str) -> Result<ExportFile> {
    match pure::original(&bytes) {
        Some((orig, text)) => {
            Ok(ExportFile { name: orig, bytes: text, original: true, archived: false })
        }
        None => as_tx(ws, m, bytes, id),
    }
}

/// A message circe wrote, as TX would have: front matter (a CIRCE-format one converted),
/// its status in TX's words, TX's file name.
fn as_tx(ws: &Workspace, m: &Message, bytes: Vec<u8>, id: &str) -> Result<ExportFile> {
    let said = task_status(ws, m)?.or_else(|| m.status.clone());
    let status = said.as_deref().map(|s| tx_status(s, m.intent.as_deref().unwrap_or_default()));
    let mesh = ws.mesh();
    // The sender is an agent (or circe) whatever roles share its name.
    let from = m.from.as_deref().unwrap_or(crate::event::CIRCE);
    let from = match &mesh {
        Some(mesh) if !from.contains('/') => format!("{mesh}/{}", agent_of(from)),
        _ => from.to_string(),
    };
    let to = tx_address(ws, mesh.as_deref(), m.to.as_deref().unwrap_or("all"));
    let same = m.format == Format::FrontMatter
        && status == m.status.as_deref()
        && m.from.as_deref() == Some(from.as_str())
        && m.to.as_deref() == Some(to.as_str());
    let text = if same {
        bytes
    } else {
        let mut fm = m.clone();
        fm.format = Format::FrontMatter;
        fm.status = status.map(str::to_string);
        fm.from = Some(from.clone());
        fm.to = Some(to.clone());
        message::render(&fm).into_bytes()
    };
    let at = m.created_at.unwrap_or_else(|| ws.now());
    // The name's recipient part: an agent's name (`agent:NAME` kept as it is without a mesh
    // name), a role as `role-NAME` (no `:` in a name).
    let label = |a: &str| {
        let a = agent_of(a);
        a.strip_prefix("agent:").map_or_else(|| a.replacen("role:", "role-", 1), str::to_string)
    };
    let name = tx_name(at, m.intent.as_deref().unwrap_or("update"), &label(&from), &label(&to), id);
    Ok(ExportFile { name, bytes: text, original: false, archived: false })
}

/// The status a task message says in TX: its task's, once the task moved on from waiting
/// (claimed, in progress, blocked, completed, failed; archived: its last), so that an import
/// of the export files a task that is no longer waiting as history. `None`: the message
/// opens no task, or its task waits (the message's own status says so).
fn task_status(ws: &Workspace, m: &Message) -> Result<Option<String>> {
    let (Some(intent), Some(task)) = (m.intent.as_deref(), m.task_id.as_deref()) else {
        return Ok(None);
    };
    let Ok(task) = TaskId::new(task) else { return Ok(None) };
    if !opens_task(ws, intent) {
        return Ok(None);
    }
    if let Some(st) = ws.engine.peek(&task)? {
        let s = st.rec.status;
        return Ok((s != crate::task::Status::New).then(|| s.as_str().to_string()));
    }
    Ok(ws.engine.archived_task(&task)?.map(|t| t.status))
}

/// A circe address as TX writes one: an agent (`agent:NAME`, or a bare name that is no
/// role) as `MESH/NAME` with this root's mesh name; `mesh/agent` as it is; a role and `all`
/// as they are (TX has no roles), as is everything when the root has no mesh name.
fn tx_address(ws: &Workspace, mesh: Option<&str>, a: &str) -> String {
    let Some(mesh) = mesh.filter(|_| !a.contains('/')) else { return a.to_string() };
    match crate::address::Address::parse(a) {
        crate::address::Address::Agent(n) => format!("{mesh}/{n}"),
        crate::address::Address::Bare(n) if !ws.registry.is_role(n) => format!("{mesh}/{n}"),
        _ => a.to_string(),
    }
}
