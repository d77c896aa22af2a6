//! The chat channel: `circe chat say` per call against `echo >> file`, and the latency from
//! an append to the line printed by `circe chat watch`, against `tail -F` on the same file.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use crate::procs::{circe, must, timed};
use crate::stats::{median, paired_ratio, percentile};
use crate::{Opts, circe_bin};
use circe::config::Durability;

/// A process whose stdout lines arrive with the time they were read.
pub(crate) struct Reader {
    child: Child,
    rx: Receiver<(Instant, String)>,
}

impl Reader {
    pub(crate) fn start(cmd: &mut Command) -> Reader {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start reader");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                if tx.send((Instant::now(), l)).is_err() {
                    break;
                }
            }
        });
        Reader { child, rx }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A line that has arrived already, if any.
    pub(crate) fn try_next(&self) -> Option<(Instant, String)> {
        self.rx.try_recv().ok()
    }

    /// The time the line holding `tag` arrived (lines before it are skipped).
    pub(crate) fn wait_for(&self, tag: &str) -> Option<Instant> {
        loop {
            let (at, l) = self.rx.recv_timeout(Duration::from_secs(10)).ok()?;
            if l.contains(tag) {
                return Some(at);
            }
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) struct ChatRows {
    say: Vec<f64>,
    say_relaxed: Vec<f64>,
    echo: Vec<f64>,
    watch: Vec<f64>,
    tail: Vec<f64>,
    say_to_line: Vec<f64>,
}

pub(crate) fn chat(opts: &Opts, dir: &Path) -> ChatRows {
    let samples = opts.rounds * 10;
    let home = dir.join("chat");
    std::fs::create_dir_all(&home).unwrap();
    must(Command::new(circe_bin()).arg("init").arg(&home));
    let root = home.join(".circe");
    let file = root.join("chat.md");
    let echo_file = home.join("echo.md");
    let mut rows = ChatRows {
        say: vec![],
        say_relaxed: vec![],
        echo: vec![],
        watch: vec![],
        tail: vec![],
        say_to_line: vec![],
    };
    eprintln!("chat: {samples} says and appends ...");
    for i in 0..samples {
        let text = format!("bench message {i}");
        let say = |d: Durability| {
            let (ms, ok, _) = timed(
                circe(&root, "engineer", d).args(["chat", "say", "--to", "qa", &text]),
                false,
            );
            assert!(ok, "chat say failed");
            ms
        };
        let echo = || {
            let line = format!("echo '[engineer-to-qa]: {text}' >> '{}'", echo_file.display());
            let (ms, ok, _) = timed(Command::new("/bin/sh").arg("-c").arg(line), false);
            assert!(ok, "echo failed");
            ms
        };
        if i % 2 == 0 {
            rows.say.push(say(Durability::Full));
            rows.say_relaxed.push(say(Durability::Relaxed));
            rows.echo.push(echo());
        } else {
            rows.echo.push(echo());
            rows.say_relaxed.push(say(Durability::Relaxed));
            rows.say.push(say(Durability::Full));
        }
    }
    // Latency: both readers follow the same file; the bench appends one line at a time.
    let watch = Reader::start(circe(&root, "qa", Durability::Full).args(["chat", "watch"]));
    let tail = Reader::start(Command::new("tail").args(["-F", "-n", "0"]).arg(&file));
    std::thread::sleep(Duration::from_millis(500));
    let mut f = std::fs::OpenOptions::new().append(true).open(&file).unwrap();
    for i in 0..samples {
        let tag = format!("latency probe {i}");
        let line = format!("[engineer-to-qa]: {tag}\n");
        let t0 = Instant::now();
        f.write_all(line.as_bytes()).unwrap();
        if let (Some(a), Some(b)) = (watch.wait_for(&tag), tail.wait_for(&tag)) {
            rows.watch.push(a.duration_since(t0).as_secs_f64() * 1000.0);
            rows.tail.push(b.duration_since(t0).as_secs_f64() * 1000.0);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for i in 0..samples {
        let tag = format!("say probe {i}");
        let t0 = Instant::now();
        must(
            circe(&root, "engineer", Durability::Relaxed).args(["chat", "say", "--to", "qa", &tag]),
        );
        if let Some(a) = watch.wait_for(&tag) {
            rows.say_to_line.push(a.duration_since(t0).as_secs_f64() * 1000.0);
        }
    }
    rows
}

pub(crate) fn report_chat(rows: &ChatRows, out: &mut String) {
    let _ = writeln!(out, "\n## Chat channel ({} samples each)\n", rows.say.len());
    let _ = writeln!(
        out,
        "| what | circe ms p50 | p99 | baseline | baseline ms p50 | p99 | circe/baseline |"
    );
    let _ = writeln!(out, "|---|---:|---:|---|---:|---:|---:|");
    let row = |out: &mut String, what: &str, a: &[f64], base: &str, b: &[f64]| {
        let _ = writeln!(
            out,
            "| {what} | {:.2} | {:.2} | {base} | {:.2} | {:.2} | {:.2} |",
            median(a),
            percentile(a, 0.99),
            median(b),
            percentile(b, 0.99),
            paired_ratio(a, b)
        );
    };
    row(out, "chat say (per call, durable)", &rows.say, "sh -c 'echo >> file'", &rows.echo);
    row(out, "chat say (per call, relaxed)", &rows.say_relaxed, "sh -c 'echo >> file'", &rows.echo);
    row(out, "chat watch: append -> JSON line", &rows.watch, "tail -F: append -> line", &rows.tail);
    let _ = writeln!(
        out,
        "| chat say -> watch's JSON line (say's whole process included) | {:.2} | {:.2} | - | - | - | - |",
        median(&rows.say_to_line),
        percentile(&rows.say_to_line, 0.99)
    );
}
