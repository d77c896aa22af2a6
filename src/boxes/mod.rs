//! Messages in boxes: sending (registry-checked, fail-closed), finding, and moving a
//! message along INBOX -> WORKSPACE -> LOGS as the reference's retention table says.

mod deliver;
mod find;
mod read;

pub use deliver::{Delivery, notify_coordinators, send};
pub use find::{Found, done, find, find_in, take};
pub use read::{first_problem, read};
