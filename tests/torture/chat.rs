//! The chat channel under load: many agents saying at once (no torn, interleaved, lost or
//! repeated message), and a watcher killed with SIGKILL and restarted on its cursor while
//! they write (every message printed at least once, in order; a repeat only of the line in
//! flight at the kill).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use circe::chat::{LineKind, Position, Scanner, classify};

use crate::caught::until_caught;
use crate::common::{Rng, Root, scaled};

/// Message `i` of writer `w`: every fourth one has three lines.
fn text(w: usize, i: usize) -> String {
    if i.is_multiple_of(4) {
        format!("w{w} m{i} part 1\nw{w} m{i} part 2\nw{w} m{i} part 3")
    } else {
        format!("w{w} m{i} single")
    }
}

/// `circe chat say` as agent `e{w+1}`, message `i` (multi-line ones through stdin).
fn say(r: &Root, w: usize, i: usize, env: &[(&str, &str)]) -> Option<String> {
    let agent = format!("e{}", w + 1);
    let t = text(w, i);
    let multi = t.contains('\n');
    let args: Vec<&str> = if multi {
        vec!["chat", "say", "--to", "coordinator"]
    } else {
        vec!["chat", "say", "--to", "coordinator", &t]
    };
    let mut cmd = r.cmd(Some(&agent), &args, env);
    cmd.stdin(if multi { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if multi {
        child.stdin.take().unwrap().write_all(t.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    (!out.status.success())
        .then(|| format!("say w{w} m{i} failed: {}", String::from_utf8_lossy(&out.stderr).trim()))
}

/// `writers` threads, each running `per` `chat say` processes one after the other.
fn write_all(
    r: &Root,
    writers: usize,
    per: usize,
    env: &[(&str, &str)],
    limit: Duration,
) -> Vec<String> {
    let start = Instant::now();
    let problems = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for w in 0..writers {
            let problems = &problems;
            s.spawn(move || {
                for i in 0..per {
                    if start.elapsed() > limit {
                        problems
                            .lock()
                            .unwrap()
                            .push(format!("w{w}: time limit after {i} messages"));
                        return;
                    }
                    if let Some(p) = say(r, w, i, env) {
                        problems.lock().unwrap().push(p);
                    }
                }
            });
        }
    });
    problems.into_inner().unwrap()
}

/// Check the channel file: every line belongs to a whole message (0 torn), every message
/// is exactly one that was sent, by its sender (0 interleaved), each sent once (0 lost, 0
/// repeated), each writer's in its order.
fn check_file(data: &[u8], writers: usize, per: usize) -> Vec<String> {
    let mut p = Vec::new();
    let nobody = |_: &str| false;
    let mut inside = false;
    for (n, line) in String::from_utf8_lossy(data).lines().enumerate() {
        match classify(line, &nobody) {
            LineKind::Message(_) => inside = true,
            LineKind::Continuation(_) if inside => {}
            _ => {
                p.push(format!("line {}: torn or stray: {line:?}", n + 1));
                inside = false;
            }
        }
    }
    let mut scanner = Scanner::new(Position::START, false);
    let (_, mut found) = scanner.feed(data, &nobody);
    found.extend(scanner.finish());
    let mut seen: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    let mut last = vec![None; writers];
    for f in &found {
        let m = &f.message;
        let id = m.message.split(' ').take(2).collect::<Vec<_>>();
        let parsed = (id.len() == 2)
            .then(|| {
                Some((
                    id[0].strip_prefix('w')?.parse().ok()?,
                    id[1].strip_prefix('m')?.parse().ok()?,
                ))
            })
            .flatten();
        let Some((w, i)) = parsed.filter(|&(w, i): &(usize, usize)| w < writers && i < per) else {
            p.push(format!("line {}: not a message that was sent: {:?}", m.line_number, m.message));
            continue;
        };
        if m.message != text(w, i) || m.sender != format!("e{}", w + 1) {
            p.push(format!(
                "line {}: interleaved: {:?} from {}",
                m.line_number, m.message, m.sender
            ));
        }
        *seen.entry((w, i)).or_default() += 1;
        if last[w].is_some_and(|l| l >= i) {
            p.push(format!("line {}: w{w} m{i} after m{}", m.line_number, last[w].unwrap_or(0)));
        }
        last[w] = Some(i);
    }
    for w in 0..writers {
        for i in 0..per {
            match seen.get(&(w, i)) {
                None => p.push(format!("w{w} m{i} lost")),
                Some(1) => {}
                Some(k) => p.push(format!("w{w} m{i} written {k} times")),
            }
        }
    }
    p
}

fn writers_run(writers: usize, per: usize, env: &[(&str, &str)], limit: Duration) -> Vec<String> {
    let r = Root::new(writers);
    let t = Instant::now();
    let mut p = write_all(&r, writers, per, env, limit);
    let data = std::fs::read(r.dir.join("chat.md")).unwrap_or_default();
    p.extend(check_file(&data, writers, per));
    eprintln!(
        "chat writers: {writers} x {per} says, {} bytes, {} problems, {:?}",
        data.len(),
        p.len(),
        t.elapsed()
    );
    p
}

#[test]
fn chat_writers_fast() {
    let p = writers_run(4, 200, &[], Duration::from_secs(120));
    assert!(p.is_empty(), "{:#?}", &p[..p.len().min(20)]);
}

/// The checker sees torn and interleaved messages when `say` writes line by line without
/// the lock (a switch that exists in debug builds only).
#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "CIRCE_TEST_BREAK=chat-split-write exists in debug builds only"
)]
fn chat_writers_checker_catches_split_writes() {
    let p = until_caught("chat writers checker", 3, Duration::from_secs(150), |_| {
        let env = [("CIRCE_TEST_BREAK", "chat-split-write")];
        let p = writers_run(4, 40, &env, Duration::from_secs(60));
        p.into_iter().filter(|l| l.contains("interleaved") || l.contains("torn")).collect()
    });
    assert!(!p.is_empty(), "no torn or interleaved message seen with split writes");
    eprintln!("split writes caught: {} problems, first: {}", p.len(), p[0]);
}

#[test]
#[ignore = "long run: cargo test --release --test torture -- --ignored"]
fn chat_writers_long() {
    let p = writers_run(8, scaled(10_000), &[], Duration::from_secs(1800));
    assert!(p.is_empty(), "{:#?}", &p[..p.len().min(20)]);
}

// ---- a watcher killed with SIGKILL --------------------------------------------------------

/// One watcher process and the lines it printed.
fn spawn_watcher(r: &Root, args: &[&str]) -> (Child, std::thread::JoinHandle<Vec<String>>) {
    let mut child =
        r.cmd(None, args, &[]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let reader =
        std::thread::spawn(move || BufReader::new(out).lines().map_while(Result::ok).collect());
    (child, reader)
}

/// How many lines a watcher killed while it catches up may print again: its cursor is
/// saved every 256 lines (or second) until it has read all there is (PROTOCOLS section 13).
const REPEAT_BOUND: usize = 256;

/// Check what the watchers printed, one list per process in order, against the messages
/// in the file (their line numbers): each printed at least once, in order. Each process
/// prints a run of the file's lines without a gap, starting at most `REPEAT_BOUND` lines
/// before the next line no process printed yet, and never after it: a line is repeated
/// only when a process was killed before its cursor was saved, and none is skipped.
pub fn check_watched(outputs: &[Vec<String>], want: &[u64]) -> Vec<String> {
    let mut p = Vec::new();
    let place: std::collections::HashMap<u64, usize> =
        want.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    // How many of `want` have been printed: the next unprinted is `want[next]`.
    let mut next = 0usize;
    let (mut lines, mut repeats) = (0usize, 0usize);
    for (k, out) in outputs.iter().enumerate() {
        let mut prev: Option<usize> = None;
        for line in out {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                p.push(format!("watcher {k}: torn output line {line:?}"));
                continue;
            };
            let n = v["line_number"].as_u64().unwrap_or(0);
            let Some(&at) = place.get(&n) else {
                p.push(format!("watcher {k}: line {n} is no message of the file"));
                continue;
            };
            match prev {
                Some(q) if at != q + 1 => {
                    p.push(format!("watcher {k}: line {n} after line {}", want[q]));
                }
                None if at > next => {
                    p.push(format!(
                        "watcher {k}: started at line {n}, skipping line {}",
                        want[next]
                    ));
                }
                None if at + REPEAT_BOUND < next => {
                    p.push(format!("watcher {k}: started at line {n}, {} lines back", next - at));
                }
                _ => {}
            }
            prev = Some(at);
            lines += 1;
            if at < next {
                repeats += 1;
            } else {
                next = at + 1;
            }
        }
    }
    if next != want.len() {
        p.push(format!("printed {next} of the file's {} messages", want.len()));
    }
    eprintln!(
        "watcher: {} processes, {lines} lines, {repeats} repeated after a kill",
        outputs.len()
    );
    p
}

/// Watchers killed and restarted while `writers` write `per` lines each; the storm goes on
/// after the writers finish until `min_kills` watchers were killed (a fast build writes
/// everything before a fixed number of kills), and the last watcher reads what is left.
fn kill_run(writers: usize, per: usize, limit: Duration, min_kills: usize) -> (usize, Vec<String>) {
    let r = Root::new(writers);
    let done = AtomicBool::new(false);
    let mut outputs = Vec::new();
    let mut kills = 0;
    let mut problems = Vec::new();
    let watch = ["chat", "watch", "--cursor", "k", "--from-start"];
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let p = write_all(&r, writers, per, &[], limit);
            done.store(true, Ordering::Relaxed);
            p
        });
        let mut rng = Rng(0x5eed_c4a7);
        while !done.load(Ordering::Relaxed) || kills < min_kills {
            let (mut child, reader) = spawn_watcher(&r, &watch);
            std::thread::sleep(Duration::from_millis(20 + rng.next() % 60));
            let _ = child.kill();
            let _ = child.wait();
            kills += 1;
            outputs.push(reader.join().unwrap());
        }
        problems.extend(writer.join().unwrap());
    });
    // The last watcher reads what is left and stops.
    let (mut child, reader) = spawn_watcher(&r, &["chat", "watch", "--cursor", "k", "--once"]);
    let _ = child.wait();
    outputs.push(reader.join().unwrap());
    let data = std::fs::read(r.dir.join("chat.md")).unwrap_or_default();
    let mut s = Scanner::new(Position::START, false);
    let (_, mut found) = s.feed(&data, &|_: &str| false);
    found.extend(s.finish());
    let want: Vec<u64> = found.iter().map(|f| f.message.line_number).collect();
    if want.len() != writers * per {
        problems.push(format!("{} messages in the file, want {}", want.len(), writers * per));
    }
    problems.extend(check_watched(&outputs, &want));
    // The checker fails on a broken variant: one printed line taken away.
    if let Some(k) = outputs.iter().position(|o| o.len() > 2) {
        let mut broken = outputs.clone();
        broken[k].remove(1);
        if check_watched(&broken, &want).is_empty() {
            problems.push("the checker missed a lost line".into());
        }
        broken.clone_from(&outputs);
        let dup = broken[k][0].clone();
        broken[k].insert(2, dup);
        if check_watched(&broken, &want).is_empty() {
            problems.push("the checker missed a repeated line".into());
        }
    } else {
        problems.push("no watcher printed more than two lines: nothing to break".into());
    }
    (kills, problems)
}

#[test]
fn chat_watcher_killed_and_restarted_fast() {
    let (kills, p) = kill_run(2, 150, Duration::from_secs(120), 5);
    assert!(p.is_empty(), "{:#?}", &p[..p.len().min(20)]);
    eprintln!("chat watcher storm: {kills} kills");
}

#[test]
#[ignore = "long run: cargo test --release --test torture -- --ignored"]
fn chat_watcher_killed_and_restarted_long() {
    let (kills, p) = kill_run(4, scaled(1_000), Duration::from_secs(900), 50);
    assert!(p.is_empty(), "{:#?}", &p[..p.len().min(20)]);
    eprintln!("chat watcher storm (long): {kills} kills");
}
