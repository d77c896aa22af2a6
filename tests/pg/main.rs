//! The PostgreSQL engine's suite: races with kill -9, server restarts, a paused owner,
//! partitions, wrong clocks, the ordered feed, watchers killed under writers, request ids, mirror and migrate. Each test
//! binary starts a throwaway cluster (tests/support/pg_cluster.rs); without PostgreSQL the
//! tests say so and pass. The long runs are `#[ignore]`d: `cargo test --test pg -- --ignored`.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test harnesses set up and inspect roots directly"
)]

#[path = "../support/caught.rs"]
mod caught;
#[macro_use]
mod common;
#[path = "../support/pg_cluster.rs"]
mod pg_cluster;
#[path = "../support/tmux.rs"]
mod tmux;

mod archive;
mod ask_race;
mod auth;
mod board;
mod chat;
mod checks;
mod commit;
mod feed;
mod fencing;
mod inbox_reads;
mod journal;
mod mirror;
mod netns;
mod outbox;
mod pooler;
mod race;
mod read_ahead;
mod relay;
mod requests;
mod restart;
mod retire;
mod schema;
mod seq;
mod server_settings;
mod watchers;
