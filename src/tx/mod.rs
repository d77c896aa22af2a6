//! TX, reference 000 and 001: what the TX message types mean, `mesh/agent` addresses, TX
//! file names, routing rules, open asks, and the bridge to and from a TX message folder.
//!
//! Pure: the operations that act on these rules live in `ops::tx` (sending), `ops::asks`,
//! `ops::route`, `ops::thread`, `ops::orphans` and `ops::bridge`. PROTOCOLS.md section 16
//! maps every TX field, type, status and file name to circe's.

mod address;
mod ask;
pub mod bridge;
mod filename;
pub mod routing;
mod semantics;

pub use address::{TxConfig, check_address};
pub use ask::{ASK_FORMAT, AskRecord, AskState};
pub use filename::{TxName, parse_tx_name, tx_name};
pub use routing::{Routing, RoutingKey};
pub use semantics::{Semantics, semantics};
