//! Which of the two on-disk message formats a message uses.

use serde::Serialize;

/// The on-disk shape of a message; `render` writes a message back in its own format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// `# MESSAGE` followed by `key: value` header lines (CIRCE spec section 7.1).
    #[default]
    Circe,
    /// A `---` delimited YAML mapping (TX messages).
    FrontMatter,
}
