//! Disk full / I/O errors: `CIRCE_FAIL_IO=n` fails the n-th store mutation (EIO, or ENOSPC
//! with `CIRCE_FAIL_IO_ERRNO=28`) for n = 1, 2, ... until the command succeeds. Each failure
//! must be a clear error with a non-zero exit, and after `doctor --repair` the root is clean
//! with every earlier message still there exactly once. A failed send's message lies in a box
//! after the repair exactly when its error said it was delivered (else it is sent again, and
//! would be there twice, or the sender was told to leave it, and it is lost). A failed
//! append to the chat channel leaves no part of its message (the channel ends with a whole
//! line); a `queue/` file's torn line is ended by the next append, which starts on a line of
//! its own (`atomic::tests`).

use crate::common::{Root, lost_or_duplicated};
use crate::crash::{SCENARIOS, Scenario};

fn fail_io_run(sc: &Scenario, errno: &str, extra: &[(&str, &str)]) -> (usize, Vec<String>) {
    let mut p = Vec::new();
    let mut normal_runs = 0;
    for n in 1..200 {
        let r = crate::crash::root_for(sc);
        for s in sc.setup {
            let mut env = vec![];
            if let Some(now) = s.2 {
                env.push(("CIRCE_NOW", now));
            }
            assert_eq!(r.run_env(s.0, s.1, &env).code, 0);
        }
        let before = r.messages();
        let ns = n.to_string();
        let mut env = vec![("CIRCE_FAIL_IO", ns.as_str()), ("CIRCE_FAIL_IO_ERRNO", errno)];
        env.extend_from_slice(extra);
        if let Some(now) = sc.cmd.2 {
            env.push(("CIRCE_NOW", now));
        }
        let o = r.run_env(sc.cmd.0, sc.cmd.1, &env);
        let want = if errno == "28" { "No space left" } else { "Input/output error" };
        // Parking refuses the claim that parks (exit 3) by design. A failure a command
        // passes over (best effort) ends as usual too: the sweep ends after three such runs
        // in a row, each checked as the others.
        let normal = if sc.name == "park" { 3 } else { 0 };
        let ctx = format!("{} with I/O call {n} failing (errno {errno})", sc.name);
        if o.code == normal && !o.stderr.contains(want) {
            normal_runs += 1;
            if normal_runs == 3 {
                return (n, p);
            }
        } else {
            normal_runs = 0;
            if o.code == 101 || o.stderr.contains("panicked") {
                p.push(format!("{ctx}: panic: {}", o.stderr));
            }
            if !o.stderr.starts_with("error: ") || o.stderr.trim().len() < 12 {
                p.push(format!("{ctx}: unclear error (exit {}): {:?}", o.code, o.stderr));
            }
            if !o.stderr.contains(want) && o.code == 1 {
                p.push(format!("{ctx}: error does not name the cause: {:?}", o.stderr));
            }
        }
        r.doctor(true);
        let (code, v) = r.doctor(false);
        if code != 0 {
            p.push(format!("{ctx}: after doctor --repair: {v:?}"));
        }
        p.extend(r.task_problems().into_iter().map(|x| format!("{ctx}: {x}")));
        p.extend(
            lost_or_duplicated(&before, &r.messages()).into_iter().map(|x| format!("{ctx}: {x}")),
        );
        p.extend(crate::crash::task_moves(&r).into_iter().map(|x| format!("{ctx}: {x}")));
        p.extend(torn_appends(&r).into_iter().map(|x| format!("{ctx}: {x}")));
        if o.code != 0 && sc.cmd.1.first() == Some(&"send") {
            let said = o.stderr.contains("was delivered");
            let landed = r.messages().keys().any(|m| !before.contains_key(m));
            if said != landed {
                p.push(format!(
                    "{ctx}: the send {} delivered, yet after the repair its message {}: {:?}",
                    if said { "said it was" } else { "failed, not said" },
                    if landed { "lies in a box" } else { "lies nowhere" },
                    o.stderr
                ));
            }
        }
        p.extend(notify_events(&r).into_iter().map(|x| format!("{ctx}: {x}")));
    }
    p.push(format!("{}: never succeeded", sc.name));
    (0, p)
}

/// The chat channel, when it ends inside a line.
fn torn_appends(r: &Root) -> Vec<String> {
    [r.dir.join("chat.md")]
        .into_iter()
        .filter(|f| std::fs::read(f).is_ok_and(|b| b.last().is_some_and(|&c| c != b'\n')))
        .map(|f| format!("{} ends inside a line", f.display()))
        .collect()
}

/// Every notice circe delivered (its msg id, in any box) has exactly one `notify` event.
fn notify_events(r: &Root) -> Vec<String> {
    let log = std::fs::read_to_string(r.dir.join("LOGS/events.jsonl")).unwrap_or_default();
    let mut logged: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for v in log.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()) {
        if v["event"] == "notify"
            && let Some(id) = v["msg_id"].as_str()
        {
            *logged.entry(id.to_string()).or_default() += 1;
        }
    }
    let mut ids = std::collections::BTreeSet::new();
    for (name, boxes) in r.messages() {
        for b in boxes {
            let Some(a) = b.strip_prefix("inbox:") else { continue };
            let path = r.dir.join("AGENTS").join(a).join("INBOX").join(&name);
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if text.lines().any(|l| l == "from: circe")
                && let Some(id) = text.lines().find_map(|l| l.strip_prefix("msg_id: "))
            {
                ids.insert(id.to_string());
            }
        }
    }
    ids.into_iter()
        .filter_map(|id| {
            let n = logged.get(&id).copied().unwrap_or(0);
            (n != 1).then(|| format!("notice {id} has {n} notify events"))
        })
        .collect()
}

#[test]
fn failing_io_every_step() {
    let mut p = Vec::new();
    let mut runs = 0;
    let names = [
        "send_task",
        "send_fanout",
        "claim",
        "release",
        "status",
        "handoff",
        "check",
        "park",
        "reap",
    ];
    for name in names.into_iter().chain(["announce_release", "chat_seq"]) {
        let sc = SCENARIOS.iter().find(|s| s.name == name).unwrap();
        for errno in ["5", "28"] {
            let (n, pr) = fail_io_run(sc, errno, &[]);
            runs += n;
            p.extend(pr);
        }
    }
    eprintln!("failing I/O: {runs} runs");
    assert!(p.is_empty(), "{} problems: {p:#?}", p.len());
}

/// The torn-append check fails when a failed append's half is left in the file.
#[test]
fn failing_io_checker_catches_a_torn_append_left() {
    let sc = SCENARIOS.iter().find(|s| s.name == "chat_seq").unwrap();
    let (_, p) = fail_io_run(sc, "28", &[("CIRCE_TEST_BREAK", "append-keep-torn")]);
    assert!(p.iter().any(|x| x.contains("ends inside a line")), "{p:#?}");
}

/// Real ENOSPC: a 512 KiB tmpfs in a private mount namespace (`unshare -m`), filled up.
#[test]
#[ignore = "long run: cargo test --release --test torture -- --ignored"]
fn real_enospc_on_tiny_tmpfs() {
    let probe = std::process::Command::new("unshare")
        .args(["-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt && umount /mnt"])
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("SKIPPED real_enospc_on_tiny_tmpfs: unshare -m / mount tmpfs not permitted here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = crate::common::BIN;
    let script = format!(
        r#"set -u
mount -t tmpfs -o size=512k tmpfs "{d}" || exit 99
cd "{d}/.."
E=$(mktemp)
export CIRCE_ROOT="{d}/.circe" CIRCE_DURABILITY=relaxed
"{bin}" init "{d}" >/dev/null || exit 98
"{bin}" --agent coordinator send --to all --intent implement_feature --task T0 --summary x >/dev/null || exit 97
dd if=/dev/zero of="{d}/filler" bs=4k 2>/dev/null
i=1; fails=0
while [ $i -le 40 ]; do
  "{bin}" --agent coordinator send --to all --intent implement_feature --task T$i --summary x >/dev/null 2>"$E"
  c=$?; if [ $c -ne 0 ]; then fails=$((fails+1)); grep -q "No space left" "$E" || {{ echo "unclear: $(cat "$E")"; exit 96; }}; fi
  i=$((i+1))
done
"{bin}" --agent engineer claim T0 >/dev/null 2>"$E"; echo "claim on full disk: $?"
"{bin}" doctor --repair >/dev/null 2>"$E"; echo "repair on full disk: $? $(head -1 "$E")"
rm -f "{d}/filler"
"{bin}" doctor --repair >/dev/null
"{bin}" doctor >&2 || exit 95
ls "{d}"/.circe/NEW_MESSAGES/*_T0.md "{d}"/.circe/AGENTS/*/INBOX/*_T0.md 2>/dev/null | wc -l | grep -qx 1 || exit 94
echo "fails=$fails"
"#,
        d = dir.path().display()
    );
    let o =
        std::process::Command::new("unshare").args(["-m", "sh", "-c", &script]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    eprintln!("real ENOSPC: {out} {}", String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "real ENOSPC run failed: {:?} {out}", o.status.code());
    assert!(out.contains("fails="), "{out}");
}
