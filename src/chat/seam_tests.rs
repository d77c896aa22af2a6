//! The chat channel through the engine seam: the same says, watches and archives on a local
//! root (the file beside it) and on the in-memory engine (a channel the engine keeps) give
//! the same messages, line numbers, cursors' progress and archive sizes.

use serde_json::Value;

use super::follow::{WatchOptions, watch};
use super::{archive, say};
use crate::config::{Config, DEFAULT_CONFIG};
use crate::engine::RootSpec;
use crate::engine::memory::MemoryEngine;
use crate::names::AgentName;
use crate::workspace::Workspace;

fn add_agents(ws: &Workspace) {
    for (a, r) in [("engineer", "engineer"), ("qa", "qa"), ("coordinator", "coordinator")] {
        ws.engine.add_agent(&AgentName::new(a).unwrap(), r).unwrap();
    }
}

fn local() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    let (root, _) = crate::engine::local::init(dir.path(), DEFAULT_CONFIG).unwrap();
    add_agents(&Workspace::open(&RootSpec::Path(root.clone())).unwrap());
    (dir, Workspace::open(&RootSpec::Path(root)).unwrap())
}

fn memory() -> Workspace {
    let config = Config::parse(DEFAULT_CONFIG).unwrap();
    let setup = Workspace::with_engine(Box::new(MemoryEngine::new()), config.clone()).unwrap();
    add_agents(&setup);
    Workspace::with_engine(setup.engine, config).unwrap()
}

/// `chat watch --once` with `opts`: the JSON lines, timestamps left out.
fn once(ws: &Workspace, opts: WatchOptions) -> Vec<Value> {
    let mut out = Vec::new();
    watch(ws, &WatchOptions { once: true, ..opts }, &mut None, &mut out, &mut |_| {}).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().remove("timestamp");
            v
        })
        .collect()
}

/// Says, watches and archives; everything they report, in order.
fn script(ws: &Workspace) -> Vec<Value> {
    let who = |n: &str| AgentName::new(n).unwrap();
    let mut seen = Vec::new();
    let cursor = || WatchOptions { cursor: Some("c".into()), ..WatchOptions::default() };
    let from_start = || WatchOptions { from_start: true, ..WatchOptions::default() };
    let m = say::say(ws, &who("engineer"), "qa", &[], "one", true, false).unwrap();
    seen.push(serde_json::to_value(m.json("T")).unwrap());
    let cc = ["coordinator".to_string()];
    let m = say::say(ws, &who("qa"), "engineer", &cc, "two\n  more\n\nend", true, false).unwrap();
    seen.push(serde_json::to_value(m.json("T")).unwrap());
    let m = say::say(ws, &who("engineer"), "qa", &[], "three", true, true).unwrap();
    seen.push(serde_json::to_value(m.json("T")).unwrap());
    seen.extend(once(ws, WatchOptions { cursor: Some("c".into()), from_start: true, ..cursor() }));
    seen.extend(once(ws, WatchOptions { first_line_only: true, ..from_start() }));
    let a = archive::run(ws, Some(2)).unwrap();
    seen.push(serde_json::json!([a.bytes, a.lines]));
    assert!(archive::run(ws, Some(3)).is_err(), "line 3 continues a message");
    say::say(ws, &who("qa"), "engineer", &[], "four", false, false).unwrap();
    seen.extend(once(ws, cursor()));
    seen.extend(once(ws, from_start()));
    let a = archive::run(ws, None).unwrap();
    seen.push(serde_json::json!([a.bytes, a.lines]));
    say::say(ws, &who("engineer"), "qa", &[], "five", false, false).unwrap();
    seen.extend(once(ws, cursor()));
    seen.extend(once(ws, WatchOptions::default()));
    seen
}

#[test]
fn the_channel_reads_the_same_on_every_engine() {
    let (_dir, on_disk) = local();
    let kept = memory();
    let (a, b) = (script(&on_disk), script(&kept));
    assert_eq!(a.len(), 16, "{a:#?}");
    assert_eq!(a, b);
    assert_eq!(a[2]["message"], "(ENGINEER #1): three");
    assert_eq!(a[9], serde_json::json!([22, 1]), "line 1 archived");
    // The cursor goes on at `four`: line 6 of the channel once line 1 is archived.
    assert_eq!((&a[10]["message"], &a[10]["line_number"]), (&"four".into(), &Value::from(6)));
    assert_eq!((&a[15]["message"], &a[15]["line_number"]), (&"five".into(), &Value::from(1)));
}
