//! Agents in containers: commands of another PID namespace share the root. Their pids mean
//! nothing here, so what they stage in tmp/ is left alone until it is old enough to be a
//! leftover (`FOREIGN_STAGING_AGE`), never taken for a dead command's at once.

use std::process::Command;
use std::time::{Duration, SystemTime};

use crate::common::{BIN, Root};

/// The send that crashes after its delivery, its events still in its journal in tmp/:
/// from another namespace this is what a send still at work there looks like.
const SEND: [&str; 9] = [
    "send",
    "--to",
    "qa",
    "--intent",
    "inform",
    "--summary",
    "from a container",
    "--msg-id",
    "20251121T170000000Z-container",
];

/// The journal files in tmp/.
fn journals(r: &Root) -> Vec<String> {
    std::fs::read_dir(r.dir.join("tmp"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("events-"))
        .collect()
}

/// How many lines of the event log name the container's message.
fn logged(r: &Root) -> usize {
    std::fs::read_to_string(r.dir.join("LOGS/events.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| l.contains("20251121T170000000Z-container"))
        .count()
}

#[test]
fn what_a_command_of_another_pid_namespace_stages_is_left_until_it_is_old() {
    let r = Root::new(0);
    let mut inside = Command::new("unshare");
    inside
        .args(["--pid", "--fork", BIN, "--agent", "engineer"])
        .args(SEND)
        .env_clear()
        .env("CIRCE_ROOT", &r.dir)
        .env("CIRCE_DURABILITY", "relaxed")
        .env("CIRCE_CRASH_AT", "send.logging");
    let code = inside.output().map(|o| o.status.code());
    if !matches!(code, Ok(Some(86))) {
        // As root (CI here) it must run: a skip there would hide the checker.
        let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
            s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        });
        assert!(!root, "`unshare --pid --fork` failed as root: {code:?}");
        eprintln!("SKIPPED: `unshare --pid --fork` cannot run circe here ({code:?})");
        return;
    }
    let found = journals(&r);
    let [journal] = &found[..] else { panic!("one journal: {found:?}") };
    // Its pid (1 in its namespace) is made one that runs nothing here, as a container's
    // pid mostly is: this namespace cannot tell that command from a dead one.
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let mut fields = journal.splitn(3, '-');
    let (kind, _pid, rest) = (fields.next().unwrap(), fields.next(), fields.next().unwrap());
    assert!(rest.starts_with("ns"), "the journal's name says its namespace: {journal}");
    let renamed = format!("{kind}-{}-{rest}", gone.id());
    std::fs::rename(r.dir.join("tmp").join(journal), r.dir.join("tmp").join(&renamed)).unwrap();
    // Ordinary commands and doctor --repair leave it: it may be a live command's.
    r.ok(Some("qa"), &["inbox"]);
    r.ok(Some("coordinator"), &["send", "--to", "qa", "--intent", "inform", "--summary", "x"]);
    let (code, violations) = r.doctor(true);
    assert!(code == 0 && violations.is_empty(), "{violations:#?}");
    assert_eq!(
        journals(&r),
        std::slice::from_ref(&renamed),
        "a young staging of another namespace was taken"
    );
    assert_eq!(logged(&r), 0, "its events were logged for it while it may still log them");
    // Once old, it is a leftover: doctor --repair logs what it holds, once.
    let file = std::fs::File::options().write(true).open(r.dir.join("tmp").join(&renamed)).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(11 * 60)).unwrap();
    let (_, violations) = r.doctor(false);
    assert!(!violations.is_empty(), "an old leftover is reported");
    let (_, violations) = r.doctor(true);
    assert!(!violations.is_empty(), "and repaired: {violations:#?}");
    assert!(journals(&r).is_empty());
    assert_eq!(logged(&r), 1);
    r.assert_clean("after the repair");
}
