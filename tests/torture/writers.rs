//! Concurrent record writers: 8 processes doing read-modify-write updates of one task's
//! checks as its owner. No torn `.checks`, no lost update.

use std::time::{Duration, Instant};

use crate::caught::until_caught;
use crate::common::{Root, scaled, spawn_worker, wait_all};

fn writers_run(per: usize, env: &[(&str, &str)]) -> Vec<String> {
    let r = Root::new(0);
    // Every name a writer sets is a check the task has (a check it has not is refused).
    let names: Vec<String> =
        (0..8).flat_map(|w| (0..per).map(move |i| format!("w{w}_{i}"))).collect();
    let yaml = std::fs::read_to_string(r.dir.join("circe.yaml")).unwrap().replace(
        "  intents: {}",
        &format!("  intents:\n    implement_feature: {{checks: [{}]}}", names.join(", ")),
    );
    std::fs::write(r.dir.join("circe.yaml"), yaml).unwrap();
    r.open("T1");
    r.ok(Some("engineer"), &["claim", "T1"]);
    let logs = tempfile::tempdir().unwrap();
    let mut kids = Vec::new();
    for w in 0..8 {
        let args = vec![
            "engineer".to_string(),
            "T1".into(),
            w.to_string(),
            per.to_string(),
            logs.path().join(format!("w{w}.log")).display().to_string(),
        ];
        kids.push(spawn_worker("writers", &args, &r.dir, env));
    }
    // Meanwhile, read .checks over and over: it must always parse.
    let mut p = Vec::new();
    let start = Instant::now();
    let mut reads = 0;
    while kids.iter_mut().any(|k| k.try_wait().unwrap().is_none())
        && start.elapsed() < Duration::from_secs(300)
    {
        if let Ok(t) = std::fs::read_to_string(r.dir.join("TASKS/T1.checks")) {
            reads += 1;
            if let Err(e) = circe::task::record::parse_checks("T1", &t) {
                p.push(format!("torn .checks: {}", e.message));
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    wait_all(kids, Duration::from_secs(300));
    let (mut refused, mut slowest) = (0, 0);
    for w in 0..8 {
        let figures =
            std::fs::read_to_string(logs.path().join(format!("w{w}.stat"))).unwrap_or_default();
        let mut f = figures.split(' ').map(|x| x.parse::<u64>().unwrap_or(0));
        refused += f.next().unwrap_or(0);
        slowest = slowest.max(f.next().unwrap_or(0));
        let log =
            std::fs::read_to_string(logs.path().join(format!("w{w}.log"))).unwrap_or_default();
        p.extend(log.lines().map(str::to_string));
    }
    let t = std::fs::read_to_string(r.dir.join("TASKS/T1.checks")).unwrap();
    let checks = circe::task::record::parse_checks("T1", &t).unwrap();
    let mut lost = 0;
    for w in 0..8 {
        for i in 0..per {
            if checks.get(format!("w{w}_{i}").as_str()) != Some(&true) {
                lost += 1;
            }
        }
    }
    if lost > 0 {
        p.push(format!("{lost} of {} updates lost", 8 * per));
    }
    eprintln!(
        "writers: 8 x {per} updates, {reads} concurrent reads, {lost} lost, {:?}; \
         {refused} lock waits over 10 s (retried), slowest update {slowest} ms",
        start.elapsed()
    );
    p
}

#[test]
fn concurrent_check_writers_fast() {
    let p = writers_run(100, &[]);
    assert!(p.is_empty(), "{:#?}", &p[..p.len().min(20)]);
}

#[test]
fn writers_checker_catches_clobber() {
    let p = until_caught("writers checker", 3, Duration::from_secs(120), |_| {
        writers_run(100, &[("CIRCE_TEST_BREAK", "clobber")])
    });
    assert!(!p.is_empty(), "lost updates went unseen with the task lock broken");
    eprintln!("clobber caught by writers checker: {}", p.last().unwrap());
}

#[test]
#[ignore = "long run: cargo test --release --test torture -- --ignored"]
fn concurrent_check_writers_long() {
    let p = writers_run(scaled(500), &[]);
    assert!(p.is_empty(), "{:#?}", &p[..p.len().min(20)]);
}
