//! One thing wrong with a message, located by line and field.

use std::fmt;

use serde::Serialize;

use crate::error::Error;

/// A reason a message does not parse. Parsing collects all of them, not just the first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// 1-based line in the file, when the problem has one.
    #[serde(rename = "line_number")]
    pub line: Option<usize>,
    /// The header key as written in the file.
    pub field: Option<String>,
    /// A lowercase fragment without a trailing period.
    pub message: String,
    pub hint: Option<String>,
    /// The limit this message is over (`limits.message_bytes`, `limits.header_lines`):
    /// too big rather than wrong; null otherwise.
    pub limit: Option<&'static str>,
}

impl Problem {
    pub fn new(line: Option<usize>, field: Option<&str>, message: impl Into<String>) -> Problem {
        Problem {
            line,
            field: field.map(str::to_string),
            message: message.into(),
            hint: None,
            limit: None,
        }
    }

    /// The same problem, tagged as being over `limit`.
    #[must_use]
    pub fn over(mut self, limit: &'static str) -> Problem {
        self.limit = Some(limit);
        self
    }

    #[must_use]
    pub fn hint(mut self, hint: impl Into<String>) -> Problem {
        self.hint = Some(hint.into());
        self
    }

    /// Hint when there is one, else keep `self` as is.
    #[must_use]
    pub fn maybe_hint(mut self, hint: Option<String>) -> Problem {
        if hint.is_some() {
            self.hint = hint;
        }
        self
    }

    /// One refusal listing every problem; the hint is the first problem's hint.
    pub fn into_error(problems: &[Problem]) -> Error {
        let listed: Vec<String> = problems.iter().map(ToString::to_string).collect();
        let e = Error::refused(format!("invalid message: {}", listed.join("; ")));
        match problems.iter().find_map(|p| p.hint.clone()) {
            Some(h) => e.hint(h),
            None => e,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for Problem {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display() {
        let p = Problem::new(Some(3), Some("created_at"), "not an RFC 3339 time");
        assert_eq!(p.to_string(), "line 3: field `created_at`: not an RFC 3339 time");
        assert_eq!(Problem::new(None, None, "empty message").to_string(), "empty message");
        let e =
            Problem::into_error(&[p, Problem::new(None, Some("to"), "missing").hint("add `to:`")]);
        assert_eq!(e.kind, crate::error::Kind::Refused);
        assert!(e.message.contains("; field `to`: missing"), "{}", e.message);
        assert_eq!(e.hint.as_deref(), Some("add `to:`"));
    }
}
