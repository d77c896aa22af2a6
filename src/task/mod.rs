//! The task model: records, the lifecycle table and what each move changes. Pure: it knows
//! nothing of where tasks are kept (the engine) or of commands (`ops`).

mod changes;
pub mod effects;
mod eligibility;
pub mod lifecycle;
pub mod outbox;
pub mod record;
mod row;
mod state;

pub use effects::{Change, Handoff, MoveCtx, Notice, OpenSpec, Ticket};
pub use eligibility::Eligibility;
pub use lifecycle::{Actor, Move, Status};
pub use record::{Checks, Outgoing, OwnerRecord, StatusRecord};
pub use row::{Row, row_of};
pub use state::TaskState;
