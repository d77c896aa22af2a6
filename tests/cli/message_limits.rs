//! Limits on messages (`limits:` in circe.yaml): size and header lines are refused on the
//! way in (`send`, `send --file`, `validate`), and a file over them in a box is reported
//! by readers (`inbox`, `doctor`) without stalling them.

use crate::common::{Env, assert_unchanged};

/// The defaults (PROTOCOLS.md section 9).
const MESSAGE_BYTES: usize = 1_048_576;
const HEADER_LINES: usize = 200;

/// A draft for qa with `extra` more header lines and a body of `body` bytes.
fn draft(extra: usize, body: usize) -> String {
    let mut s = String::from("# MESSAGE\nto: qa\nintent: inform\n");
    for i in 0..extra {
        s.push_str(&format!("x-{i}: v\n"));
    }
    s.push('\n');
    s.push_str(&"b".repeat(body));
    s
}

/// The same in front-matter form.
fn draft_tx(extra: usize) -> String {
    let mut s = String::from("---\nto: qa\ntype: inform\n");
    for i in 0..extra {
        s.push_str(&format!("x-{i}: v\n"));
    }
    s.push_str("---\nbody\n");
    s
}

fn write(env: &Env, name: &str, text: &str) -> String {
    let p = env.path().join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[track_caller]
fn refused_naming(o: &crate::common::Out, limit: &str, value: &str) {
    o.code(3);
    assert!(o.stderr.contains(limit) && o.stderr.contains(value), "{}", o.show());
    assert!(o.stderr.contains("hint:"), "{}", o.show());
}

#[test]
fn a_message_over_the_size_limit_is_refused_naming_limit_and_size() {
    let env = Env::new();
    let big = draft(0, MESSAGE_BYTES);
    let size = big.len().to_string();
    let file = write(&env, "big.md", &big);
    let body = write(&env, "body.md", &"b".repeat(MESSAGE_BYTES));
    let before = env.state();
    let o = env.as_("engineer", &["send", "--file", &file]);
    refused_naming(&o, "limits.message_bytes", &size);
    assert!(o.stderr.contains(&MESSAGE_BYTES.to_string()), "{}", o.show());
    let o = env.circe(["send", "--file", "-"]).agent("engineer").stdin(big.as_bytes()).run();
    refused_naming(&o, "limits.message_bytes", &MESSAGE_BYTES.to_string());
    let o =
        env.as_("engineer", &["send", "--to", "qa", "--intent", "inform", "--body-file", &body]);
    refused_naming(&o, "limits.message_bytes", &MESSAGE_BYTES.to_string());
    let o = env.circe(["validate", "--draft", &file]).run();
    refused_naming(&o, "limits.message_bytes", &size);
    let j = env.circe(["validate", "--draft", &file, "--json"]).run();
    j.code(3);
    assert_eq!(j.json()["files"][0]["valid"], false);
    assert_eq!(j.json()["files"][0]["problems"][0]["limit"], "limits.message_bytes");
    // Any other problem says null: absent values are null in command output.
    let bad = write(&env, "bad.md", "# MESSAGE\nto: qa\n\n## Summary\nx\n");
    let j = env.circe(["validate", "--draft", &bad, "--json"]).run();
    j.code(3);
    let p = &j.json()["files"][0]["problems"][0];
    assert!(p.get("limit").is_some_and(serde_json::Value::is_null), "{}", j.show());
    assert_unchanged(&before, &env.state());
    // Under the limit: delivered.
    let under = write(&env, "under.md", &draft(0, MESSAGE_BYTES - 4096));
    env.as_("engineer", &["send", "--file", &under]).ok();
    assert_eq!(env.ls("AGENTS/qa/INBOX").len(), 1);
}

#[test]
fn too_many_header_lines_are_refused_in_both_formats() {
    let env = Env::new();
    let before = env.state();
    // `to` and `intent` plus 199 more: 201 header lines.
    for (name, text) in
        [("c.md", draft(HEADER_LINES - 1, 10)), ("f.md", draft_tx(HEADER_LINES - 1))]
    {
        let file = write(&env, name, &text);
        let o = env.as_("engineer", &["send", "--file", &file]);
        refused_naming(&o, "limits.header_lines", "200");
        let o = env.circe(["validate", "--draft", &file]).run();
        refused_naming(&o, "limits.header_lines", "200");
        // 200 lines is a valid draft, but send fills in 5 more: refused as delivered.
        let file = write(&env, name, &text.replacen("x-0: v\n", "", 1));
        env.circe(["validate", "--draft", &file]).run().ok();
        let o = env.as_("engineer", &["send", "--file", &file]);
        refused_naming(&o, "limits.header_lines", "200");
    }
    assert_unchanged(&before, &env.state());
    for (name, text) in
        [("c.md", draft(HEADER_LINES - 7, 10)), ("f.md", draft_tx(HEADER_LINES - 7))]
    {
        let file = write(&env, name, &text);
        env.as_("engineer", &["send", "--file", &file]).ok();
    }
    assert_eq!(env.ls("AGENTS/qa/INBOX").len(), 2);
    let inbox = env.as_("qa", &["inbox", "--json"]);
    inbox.ok();
    assert!(inbox.stderr.is_empty(), "{}", inbox.show());
}

#[test]
fn the_limits_are_configurable_and_checked() {
    local_only!("plants files in a box and edits circe.yaml");
    let env = Env::new();
    let set = |limits: &str| {
        std::fs::write(env.root().join("circe.yaml"), format!("version: 1\nlimits: {limits}\n"))
            .unwrap();
    };
    set("{message_bytes: 4096, header_lines: 20}");
    let file = write(&env, "m.md", &draft(0, 5000));
    refused_naming(&env.as_("engineer", &["send", "--file", &file]), "4096", "5033");
    let file = write(&env, "h.md", &draft(19, 10));
    refused_naming(&env.as_("engineer", &["send", "--file", &file]), "limits.header_lines", "20");
    // As delivered: send fills in from, created_at, msg_id, status and seq (5 more lines).
    let file = write(&env, "ok.md", &draft(13, 3000));
    env.as_("engineer", &["send", "--file", &file]).ok();
    for (bad, named) in [
        ("{message_bytes: 10}", "limits.message_bytes"),
        ("{message_bytes: 1073741824}", "limits.message_bytes"),
        ("{header_lines: 3}", "limits.header_lines"),
        ("{header_lines: 1000000}", "limits.header_lines"),
        ("{colour: red}", "colour"),
    ] {
        set(bad);
        let o = env.as_("engineer", &["inbox"]);
        o.code(3);
        assert!(o.stderr.contains(named) && o.stderr.contains("circe.yaml"), "{}", o.show());
    }
}

#[test]
fn a_file_over_the_limits_in_a_box_is_reported_and_readers_go_on() {
    local_only!("plants files in a box and edits circe.yaml");
    let env = Env::new();
    env.as_("engineer", &["send", "--to", "qa", "--intent", "inform", "--summary", "hello"]).ok();
    let inbox = env.root().join("AGENTS/qa/INBOX");
    // Planted: 5 MB in one headline, and 60,000 header lines under the size limit.
    let huge = format!(
        "# MESSAGE\nfrom: engineer\nto: qa\nintent: inform\nstatus: new\n\
         created_at: 2025-11-21T17:00:00Z\nheadline: {}\n\nbody\n",
        "h".repeat(5_000_000)
    );
    std::fs::write(inbox.join("20251121_170001_engineer-qa_inform.md"), huge).unwrap();
    let mut long = draft(60_000, 0);
    long = long.replace("to: qa\n", "from: engineer\nto: qa\n");
    std::fs::write(inbox.join("20251121_170002_engineer-qa_inform.md"), long).unwrap();

    let o = env.as_("qa", &["inbox"]);
    o.ok();
    // The good message is listed (by its id, with its summary), the planted ones by file.
    assert!(o.stdout.contains("hello"), "{}", o.show());
    assert!(o.stdout.contains("20251121_170001_engineer-qa_inform.md"), "{}", o.show());
    for planted in ["170001", "170002"] {
        let line = o.stderr.lines().find(|l| l.contains(planted));
        assert!(line.is_some(), "no stderr line for {planted}:\n{}", o.show());
    }
    assert!(o.stderr.contains("limits.message_bytes"), "{}", o.show());
    assert!(o.stderr.contains("limits.header_lines"), "{}", o.show());
    let j = env.as_("qa", &["inbox", "--json"]);
    j.ok();
    let j = j.json();
    let msgs = j["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3);
    let bad: Vec<&serde_json::Value> = msgs.iter().filter(|m| m["valid"] == false).collect();
    assert_eq!(bad.len(), 2, "{msgs:?}");
    assert!(bad.iter().all(|m| m["problem"].as_str().is_some_and(|p| p.contains("limits."))));
    assert!(msgs.iter().any(|m| m["valid"] == true && m["problem"].is_null()));

    env.circe(["tasks"]).run().ok();
    let before = env.state();
    for args in [&["doctor"][..], &["doctor", "--repair"]] {
        let d = env.circe(args).run();
        d.code(1);
        for planted in ["170001", "170002"] {
            assert!(d.stderr.contains(planted), "{}", d.show());
        }
        assert!(d.stderr.contains("limits.message_bytes"), "{}", d.show());
    }
    // Over a limit is not broken: repair leaves the files for a person (or a higher limit).
    assert_unchanged(&before, &env.state());
    let d = env.circe(["doctor", "--json"]).run();
    d.code(1);
    assert_eq!(d.json()["violations"].as_array().map(Vec::len), Some(2), "{}", d.show());
}
