//! `circe board`: the live board, driven in tmux as a person would (send-keys to type,
//! capture-pane to read the screen), and its one-shot table when stdout is no terminal.

use crate::common::{Env, exe};
use crate::tmux::Tmux;

fn open(env: &Env, task: &str, summary: &str) {
    env.as_(
        "coordinator",
        &[
            "send",
            "--to",
            "role:engineer",
            "--intent",
            "implement_feature",
            "--task",
            task,
            "--summary",
            summary,
        ],
    )
    .ok();
}

#[test]
fn the_live_board_follows_the_log_and_answers_keys() {
    local_only!("the terminal runs with the environment tmux passes on, not the database's");
    let env = Env::new();
    open(&env, "BOARD-1", "first");
    let tmux = live_board(&env, "");
    // Waited for whole: a capture can catch the screen half drawn.
    tmux.until("the board with BOARD-1 and the agents' inboxes", |s| {
        s.contains("circe board")
            && s.contains("BOARD-1")
            && s.contains("AGENT")
            && s.contains("engineer")
    });
    // A change elsewhere shows up without a key pressed: the event feed woke the board.
    open(&env, "BOARD-2", "second");
    env.as_("engineer", &["claim", "BOARD-1"]).ok();
    tmux.until("BOARD-2 and BOARD-1 claimed", |s| {
        s.contains("BOARD-2")
            && s.lines().any(|l| l.starts_with("│BOARD-1") && l.contains("claimed"))
    });
    tmux.until("the claim event", |s| s.contains("claim") && s.contains("new -> claimed"));
    // `/` filters.
    tmux.keys(&["/"]);
    tmux.keys(&["BOARD-2", "Enter"]);
    let s = tmux.until("only BOARD-2", |s| {
        s.contains("filter: BOARD-2") && !s.lines().any(|l| l.starts_with("│BOARD-1"))
    });
    assert!(s.contains("1 tasks shown of 2"), "{s}");
    // Enter opens the selected task; Esc goes back.
    tmux.keys(&["Enter"]);
    tmux.until("the task's record", |s| {
        s.contains("task BOARD-2 (Esc: back)") && s.contains("opened_by: coordinator")
    });
    tmux.keys(&["Escape"]);
    tmux.until("the list again", |s| !s.contains("(Esc: back)"));
    // `s` cycles the status shown.
    tmux.keys(&["s"]);
    tmux.until("status new", |s| s.contains("status: new"));
    tmux.quit();
}

#[test]
fn without_a_terminal_the_board_prints_once() {
    let env = Env::new();
    open(&env, "BOARD-1", "first");
    let o = env.circe(["board"]).run();
    o.ok();
    assert!(o.stdout.contains("BOARD-1") && o.stdout.contains("INBOX"), "{}", o.show());
    assert!(o.stdout.contains("latest events") && o.stdout.contains("open"), "{}", o.show());
    // The JSON counts an agent's INBOX under the name `prime --json` gives it.
    env.as_("engineer", &["send", "--to", "qa", "--intent", "inform", "--summary", "x"]).ok();
    let board = env.circe(["board", "--json"]).run().json();
    let qa = board["agents"].as_array().unwrap().iter().find(|a| a["agent"] == "qa").cloned();
    assert_eq!(qa.unwrap()["inbox_count"], 1, "{board}");
    let prime = env.as_("qa", &["prime", "--json"]).json();
    assert_eq!(prime["inbox_count"], 1, "{prime}");
    // Without an acting agent there is no INBOX to count: null, as the agent is.
    let nobody = env.circe(["prime", "--json"]).run().json();
    let counts = (&nobody["agent"], &nobody["inbox_count"], &nobody["open_questions"]);
    let null = serde_json::Value::Null;
    assert_eq!(counts, (&null, &null, &null), "{nobody}");
    assert!(!qa_retired(&env));
    env.as_("coordinator", &["agent", "retire", "qa"]).ok();
    assert!(qa_retired(&env), "a retired agent is said so, as `agent list` says it");
}

fn qa_retired(env: &Env) -> bool {
    let board = env.circe(["board", "--json"]).run().json();
    let qa = board["agents"].as_array().unwrap().iter().find(|a| a["agent"] == "qa").cloned();
    qa.unwrap()["retired"].as_bool().expect("retired: a boolean")
}

/// One agent's folder that cannot be read (a link stands there) does not take the board
/// away from the others: its INBOX count is `?` (`null` in JSON), and the board says why.
#[test]
fn the_board_shows_an_inbox_it_cannot_read_as_unknown() {
    local_only!("moves an agent's folder by hand");
    let env = Env::new();
    open(&env, "BOARD-1", "first");
    env.link_away("AGENTS/qa");
    let o = env.circe(["board"]).run();
    o.ok();
    assert!(o.stdout.contains("BOARD-1"), "{}", o.show());
    assert!(o.stdout.contains("the INBOX cannot be read; `circe doctor` says why"), "{}", o.show());
    let board = env.circe(["board", "--json"]).run().json();
    let agent = |n: &str| {
        board["agents"].as_array().unwrap().iter().find(|a| a["agent"] == n).cloned().unwrap()
    };
    assert!(agent("qa")["inbox_count"].is_null(), "{board}");
    assert_eq!(agent("engineer")["inbox_count"], 0, "{board}");
    // Another agent's start is not taken away either. Asked nothing, it has no question
    // waiting, whatever the other boxes hold; asked one, whether it is answered is unknown.
    let prime = env.as_("engineer", &["prime", "--json"]);
    assert_eq!(prime.json()["open_questions"], 0, "{}", prime.show());
    let ask = ["send", "--to", "agent:engineer", "--intent", "question", "--summary", "why?"];
    env.as_("coordinator", &ask).ok();
    let prime = env.as_("engineer", &["prime", "--json"]);
    assert!(prime.json()["open_questions"].is_null(), "{}", prime.show());
    let text = env.as_("engineer", &["prime"]);
    assert!(
        text.ok().stdout.contains("questions waiting for your answer: unknown"),
        "{}",
        text.show()
    );
}

/// SIGTERM (or SIGHUP) ends the live board as `q` does: the terminal is given back as it
/// was (canonical mode, the main screen), not left raw for the shell that follows.
#[test]
fn sigterm_ends_the_board_and_gives_the_terminal_back() {
    local_only!("the terminal runs with the environment tmux passes on, not the database's");
    let env = Env::new();
    open(&env, "BOARD-1", "first");
    let tmux = Tmux { socket: format!("circe-test-term-{}", std::process::id()) };
    let env_vars = board_env(&env);
    let script = format!(
        "sh -c '{} board; echo board-ended; stty -a | tr \" \" \"\\n\" | grep -x -- -*icanon; sleep 30'",
        exe().display()
    );
    tmux.start(&env_vars, &script);
    tmux.until("the board", |s| s.contains("circe board") && s.contains("BOARD-1"));
    let shell = tmux.run(&["list-panes", "-t", "board", "-F", "#{pane_pid}"]);
    let board = std::process::Command::new("pgrep").args(["-P", shell.trim()]).output().unwrap();
    let sh = String::from_utf8_lossy(&board.stdout).trim().to_string();
    // The pane runs sh -c: its child is circe (or sh's child is).
    let inner = std::process::Command::new("pgrep").args(["-P", &sh]).output().unwrap();
    let pid = String::from_utf8_lossy(&inner.stdout).trim().to_string();
    let pid = if pid.is_empty() { sh } else { pid };
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let s = tmux.until("the shell after the board", |s| s.contains("board-ended"));
    let s = if s.contains("icanon") { s } else { tmux.until("stty", |s| s.contains("icanon")) };
    assert!(s.lines().any(|l| l.trim() == "icanon"), "the terminal was left raw:\n{s}");
    assert!(!s.contains("circe board"), "still on the board's screen:\n{s}");
}

/// The board counts an INBOX as `prime` does: `inbox_count` the new messages only, and the
/// stale ones apart (`stale_count`; a STALE column in the text once an agent has one).
#[test]
fn the_board_counts_stale_messages_apart_as_prime_does() {
    let env = Env::new();
    let o = env.circe(["board", "--once"]).run();
    assert!(!o.ok().stdout.contains("STALE"), "{}", o.show());
    let send = |summary: &str| {
        let args = ["send", "--to", "coordinator", "--intent", "status_update", "--summary"];
        let o = env.as_("engineer", &[&args[..], &[summary, "--json"]].concat());
        o.json()["msg_id"].as_str().unwrap().to_string()
    };
    send("first");
    let second = send("second");
    send("third");
    // Handing on #2 makes #1 stale; #3 stays new.
    env.as_("coordinator", &["done", &second]).ok();
    let prime = env.as_("coordinator", &["prime", "--json"]).json();
    assert_eq!((&prime["inbox_count"], &prime["stale_count"]), (&1.into(), &1.into()), "{prime}");
    let board = env.circe(["board", "--json"]).run().json();
    let agent = |n: &str| {
        board["agents"].as_array().unwrap().iter().find(|a| a["agent"] == n).cloned().unwrap()
    };
    let boss = agent("coordinator");
    assert_eq!((&boss["inbox_count"], &boss["stale_count"]), (&1.into(), &1.into()), "{board}");
    let qa = agent("qa");
    assert_eq!((&qa["inbox_count"], &qa["stale_count"]), (&0.into(), &0.into()), "{board}");
    let o = env.circe(["board", "--once"]).run();
    o.ok();
    let header = o.stdout.lines().find(|l| l.starts_with("AGENT")).unwrap_or_default();
    assert_eq!(header.split_whitespace().collect::<Vec<_>>(), ["AGENT", "ROLE", "INBOX", "STALE"]);
    let line = o.stdout.lines().find(|l| l.starts_with("coordinator ")).unwrap_or_default();
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>(),
        ["coordinator", "coordinator", "1", "1"]
    );
}

/// The live board counts an INBOX as `board --once` does: the new messages under INBOX, the
/// stale ones under STALE, shown once an agent has one and counted again as events come.
#[test]
fn the_live_board_counts_stale_messages_apart() {
    local_only!("the terminal runs with the environment tmux passes on, not the database's");
    let env = Env::new();
    let send = |summary: &str| {
        let args = ["send", "--to", "coordinator", "--intent", "status_update", "--summary"];
        let o = env.as_("engineer", &[&args[..], &[summary, "--json"]].concat());
        o.json()["msg_id"].as_str().unwrap().to_string()
    };
    send("first");
    let second = send("second");
    send("third");
    let tmux = live_board(&env, "stale-");
    let cells = |s: &str| -> Vec<Vec<String>> {
        s.lines()
            .map(|l| l.split('│').nth(3).unwrap_or_default())
            .map(|c| c.split_whitespace().map(str::to_string).collect())
            .collect()
    };
    let s = tmux.until("the agents", |s| s.contains("AGENT") && s.contains("coordinator"));
    assert!(!s.contains("STALE"), "{s}");
    assert!(
        cells(&s).contains(&vec!["coordinator".into(), "coordinator".into(), "3".into()]),
        "{s}"
    );
    // Handing on #2 makes #1 stale; #3 stays new.
    env.as_("coordinator", &["done", &second]).ok();
    let want: Vec<String> = ["coordinator", "coordinator", "1", "1"].map(String::from).to_vec();
    let s = tmux.until("one new, one stale", |s| cells(s).contains(&want));
    assert!(s.contains("STALE"), "{s}");
    tmux.quit();
}

/// `board --once` says in its text what its JSON says: a retired agent is marked so.
#[test]
fn the_one_shot_board_marks_a_retired_agent() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    env.as_("coordinator", &["agent", "retire", "engineer-2"]).ok();
    let o = env.circe(["board", "--once"]).run();
    o.ok();
    let line = o.stdout.lines().find(|l| l.starts_with("engineer-2")).unwrap_or_default();
    assert!(line.starts_with("engineer-2 (retired)"), "{}", o.show());
    let line = o.stdout.lines().find(|l| l.starts_with("engineer ")).unwrap_or_default();
    assert!(!line.contains("retired"), "{}", o.show());
}

/// `tasks` and `board --once` show a DUE column (time left before the deadline) when a task
/// shown has a deadline, and none otherwise.
#[test]
fn the_tables_show_a_deadline_when_a_task_has_one() {
    let env = Env::new();
    open(&env, "NODL-1", "no deadline");
    for args in [&["tasks"][..], &["board", "--once"]] {
        let o = env.circe(args).run();
        assert!(!o.stdout.contains("DUE"), "{}", o.show());
    }
    env.open_task_due("DL-1", "role:engineer", "2025-11-21T19:00:00Z");
    for args in [&["tasks"][..], &["board", "--once"]] {
        let o = env.circe(args).run();
        o.ok();
        assert!(o.stdout.contains(" DUE "), "{}", o.show());
        let dl = o.stdout.lines().find(|l| l.starts_with("DL-1")).unwrap_or_default();
        assert!(dl.contains(" 2h00m "), "{}", o.show());
        let none = o.stdout.lines().find(|l| l.starts_with("NODL-1")).unwrap_or_default();
        assert!(none.split_whitespace().filter(|c| *c == "-").count() >= 3, "{}", o.show());
    }
    let o = env.circe(["tasks"]).now("2025-11-21T19:00:00Z").run();
    let dl = o.stdout.lines().find(|l| l.starts_with("DL-1")).unwrap_or_default();
    assert!(dl.contains(" passed "), "{}", o.show());
}

/// The live board shows DUE as `board --once` does: the column once a task on the board has
/// a deadline, the time left in it (`-` for a task without one).
#[test]
fn the_live_board_shows_a_deadline_when_a_task_has_one() {
    local_only!("the terminal runs with the environment tmux passes on, not the database's");
    let env = Env::new();
    open(&env, "NODL-1", "no deadline");
    let tmux = live_board(&env, "due-");
    let row = |s: &str, task: &str| -> Vec<String> {
        let line = s.lines().find(|l| l.starts_with(&format!("│{task} "))).unwrap_or_default();
        let cells = line.split('│').nth(1).unwrap_or_default();
        cells.split_whitespace().map(str::to_string).collect()
    };
    let s = tmux.until("NODL-1", |s| s.contains("│NODL-1") && s.contains("AGENT"));
    assert!(!s.contains(" DUE "), "{s}");
    env.open_task_due("DL-1", "role:engineer", "2025-11-21T19:00:00Z");
    let s = tmux.until("DL-1", |s| s.contains("│DL-1"));
    let header = row(&s, "TASK");
    assert_eq!(header.get(6).map(String::as_str), Some("DUE"), "{s}");
    assert_eq!(row(&s, "DL-1").get(6).map(String::as_str), Some("2h00m"), "{s}");
    assert_eq!(row(&s, "NODL-1").get(6).map(String::as_str), Some("-"), "{s}");
    tmux.quit();
}

/// `tasks --owner` says what it lists: the tasks the agent holds and those finished while
/// it held them (the record keeps its last holder).
#[test]
fn tasks_owner_lists_what_its_help_says() {
    let env = Env::new();
    env.complete_task("DONE-1");
    env.open_task("HELD-1");
    env.as_("engineer", &["claim", "HELD-1"]).ok();
    let o = env.circe(["tasks", "--owner", "engineer"]).run();
    assert!(o.stdout.contains("DONE-1") && o.stdout.contains("HELD-1"), "{}", o.show());
    let h = env.circe(["help", "tasks"]).run();
    assert!(
        h.stdout.contains("those it holds, and those that were completed, failed or expired"),
        "{}",
        h.show()
    );
}

/// A task whose board line is longer than most (many long check names) is listed after a
/// change like any other: the line was read into a fixed buffer, and one cut short said
/// nothing, so the task left every listing (and a compaction kept it out).
#[test]
fn a_task_with_a_long_board_line_stays_listed() {
    let env = Env::new();
    let checks: Vec<String> = (0..36).map(|i| format!("c{i:02}_{}", "x".repeat(56))).collect();
    let cfg = env.circe(["config"]).run().stdout.clone();
    assert!(cfg.contains("  intents: {}"), "{cfg}");
    env.set_config(&cfg.replace(
        "  intents: {}",
        &format!(
            "  intents:\n    bigwork: {{from: [coordinator], to: [engineer], opens_task: true, checks: [{}]}}",
            checks.join(", ")
        ),
    ));
    let args = ["send", "--to", "engineer", "--intent", "bigwork", "--task", "BIG-1"];
    env.as_("coordinator", &[&args[..], &["--summary", "big"]].concat()).ok();
    env.as_("engineer", &["claim", "BIG-1"]).ok();
    for _ in 0..3 {
        env.as_("engineer", &["heartbeat", "BIG-1"]).ok();
        let rows = env.circe(["tasks", "--json"]).run().json()["tasks"].clone();
        let big = rows.as_array().unwrap().iter().find(|r| r["task_id"] == "BIG-1").cloned();
        assert_eq!(big.map(|r| r["checks_total"].clone()), Some(serde_json::json!(36)), "{rows}");
    }
    let held = env.as_("engineer", &["--json", "prime"]).json()["held"].clone();
    assert_eq!(held.as_array().map(Vec::len), Some(1), "{held}");
}

/// Send a `status_update` as `from` to the coordinator; its msg_id.
fn update(env: &Env, from: &str, summary: &str) -> String {
    let args = ["send", "--to", "coordinator", "--intent", "status_update", "--summary", summary];
    let o = env.as_(from, &[&args[..], &["--json"]].concat());
    o.json()["msg_id"].as_str().unwrap().to_string()
}

/// (new, stale) of `agent` as `inbox`, `prime` and the board count them; the three agree.
fn counted(env: &Env, agent: &str) -> (u64, u64) {
    let inbox = env.as_(agent, &["inbox", "--json"]).json();
    let len = |k: &str| inbox[k].as_array().map_or(0, |a| a.len() as u64);
    let by_inbox = (len("messages"), len("stale"));
    let prime = env.as_(agent, &["prime", "--json"]).json();
    let by_prime = (prime["inbox_count"].as_u64().unwrap(), prime["stale_count"].as_u64().unwrap());
    let board = env.circe(["board", "--json"]).run().json();
    let row = board["agents"].as_array().unwrap().iter().find(|a| a["agent"] == agent).unwrap();
    let by_board = (row["inbox_count"].as_u64().unwrap(), row["stale_count"].as_u64().unwrap());
    assert_eq!((by_prime, by_board), (by_inbox, by_inbox), "{agent}: prime, board, inbox");
    by_inbox
}

/// An INBOX of new and stale messages from several senders, a sender reset to a new epoch,
/// and a claimed task's ticket numbered below what its agent saw (never stale): `prime` and
/// the board count it as `inbox` sorts it, again and again.
#[test]
fn stale_counts_agree_with_inbox_in_a_mixed_inbox() {
    let env = Env::new();
    update(&env, "engineer", "e1");
    let e2 = update(&env, "engineer", "e2");
    update(&env, "engineer", "e3");
    update(&env, "qa", "q1");
    let q2 = update(&env, "qa", "q2");
    env.as_("coordinator", &["done", &e2]).ok();
    env.as_("coordinator", &["take", &q2]).ok();
    env.as_("engineer", &["seq", "reset"]).ok();
    update(&env, "engineer", "e1 of epoch 1");
    // The engineer's ticket (the coordinator's #1) after it saw the coordinator's #3.
    open(&env, "MIX-1", "the task");
    let inform = |s: &str| {
        let args = ["send", "--to", "engineer", "--intent", "inform", "--summary", s, "--json"];
        env.as_("coordinator", &args).json()["msg_id"].as_str().unwrap().to_string()
    };
    inform("a");
    let b = inform("b");
    env.as_("engineer", &["done", &b]).ok();
    env.as_("engineer", &["claim", "MIX-1"]).ok();
    for _ in 0..2 {
        assert_eq!(counted(&env, "coordinator"), (2, 2));
        assert_eq!(counted(&env, "engineer"), (1, 1));
        assert_eq!(counted(&env, "qa"), (0, 0));
    }
}

/// The local engine remembers what decides each message's fate by file identity
/// (`locks/inbox-<agent>.digests`, once a file is over 3 s old): the counts follow a
/// message edited in place, a lastSeen that moved, and a remembered file that is garbage.
#[test]
fn remembered_fates_follow_an_edited_message_and_a_moved_last_seen() {
    local_only!("edits a message and the cache in the root's files");
    let env = Env::new();
    update(&env, "engineer", "e1");
    let e2 = update(&env, "engineer", "e2");
    update(&env, "engineer", "e3");
    update(&env, "qa", "q1");
    env.as_("coordinator", &["done", &e2]).ok();
    // Old enough to be remembered.
    std::thread::sleep(std::time::Duration::from_millis(3500));
    assert_eq!(counted(&env, "coordinator"), (2, 1));
    let cache = env.root().join("locks/inbox-coordinator.digests");
    let text = std::fs::read_to_string(&cache).unwrap();
    let inbox = env.ls("AGENTS/coordinator/INBOX");
    assert!(inbox.iter().all(|n| text.contains(n.as_str())), "{text}");
    assert_eq!(counted(&env, "coordinator"), (2, 1));
    // #3 edited in place into a #1: stale now.
    let third = inbox
        .iter()
        .map(|n| env.root().join("AGENTS/coordinator/INBOX").join(n))
        .find(|p| std::fs::read_to_string(p).unwrap().contains("seq: 3"))
        .unwrap();
    let edited = std::fs::read_to_string(&third).unwrap().replace("seq: 3", "seq: 1");
    std::fs::write(&third, edited).unwrap();
    assert_eq!(counted(&env, "coordinator"), (1, 2));
    // qa's later message handed on: its earlier one, remembered as new, is stale now.
    let q2 = update(&env, "qa", "q2");
    env.as_("coordinator", &["take", &q2]).ok();
    assert_eq!(counted(&env, "coordinator"), (0, 3));
    std::fs::write(&cache, "{not json").unwrap();
    assert_eq!(counted(&env, "coordinator"), (0, 3));
    env.circe(["doctor"]).run().ok();
}

/// Open questions `agent` holds a copy of, as `prime` counts them and `questions` lists
/// them; the two agree.
fn open_to(env: &Env, agent: &str) -> u64 {
    let prime = env.as_(agent, &["prime", "--json"]).json()["open_questions"].as_u64().unwrap();
    let listed = env.as_(agent, &["questions", "--json"]).json()["questions"].clone();
    let to_me = listed.as_array().unwrap().iter().filter(|q| q["direction"] == "to_me").count();
    assert_eq!(prime, to_me as u64, "{agent}: prime, questions: {listed}");
    prime
}

/// `prime` counts the open questions as `questions` lists them, again and again (the
/// local engine remembers what each INBOX message holds once it is over 3 s old): a
/// question asked, answered, and asked again.
#[test]
fn prime_counts_open_questions_as_questions_lists_them() {
    let env = Env::new();
    update(&env, "engineer", "e1");
    assert_eq!(open_to(&env, "coordinator"), 0);
    let ask = ["send", "--to", "coordinator", "--intent", "question", "--summary", "which db?"];
    env.as_("engineer", &[&ask[..], &["--msg-id", "q-1"]].concat()).ok();
    if !crate::common::pg_mode() {
        std::thread::sleep(std::time::Duration::from_millis(3500));
    }
    for _ in 0..2 {
        assert_eq!(open_to(&env, "coordinator"), 1);
        assert_eq!(counted(&env, "coordinator"), (2, 0));
    }
    let answer = ["send", "--to", "engineer", "--intent", "answer", "--in-reply-to", "q-1"];
    env.as_("coordinator", &[&answer[..], &["--summary", "postgres"]].concat()).ok();
    assert_eq!(open_to(&env, "coordinator"), 0);
    env.as_("engineer", &[&ask[..], &["--msg-id", "q-2"]].concat()).ok();
    assert_eq!(open_to(&env, "coordinator"), 1);
}

/// A message remembered (over 3 s old) and then edited in place is read again: into a
/// question it is counted open, out of one it is not; edited into a stale one, it wakes
/// no `wait --for inbox`.
#[test]
fn remembered_messages_edited_in_place_count_as_they_read_now() {
    local_only!("edits messages in the root's files");
    let env = Env::new();
    update(&env, "engineer", "e1");
    let e2 = update(&env, "engineer", "e2");
    update(&env, "engineer", "e3");
    env.as_("coordinator", &["done", &e2]).ok();
    std::thread::sleep(std::time::Duration::from_millis(3500));
    assert_eq!((open_to(&env, "coordinator"), counted(&env, "coordinator")), (0, (1, 1)));
    let inbox = env.root().join("AGENTS/coordinator/INBOX");
    let third = env
        .ls("AGENTS/coordinator/INBOX")
        .iter()
        .map(|n| inbox.join(n))
        .find(|p| std::fs::read_to_string(p).unwrap().contains("seq: 3"))
        .unwrap();
    let text = std::fs::read_to_string(&third).unwrap();
    // #3 edited into a question: open, and still new.
    std::fs::write(&third, text.replace("intent: status_update", "intent: question")).unwrap();
    assert_eq!((open_to(&env, "coordinator"), counted(&env, "coordinator")), (1, (1, 1)));
    // Then into a #1 (stale) and no question: nothing is open, and nothing wakes a wait.
    std::fs::write(&third, text.replace("seq: 3", "seq: 1")).unwrap();
    assert_eq!((open_to(&env, "coordinator"), counted(&env, "coordinator")), (0, (0, 2)));
    env.as_("coordinator", &["wait", "--for", "inbox", "--timeout", "1s"]).code(7);
    update(&env, "engineer", "e4");
    let w = env.as_("coordinator", &["wait", "--for", "inbox", "--timeout", "1s", "--json"]);
    let woke = std::fs::read_to_string(inbox.join(w.json()["file"].as_str().unwrap())).unwrap();
    assert!(woke.contains("e4"), "{}", w.show());
}

/// `read` by what the root remembers now, then with every INBOX read whole (each
/// `locks/inbox-<agent>.digests` removed first), then by what that run remembered: the
/// three agree, and the answer is returned.
fn remembered_and_whole<T: PartialEq + std::fmt::Debug>(env: &Env, read: impl Fn() -> T) -> T {
    let remembered = read();
    for f in env.ls_all("locks").iter().filter(|f| f.ends_with(".digests")) {
        std::fs::remove_file(env.root().join("locks").join(f)).unwrap();
    }
    let whole = read();
    assert!(env.ls_all("locks").iter().any(|f| f.ends_with(".digests")), "remembered");
    assert_eq!(remembered, whole, "by what was remembered before, and read whole");
    assert_eq!(read(), whole, "by what the whole read remembered, and read whole");
    whole
}

/// `questions` as each agent and as nobody sees it, and `prime`'s count for each agent.
fn questions_seen(env: &Env) -> Vec<serde_json::Value> {
    let mut seen = vec![env.circe(["questions", "--all", "--json"]).run().json()];
    for a in ["coordinator", "engineer", "qa"] {
        seen.push(env.as_(a, &["questions", "--json"]).json());
        seen.push(open_to(env, a).into());
    }
    seen
}

/// Which message `wait --for reply:ID` (without `--new`) finds at once, as `agent`; `None`
/// when it waits (for a second).
fn reply_found(env: &Env, agent: &str, id: &str) -> Option<String> {
    let reply = format!("reply:{id}");
    let w = env.as_(agent, &["wait", "--for", &reply, "--timeout", "1s", "--json"]);
    if w.code == 7 {
        return None;
    }
    Some(w.ok().json()["file"].as_str().unwrap().to_string())
}

/// The file of `agent`'s INBOX that holds `text`.
fn inbox_file_with(env: &Env, agent: &str, text: &str) -> std::path::PathBuf {
    let inbox = env.root().join("AGENTS").join(agent).join("INBOX");
    let holds = |p: &std::path::PathBuf| std::fs::read_to_string(p).unwrap().contains(text);
    env.ls(&format!("AGENTS/{agent}/INBOX")).iter().map(|n| inbox.join(n)).find(holds).unwrap()
}

/// `questions` (and `prime`'s count) read an INBOX by what the local engine remembers of
/// each message once it is over 3 s old: its id, its intent and the id it replies to; a
/// question's copy is read whole. They say what reading every message says, also of an
/// answer edited in place (to the same size) to answer another question (remembered by a
/// stamp that missed the edit, the first question would stay answered), then replaced by
/// the answer again and by a file that does not read.
#[test]
fn questions_by_remembered_gists_say_what_reading_every_message_says() {
    local_only!("edits a message and removes the caches in the root's files");
    let env = Env::new();
    let ask = |from: &str, id: &str| {
        let args = ["send", "--to", "coordinator", "--intent", "question", "--msg-id", id];
        env.as_(from, &[&args[..], &["--summary", "which db?"]].concat()).ok();
    };
    ask("engineer", "q-1");
    ask("qa", "q-2");
    ask("engineer", "q-3");
    update(&env, "engineer", "e1");
    let answer = ["send", "--to", "engineer", "--intent", "answer", "--in-reply-to", "q-1"];
    env.as_("coordinator", &[&answer[..], &["--summary", "postgres"]].concat()).ok();
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let open = |seen: &[serde_json::Value]| {
        let ids = seen[0]["questions"].as_array().unwrap().iter();
        ids.map(|q| q["msg_id"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    let seen = remembered_and_whole(&env, || questions_seen(&env));
    assert_eq!(open(&seen), ["q-2", "q-3"]);
    assert_eq!(seen[2], 2, "the coordinator holds two: {seen:?}");
    // The answer to q-1 edited in place into one to q-3.
    let answered = inbox_file_with(&env, "engineer", "in_reply_to: q-1");
    let text = std::fs::read_to_string(&answered).unwrap();
    std::fs::write(&answered, text.replace("in_reply_to: q-1", "in_reply_to: q-3")).unwrap();
    let seen = remembered_and_whole(&env, || questions_seen(&env));
    assert_eq!(open(&seen), ["q-1", "q-2"]);
    // Remembered as it is now, then replaced (another file renamed over it) by the answer
    // to q-1 again; remembered so, then replaced by a file that does not read.
    let replace = |with: &str| {
        std::thread::sleep(std::time::Duration::from_millis(3500));
        questions_seen(&env);
        let cache = env.read("locks/inbox-engineer.digests");
        assert!(cache.contains(answered.file_name().unwrap().to_str().unwrap()), "{cache}");
        let aside = env.root().join("tmp/replacement");
        std::fs::write(&aside, with).unwrap();
        std::fs::rename(&aside, &answered).unwrap();
    };
    replace(&text);
    assert_eq!(open(&remembered_and_whole(&env, || questions_seen(&env))), ["q-2", "q-3"]);
    replace("no message at all\n");
    assert_eq!(open(&remembered_and_whole(&env, || questions_seen(&env))), ["q-1", "q-2", "q-3"]);
}

/// A digests file written before each message's id and the id it replies to were kept
/// (`gist 1`: its gists lack them) is read as none: every message is read once, and the
/// file written anew.
#[test]
fn digests_written_before_replies_were_kept_are_read_as_none() {
    local_only!("rewrites the cache in the root's files");
    let env = Env::new();
    let ask = ["send", "--to", "coordinator", "--intent", "question", "--msg-id", "q-1"];
    env.as_("engineer", &[&ask[..], &["--summary", "which db?"]].concat()).ok();
    let answer = ["send", "--to", "engineer", "--intent", "answer", "--in-reply-to", "q-1"];
    env.as_("coordinator", &[&answer[..], &["--summary", "postgres"]].concat()).ok();
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let open = || env.circe(["questions", "--all", "--json"]).run().json()["questions"].clone();
    assert_eq!(open(), serde_json::json!([]));
    let path = env.root().join("locks/inbox-engineer.digests");
    let mut cache: serde_json::Value =
        serde_json::from_str(&env.read("locks/inbox-engineer.digests")).unwrap();
    let kind = cache["kind"].as_str().unwrap().replace("gist 2 ", "gist 1 ");
    cache["kind"] = kind.into();
    for (_, file) in cache["files"].as_object_mut().unwrap() {
        let gist = file[1].as_object_mut().unwrap();
        assert!(gist.remove("reply_to").is_some() && gist.remove("id").is_some(), "{gist:?}");
    }
    std::fs::write(&path, cache.to_string()).unwrap();
    assert_eq!(open(), serde_json::json!([]));
    assert!(env.read("locks/inbox-engineer.digests").contains("\"reply_to\":\"q-1\""));
}

/// `wait --for reply:ID` reads an INBOX by its remembered gists as `questions` does (a
/// reply read whole): it finds what reading every message finds, also after a reply edited
/// in place (to the same size) to answer another question (remembered by a stamp that
/// missed the edit, it would not be found), and a question given another id.
#[test]
fn wait_for_a_reply_by_remembered_gists_finds_what_reading_every_message_finds() {
    local_only!("edits messages and removes the caches in the root's files");
    let env = Env::new();
    let ask = |id: &str| {
        let args = ["send", "--to", "coordinator", "--intent", "question", "--msg-id", id];
        env.as_("engineer", &[&args[..], &["--summary", "which db?"]].concat()).ok();
    };
    ask("q-1");
    ask("q-3");
    let answer = ["send", "--to", "engineer", "--intent", "answer", "--in-reply-to", "q-1"];
    env.as_("coordinator", &[&answer[..], &["--summary", "postgres"]].concat()).ok();
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let answered = inbox_file_with(&env, "engineer", "in_reply_to: q-1");
    let name = answered.file_name().unwrap().to_str().unwrap().to_string();
    let found = |id: &str| remembered_and_whole(&env, || reply_found(&env, "engineer", id));
    assert_eq!((found("q-1"), found("q-3")), (Some(name.clone()), None));
    let text = std::fs::read_to_string(&answered).unwrap();
    std::fs::write(&answered, text.replace("in_reply_to: q-1", "in_reply_to: q-3")).unwrap();
    assert_eq!((found("q-3"), found("q-1")), (Some(name), None));
    // q-3 (only in the coordinator's INBOX) named q-4: a reply to q-4 may come, none to q-3.
    let asked = inbox_file_with(&env, "coordinator", "msg_id: q-3");
    let text = std::fs::read_to_string(&asked).unwrap();
    std::fs::write(&asked, text.replace("msg_id: q-3", "msg_id: q-4")).unwrap();
    assert_eq!(found("q-4"), None);
}

/// What the live board's terminal is given: the root and the clock of `env`.
fn board_env(env: &Env) -> [String; 2] {
    [format!("CIRCE_ROOT={}", env.root().display()), format!("CIRCE_NOW={}", env.now)]
}

/// `circe board` (the live one) in a tmux server of its own (`circe-test-<tag><pid>`).
fn live_board(env: &Env, tag: &str) -> Tmux {
    let tmux = Tmux { socket: format!("circe-test-{tag}{}", std::process::id()) };
    tmux.start(&board_env(env), &format!("{} board", exe().display()));
    tmux
}
