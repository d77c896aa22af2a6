//! circe: file-based coordination for teams of AI coding agents.
//!
//! Folders are states, an atomic rename is a transition, YAML records hold task ownership.
//! The on-disk contract is PROTOCOLS.md (version 1); this crate implements it.
//!
//! Layers, bottom up: `store` (the only code that touches the filesystem), `message`,
//! `registry` and `seq` (pure: formats and rules), `boxes`, `task` and `chat` (domain
//! operations; `chat` keeps its grammar and scanner pure too), `cli`.
//!
//! A worker written in Rust can claim through the library instead of starting a `circe`
//! process per claim (the same locks, renames, records and fsyncs; BENCHMARKS.md measures
//! both):
//!
//! ```no_run
//! use circe::error::Kind;
//! use circe::workspace::Workspace;
//!
//! let ws = Workspace::open(None)?; // the root above the current folder, like the CLI
//! let (me, role) = ws.agent(Some("engineer"))?;
//! loop {
//!     match circe::task::claim_next(&ws, &me, &role, None) {
//!         Ok(claim) => println!("working on {} (epoch {})", claim.task, claim.epoch),
//!         Err(e) if e.kind == Kind::NothingToClaim => break,
//!         Err(e) => return Err(e),
//!     }
//! }
//! # Ok::<(), circe::error::Error>(())
//! ```

pub mod boxes;
pub mod chat;
pub mod cli;
pub mod clock;
pub mod config;
pub mod doctor;
pub mod error;
pub mod exit_code;
pub mod fixture;
pub mod message;
pub mod names;
pub mod registry;
pub mod seq;
pub mod store;
pub mod task;
pub mod workspace;
pub mod yaml;
