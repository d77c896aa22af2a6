//! Reading many messages of a box at once (`Engine::read_messages_capped`): a durable
//! consumer that hands a message on judges its sender's other messages in the INBOX, and
//! reading them one statement each made its every event cost as many round trips as the
//! INBOX held messages. Many are read in a few statements, each answered as a read of one
//! would be.

use circe::boxes::Mailbox;
use circe::names::AgentName;

use crate::common::Root;

/// Files put straight into e1's INBOX: `sizes` bytes each (`m<i>.md`).
fn plant(c: &crate::pg_cluster::Cluster, schema: &str, sizes: &[usize]) -> Vec<String> {
    let mut files = Vec::new();
    for (i, n) in sizes.iter().enumerate() {
        let file = format!("m{i}.md");
        c.psql(&format!(
            "INSERT INTO \"{schema}\".messages (box, file, body) \
             VALUES ('inbox:e1', '{file}', convert_to(repeat('{}', {n}), 'UTF8'))",
            char::from(b'a' + u8::try_from(i % 26).unwrap())
        ));
        files.push(file);
    }
    files
}

/// Each file as `read_messages_capped` answers it, next to a read of that file alone:
/// the same bytes and size, or not found both.
#[test]
fn many_messages_read_at_once_are_each_what_a_read_of_one_says() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = url.rsplit_once("schema=").map(|(_, s)| s.to_string()).unwrap();
    let root = Root::new(&url, "server", 1);
    // Over the 1 MiB one statement brings: read in several.
    let planted = plant(c, &schema, &[300_000, 10, 700_000, 900_000, 1, 400_000, 2_000_000]);
    let engine = root.engine();
    let inbox = Mailbox::Inbox(AgentName::new("e1").unwrap());
    // Out of order, with names that are not there and one asked twice.
    let mut asked: Vec<String> = planted.iter().rev().cloned().collect();
    asked.insert(2, "gone.md".into());
    asked.push(planted[1].clone());
    asked.push("gone-too.md".into());
    for cap in [1 << 20, 100, 0] {
        let mut got = Vec::new();
        engine
            .read_messages_capped(&inbox, &asked, cap, &mut |f, r| {
                got.push((f.to_string(), r.map(|c| (c.bytes, c.size)).map_err(|e| e.kind)));
            })
            .unwrap();
        let names: Vec<&str> = got.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(names, asked.iter().map(String::as_str).collect::<Vec<_>>(), "cap {cap}");
        for (f, r) in got {
            let one = engine.read_message_capped(&inbox, &f, cap);
            assert_eq!(r, one.map(|c| (c.bytes, c.size)).map_err(|e| e.kind), "{f}, cap {cap}");
        }
    }
    // None asked: nothing answered, no statement.
    engine.read_messages_capped(&inbox, &[], 10, &mut |f, _| panic!("{f} answered")).unwrap();
}

/// A durable consumer of e1 hands on 30 messages of one sender that all stay in its INBOX:
/// the statements reading that INBOX are a few per event, not one per message it holds.
#[test]
fn a_durable_watcher_reads_the_inbox_in_statements_that_do_not_grow_with_it() {
    const N: usize = 30;
    let c = match crate::pg_cluster::start_with(&["log_statement=all"]) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let root = Root::new(&format!("{}&schema=reads", c.base_url()), "server", 1);
    for i in 0..N {
        let send = ["send", "--to", "e1", "--intent", "inform", "--summary"];
        root.run(Some("coordinator"), &[&send[..], &[&format!("m{i}")]].concat()).ok();
    }
    let log = c.dir.join("log");
    let before = std::fs::read_to_string(&log).unwrap().len();
    let args = ["watch", "--cursor", "q", "--kind", "send", "--from-start", "--once", "--json"];
    let o = root.run(Some("e1"), &args);
    o.ok();
    assert_eq!(o.stdout.lines().count(), N, "{o:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    let reads = text[before..].lines().filter(|l| l.contains("\"reads\".messages")).count();
    // A read of the event's message to judge it, one to hand it on, the INBOX's listing
    // and one statement for the sender's messages in it: 4 per event.
    assert!(reads <= 5 * N, "{reads} statements read e1's INBOX for {N} events");
    let seen = root.run(None, &["seq", "state", "--json"]);
    assert_eq!(seen.ok().json()["lastSeen"]["E1"]["COORDINATOR"], N, "{seen:?}");
}
