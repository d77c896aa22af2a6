//! `circe init`, root discovery and `--root`.

use crate::common::Env;

const AGENTS: [&str; 6] = ["coordinator", "eagle", "engineer", "qa", "rooster", "scribe"];

#[test]
fn init_makes_the_layout_and_one_agent_per_role() {
    let env = Env::bare();
    let out = env.circe(["init"]).run();
    out.ok();
    snap!(env, out);
    for b in ["NEW_MESSAGES", "AGENTS", "LOGS", "TASKS", "tmp", "locks", "queue"] {
        assert!(env.root().join(b).is_dir(), "missing {b}");
    }
    assert!(env.read("circe.yaml").contains("version: 1"));
    for a in AGENTS {
        assert!(env.root().join("AGENTS").join(a).join("INBOX").is_dir(), "{a} INBOX");
        assert!(env.root().join("AGENTS").join(a).join("WORKSPACE").is_dir(), "{a} WORKSPACE");
        assert_eq!(env.read(&format!("AGENTS/{a}/agent.yaml")), format!("role: {a}\n"));
    }
}

#[test]
fn init_is_idempotent() {
    let env = Env::new();
    let before = env.state();
    let out = env.circe(["init"]).run();
    out.ok();
    assert!(out.stdout.contains("kept as it was"), "{}", out.show());
    assert!(out.stdout.contains("agents: all present"), "{}", out.show());
    let j = env.circe(["init", "--json"]).run();
    j.ok();
    let j = j.json();
    assert_eq!(j["config_written"], false);
    assert_eq!(j["agents_added"], serde_json::json!([]));
    crate::common::assert_unchanged(&before, &env.state());
}

/// A root inside a root's own folder (its `.circe`, a box) is refused and nothing is made:
/// commands run there would act on it, and the outer root would hold it as strays.
#[test]
fn init_inside_a_roots_folder_is_refused() {
    local_only!("names the root's folders");
    let env = Env::new();
    let before = env.state();
    for inner in [".circe", ".circe/AGENTS/qa/INBOX"] {
        let dir = env.path().join(inner);
        let o = env.circe(["init", dir.to_str().unwrap()]).run();
        assert_eq!(o.code, 2, "{}", o.show());
        assert!(o.stderr.contains("lies inside the root folder"), "{}", o.show());
    }
    crate::common::assert_unchanged(&before, &env.state());
    assert!(
        !env.root().join(".circe").exists() && !env.root().join("AGENTS/qa/INBOX/.circe").exists()
    );
}

#[test]
fn init_never_clobbers_an_edited_config() {
    let env = Env::new();
    let edited = "version: 1\nlease: 5m\nmax_attempts: 2\n";
    env.set_config(edited);
    env.circe(["init"]).run().ok();
    assert_eq!(env.read("circe.yaml"), edited);
}

/// And a `queue/` made again names the tasks waiting: `claim --next` finds them. Which
/// folders it made again is said (`boxes_made`), the root's own as the agents' boxes.
#[test]
fn init_adds_missing_boxes_and_agents_back() {
    local_only!("removes folders of a root");
    let env = Env::new();
    env.open_task("T-1");
    std::fs::remove_dir_all(env.root().join("AGENTS/qa")).unwrap();
    for gone in ["queue", "tmp", "AGENTS/eagle/INBOX"] {
        std::fs::remove_dir_all(env.root().join(gone)).unwrap();
    }
    let out = env.circe(["init", "--json"]).run();
    out.ok();
    assert_eq!(
        out.json()["agents_added"],
        serde_json::json!([{"agent": "qa", "role": "qa", "retired": false}])
    );
    let made = serde_json::json!(["tmp", "queue", "AGENTS/eagle/INBOX"]);
    assert_eq!(out.json()["boxes_made"], made, "{}", out.show());
    std::fs::remove_dir_all(env.root().join("locks")).unwrap();
    let out = env.circe(["init"]).run();
    assert!(out.ok().stdout.contains("\nboxes made again: locks\n"), "{}", out.show());
    assert!(env.root().join("queue").is_dir());
    assert!(env.root().join("AGENTS/qa/INBOX").is_dir());
    env.circe(["doctor"]).run().ok();
    env.as_("engineer", &["claim", "--next"]).ok();
}

/// A circe.yaml that does not parse (exit 3), or a file where a folder belongs (exit 2):
/// refused naming the path, and nothing is made.
#[test]
fn init_refuses_a_bad_config_or_a_file_and_makes_nothing() {
    local_only!("makes local roots");
    let env = Env::bare();
    std::fs::create_dir_all(env.path().join("f2/.circe")).unwrap();
    std::fs::write(env.path().join("f2/.circe/circe.yaml"), "garbage: [\n").unwrap();
    let o = env.circe(["init", "f2"]).run();
    assert_eq!(o.code, 3, "{}", o.show());
    assert!(o.stderr.contains("f2/.circe/circe.yaml: "), "{}", o.show());
    let made: Vec<_> = std::fs::read_dir(env.path().join("f2/.circe")).unwrap().collect();
    assert_eq!(made.len(), 1, "only circe.yaml: {made:?}");
    std::fs::write(env.path().join("afile"), "x").unwrap();
    std::fs::create_dir(env.path().join("f1")).unwrap();
    std::fs::write(env.path().join("f1/.circe"), "x").unwrap();
    std::fs::create_dir_all(env.path().join("f3/.circe")).unwrap();
    std::fs::write(env.path().join("f3/.circe/AGENTS"), "x").unwrap();
    // A link where the root or one of its folders belongs: nothing is made through it.
    std::fs::create_dir_all(env.path().join("l1")).unwrap();
    std::fs::create_dir_all(env.path().join("elsewhere")).unwrap();
    std::os::unix::fs::symlink("../elsewhere", env.path().join("l1/.circe")).unwrap();
    std::fs::create_dir_all(env.path().join("l2/.circe")).unwrap();
    std::os::unix::fs::symlink("../../elsewhere", env.path().join("l2/.circe/tmp")).unwrap();
    std::fs::create_dir_all(env.path().join("l3/.circe")).unwrap();
    std::os::unix::fs::symlink("../../elsewhere", env.path().join("l3/.circe/seq")).unwrap();
    for (dir, says) in [
        ("l3", "l3/.circe/seq is a link"),
        ("l1", "l1/.circe is a link"),
        ("l2", "l2/.circe/tmp is a link"),
        ("afile", "afile is a file"),
        ("afile/sub", "afile is a file"),
        ("f1", "f1/.circe is a file"),
        ("f3", "f3/.circe/AGENTS is a file"),
    ] {
        let o = env.circe(["init", dir]).run();
        assert_eq!(o.code, 2, "{}", o.show());
        assert!(o.stderr.contains(says), "{}", o.show());
    }
    let made: Vec<_> = std::fs::read_dir(env.path().join("f3/.circe")).unwrap().collect();
    assert_eq!(made.len(), 1, "nothing made beside the file: {made:?}");
    let through: Vec<_> = std::fs::read_dir(env.path().join("elsewhere")).unwrap().collect();
    assert!(through.is_empty(), "nothing made through a link: {through:?}");
}

#[test]
fn init_into_a_named_folder() {
    let env = Env::bare();
    env.circe(["init", "sub/project"]).run().ok();
    assert!(env.path().join("sub/project/.circe/circe.yaml").is_file());
    assert!(!env.root().exists());
}

#[test]
fn the_root_is_found_from_a_subfolder() {
    let env = Env::new();
    let deep = env.path().join("src/a/b");
    std::fs::create_dir_all(&deep).unwrap();
    let out = env.circe(["agent", "list", "--json"]).cwd(&deep).run();
    out.ok();
    assert_eq!(out.json()["agents"].as_array().map(Vec::len), Some(6));
    // And a command run from there writes into that root.
    env.circe(["send", "--to", "qa", "--intent", "inform", "--summary", "hi"])
        .agent("engineer")
        .cwd(&deep)
        .run()
        .ok();
    assert_eq!(env.ls("AGENTS/qa/INBOX").len(), 1);
}

#[test]
fn outside_any_root_is_a_usage_error_with_a_hint() {
    let env = Env::bare();
    let out = env.circe(["tasks"]).run();
    out.code(2);
    assert!(out.stderr.contains("hint:") && out.stderr.contains("circe init"), "{}", out.show());
    snap!(env, out);
    let j = env.circe(["tasks", "--json"]).run();
    j.code(2);
    let j = j.json();
    assert_eq!(j["error"]["kind"], "usage");
    assert_eq!(j["error"]["exit_code"], 2);
    assert!(j["error"]["hint"].as_str().unwrap().contains("circe init"));
}

#[test]
fn root_flag_takes_the_project_or_the_circe_folder() {
    let env = Env::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let project = env.path().display().to_string();
    let dotcirce = env.dot_circe().display().to_string();
    for root in [&project, &dotcirce] {
        let out = env.circe(["--root", root, "agent", "list"]).cwd(elsewhere.path()).run();
        out.ok();
        assert!(out.stdout.contains("engineer"), "{}", out.show());
    }
    // CIRCE_ROOT works the same way.
    let out = env.circe(["agent", "list"]).var("CIRCE_ROOT", &dotcirce).cwd(elsewhere.path()).run();
    out.ok();
    // A --root that is not a root: usage error, with a hint.
    let out = env.circe(["--root", elsewhere.path().to_str().unwrap(), "tasks"]).run();
    out.code(2);
    assert!(out.stderr.contains("hint:"), "{}", out.show());
}

/// `init --root DIR` (or `--root DIR/.circe`) makes the root there, as every other command
/// reads `--root`; a DIR given as the argument wins.
#[test]
fn init_makes_the_root_that_root_names() {
    local_only!("a folder root");
    let env = Env::bare();
    let there = env.path().join("team");
    env.circe(["init", "--root", there.to_str().unwrap()]).run().ok();
    assert!(there.join(".circe/circe.yaml").is_file());
    assert!(!env.path().join(".circe").exists(), "made in the current folder");
    let dotted = env.path().join("other/.circe");
    env.circe(["init", "--root", dotted.to_str().unwrap()]).run().ok();
    assert!(dotted.join("circe.yaml").is_file());
    let arg = env.path().join("third");
    env.circe(["init", arg.to_str().unwrap(), "--root", there.to_str().unwrap()]).run().ok();
    assert!(arg.join(".circe/circe.yaml").is_file());
}

/// A circe.yaml written beside `.circe` (`circe config > circe.yaml`, to edit and `--set`
/// it) is no second root: commands in the project folder still find `.circe`, and the file
/// sets the configuration.
#[test]
fn a_config_file_beside_the_root_is_no_root() {
    let env = Env::new();
    let shown = env.circe(["config"]).run();
    shown.ok();
    let edited = shown.stdout.replace("lease: 30m", "lease: 45m");
    assert_ne!(edited, shown.stdout, "the default config names its lease");
    std::fs::write(env.path().join("circe.yaml"), &edited).unwrap();
    env.circe(["tasks"]).run().ok();
    env.circe(["config", "--set", "circe.yaml"]).run().ok();
    let now = env.circe(["config"]).run();
    assert!(now.stdout.contains("lease: 45m"), "{}", now.show());
    // An empty one too (the shell made it before `circe config` ran).
    std::fs::write(env.path().join("circe.yaml"), "").unwrap();
    env.circe(["config"]).run().ok();
}

/// `circe init` in a folder below a project with a root makes no second root unasked: the
/// folder's commands already use the project's (exit 3, nothing made); `circe init .` makes
/// one anyway.
#[test]
fn init_below_a_root_makes_no_second_root_unasked() {
    let env = Env::local();
    let below = env.path().join("src");
    std::fs::create_dir(&below).unwrap();
    let o = env.circe(["init"]).cwd(&below).run();
    o.code(3);
    assert!(o.stderr.contains("lies below") && o.stderr.contains("circe init ."), "{}", o.show());
    assert!(!below.join(".circe").exists());
    env.circe(["tasks"]).cwd(&below).run().ok();
    env.circe(["init", "."]).cwd(&below).run().ok();
    assert!(below.join(".circe/circe.yaml").is_file());
    // Inside the root's own folder it is the usage error it always was (exit 2).
    let inside = env.circe(["init"]).cwd(env.dot_circe().join("AGENTS")).run();
    inside.code(2);
    assert!(inside.stderr.contains("lies inside the root folder"), "{}", inside.show());
}
