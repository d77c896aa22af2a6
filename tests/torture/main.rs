//! The torture suite: races, crashes at every named step, kill -9 storms, stale owners,
//! concurrent record writers, failing I/O, hostile input and parser fuzzing, and sequence
//! numbers under racing senders.
//!
//! Fast slice: `cargo test --test torture` (part of plain `cargo test`).
//! Long run (see RELIABILITY.md):
//! `cargo test --release --test torture -- --ignored --test-threads=1`
//! `CIRCE_TORTURE_SCALE` multiplies the long run's sizes (default 1).
//!
//! Every checker is also run once against a deliberately broken build switch
//! (`CIRCE_TEST_BREAK`, test only) to show that it can fail.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test and bench harnesses set up and inspect roots directly"
)]

mod archive;
mod archive_live;
mod archive_scale;
#[path = "../support/caught.rs"]
mod caught;
mod chat;
mod common;
mod crash;
mod events;
mod hostile;
mod iofail;
mod kill;
mod namespaces;
mod parsers;
#[path = "../support/pg_cluster.rs"]
#[allow(dead_code, reason = "shared with the postgres suite; the torture tests use a part")]
mod pg_cluster;
mod race;
mod retire;
mod route;
mod sendlog;
mod seq;
mod stale;
mod watch;
mod workers;
mod writers;

/// Not a test: when started by `common::spawn_worker`, this process is a worker that
/// loops over library calls (no exec per attempt), then exits.
#[test]
fn worker_entry() {
    let Ok(kind) = std::env::var("CIRCE_TORTURE_WORKER") else { return };
    workers::run(&kind, &common::worker_args());
    std::process::exit(0);
}
