//! Message formats: the CIRCE `# MESSAGE` header block and TX YAML front matter.
//!
//! Pure functions on text: parsing (every problem at once, with line numbers), rendering in
//! the canonical order, and file names. The store layer does the I/O. The grammar is in
//! PROTOCOLS.md sections 3 and 4.

mod circe;
mod field;
mod filename;
mod format;
mod front_matter;
mod limits;
mod model;
mod parse;
mod priority;
mod problem;
mod render;
pub mod status;

#[cfg(test)]
mod limits_tests;
#[cfg(test)]
mod tests;

use field::Field;

pub use filename::{
    FileName, check_length as check_name_length, file_name, fit as fit_name, name_stamp_of_id,
    numbered, parse_file_name, says_no_task,
};
pub use format::Format;
pub use limits::Limits;
pub use model::{Message, agent_of, clip, one_line_shown, reorders, summary_of};
pub use parse::{Mode, parse, parse_bytes, parse_limited};
pub use priority::{Priority, rank_of};
pub use problem::Problem;
pub use render::render;
