//! circe: file-based coordination for teams of AI coding agents.
//!
//! Folders are states, an atomic rename is a transition, YAML records hold task ownership.
//! The on-disk contract is PROTOCOLS.md (version 1); this crate implements it.
//!
//! Layers, bottom up: `store` (the only code that touches the filesystem), `message` and
//! `registry` (pure: formats and rules), `boxes` and `task` (domain operations), `cli`.

pub mod boxes;
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
pub mod store;
pub mod task;
pub mod workspace;
pub mod yaml;
