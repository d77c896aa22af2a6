//! The streams: latency from a send's commit to the JSON line `circe watch` prints (against
//! `inotifywait -m` on the same folder, the floor: the kernel telling a process), the same
//! for `circe wait --for inbox` waking up, a watcher's CPU while idle and its peak memory
//! after a burst, and `circe log --limit 20` on a large log against `tail -n 20`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::Opts;
use crate::chat::Reader;
use crate::procs::{circe, must, timed};
use crate::stats::{median, paired_ratio, percentile};
use circe::config::Durability;
use circe::engine::RootSpec;
use circe::event::{Event, EventKind};
use circe::message::{Format, Message};
use circe::names::AgentName;
use circe::workspace::Workspace;

pub(crate) struct StreamRows {
    watch: Vec<f64>,
    inotify: Vec<f64>,
    wait: Vec<f64>,
    wait_floor: Vec<f64>,
    idle_cpu_ms: f64,
    idle_secs: f64,
    burst: usize,
    rss_kb: u64,
    log_events: usize,
    log: Vec<f64>,
    tail: Vec<f64>,
}

fn root(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    must(Command::new(crate::circe_bin()).arg("init").arg(dir));
    dir.join(".circe")
}

fn inform(ws: &Workspace, from: &AgentName, text: &str) {
    let mut m = Message::new(Format::Circe);
    m.to = Some("qa".into());
    m.intent = Some("inform".into());
    m.body = format!("## Summary\n{text}\n");
    circe::ops::send(ws, from, m).expect("send");
}

/// A process's CPU time (user + system) in ms, from /proc.
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    ticks * 10.0 // USER_HZ = 100
}

fn vm_hwm_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:")?.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap_or(0)
}

fn ms(a: Instant, b: Instant) -> f64 {
    b.checked_duration_since(a).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

#[expect(clippy::many_single_char_names, clippy::too_many_lines)] // one run, in order; paired w/i, wt/floor, lg/tl
pub(crate) fn streams(opts: &Opts, dir: &Path) -> StreamRows {
    let quick = opts.rounds < 15;
    let n = if quick { 300 } else { 2000 };
    let r = root(&dir.join("streams"));
    let ws = Workspace::open_with(&RootSpec::Path(r.clone()), Durability::Relaxed).unwrap();
    let eng = AgentName::new("engineer").unwrap();
    // 1. watch (JSON lines) and inotifywait on LOGS/, side by side, for each send.
    let watch =
        Reader::start(circe(&r, "qa", Durability::Relaxed).args(["watch", "--all", "--json"]));
    let inotify = Reader::start(
        Command::new("inotifywait")
            .args(["-m", "-q", "-e", "modify", "--format", "%f"])
            .arg(r.join("LOGS")),
    );
    std::thread::sleep(Duration::from_millis(500));
    let (mut w, mut i) = (Vec::new(), Vec::new());
    for k in 0..n {
        inform(&ws, &eng, &format!("tag-{k}"));
        let t0 = Instant::now(); // the send returned: its event is appended (no fsync: relaxed)
        let tw = watch.wait_for(&format!("{{\"id\":{},", k + 1));
        let ti = inotify.wait_for("events.jsonl");
        if let (Some(tw), Some(ti)) = (tw, ti) {
            w.push(ms(t0, tw));
            i.push(ms(t0, ti));
        }
        // Drain the other notifications of this send (its message file landed too).
        std::thread::sleep(Duration::from_millis(2));
        while inotify.try_next().is_some() {}
    }
    drop(inotify);
    // 2. idle: the same watcher, nothing happening.
    let idle = if quick { 10.0 } else { 60.0 };
    let before = cpu_ms(watch.pid());
    std::thread::sleep(Duration::from_secs_f64(idle));
    let idle_cpu_ms = cpu_ms(watch.pid()) - before;
    // 3. a burst from 8 writer threads' worth of sends (one process), then the watcher's
    // peak memory.
    let burst = if quick { 2000 } else { 20_000 };
    for k in 0..burst {
        let ev = Event::now(EventKind::Notify, "circe");
        let _ = k;
        ws.engine.append_events(vec![ev]).unwrap();
    }
    let last = ws.engine.last_event_id().unwrap();
    let _ = watch.wait_for(&format!("{{\"id\":{last},"));
    let rss_kb = vm_hwm_kb(watch.pid());
    drop(watch);
    // 4. wait --for inbox: a fresh process per sample, woken by a send.
    let samples = if quick { 30 } else { 200 };
    let (mut wt, mut floor) = (Vec::new(), Vec::new());
    for k in 0..samples {
        let waiter = Reader::start(circe(&r, "qa", Durability::Relaxed).args([
            "wait",
            "--for",
            "inbox",
            "--new",
            "--json",
            "--timeout",
            "30s",
        ]));
        let inotify = Reader::start(
            Command::new("inotifywait")
                .args(["-q", "-e", "modify", "--format", "%f"])
                .arg(r.join("LOGS")),
        );
        std::thread::sleep(Duration::from_millis(150));
        inform(&ws, &eng, &format!("wake-{k}"));
        let t0 = Instant::now();
        if let (Some(a), Some(b)) = (waiter.wait_for("\"event\""), inotify.wait_for("events.jsonl"))
        {
            wt.push(ms(t0, a));
            floor.push(ms(t0, b));
        }
    }
    // 5. log --limit 20 against tail -n 20 on a large log.
    let log_events = if quick { 100_000 } else { 1_000_000 };
    let big = root(&dir.join("biglog"));
    let bws = Workspace::open_with(&RootSpec::Path(big.clone()), Durability::Relaxed).unwrap();
    for _ in 0..log_events / 1000 {
        let batch: Vec<Event> = (0..1000).map(|_| Event::now(EventKind::Notify, "circe")).collect();
        bws.engine.append_events(batch).unwrap();
    }
    let (mut lg, mut tl) = (Vec::new(), Vec::new());
    for _ in 0..opts.rounds.max(7) * 2 {
        let (a, ok, _) = timed(
            circe(&big, "qa", Durability::Relaxed).args(["log", "--all", "--limit", "20"]),
            false,
        );
        assert!(ok, "circe log failed");
        let (b, _, _) = timed(
            Command::new("tail").args(["-n", "20"]).arg(big.join("LOGS/events.jsonl")),
            false,
        );
        lg.push(a);
        tl.push(b);
    }
    StreamRows {
        watch: w,
        inotify: i,
        wait: wt,
        wait_floor: floor,
        idle_cpu_ms,
        idle_secs: idle,
        burst,
        rss_kb,
        log_events,
        log: lg,
        tail: tl,
    }
}

pub(crate) fn report_streams(r: &StreamRows, out: &mut String) {
    let _ = writeln!(out, "\n## Streams\n");
    let _ = writeln!(
        out,
        "| what | circe ms p50 | p99 | floor | floor ms p50 | p99 | p99 circe/floor |"
    );
    let _ = writeln!(out, "|---|---:|---:|---|---:|---:|---:|");
    let row = |out: &mut String, what: &str, a: &[f64], base: &str, b: &[f64]| {
        let _ = writeln!(
            out,
            "| {what} ({} samples) | {:.3} | {:.3} | {base} | {:.3} | {:.3} | {:.2} |",
            a.len(),
            median(a),
            percentile(a, 0.99),
            median(b),
            percentile(b, 0.99),
            percentile(a, 0.99) / percentile(b, 0.99).max(0.001)
        );
    };
    row(
        out,
        "send's commit -> `watch --json` line",
        &r.watch,
        "inotifywait -m: the same append",
        &r.inotify,
    );
    row(
        out,
        "send's commit -> `wait --for inbox` answer",
        &r.wait,
        "inotifywait: the same append",
        &r.wait_floor,
    );
    let _ = writeln!(
        out,
        "\nwatch idle for {:.0} s: {:.1} ms CPU (target < 10 ms per 60 s). Peak RSS of the watcher after a burst of {} events: {:.1} MB (target <= 16 MB).",
        r.idle_secs,
        r.idle_cpu_ms,
        r.burst,
        f64::from(u32::try_from(r.rss_kb).unwrap_or(u32::MAX)) / 1024.0
    );
    let _ = writeln!(
        out,
        "\n`circe log --all --limit 20` on a {}-event log: {:.2} ms p50; `tail -n 20` of the same file: {:.2} ms; paired ratio {:.2} (target <= 2).",
        r.log_events,
        median(&r.log),
        median(&r.tail),
        paired_ratio(&r.log, &r.tail)
    );
}
