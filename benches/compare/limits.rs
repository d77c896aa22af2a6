//! Message limits: the parser is linear (a message at the size limit against one a tenth
//! of it), and one message at the limit (or a huge planted one) in a box does not stall
//! `inbox` or `doctor`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::procs::{circe, must, timed};
use crate::stats::{median, paired_ratio};
use circe::config::Durability;
use circe::message::{Limits, Mode, parse_bytes, parse_limited};

/// A CIRCE message of about `bytes` bytes, all header lines (`x-<n>: v`), no body.
fn headers_circe(bytes: usize) -> Vec<u8> {
    let mut s = String::from("# MESSAGE\nfrom: w0\nto: qa\nintent: inform\nstatus: new\n");
    s.push_str("created_at: 2025-11-21T17:00:00Z\n");
    let mut i = 0;
    while s.len() < bytes - 20 {
        let _ = writeln!(s, "x-{i}: v");
        i += 1;
    }
    s.push_str("\nbody\n");
    s.into_bytes()
}

/// The same in front matter (`---` YAML).
fn headers_front_matter(bytes: usize) -> Vec<u8> {
    let mut s = String::from("---\nfrom: w0\nto: qa\ntype: inform\nstatus: new\n");
    s.push_str("timestamp: 2025-11-21T17:00:00Z\n");
    let mut i = 0;
    while s.len() < bytes - 20 {
        let _ = writeln!(s, "x-{i}: v");
        i += 1;
    }
    s.push_str("---\nbody\n");
    s.into_bytes()
}

/// A valid message of exactly `bytes` bytes: the usual headers and a long body.
pub(crate) fn body_message(bytes: usize) -> Vec<u8> {
    let head = "# MESSAGE\nfrom: w0\nto: qa\nintent: inform\nstatus: new\n\
                created_at: 2025-11-21T17:00:00Z\nmsg_id: bench-limit\n\n";
    let mut s = String::from(head);
    while s.len() < bytes {
        s.push_str(&"b".repeat((bytes - s.len()).min(99)));
        if s.len() < bytes {
            s.push('\n');
        }
    }
    s.into_bytes()
}

/// Times of `first` and `second` in ms over `rounds`, interleaved (A B B A ...).
fn paired(
    rounds: usize,
    mut first: impl FnMut(),
    mut second: impl FnMut(),
) -> (Vec<f64>, Vec<f64>) {
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    let time = |run: &mut dyn FnMut()| {
        let start = Instant::now();
        run();
        start.elapsed().as_secs_f64() * 1000.0
    };
    for r in 0..rounds {
        if r % 2 == 0 {
            xs.push(time(&mut first));
            ys.push(time(&mut second));
        } else {
            ys.push(time(&mut second));
            xs.push(time(&mut first));
        }
    }
    (xs, ys)
}

fn line_count(bytes: &[u8]) -> usize {
    std::str::from_utf8(bytes).map_or(0, |s| s.lines().count())
}

/// A test input: its name, how to make it of a given size, whether to parse with limits.
type Case = (&'static str, fn(usize) -> Vec<u8>, bool);

pub(crate) fn limits(rounds: usize, dir: &Path, out: &mut String) {
    let _ = writeln!(
        out,
        "\n## Message limits (limit {} bytes, {} header lines; ms, median of {rounds} rounds)\n",
        Limits::DEFAULT.message_bytes,
        Limits::DEFAULT.header_lines
    );
    parse_rows(rounds, out);
    box_rows(rounds, dir, out);
}

fn parse_rows(rounds: usize, out: &mut String) {
    let limit = Limits::DEFAULT.message_bytes;
    let _ = writeln!(out, "### Parsing, in process (linear: 10x the input <= 12x the time)\n");
    let _ = writeln!(
        out,
        "| input | at the limit ms | at 1/10 ms | ratio | verdict |\n|---|---:|---:|---:|---|"
    );
    let no_limits = |bytes: &[u8]| {
        let _ = std::hint::black_box(parse_bytes(bytes, Mode::Draft));
    };
    let cases: [Case; 3] = [
        ("CIRCE, all header lines, no limits", headers_circe, false),
        ("front matter, all header lines, no limits", headers_front_matter, false),
        ("CIRCE, headers + body, default limits", body_message, true),
    ];
    for (name, make, limited) in cases {
        let (big, small) = (make(limit), make(limit / 10));
        let parse = |bytes: &[u8]| {
            if limited {
                let size = Some(bytes.len() as u64);
                let r = parse_limited(bytes, size, Mode::Draft, &Limits::DEFAULT);
                assert!(r.is_ok(), "the message at the limit parses");
            } else {
                no_limits(bytes);
            }
        };
        let (a, b) = paired(rounds.max(15), || parse(&big), || parse(&small));
        let ratio = paired_ratio(&a, &b);
        let _ = writeln!(
            out,
            "| {name} ({} / {} lines) | {:.2} | {:.2} | {ratio:.1} | {} |",
            line_count(&big),
            line_count(&small),
            median(&a),
            median(&b),
            if ratio <= 12.0 { "MET" } else { "MISSED" }
        );
    }
}

/// A root with 100 ordinary messages in qa's INBOX against copies of it holding one big
/// file more: a message at the limit, or a planted 5 MB file over it. Runs alternate
/// between the roots; nothing is written between runs.
fn box_rows(rounds: usize, dir: &Path, out: &mut String) {
    let limit = Limits::DEFAULT.message_bytes;
    let base = dir.join("limits-base");
    std::fs::create_dir_all(&base).unwrap();
    must(Command::new(crate::circe_bin()).arg("init").arg(&base));
    let root = base.join(".circe");
    must(
        circe(&root, "coordinator", Durability::Relaxed)
            .args(["agent", "add", "w0", "--role", "engineer"]),
    );
    for i in 0..100 {
        let summary = format!("message {i}");
        must(circe(&root, "w0", Durability::Relaxed).args([
            "send",
            "--to",
            "qa",
            "--intent",
            "inform",
            "--summary",
            &summary,
        ]));
    }
    let variants = [
        ("one message at the limit", "limits-at", body_message(limit)),
        ("one planted 5 MB file", "limits-planted", body_message(5_000_000)),
    ];
    let _ =
        writeln!(out, "\n### Reading a box of 100 messages, plus one big file (whole processes)\n");
    let _ =
        writeln!(out, "| command | without ms | with ms | with/without |\n|---|---:|---:|---:|");
    for (what, name, bytes) in variants {
        let copy = dir.join(name);
        must(Command::new("cp").arg("-a").arg(&base).arg(&copy));
        let big = copy.join(".circe/AGENTS/qa/INBOX/20251121_170000_w0-qa_inform_zz-big.md");
        std::fs::write(big, bytes).unwrap();
        let with_root = copy.join(".circe");
        for args in [&["inbox"][..], &["doctor"]] {
            let run = |r: &Path| {
                timed(circe(r, "qa", Durability::Full).args(args), false);
            };
            let (with, without) = paired(rounds.max(9), || run(&with_root), || run(&root));
            let _ = writeln!(
                out,
                "| circe {} ({what}) | {:.2} | {:.2} | {:.2} |",
                args.join(" "),
                median(&without),
                median(&with),
                paired_ratio(&with, &without)
            );
        }
    }
}
