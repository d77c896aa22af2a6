//! The CLI integration tests: one binary, one module per area. Each test gets its own temp
//! project and runs the real `circe` binary with a cleared environment (see `common`).

#[macro_use]
mod common;

mod agent;
mod fixtures;
mod harness;
mod init;
mod lifecycle;
mod messages;
mod send;
