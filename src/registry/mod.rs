//! The intent registry: roles, intents, and who may send what to whom.
//!
//! Pure: no filesystem access. The built-in table is in `builtin`; circe.yaml may add roles
//! and intents or narrow built-in ones (`config`); every send is checked by
//! `Registry::check_send` (`send_check`). PROTOCOLS.md section 5 documents the rules.

mod builtin;
mod config;
mod intent;
#[expect(clippy::module_inception, reason = "the file is named after the type it holds")]
mod registry;
mod roles;
mod send_check;
mod table;
mod templates;

pub use builtin::BUILTIN_ROLES;
pub use config::{IntentRule, RegistryConfig, RoleList};
pub use intent::Intent;
pub use registry::Registry;
pub use roles::Roles;
pub use send_check::{BROADCAST, SendCheck};
pub use templates::{not_filled_in, template, templates};
