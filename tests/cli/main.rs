//! The CLI integration tests: one binary, one module per area. Each test gets its own temp
//! project and runs the real `circe` binary with a cleared environment (see `common`).
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test and bench harnesses set up and inspect roots directly"
)]

#[macro_use]
mod common;
#[path = "../support/caught.rs"]
mod caught;
#[path = "../support/pg_cluster.rs"]
#[allow(dead_code, reason = "shared with the postgres suite; the CLI tests use a part")]
mod pg_cluster;
#[path = "../support/tmux.rs"]
mod tmux;

mod agent;
mod agents;
mod archive;
mod board;
mod boundaries;
mod chat;
mod fixtures;
mod git;
mod guidance;
mod hardening;
mod harness;
mod help;
mod init;
mod lifecycle;
mod limits;
mod message_limits;
mod messages;
mod orphans;
mod requests;
mod schema;
mod send;
mod seq;
mod status_words;
mod streams;
mod tx;
