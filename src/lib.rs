//! circe: file-based coordination for teams of AI coding agents.
//!
//! Folders are states, an atomic rename is a transition, YAML records hold task ownership.
//! The on-disk contract is PROTOCOLS.md (version 1); this crate implements it.
//!
//! Layers, bottom up: `names`, `message`, `registry`, `task` and `event` (pure: names,
//! formats, rules, the task model and its lifecycle table, the event log's lines); `engine`
//! (the seam, with the local engine: the only code that touches the filesystem); `ops` (the
//! operations, written against the seam); `cli`. Beside them, `fault`: the crash points and
//! the test-only switches the torture suite reaches every layer through.
//!
//! A worker written in Rust can claim through the library instead of starting a `circe`
//! process per claim (the same locks, renames, records and fsyncs; BENCHMARKS.md measures
//! both):
//!
//! ```no_run
//! use circe::error::Kind;
//! use circe::workspace::Workspace;
//!
//! // the root above the current folder, like the CLI
//! let ws = Workspace::open(&circe::engine::RootSpec::Search)?;
//! let (me, role) = ws.agent(Some("engineer"))?;
//! loop {
//!     match circe::ops::claim_next(&ws, &me, &role, None) {
//!         Ok(claim) => println!("working on {} (epoch {})", claim.task, claim.epoch),
//!         Err(e) if e.kind == Kind::NothingToClaim => break,
//!         Err(e) => return Err(e),
//!     }
//! }
//! # Ok::<(), circe::error::Error>(())
//! ```

pub mod address;
pub mod archive;
pub mod boxes;
pub mod chat;
pub mod cli;
pub mod clock;
pub mod config;
pub mod engine;
pub mod error;
pub mod event;
pub mod exit_code;
pub mod fault;
pub mod fixture;
pub mod message;
pub mod names;
pub mod ops;
pub mod registry;
pub mod seq;
pub mod suggest;
pub mod task;
pub mod tx;
pub mod workspace;
pub mod yaml;
