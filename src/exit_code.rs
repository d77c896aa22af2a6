//! Process exit codes: part of circe's interface, documented in README and PROTOCOLS.md.

/// The command did what was asked.
pub const OK: u8 = 0;
/// Internal or I/O error (disk full, permission denied, a bug).
pub const INTERNAL: u8 = 1;
/// The command line was wrong (unknown flag, missing argument, no root, no agent).
pub const USAGE: u8 = 2;
/// Refused by a rule: registry, lifecycle, invalid message or name.
pub const REFUSED: u8 = 3;
/// Conflict: another agent holds it, or a newer owner fenced this one out.
pub const CONFLICT: u8 = 4;
/// The task, message, agent or file does not exist.
pub const NOT_FOUND: u8 = 5;
/// `claim --next` found no task this agent may take.
pub const NOTHING_TO_CLAIM: u8 = 6;
/// `wait` gave up: its `--timeout` passed before the condition held.
pub const TIMED_OUT: u8 = 7;
