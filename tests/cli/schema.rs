//! One JSON vocabulary: every command's real `--json` output (and every error's) validates
//! against the schema `circe schema CMD` prints, and every command is covered.

use std::collections::BTreeSet;

use clap::CommandFactory;
use serde_json::Value;

use crate::common::{Env, Out};

const T: &str = "AUTH-012";

/// The schema `circe schema NAME` prints, as a validator.
fn validator(env: &Env, name: &str) -> jsonschema::Validator {
    let words: Vec<&str> = name.split(' ').collect();
    let o = env.circe([&["schema"][..], &words].concat()).run();
    o.ok();
    let schema: Value = serde_json::from_str(&o.stdout).expect("a schema is JSON");
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("schema of {name}: {e}"))
}

#[track_caller]
fn valid(v: &jsonschema::Validator, doc: &Value, what: &str) {
    let errors: Vec<String> =
        v.iter_errors(doc).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(
        errors.is_empty(),
        "{what}: output does not match its schema:\n{}\n{doc:#}",
        errors.join("\n")
    );
}

/// Every leaf command of the command line, as typed (`agent add`).
fn leaves() -> BTreeSet<String> {
    fn walk(c: &clap::Command, prefix: &str, out: &mut BTreeSet<String>) {
        for s in c.get_subcommands() {
            let name = format!("{prefix}{}", s.get_name());
            if s.has_subcommands() {
                walk(s, &format!("{name} "), out);
            } else {
                out.insert(name);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&circe::cli::Cli::command(), "", &mut out);
    out
}

#[test]
#[expect(clippy::too_many_lines, reason = "one step per command")]
fn every_command_prints_what_its_schema_says() {
    let env = Env::bare();
    let draft = env.path().join("d.md");
    std::fs::write(&draft, "# MESSAGE\nto: qa\nintent: inform\n\nhi\n").unwrap();
    let d = draft.to_str().unwrap();
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/race-lost");
    let ask = env.path().join("ask.md");
    std::fs::write(&ask, "---\nto: qa\ntype: ask\nmsg-id: ask-001\n---\nready?\n").unwrap();
    let state = env.path().join("message-state.json");
    std::fs::write(&state, r#"{"counters": {"ENGINEER": 9}, "lastSeen": {}}"#).unwrap();
    let txdir = env.path().join("tx-msgs");
    std::fs::create_dir(&txdir).unwrap();
    std::fs::write(
        txdir.join("1121170000-update-core--brain-u-1.md"),
        "---\nto: core/brain\nfrom: core/core\ntype: update\nmsg-id: u-1\ntimestamp: 2025-11-21T17:00:00Z\n---\nhi\n",
    )
    .unwrap();
    let out = env.path().join("tx-out");
    let (ask, state, txdir, out) = (
        ask.to_str().unwrap(),
        state.to_str().unwrap(),
        txdir.to_str().unwrap(),
        out.to_str().unwrap(),
    );
    // (schema, agent, args, exit code)
    let steps: &[(&str, Option<&str>, &[&str], i32)] = &[
        ("init", None, &["init"], 0),
        ("agent add", None, &["agent", "add", "engineer-2", "--role", "engineer"], 0),
        ("agent list", None, &["agent", "list"], 0),
        ("registry", None, &["registry"], 0),
        ("send", None, &["send", "--template", "fix_bug"], 0),
        (
            "send",
            Some("coordinator"),
            &[
                "send",
                "--to",
                "role:engineer",
                "--intent",
                "implement_feature",
                "--task",
                T,
                "--summary",
                "JWT",
                "--priority",
                "high",
            ],
            0,
        ),
        ("send", Some("engineer"), &["send", "--file", d], 0),
        (
            "send",
            Some("coordinator"),
            &[
                "send",
                "--to",
                "engineer-2",
                "--intent",
                "question",
                "--summary",
                "which DB?",
                "--msg-id",
                "which-db-1",
            ],
            0,
        ),
        ("inbox", Some("qa"), &["inbox", "--workspace"], 0),
        ("questions", Some("engineer-2"), &["questions"], 0),
        ("questions", None, &["questions", "--all"], 0),
        ("prime", Some("engineer"), &["prime"], 0),
        ("prime", None, &["prime"], 0),
        ("validate", None, &["validate", d, "--draft"], 0),
        ("validate", None, &["validate", d], 3),
        ("validate", None, &["validate", "--config"], 0),
        ("claim", Some("engineer"), &["claim", "--next", "--dry-run"], 0),
        ("claim", Some("engineer"), &["claim", T], 0),
        ("error", Some("engineer-2"), &["claim", T], 4),
        ("claim", Some("engineer-2"), &["claim", "--next"], 6),
        ("status", Some("engineer"), &["status", T, "in_progress"], 0),
        ("status", Some("engineer"), &["status", T, "in_progress"], 0),
        ("heartbeat", Some("engineer"), &["heartbeat", T], 0),
        ("take", Some("engineer"), &["take", T], 0),
        ("check", Some("engineer"), &["check", T, "tests_passed=true"], 0),
        ("check", Some("engineer"), &["check", T, "--run", "tests_passed", "--", "true"], 0),
        ("show", Some("engineer"), &["show", T], 0),
        ("tasks", None, &["tasks"], 0),
        ("board", None, &["board"], 0),
        ("release", Some("engineer"), &["release", T], 0),
        ("readdress", Some("coordinator"), &["readdress", T, "--to", "role:engineer"], 0),
        ("reap", None, &["reap"], 0),
        ("doctor", None, &["doctor"], 0),
        ("error", Some("engineer"), &["done", T], 5),
        ("done", Some("qa"), &["done", "20251121_170000_engineer-qa_inform.md"], 0),
        ("chat say", Some("engineer"), &["chat", "say", "--to", "qa", "hello"], 0),
        ("chat watch", None, &["chat", "watch", "--once", "--from-start"], 0),
        ("chat archive", None, &["chat", "archive"], 0),
        ("schema", None, &["schema", "claim"], 0),
        ("schema", None, &["schema"], 0),
        ("version", None, &["--version"], 0),
        ("help", None, &["help", "claim"], 0),
        ("help", None, &["chat", "help", "say"], 0),
        ("completions", None, &["completions", "bash"], 0),
        ("man", None, &["man", "claim"], 0),
        ("demo", None, &["demo"], 0),
        ("replay", None, &["replay", fixture], 0),
        ("wait", Some("engineer-2"), &["wait", "--for", "inbox", "--timeout", "10s"], 0),
        ("watch", None, &["watch", "--once", "--from-start"], 0),
        ("log", None, &["log", "--limit", "5"], 0),
        ("cursors", None, &["cursors"], 0),
        ("config", None, &["config"], 0),
        ("mirror", None, &["mirror", "mirrored"], 0),
        ("send", Some("engineer"), &["send", "--file", ask], 0),
        ("asks", None, &["asks", "--all"], 0),
        ("thread", None, &["thread", "ask-001"], 0),
        // One message, by its id (a numbered one: `seq`, `seq_epoch`).
        ("show", None, &["show", "ask-001"], 0),
        ("seq reset", Some("engineer"), &["seq", "reset"], 0),
        ("seq import", None, &["seq", "import", state], 0),
        ("seq state", None, &["seq", "state"], 0),
        ("agent retire", Some("coordinator"), &["agent", "retire", "engineer-2"], 0),
        ("orphans", None, &["orphans"], 0),
        (
            "orphans redeliver",
            Some("coordinator"),
            &["orphans", "redeliver", "which-db-1", "--to", "engineer"],
            0,
        ),
        ("import tx", None, &["import", "tx", txdir], 0),
        ("export tx", None, &["export", "tx", out], 0),
        (
            "send",
            Some("coordinator"),
            &[
                "send",
                "--to",
                "all",
                "--intent",
                "implement_feature",
                "--task",
                "ARC-1",
                "--summary",
                "old",
            ],
            0,
        ),
        ("claim", Some("engineer"), &["claim", "ARC-1"], 0),
        ("status", Some("engineer"), &["status", "ARC-1", "in_progress"], 0),
        ("check", Some("engineer"), &["check", "ARC-1", "tests_passed=true"], 0),
        ("status", Some("engineer"), &["status", "ARC-1", "completed"], 0),
        // Only a root in a database can be migrated out of, or into one: the PostgreSQL
        // suite (tests/pg) covers its output; here its refusal.
        ("migrate", None, &["migrate"], 2),
        ("error", Some("nobody"), &["inbox"], 5),
        ("error", None, &["tasks", "--status", "x"], 2),
        ("error", None, &["no-such-command"], 2),
        ("error", None, &["claim", "--bogus-flag"], 2),
    ];
    let mut covered = BTreeSet::new();
    let mut samples = Samples::default();
    for (schema, agent, args, code) in steps {
        let mut run = env.circe([&["--json"][..], args].concat());
        if let Some(a) = agent {
            run = run.agent(a);
        }
        let o: Out = run.run();
        o.code(*code);
        let v = validator(&env, if *code != 0 && *schema == "error" { "error" } else { schema });
        let streamed = ["chat watch", "demo", "replay", "watch", "log"].contains(schema);
        if streamed {
            for line in o.stdout.lines() {
                let doc: Value = serde_json::from_str(line).expect("one JSON object per line");
                valid(&v, &doc, &o.show());
                samples.add(schema, doc);
            }
        } else {
            let doc = o.json();
            assert!(doc.is_object(), "an object at the top: {}", o.show());
            if *code != 0 && *schema != "error" && doc.get("error").is_some() {
                valid(&validator(&env, "error"), &doc, &o.show());
                samples.add("error", doc);
            } else {
                valid(&v, &doc, &o.show());
                samples.add(if *code != 0 { "error" } else { schema }, doc);
            }
        }
        // Every task id is `task_id`, never `task` holding an id.
        assert!(!o.stdout.contains("\"task\": \""), "`task` holding an id: {}", o.show());
        covered.insert((*schema).to_string());
    }
    // The archive, a month later: ARC-1 goes; search, restore, verify and show find it.
    let restored = env.path().join("restored");
    let restored = restored.to_str().unwrap();
    let archive_steps: &[(&str, &[&str])] = &[
        ("archive", &["archive", "--dry-run"]),
        ("archive", &["archive"]),
        ("archive search", &["archive", "search", "ARC-1"]),
        ("archive restore", &["archive", "restore", "ARC-1", "--to", restored]),
        ("archive verify", &["archive", "verify"]),
        ("show", &["show", "ARC-1"]),
    ];
    for (schema, args) in archive_steps {
        let o = env.circe([&["--json"][..], args].concat()).now("2026-01-01T00:00:00Z").run();
        o.ok();
        valid(&validator(&env, schema), &o.json(), &o.show());
        samples.add(schema, o.json());
        assert!(!o.stdout.contains("\"task\": \""), "`task` holding an id: {}", o.show());
        covered.insert((*schema).to_string());
    }
    migrate_both_ways(&env, &mut samples);
    let bad = env.circe(["--json", "chat", "say", "--to", "qa", "--bogus-flag"]).run();
    let message = bad.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("--bogus-flag") && !message.contains("tip:"), "{}", bad.show());
    // clap's tip is a hint (where it helps: `chat say` takes free text).
    let hint = bad.json()["error"]["hint"].as_str().unwrap().to_string();
    assert!(hint.starts_with("to pass '--bogus-flag' as a value"), "{}", bad.show());
    let missing: Vec<String> = leaves().difference(&covered).cloned().collect();
    assert!(missing.is_empty(), "commands whose output no step validates: {missing:?}");
    samples.keys_always_printed_are_required(&env);
}

/// `migrate` both ways, each output checked against the one schema: the root into a fresh
/// schema of the throwaway cluster (its archive stays behind), then back into a folder of
/// the project (the pointer left in `.circe` is stale). Skipped, saying so, only where
/// PostgreSQL is not installed.
fn migrate_both_ways(env: &Env, samples: &mut Samples) {
    if let Some(why) = crate::pg_cluster::unavailable() {
        eprintln!("migrate's outputs not checked: {why}");
        return;
    }
    let url = crate::pg_cluster::cluster().expect("a throwaway cluster").fresh_url();
    let v = validator(env, "migrate");
    let into_db = ["migrate", "--to", &url, "--clock", "client"];
    let into_folder = ["migrate", "--to-local", "back"];
    let mut docs = Vec::new();
    for args in [&into_db[..], &into_folder[..]] {
        let o = env.circe([&["--json"][..], args].concat()).run();
        o.ok();
        valid(&v, &o.json(), &o.show());
        samples.add("migrate", o.json());
        docs.push(o.json());
    }
    // Each direction's shape is exact: none of its keys may be missing, and neither takes
    // the other's.
    let (db, folder) = (&docs[0], &docs[1]);
    assert!(db["retired_to"].is_string() && folder["stale_pointer"].is_string(), "{docs:?}");
    for (doc, theirs) in [(db, ("stale_pointer", "null")), (folder, ("archived_count", "0"))] {
        let Value::Object(mine) = doc else { panic!("an object: {doc}") };
        for k in mine.keys() {
            let mut less = mine.clone();
            less.remove(k);
            assert!(!v.is_valid(&Value::Object(less)), "migrate's `{k}` may be missing: {doc}");
        }
        let mut more = mine.clone();
        more.insert(theirs.0.into(), serde_json::from_str(theirs.1).unwrap());
        assert!(!v.is_valid(&Value::Object(more)), "`{}` passes in {doc}", theirs.0);
    }
}

/// Keys an output may leave out although every output the tests make carries them:
/// (place, key, why); the place is the type whose schema it is (`RowDef`, the `title` or a
/// `$defs` name). Every other key that all its outputs carry is `required`.
const MAY_BE_ABSENT: &[(&str, &str, &str)] = &[
    ("RowDef", "owner", "a waiting task has no owner"),
    ("RowDef", "lease_expires_at", "nor a lease"),
    ("RowDef", "deadline", "a task sent without a deadline has none"),
    ("StatusRecordDef", "deadline", "a task sent without a deadline has none"),
    ("EventDef", "task_id", "an event of no task: a message that names none, a repair"),
];

/// The outputs a test printed, by the schema they follow, to find the keys every one of
/// them carries that their schema does not list as `required`: a reader of the schema
/// would guard against a key that is never missing, or trust one that may be.
#[derive(Default)]
struct Samples(Vec<(String, Value)>);

/// An object schema the samples reached: the keys every instance of it carried (None
/// before the first), and the keys it requires.
#[derive(Default)]
struct Reached {
    always: Option<BTreeSet<String>>,
    required: BTreeSet<String>,
    count: usize,
}

impl Samples {
    fn add(&mut self, schema: &str, doc: Value) {
        self.0.push((schema.to_string(), doc));
    }

    #[track_caller]
    fn keys_always_printed_are_required(&self, env: &Env) {
        let mut schemas = std::collections::BTreeMap::new();
        let mut reached = std::collections::BTreeMap::new();
        for (name, doc) in &self.0 {
            let schema = schemas.entry(name.clone()).or_insert_with(|| {
                let words: Vec<&str> = name.split(' ').collect();
                let o = env.circe([&["schema"][..], &words].concat()).run();
                serde_json::from_str::<Value>(&o.ok().stdout).expect("a schema is JSON")
            });
            walk(schema, schema, "#", doc, &mut |at, required, keys| {
                // A type's schema under `$defs` is one place in every command that prints it.
                let title = schema.get("title").and_then(Value::as_str).unwrap_or(name);
                let place = match at.strip_prefix("#/$defs/") {
                    Some(def) => def.to_string(),
                    None if at == "#" => title.to_string(),
                    None => format!("{name}{}", &at[1..]),
                };
                let r: &mut Reached = reached.entry(place).or_default();
                r.count += 1;
                r.required.clone_from(required);
                r.always = Some(match r.always.take() {
                    None => keys.clone(),
                    Some(a) => a.intersection(keys).cloned().collect(),
                });
            });
        }
        let allowed: BTreeSet<(&str, &str)> =
            MAY_BE_ABSENT.iter().map(|(s, k, _)| (*s, *k)).collect();
        let mut wrong = Vec::new();
        for (place, r) in &reached {
            for k in r.always.iter().flatten().filter(|k| !r.required.contains(*k)) {
                if !allowed.contains(&(place.as_str(), k.as_str())) {
                    wrong.push(format!("{place}: `{k}` (in all {} outputs)", r.count));
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "keys every output carried that the schema does not require (require them, or, \
             when an output may lack one, say why in MAY_BE_ABSENT):\n{}",
            wrong.join("\n")
        );
    }
}

/// Told of each object schema reached: where it is, its `required`, the object's keys.
type Seen<'a> = dyn FnMut(&str, &BTreeSet<String>, &BTreeSet<String>) + 'a;

/// Follows `doc` through `node` (a part of `root`, `at` its place), calling `seen` with
/// every object schema an object of `doc` meets: where it is, its `required`, the keys the
/// object has. Of `anyOf`/`oneOf`, the alternatives the value is valid against.
fn walk(root: &Value, node: &Value, at: &str, doc: &Value, seen: &mut Seen<'_>) {
    if let Some(r) = node.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or_default();
        if let Some(d) = root.get("$defs").and_then(|d| d.get(name)) {
            walk(root, d, r, doc, seen);
        }
        return;
    }
    for alt in ["anyOf", "oneOf", "allOf"] {
        for (i, a) in node.get(alt).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let mut with_defs = a.clone();
            if let (Some(o), Some(defs)) = (with_defs.as_object_mut(), root.get("$defs")) {
                o.insert("$defs".into(), defs.clone());
            }
            if jsonschema::is_valid(&with_defs, doc) {
                walk(root, a, &format!("{at}/{alt}/{i}"), doc, seen);
            }
        }
    }
    if let (Some(props), Some(obj)) =
        (node.get("properties").and_then(Value::as_object), doc.as_object())
    {
        let required: BTreeSet<String> = node
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|k| k.as_str().map(str::to_string))
            .collect();
        seen(at, &required, &obj.keys().cloned().collect());
        for (k, v) in obj {
            if let Some(p) = props.get(k) {
                walk(root, p, &format!("{at}/properties/{k}"), v, seen);
            }
        }
    }
    if let Some(obj) = doc.as_object()
        && let Some(extra) = node.get("additionalProperties").filter(|x| x.is_object())
    {
        let props = node.get("properties").and_then(Value::as_object);
        for (_, v) in obj.iter().filter(|(k, _)| props.is_none_or(|p| !p.contains_key(*k))) {
            walk(root, extra, &format!("{at}/additionalProperties"), v, seen);
        }
    }
    if let (Some(items), Some(list)) = (node.get("items"), doc.as_array()) {
        for v in list {
            walk(root, items, &format!("{at}/items"), v, seen);
        }
    }
}

/// The validator is not a rubber stamp: output that breaks the vocabulary fails it.
#[test]
fn a_document_off_the_schema_fails() {
    let env = Env::new();
    let v = validator(&env, "reap");
    assert!(v.is_valid(&serde_json::json!({"reaped": [{"task_id": "T-1", "status": "new"}],
        "asks_expired": [], "messages_filed": []})));
    assert!(!v.is_valid(&serde_json::json!({"reaped": [{"task": "T-1", "status": "new"}]})));
    assert!(!v.is_valid(&serde_json::json!([{"task_id": "T-1", "status": "new"}])));
    let v = validator(&env, "tasks");
    assert!(!v.is_valid(&serde_json::json!({"tasks": [{"task_id": "T"}]})));
}

/// A task with a deadline, and the same task expired by `reap`, print what the schemas say
/// in every command that shows a task (the record's `deadline`, the status `expired`).
#[test]
fn a_task_with_a_deadline_and_an_expired_task_print_what_their_schemas_say() {
    let env = Env::new();
    let draft = env.path().join("dl.md");
    std::fs::write(
        &draft,
        "# MESSAGE\nto: role:engineer\nintent: implement_feature\ntask_id: DL-1\n\
         deadline: 2030-01-01T00:00:00Z\n\n## Summary\nbefore the year ends\n",
    )
    .unwrap();
    let d = draft.to_str().unwrap();
    let later = "2030-01-02T00:00:00Z";
    let mut samples = Samples::default();
    // (schema, agent, args, at the later time)
    let steps: &[(&str, Option<&str>, &[&str], bool)] = &[
        ("send", Some("coordinator"), &["send", "--file", d], false),
        // Claimed by a waiter: its `claimed` is a claim as `claim --json` prints one.
        (
            "wait",
            Some("engineer"),
            &["wait", "--for", "claimable", "--claim", "--timeout", "10s"],
            false,
        ),
        ("status", Some("engineer"), &["status", "DL-1", "in_progress"], false),
        ("heartbeat", Some("engineer"), &["heartbeat", "DL-1"], false),
        ("show", None, &["show", "DL-1"], false),
        ("tasks", None, &["tasks"], false),
        ("board", None, &["board"], false),
        ("reap", None, &["reap"], true),
        ("show", None, &["show", "DL-1"], true),
        ("tasks", None, &["tasks"], true),
        ("board", None, &["board"], true),
        ("log", None, &["log", "--everything"], true),
    ];
    for (schema, agent, args, late) in steps {
        let mut run = env.circe([&["--json"][..], args].concat());
        if let Some(a) = agent {
            run = run.agent(a);
        }
        if *late {
            run = run.now(later);
        }
        let o = run.run();
        o.ok();
        let v = validator(&env, schema);
        if *schema == "log" {
            for line in o.stdout.lines() {
                let doc = serde_json::from_str(line).expect("a JSON line");
                valid(&v, &doc, &o.show());
                samples.add(schema, doc);
            }
        } else {
            valid(&v, &o.json(), &o.show());
            samples.add(schema, o.json());
        }
    }
    samples.keys_always_printed_are_required(&env);
    let shown = env.circe(["--json", "show", "DL-1"]).now(later).run();
    assert_eq!(shown.json()["task"]["status"], "expired", "{}", shown.show());
}

/// The kinds of value (`array`, `object`, `string`, `number`, `boolean`) a property's schema
/// allows, `null` aside, following `$ref`s into the document's `$defs`.
fn kinds_of(v: &Value, defs: &Value, depth: usize, out: &mut BTreeSet<String>) {
    if depth > 8 {
        return;
    }
    if let Some(r) = v.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or_default();
        if let Some(d) = defs.get(name) {
            kinds_of(d, defs, depth + 1, out);
        }
        return;
    }
    let number = |t: &str| if t == "integer" { "number".to_string() } else { t.to_string() };
    match v.get("type") {
        Some(Value::String(t)) => {
            out.insert(number(t));
        }
        Some(Value::Array(ts)) => out.extend(ts.iter().filter_map(Value::as_str).map(number)),
        _ if v.get("enum").is_some() || v.get("const").is_some() => {
            out.insert("string".into());
        }
        _ => {}
    }
    for alt in ["anyOf", "oneOf"] {
        for a in v.get(alt).and_then(Value::as_array).into_iter().flatten() {
            kinds_of(a, defs, depth + 1, out);
        }
    }
    out.remove("null");
}

/// Every property of a schema, with the kinds of value it allows: key -> kinds.
fn properties(
    v: &Value,
    defs: &Value,
    seen: &mut BTreeSet<String>,
    out: &mut Vec<(String, BTreeSet<String>)>,
) {
    if let Some(r) = v.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or_default().to_string();
        if seen.insert(name.clone())
            && let Some(d) = defs.get(&name)
        {
            properties(d, defs, seen, out);
        }
        return;
    }
    for (k, p) in v.get("properties").and_then(Value::as_object).into_iter().flatten() {
        let mut kinds = BTreeSet::new();
        kinds_of(p, defs, 0, &mut kinds);
        out.push((k.clone(), kinds));
        properties(p, defs, seen, out);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(x) = v.get(key).filter(|x| x.is_object()) {
            properties(x, defs, seen, out);
        }
    }
    for alt in ["anyOf", "oneOf", "allOf"] {
        for a in v.get(alt).and_then(Value::as_array).into_iter().flatten() {
            properties(a, defs, seen, out);
        }
    }
}

/// A schema's property: its key and the kinds of value it holds.
type Property = (String, BTreeSet<String>);

/// Every command that has a schema (and `error` when `with_error`), with the properties of
/// its schema: each key and the kinds of value it holds.
fn every_schema(with_error: bool) -> Vec<(String, Vec<Property>)> {
    let env = Env::bare();
    let list = env.circe(["schema", "--json"]).run();
    let mut commands: Vec<String> = list.ok().json()["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    if with_error {
        commands.push("error".into());
    }
    commands
        .into_iter()
        .map(|cmd| {
            let words: Vec<&str> = cmd.split(' ').collect();
            let o = env.circe([&["schema"][..], &words].concat()).run();
            let schema: Value = serde_json::from_str(&o.ok().stdout).unwrap();
            let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
            let mut props = Vec::new();
            properties(&schema, &defs, &mut BTreeSet::new(), &mut props);
            (cmd, props)
        })
        .collect()
}

/// One vocabulary: a key holds one kind of value in every command's output (a plural key is
/// a list, its count `<thing>_count`), but for the few PROTOCOLS section 11 names.
#[test]
fn a_key_holds_one_kind_of_value_in_every_command() {
    let mut kinds: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>> =
        std::collections::BTreeMap::new();
    for (cmd, props) in every_schema(false) {
        for (k, ks) in props {
            for kind in ks {
                kinds.entry(k.clone()).or_default().entry(kind).or_insert_with(|| cmd.clone());
            }
        }
    }
    let mixed: Vec<String> =
        kinds.iter().filter(|(_, by)| by.len() > 1).map(|(k, by)| format!("{k}: {by:?}")).collect();
    let names: BTreeSet<&str> =
        mixed.iter().map(|m| m.split(':').next().unwrap_or_default()).collect();
    // An address (string) or a rule's roles and an outbox entry's boxes (lists); a text, a
    // ticket's file name, or a message (object); an event's kind, or `wait`'s event.
    let allowed: BTreeSet<&str> = ["event", "from", "message", "to"].into_iter().collect();
    assert_eq!(names, allowed, "keys holding more than one kind of value:\n{}", mixed.join("\n"));
}

/// Every command's JSON keys, written down (`snapshots/cli__schema__vocabulary.snap`): a key
/// renamed or dropped in any output changes this list, so it is done on purpose (and said
/// in README's "Upgrading"), never by a refactor that renames a field. The schema test
/// cannot see a rename: the schema and the output come from one struct.
#[test]
fn every_commands_keys_are_written_down() {
    let mut text = String::new();
    for (cmd, props) in every_schema(true) {
        let keys: BTreeSet<String> = props.into_iter().map(|(k, _)| k).collect();
        text.push_str(&format!("{cmd}: {}\n", keys.into_iter().collect::<Vec<_>>().join(" ")));
    }
    insta::assert_snapshot!("vocabulary", text);
}
