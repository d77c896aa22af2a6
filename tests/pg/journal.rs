//! A send's events in a database root: senders killed with -9 at random, some between the
//! statement that delivers and the one that logs. After `doctor --repair` every message
//! delivered has exactly one `send` event (the journal row the delivery inserts is logged
//! once, by whoever deletes it). With the journal off (`no-journal`) the checker sees
//! messages with no event. Directly and through PgBouncer, where a killed client's backend
//! lives on in the pool.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::caught::until_caught;
use crate::common::{Root, nap};

/// `agents` senders for `secs` seconds (plain messages to one agent and to all), a client
/// killed every `kill_ms`; returns the kills.
fn storm(root: &Root, agents: usize, secs: u64, kill_ms: u64) -> usize {
    let pids = Mutex::new(HashSet::new());
    let kills = Mutex::new(0usize);
    let until = Instant::now() + Duration::from_secs(secs);
    std::thread::scope(|s| {
        for slot in 0..agents {
            let pids = &pids;
            let me = format!("e{}", slot + 1);
            s.spawn(move || {
                let mut i = 0;
                while Instant::now() < until {
                    i += 1;
                    let to = if i % 3 == 0 { "all" } else { "coordinator" };
                    let args = ["send", "--to", to, "--intent", "inform", "--summary", "x"];
                    let child = root.command(Some(&me), &args).spawn().expect("spawn");
                    let pid = child.id();
                    pids.lock().unwrap().insert(pid);
                    let _ = child.wait_with_output();
                    pids.lock().unwrap().remove(&pid);
                }
            });
        }
        let (pids, kills) = (&pids, &kills);
        s.spawn(move || {
            while Instant::now() < until {
                nap(kill_ms);
                let Some(pid) = pids.lock().unwrap().iter().next().copied() else { continue };
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .stderr(std::process::Stdio::null())
                    .status();
                *kills.lock().unwrap() += 1;
            }
        });
    });
    kills.into_inner().unwrap()
}

/// After `doctor --repair`: every message an agent sent has exactly one `send` event.
fn send_event_problems(root: &Root) -> (usize, Vec<String>) {
    root.run(None, &["doctor", "--repair"]).ok();
    let eng = root.engine();
    let snap = circe::engine::Snapshot::read(&*eng).expect("read the root");
    let mut ids = HashSet::new();
    for (_, files) in &snap.boxes {
        for (_, bytes) in files {
            let m = circe::message::parse_bytes(bytes, circe::message::Mode::Draft).expect("parse");
            if m.from_agent().is_some_and(|a| a != "circe")
                && let Some(id) = m.msg_id
            {
                ids.insert(id);
            }
        }
    }
    let mut sent: BTreeMap<String, usize> = BTreeMap::new();
    for e in root.events() {
        if e.event.as_str() == "send"
            && let Some(id) = e.msg_id
        {
            *sent.entry(id).or_default() += 1;
        }
    }
    let mut p: Vec<String> = ids
        .iter()
        .filter_map(|id| match sent.get(id).copied().unwrap_or(0) {
            1 => None,
            n => Some(format!("message {id} has {n} send events")),
        })
        .collect();
    p.sort();
    (ids.len(), p)
}

#[test]
fn senders_killed_between_delivery_and_event_leave_every_message_one_send_event() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 3);
    let kills = storm(&root, 3, 6, 25);
    let (messages, p) = send_event_problems(&root);
    eprintln!("pg send events: {messages} messages, {kills} kills");
    assert!(messages > 20, "too few sends: {messages}");
    assert!(p.is_empty(), "{p:#?}");
    root.run(None, &["doctor"]).ok();
}

#[test]
fn the_send_event_checker_catches_senders_without_the_journal() {
    let c = need_pg!();
    let mut root = Root::new(&c.fresh_url(), "server", 3);
    root.env.push(("CIRCE_TEST_BREAK".into(), "no-journal".into()));
    let p = until_caught("pg send event checker", 4, Duration::from_secs(60), |_| {
        storm(&root, 3, 5, 20);
        send_event_problems(&root).1
    });
    assert!(p.iter().any(|x| x.contains("has 0 send events")), "not caught: {p:?}");
}

#[test]
fn through_pgbouncer_a_killed_senders_events_are_logged_once() {
    let c = need_pg!();
    let Some((_bouncer, root)) = crate::seq::pooled_root(c, 3, 3) else { return };
    let kills = storm(&root, 3, 5, 25);
    let (messages, p) = send_event_problems(&root);
    eprintln!("pg send events through PgBouncer: {messages} messages, {kills} kills");
    assert!(messages > 20, "too few sends: {messages}");
    assert!(p.is_empty(), "{p:#?}");
}

/// A send settles only its sender's numbered deliveries cut off before their events: a move
/// of e1's still under way (its row inserted, its event not logged yet) while e1 sends is
/// left to that move, which logs its own event, not a "logged late" one.
#[test]
fn a_send_leaves_its_senders_move_under_way_to_that_move() {
    use circe::boxes::Mailbox;
    use circe::event::{Event, EventKind};
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 1);
    let to_e1 = ["send", "--to", "e1", "--intent", "inform", "--summary", "x"];
    root.run(Some("coordinator"), &to_e1).ok();
    let sent = root.events().into_iter().find(|e| e.event == EventKind::Send).expect("sent");
    let (id, file) = (sent.msg_id.clone().unwrap(), sent.files[0].file.clone());
    let e1 = circe::names::AgentName::new("e1").unwrap();
    let (inbox, workspace) = (Mailbox::Inbox(e1.clone()), Mailbox::Workspace(e1));
    // e1's take, between its move and its event.
    let eng = root.engine();
    let take = Event::now(EventKind::Take, "e1").file(workspace.label(), file.clone());
    let j = eng.journal_move(&id, &inbox, &file, &take).unwrap().expect("a journal");
    assert_eq!(eng.file_message(&inbox, &workspace, &file).unwrap(), Some(file.clone()));
    // e1 sends meanwhile.
    root.run(Some("e1"), &["send", "--to", "coordinator", "--intent", "inform", "--summary", "y"])
        .ok();
    eng.append_events(vec![take]).unwrap();
    eng.close_journal(&j, true).unwrap();
    let takes: Vec<Event> = root
        .events()
        .into_iter()
        .filter(|e| e.event == EventKind::Take && e.files.first().is_some_and(|f| f.file == file))
        .collect();
    assert_eq!(takes.len(), 1, "{takes:#?}");
    assert_eq!(takes[0].what, None, "the live move's event was logged by the send: {takes:#?}");
}
