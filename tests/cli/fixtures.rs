//! Fixture snapshots: every `fixtures/<case>/steps` is replayed with `circe::fixture::run`
//! in a fresh temp project (after copying `fixtures/<case>/tree/` when there is one) and
//! snapshotted whole: each step's command, exit code and output, then the final tree under
//! `.circe`, every TASKS record and the event log. Adding a fixture needs no Rust: add the
//! folder and run `INSTA_UPDATE=always cargo test --test cli fixtures`, then read the .snap.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use circe::fixture::{self, Step};

use crate::common::{common_filters, exe, tree};

fn cases() -> Vec<(String, PathBuf)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .expect("fixtures/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("steps").is_file())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        .collect();
    out.sort();
    out
}

/// Replay one fixture and render everything it did and left.
pub fn transcript(case_dir: &Path, project: &Path) -> String {
    let steps = fixture::parse_steps(&std::fs::read_to_string(case_dir.join("steps")).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", case_dir.display()));
    if case_dir.join("tree").is_dir() {
        circe::engine::local::copy_tree(&case_dir.join("tree"), project).unwrap();
    }
    if crate::common::pg_mode() {
        // The fixture's own `circe init` then finds .circe/circe.yaml naming this root.
        let url = crate::common::pg_url();
        let out = std::process::Command::new(exe())
            .args(["init", "--engine", &url, "--clock", "client"])
            .current_dir(project)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let outcomes = fixture::run(exe(), project, &steps, &mut |_, _| {}).unwrap();
    // Outcomes come one per `agent: command` step, in order: walk the steps beside them.
    let mut text = String::new();
    let mut runs = outcomes.iter();
    for step in &steps {
        match step {
            Step::Say(s) => {
                let _ = writeln!(text, "\n## {s}");
            }
            Step::Now(t) => {
                let _ = writeln!(text, "@now {t}");
            }
            Step::Run { .. } => {
                let o = runs.next().expect("one outcome per command step");
                let _ = writeln!(text, "{}", fixture::command_line(o.agent.as_deref(), &o.args));
                let _ = writeln!(text, "exit: {}", o.code);
                for (name, s) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
                    if !s.is_empty() {
                        let _ = writeln!(text, "--- {name}");
                        text.push_str(s);
                        if !s.ends_with('\n') {
                            text.push('\n');
                        }
                    }
                }
            }
        }
    }
    let failed = outcomes.iter().filter(|o| o.code != 0).count();
    let _ = writeln!(text, "\n== {} steps, {failed} with a non-zero exit", outcomes.len());
    let mut root = project.join(".circe");
    if crate::common::pg_mode() {
        let mirror = project.join("mirror");
        let out = std::process::Command::new(exe())
            .arg("mirror")
            .arg(&mirror)
            .current_dir(project)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        root = mirror;
    }
    let files = tree(&root, &["locks", "queue", "tmp", ".circe-mirror"]);
    text.push_str("\n== tree (.circe, without locks/ queue/ tmp/)\n");
    for path in files.keys() {
        let _ = writeln!(text, "{path}");
    }
    for (path, content) in &files {
        if path.starts_with("TASKS/") && !path.ends_with('/') || path == "LOGS/events.jsonl" {
            let _ = write!(text, "\n== {path}\n{content}");
        }
    }
    text
}

#[test]
fn fixtures() {
    let cases = cases();
    assert!(cases.iter().any(|(n, _)| n == "reference-flow"), "fixtures/ was not found");
    let mut failed = Vec::new();
    for (name, dir) in &cases {
        let project = tempfile::Builder::new().prefix("circe-test-").tempdir().unwrap();
        let text = transcript(dir, project.path());
        let mut settings = insta::Settings::clone_current();
        let raw = project.path().display().to_string();
        settings.add_filter(&regex_escape(&raw), "[PROJECT]");
        for (re, with) in common_filters() {
            settings.add_filter(&re, with.as_str());
        }
        settings.set_input_file(dir.join("steps"));
        settings.set_description(format!("fixtures/{name}/steps"));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            settings.bind(|| insta::assert_snapshot!(format!("fixture-{name}"), text));
        }));
        if r.is_err() {
            failed.push(name.clone());
        }
    }
    assert!(failed.is_empty(), "fixtures whose snapshot differs: {failed:?}");
}

fn regex_escape(s: &str) -> String {
    s.chars().fold(String::new(), |mut out, c| {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
        out
    })
}

/// Every fixture of the source tree is built into the binary, exactly as its file says,
/// so `circe replay CASE` runs where there is no source tree.
#[test]
fn every_fixture_is_built_in() {
    let cases = cases();
    let names: Vec<&str> = cases.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(fixture::built_in_names().collect::<Vec<_>>(), names);
    for (name, dir) in &cases {
        let steps = std::fs::read_to_string(dir.join("steps")).unwrap();
        assert_eq!(fixture::built_in(name), Some(steps.as_str()), "{name}");
    }
    let away = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(exe())
        .args(["replay", "race-lost"])
        .current_dir(away.path())
        .env_remove("CIRCE_ROOT")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
