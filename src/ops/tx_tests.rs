//! TX at work, on both engines: asks and their one answer, task-complete through the gate,
//! prompts, deadlines, retired agents and their orphans, threads, routing rules.

use super::*;
use crate::message::Mode;

/// A TX front-matter message, as an agent writes it.
fn fm(text: &str) -> Message {
    crate::message::parse(text, Mode::Draft).unwrap()
}

fn inbox(ws: &Workspace, agent: &str) -> Vec<Message> {
    let b = Mailbox::Inbox(a(agent));
    ws.engine
        .list_box(&b)
        .unwrap()
        .iter()
        .map(|n| {
            crate::message::parse_bytes(&ws.engine.read_message(&b, n).unwrap(), Mode::Draft)
                .unwrap()
        })
        .collect()
}

fn refused(r: crate::error::Result<Delivery>) -> crate::error::Error {
    let e = r.unwrap_err();
    assert_eq!(e.kind, Kind::Refused, "{e:?}");
    e
}

on_both_engines! {
    /// An ask stays open until the one ask-response from an agent it was addressed to; the
    /// answer inherits the ask's task; a second answer is refused; a retry changes nothing.
    fn an_ask_waits_for_one_answer(ws) {
        send(ws, &a("engineer"), fm("---\nto: qa\ntype: ask\nmsg-id: ask-1\ntask-id: T-9\nheadline: Which tests?\n---\n\nWhich tests cover auth?\n")).unwrap();
        let open = asks::list(ws, false).unwrap();
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].ask.recipients, [a("qa")]);
        let e = refused(send(ws, &a("qa"), fm("---\nto: engineer\ntype: ask-response\n---\nx\n")));
        assert!(e.hint.unwrap().contains("ask-1"), "the hint names the open ask");
        refused(send(ws, &a("engineer-2"), fm("---\nto: engineer\ntype: ask-response\nin-reply-to: ask-1\n---\nx\n")));
        refused(send(ws, &a("qa"), fm("---\nto: engineer\ntype: ask-response\nin-reply-to: nope-1\n---\nx\n")));
        assert!(inbox(ws, "engineer").is_empty(), "refusals write nothing");
        let answer = "---\nto: engineer\ntype: ask-response\nstatus: complete\nmsg-id: r-1\nin-reply-to: ask-1\n---\n\nThe auth suite.\n";
        send(ws, &a("qa"), fm(answer)).unwrap();
        let got = inbox(ws, "engineer");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].task_id.as_deref(), Some("T-9"), "the answer joins the ask's task");
        assert!(asks::list(ws, false).unwrap().is_empty(), "answered");
        let all = asks::list(ws, true).unwrap();
        assert_eq!((all[0].ask.state, all[0].ask.answer.as_deref()), (crate::tx::AskState::Answered, Some("r-1")));
        let e = refused(send(ws, &a("qa"), fm("---\nto: engineer\ntype: ask-response\nmsg-id: r-2\nin-reply-to: ask-1\n---\nmore\n")));
        assert!(e.message.contains("answered already"), "{}", e.message);
        assert!(send(ws, &a("qa"), fm(answer)).unwrap().already_delivered, "the same answer again");
        assert_eq!(inbox(ws, "engineer").len(), 1);
    }

    /// An ask marked `answering` by an answer still under way (it holds the ask) is left
    /// alone: not reopened, not expired by `reap`, not answered by another; once its holder
    /// is gone the mark is a crash's leftover and is settled (open again, then expired).
    fn an_answer_under_way_is_left_alone(ws) {
        send(ws, &a("engineer"), fm("---\nto: qa\ntype: ask\nmsg-id: ask-2\ndeadline: 2025-11-21T17:30:00Z\n---\n?\n")).unwrap();
        let rec = ws.engine.ask(&crate::names::MsgId::new("ask-2").unwrap()).unwrap().unwrap();
        let held = ws.engine.hold_ask(&rec.msg_id, false).unwrap().expect("free");
        assert!(ws.engine.hold_ask(&rec.msg_id, false).unwrap().is_none(), "one holder");
        let marked = asks::answering(ws, &a("qa"), &rec, "r-9").unwrap();
        ws.pin_clock(t(31));
        assert!(deadline::reap_messages(ws).unwrap().asks.is_empty(), "not expired under way");
        assert_eq!(asks::settle(ws, marked.clone()).unwrap().state, crate::tx::AskState::Answering);
        drop(held);
        assert_eq!(asks::settle(ws, marked).unwrap().state, crate::tx::AskState::Open, "its answer never landed");
        assert_eq!(deadline::reap_messages(ws).unwrap().asks, ["ask-2"]);
    }

    /// A TX task opens a task named by its msg-id; its task-complete completes it through the
    /// same gate as `status completed` (started first, checks passed), and is delivered once.
    fn a_task_complete_completes_its_task(ws) {
        let d = send(ws, &a("coordinator"), fm("---\nto: engineer\ntype: task\nmsg-id: task-001\n---\n\nReview `lib/auth/`.\n")).unwrap();
        assert_eq!(d.task.unwrap().record.task_id.as_str(), "task-001");
        let eng = a("engineer");
        claim(ws, &eng, "engineer", &id("task-001"), None).unwrap();
        let done = "---\nto: coordinator\ntype: task-complete\nstatus: complete\nmsg-id: complete-001\nin-reply-to: task-001\n---\n\nReview complete.\n";
        let e = refused(send(ws, &eng, fm(done)));
        assert!(e.message.contains("start it"), "{}", e.message);
        assert!(inbox(ws, "coordinator").is_empty());
        set_status(ws, &eng, &id("task-001"), Status::InProgress, None, None).unwrap();
        send(ws, &eng, fm(done)).unwrap();
        assert_eq!(ws.engine.peek(&id("task-001")).unwrap().unwrap().rec.status, Status::Completed);
        let got = inbox(ws, "coordinator");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].task_id.as_deref(), Some("task-001"), "inherited from in-reply-to");
        assert!(send(ws, &eng, fm(done)).unwrap().already_delivered);
        refused(send(ws, &eng, fm("---\nto: coordinator\ntype: task-complete\nmsg-id: c-2\nin-reply-to: task-001\n---\nagain\n")));
        let k = kinds(ws);
        assert_eq!(&k[k.len() - 2..], [EventKind::Complete, EventKind::Send]);
        // Checks gate it like `status completed`.
        open(ws, "I-1", None);
        claim(ws, &eng, "engineer", &id("I-1"), None).unwrap();
        set_status(ws, &eng, &id("I-1"), Status::InProgress, None, None).unwrap();
        let fin = "---\nto: coordinator\ntype: task-complete\ntask-id: I-1\nmsg-id: c-3\n---\ndone\n";
        let e = refused(send(ws, &eng, fm(fin)));
        assert!(e.message.contains("tests_passed"), "{}", e.message);
        assert_eq!(inbox(ws, "coordinator").len(), 1, "nothing delivered while refused");
        check_set(ws, &eng, &id("I-1"), &CheckName::new("tests_passed").unwrap(), true, None).unwrap();
        send(ws, &eng, fm(fin)).unwrap();
        assert_eq!(inbox(ws, "coordinator").len(), 2);
    }

    /// A prompt (TX writes it `from: system`; a coordinator sends it) becomes the agent's
    /// current prompt; others may not send one.
    fn a_prompt_is_the_current_prompt(ws) {
        let p = "---\nto: engineer\nfrom: system\ntype: prompt\nstatus: start\nmsg-id: prompt-1\n---\n\n# You are the engineer\n";
        send(ws, &a("coordinator"), fm(p)).unwrap();
        let cur = current_prompt(ws, &a("engineer")).unwrap().unwrap();
        assert_eq!((cur.from.as_deref(), cur.msg_id.as_deref()), (Some("system"), Some("prompt-1")));
        assert!(cur.text.contains("You are the engineer"));
        assert!(current_prompt(ws, &a("qa")).unwrap().is_none());
        refused(send(ws, &a("engineer"), fm(&p.replace("prompt-1", "prompt-2"))));
        refused(send(ws, &a("engineer"), fm("---\nto: qa\ntype: prompt\n---\nx\n")));
        assert_eq!(current_prompt(ws, &a("engineer")).unwrap().unwrap().msg_id.as_deref(), Some("prompt-1"));
    }

    /// Deadlines: a message past its deadline is not sent; `claim --next` takes priority, then
    /// deadline, then age; past its deadline a task is not claimed or completed, and `reap`
    /// expires it (its message into LOGS, the coordinators told).
    fn deadlines(ws) {
        let task = |id: &str, deadline: Option<&str>| {
            let d = deadline.map_or_else(String::new, |d| format!("deadline: {d}\n"));
            fm(&format!("---\nto: engineer\ntype: task\nmsg-id: {id}\n{d}---\nwork\n"))
        };
        refused(send(ws, &a("coordinator"), task("late", Some("2025-11-21T16:00:00Z"))));
        ws.pin_clock(t(0));
        send(ws, &a("coordinator"), task("none", None)).unwrap();
        ws.pin_clock(t(1));
        send(ws, &a("coordinator"), task("d30", Some("2025-11-21T17:30:00Z"))).unwrap();
        ws.pin_clock(t(2));
        send(ws, &a("coordinator"), task("d10", Some("2025-11-21T17:10:00Z"))).unwrap();
        let eng = a("engineer");
        let order: Vec<String> =
            (0..3).map(|_| claim_next(ws, &eng, "engineer", None).unwrap().task.to_string()).collect();
        assert_eq!(order, ["d10", "d30", "none"]);
        set_status(ws, &eng, &id("d10"), Status::InProgress, None, None).unwrap();
        ws.pin_clock(t(11));
        let e = set_status(ws, &eng, &id("d10"), Status::Completed, None, None).unwrap_err();
        assert!(e.message.contains("deadline"), "{}", e.message);
        send(ws, &a("coordinator"), task("d20", Some("2025-11-21T17:20:00Z"))).unwrap();
        ws.pin_clock(t(21));
        let e = claim(ws, &eng, "engineer", &id("d20"), None).unwrap_err();
        assert_eq!(e.kind, Kind::Refused);
        assert_eq!(claim_next(ws, &eng, "engineer", None).unwrap_err().kind, Kind::NothingToClaim);
        let reaped = reap(ws, "circe").unwrap();
        assert_eq!(reaped, [(id("d10"), Status::Expired), (id("d20"), Status::Expired)]);
        let d10 = ws.engine.peek(&id("d10")).unwrap().unwrap();
        assert_eq!((d10.location, d10.rec.owner), (Some(Mailbox::Logs), Some(eng.clone())));
        assert_eq!(inbox(ws, "coordinator").len(), 2, "a status_update per expired task");
        assert_eq!(claim(ws, &eng, "engineer", &id("d20"), None).unwrap_err().kind, Kind::Refused);
        assert!(reap(ws, "circe").unwrap().is_empty(), "expired is final");
        // An unread message past its deadline is filed; an unanswered ask expires.
        ws.pin_clock(t(30));
        send(ws, &a("qa"), fm("---\nto: engineer\ntype: update\ndeadline: 2025-11-21T17:40:00Z\n---\nfyi\n")).unwrap();
        send(ws, &a("qa"), fm("---\nto: engineer\ntype: ask\nmsg-id: q-1\ndeadline: 2025-11-21T17:40:00Z\n---\n?\n")).unwrap();
        ws.pin_clock(t(41));
        let lapsed = deadline::reap_messages(ws).unwrap();
        assert_eq!(lapsed.asks, ["q-1"]);
        // `to: engineer` is the role: engineer and engineer-2 each hold a copy of both.
        assert_eq!(lapsed.filed.len(), 4, "the update and the ask, unread: {lapsed:?}");
        // Every copy keeps its place in LOGS: the second under a numbered name.
        let logs = ws.engine.list_box(&Mailbox::Logs).unwrap();
        for n in ["20251121_173000_qa-engineer_ask.md", "20251121_173000_qa-engineer_ask.2.md"] {
            assert!(logs.iter().any(|f| f == n), "{n} not in LOGS: {logs:?}");
        }
        assert_eq!(inbox(ws, "qa").len(), 1, "the asker is told");
        refused(send(ws, &a("engineer"), fm("---\nto: qa\ntype: ask-response\nin-reply-to: q-1\n---\nlate\n")));
    }

    /// A retired agent's held tasks go back to the queue; what it leaves, or what reaches it
    /// later, is an orphan a coordinator redelivers.
    fn retired_agents_leave_orphans(ws) {
        let e2 = a("engineer-2");
        send(ws, &a("coordinator"), fm("---\nto: engineer-2\ntype: task\nmsg-id: T-A\n---\nyours\n")).unwrap();
        open(ws, "T-B", None);
        claim(ws, &e2, "engineer", &id("T-B"), None).unwrap();
        send(ws, &a("qa"), fm("---\nto: engineer-2\ntype: update\nmsg-id: u-1\n---\nfyi\n")).unwrap();
        let e = orphans::retire(ws, &a("engineer"), &e2).unwrap_err();
        assert_eq!(e.kind, Kind::Refused, "only a coordinator retires");
        let r = orphans::retire(ws, &a("coordinator"), &e2).unwrap();
        assert_eq!(r.released, [id("T-B")]);
        assert_eq!(ws.engine.peek(&id("T-B")).unwrap().unwrap().rec.status, Status::New);
        assert_eq!(ws.agent(Some("engineer-2")).unwrap_err().kind, Kind::Refused);
        send(ws, &a("qa"), fm("---\nto: engineer-2\ntype: update\nmsg-id: u-2\n---\nlater\n")).unwrap();
        let o = orphans::list(ws).unwrap();
        let ids: Vec<&str> = o.messages.iter().filter_map(|m| m.msg_id.as_deref()).collect();
        assert_eq!(ids, ["u-1", "u-2"]);
        assert_eq!(o.tasks.iter().map(|t| t.task.as_str()).collect::<Vec<_>>(), ["T-A"]);
        assert!(kinds(ws).contains(&EventKind::Orphan));
        orphans::redeliver(ws, &a("coordinator"), "u-1", &a("qa")).unwrap();
        assert_eq!(inbox(ws, "qa").len(), 1);
        orphans::redeliver(ws, &a("coordinator"), "T-A", &a("engineer")).unwrap();
        let c = claim(ws, &a("engineer"), "engineer", &id("T-A"), None).unwrap();
        assert_eq!(c.owner, a("engineer"));
        let o = orphans::list(ws).unwrap();
        assert_eq!((o.messages.len(), o.tasks.len()), (1, 0));
        let e = orphans::redeliver(ws, &a("coordinator"), "u-2", &e2).unwrap_err();
        assert_eq!(e.kind, Kind::Refused, "not to a retired agent");
        // An open ask moves with its message: its new recipient answers it.
        send(ws, &a("qa"), fm("---\nto: engineer-2\ntype: ask\nmsg-id: q-9\n---\n?\n")).unwrap();
        orphans::redeliver(ws, &a("coordinator"), "q-9", &a("engineer")).unwrap();
        send(ws, &a("engineer"), fm("---\nto: qa\ntype: ask-response\nin-reply-to: q-9\n---\nyes\n")).unwrap();
        assert!(asks::list(ws, false).unwrap().is_empty());
    }

    /// Replies join their thread's task; the thread reads as a tree from its first message.
    fn threads(ws) {
        send(ws, &a("engineer"), fm("---\nto: qa\ntype: ask\nmsg-id: ask-1\ntask-id: T-9\n---\nWhich tests?\n")).unwrap();
        send(ws, &a("qa"), fm("---\nto: engineer\ntype: ask-response\nmsg-id: r-1\nin-reply-to: ask-1\n---\nThe auth suite.\n")).unwrap();
        send(ws, &a("engineer"), fm("---\nto: qa\ntype: update\nmsg-id: u-1\nin-reply-to: r-1\n---\nThanks, running it.\n")).unwrap();
        send(ws, &a("qa"), fm("---\nto: engineer\ntype: update\nmsg-id: u-2\nin-reply-to: ask-1\n---\nAlso e2e.\n")).unwrap();
        let root = thread::thread(ws, "u-1").unwrap();
        assert_eq!(root.msg_id, "ask-1");
        let kids: Vec<&str> = root.replies.iter().map(|n| n.msg_id.as_str()).collect();
        assert_eq!(kids, ["r-1", "u-2"]);
        assert_eq!(root.replies[0].replies[0].msg_id, "u-1");
        assert_eq!(root.replies[0].replies[0].task_id.as_deref(), Some("T-9"));
        let text = thread::render(&root);
        assert!(text.contains("└─ u-1"), "{text}");
        assert_eq!(thread::thread(ws, "nope").unwrap_err().kind, Kind::NotFound);
    }
}

/// The same body on a local root and an in-memory one, both with `config`.
fn both(config: &str, body: impl Fn(&Workspace)) {
    let dir = tempfile::tempdir().unwrap();
    let (root, _) = crate::engine::local::init(dir.path(), config).unwrap();
    let setup = Workspace::open(&RootSpec::Path(root.clone())).unwrap();
    add_agents(&setup);
    let local = Workspace::open(&RootSpec::Path(root)).unwrap();
    local.pin_clock(t(0));
    body(&local);
    let cfg = Config::parse(config).unwrap();
    let setup = Workspace::with_engine(Box::new(MemoryEngine::new()), cfg.clone()).unwrap();
    add_agents(&setup);
    let mem = Workspace::with_engine(setup.engine, cfg).unwrap();
    mem.pin_clock(t(0));
    body(&mem);
}

/// Routing rules fire on an agent's task moves and on its messages' statuses, once each; what
/// circe routes fires nothing further.
#[test]
fn routing_rules_fire_once() {
    let config = format!(
        "{DEFAULT_CONFIG}routing:\n  engineer:\n    complete: {{qa: Ready for testing}}\n    blocked: {{coordinator: Engineer is blocked}}\n  qa:\n    approved: {{engineer: \"Approved, go on\"}}\n    complete: {{coordinator: qa finished}}\n"
    );
    both(&config, |ws| {
        let eng = a("engineer");
        open(ws, "R-1", None);
        claim(ws, &eng, "engineer", &id("R-1"), None).unwrap();
        set_status(ws, &eng, &id("R-1"), Status::InProgress, None, None).unwrap();
        set_status(ws, &eng, &id("R-1"), Status::Blocked, None, None).unwrap();
        let co = inbox(ws, "coordinator");
        assert_eq!(co.len(), 1);
        assert_eq!(
            co[0].extra.iter().find(|(k, _)| k == "routed-by").map(|(_, v)| v.as_str()),
            Some("engineer.blocked")
        );
        set_status(ws, &eng, &id("R-1"), Status::InProgress, None, None).unwrap();
        check_set(ws, &eng, &id("R-1"), &CheckName::new("tests_passed").unwrap(), true, None)
            .unwrap();
        set_status(ws, &eng, &id("R-1"), Status::Completed, None, None).unwrap();
        let qa = inbox(ws, "qa");
        assert_eq!(qa.len(), 1, "one routed message per move");
        assert_eq!(qa[0].headline.as_deref(), Some("Ready for testing"));
        assert_eq!(qa[0].task_id.as_deref(), Some("R-1"));
        assert_eq!(kinds(ws).iter().filter(|k| **k == EventKind::Route).count(), 2);
        // A message's status fires its sender's rules, in the same delivery.
        send(ws, &a("qa"), fm("---\nto: coordinator\ntype: update\nstatus: approved\nmsg-id: ok-1\n---\nLooks good\n")).unwrap();
        let routed = |ws: &Workspace| -> Vec<Message> {
            inbox(ws, "engineer")
                .into_iter()
                .filter(|m| m.from.as_deref() == Some("circe"))
                .collect()
        };
        let e = routed(ws);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].in_reply_to.as_deref(), Some("ok-1"));
        assert_eq!(inbox(ws, "coordinator").len(), 2, "the update itself, and no more");
        // Statuses no rule names send nothing.
        send(ws, &a("qa"), fm("---\nto: coordinator\ntype: update\nstatus: rejected\n---\nno\n"))
            .unwrap();
        assert_eq!(routed(ws).len(), 1);
    });
}
