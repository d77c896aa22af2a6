//! The one place that knows which YAML library circe uses (serde-saphyr), so it can be swapped.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A YAML document that did not parse or did not fit the expected shape.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct YamlError(String);

pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    serde_saphyr::from_str(text).map_err(|e| YamlError(one_line(&e.to_string())))
}

pub fn to_string<T: Serialize>(value: &T) -> Result<String, YamlError> {
    serde_saphyr::to_string(value).map_err(|e| YamlError(e.to_string()))
}

/// serde-saphyr renders errors with a source snippet over several lines; keep the first,
/// without its own `error: ` (circe says that once, in front of the whole message) and
/// without advice meant for a program using the library (its parser options).
fn one_line(s: &str) -> String {
    let first = s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s).trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    first.replace(", set DuplicateKeyPolicy in Options if acceptable", "")
}

#[cfg(test)]
mod tests {
    /// A duplicate key is said without the library's advice to its programmer.
    #[test]
    fn a_duplicate_key_is_said_plainly() {
        let e = super::from_str::<serde_json::Value>("a: 1\na: 2\n").unwrap_err().to_string();
        assert!(e.contains("duplicate mapping key: a"), "{e}");
        assert!(!e.contains("DuplicateKeyPolicy"), "{e}");
    }
}
