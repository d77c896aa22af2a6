//! A watcher with a cursor, SIGKILLed again and again while 8 writers append events: every
//! event must reach its output at least once, in order, and repeat only as the events printed
//! since its last save of the cursor (at most `SAVE_EVERY`).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::caught::until_caught;
use crate::common::{BIN, Rng, Root, scaled, spawn_worker, wait_all};

pub struct Watched {
    pub kills: usize,
    pub events: u64,
    pub repeats: usize,
    pub problems: Vec<String>,
}

fn watcher(r: &Root, out: &std::path::Path, env: &[(&str, &str)]) -> Child {
    let file = std::fs::File::create(out).unwrap();
    let mut c = Command::new(BIN);
    c.args(["watch", "--all", "--json", "--from-start", "--cursor", "w"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("CIRCE_ROOT", &r.dir)
        .env("CIRCE_DURABILITY", "relaxed")
        .stdin(Stdio::null())
        .stdout(Stdio::from(file))
        .stderr(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().unwrap()
}

pub fn run(per_writer: usize, max_kills: usize, env: &[(&str, &str)], limit: Duration) -> Watched {
    let r = Root::new(0);
    let outs = tempfile::tempdir().unwrap();
    let writers: Vec<Child> =
        (0..8).map(|_| spawn_worker("events", &[per_writer.to_string()], &r.dir, &[])).collect();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let start = Instant::now();
    let mut generation = 0;
    let mut w = watcher(&r, &outs.path().join("0.jsonl"), env);
    let mut kills = 0;
    let mut writers = writers;
    while kills < max_kills && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(5 + rng.next() % 25));
        let _ = w.kill();
        let _ = w.wait();
        kills += 1;
        generation += 1;
        w = watcher(&r, &outs.path().join(format!("{generation}.jsonl")), env);
        if writers.iter_mut().all(|k| k.try_wait().unwrap().is_some()) && kills >= max_kills / 2 {
            break;
        }
    }
    wait_all(std::mem::take(&mut writers), Duration::from_secs(300));
    // Let the last watcher catch up, then stop it the polite way.
    let last =
        std::fs::read_to_string(r.dir.join("LOGS/events.jsonl")).unwrap().lines().count() as u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen = std::fs::read_to_string(outs.path().join(format!("{generation}.jsonl")))
            .unwrap_or_default();
        let top = seen
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["id"].as_u64())
            .max();
        if top == Some(last) || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = w.kill();
    let _ = w.wait();
    // Check: ids in each output increase by one; across outputs every id 1..=last appears;
    // a repeat is only the first line of an output equal to the previous output's last.
    let mut problems = Vec::new();
    let mut seen = vec![0usize; usize::try_from(last).unwrap() + 1];
    let mut repeats = 0;
    let mut prev_last: Option<u64> = None;
    for g in 0..=generation {
        let text =
            std::fs::read_to_string(outs.path().join(format!("{g}.jsonl"))).unwrap_or_default();
        let ids: Vec<u64> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["id"].as_u64())
            .collect();
        for pair in ids.windows(2) {
            if pair[1] != pair[0] + 1 {
                problems.push(format!("output {g}: id {} after {}", pair[1], pair[0]));
            }
        }
        if let (Some(first), Some(p)) = (ids.first(), prev_last) {
            if *first <= p {
                repeats += usize::try_from(p - first + 1).unwrap();
                if p - first + 1 > circe::ops::stream::SAVE_EVERY {
                    problems.push(format!(
                        "output {g} repeats {} events (from {first})",
                        p - first + 1
                    ));
                }
            } else if *first > p + 1 {
                problems.push(format!("output {g} starts at {first}, after {p}: events lost"));
            }
        }
        for id in &ids {
            if let Some(n) = seen.get_mut(usize::try_from(*id).unwrap()) {
                *n += 1;
            }
        }
        if let Some(l) = ids.last() {
            prev_last = Some(*l);
        }
    }
    let missing: Vec<usize> = (1..seen.len()).filter(|&i| seen[i] == 0).collect();
    if !missing.is_empty() {
        problems.push(format!(
            "{} events never printed, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        ));
    }
    Watched { kills, events: last, repeats, problems }
}

#[test]
fn watcher_killed_under_writers_fast() {
    let w = run(150, 25, &[], Duration::from_secs(60));
    eprintln!("watch storm: {} kills, {} events, {} repeated", w.kills, w.events, w.repeats);
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    assert!(
        w.repeats <= w.kills * usize::try_from(circe::ops::stream::SAVE_EVERY).unwrap(),
        "repeats only since the last save"
    );
}

#[test]
#[ignore = "long run: cargo test --release --test torture -- --ignored"]
fn watcher_killed_under_writers_long() {
    let w = run(scaled(2_500), scaled(5) * 40, &[], Duration::from_secs(600));
    eprintln!("watch storm (long): {} kills, {} events, {} repeated", w.kills, w.events, w.repeats);
    assert!(w.problems.is_empty(), "{:?}", w.problems);
}

/// The checker fails when the cursor moves before the event is printed.
#[test]
fn watch_checker_catches_cursor_early() {
    let caught = until_caught("watch checker", 5, Duration::from_secs(150), |_| {
        run(150, 40, &[("CIRCE_TEST_BREAK", "cursor-early")], Duration::from_secs(30)).problems
    });
    assert!(!caught.is_empty(), "the checker saw nothing with the cursor saved too early");
    eprintln!("cursor-early caught: {:?}", &caught[..caught.len().min(3)]);
}
