//! Limits on one message: its size in bytes and the lines of its header block
//! (`limits:` in circe.yaml, PROTOCOLS.md sections 3 and 9).

use serde::{Deserialize, Serialize};

use super::Problem;

/// How big a message may be. Checked on the way in (`send`, `validate`) and when a box is
/// read (`inbox`, `doctor`, `show`): a reader never reads or parses past them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// The whole file, headers and body, in bytes.
    pub message_bytes: usize,
    /// Lines of the header block: between `# MESSAGE` and the blank line, or between the
    /// two `---` lines (a YAML list item is a line too).
    pub header_lines: usize,
}

impl Limits {
    /// 1 MiB and 200 lines: far more than any message an agent writes by hand, and small
    /// enough that a box listing stays quick whatever is planted in it.
    pub const DEFAULT: Limits = Limits { message_bytes: 1 << 20, header_lines: 200 };
    /// No limit: for text that is bounded already (tests, the fuzzer, round trips).
    pub const NONE: Limits = Limits { message_bytes: usize::MAX, header_lines: usize::MAX };
    /// What circe.yaml may set: `message_bytes` 1 KiB to 64 MiB.
    pub const MESSAGE_BYTES: (usize, usize) = (1 << 10, 64 << 20);
    /// `header_lines` 16 (room for every known field) to 10,000.
    pub const HEADER_LINES: (usize, usize) = (16, 10_000);

    /// The first setting outside its range, as `circe.yaml` error text.
    pub fn out_of_range(&self) -> Option<String> {
        let check = |name: &str, v: usize, (lo, hi): (usize, usize)| {
            (!(lo..=hi).contains(&v)).then(|| {
                format!("limits.{name}: {v} is out of range: it must be from {lo} to {hi}")
            })
        };
        check("message_bytes", self.message_bytes, Self::MESSAGE_BYTES)
            .or_else(|| check("header_lines", self.header_lines, Self::HEADER_LINES))
    }

    /// The problem with a message of `size` bytes, if it is over the limit. `exact`: the
    /// whole size is known (a file's length), else only that it is at least `size` (a
    /// stream read up to the limit and one byte more).
    pub fn size_problem(&self, size: u64, exact: bool) -> Option<Problem> {
        let limit = u64::try_from(self.message_bytes).unwrap_or(u64::MAX);
        let is = if exact { format!("is {size} bytes,") } else { "is".to_string() };
        (size > limit).then(|| {
            Problem::new(
                None,
                None,
                format!("message {is} over the limit of {limit} bytes (limits.message_bytes)"),
            )
            .hint("shorten the message (attach a path to a file instead of its text), or raise limits.message_bytes in circe.yaml")
            .over("limits.message_bytes")
        })
    }

    /// The problem with a header block that reaches line `line` (1-based in the file) past
    /// its limit.
    pub(super) fn header_problem(&self, line: usize) -> Problem {
        Problem::new(
            Some(line),
            None,
            format!(
                "header block is over the limit of {} lines (limits.header_lines)",
                self.header_lines
            ),
        )
        .hint("move the text into the body, or raise limits.header_lines in circe.yaml")
        .over("limits.header_lines")
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(Limits::DEFAULT.out_of_range(), None);
        let l = Limits { message_bytes: 10, ..Limits::DEFAULT };
        assert!(l.out_of_range().unwrap().starts_with("limits.message_bytes: 10 is out of range"));
        let l = Limits { header_lines: 10_001, ..Limits::DEFAULT };
        assert!(l.out_of_range().unwrap().contains("from 16 to 10000"));
        assert!(Limits::DEFAULT.size_problem(1 << 20, true).is_none());
        let p = Limits::DEFAULT.size_problem(5_000_000, true).unwrap();
        assert_eq!(
            p.to_string(),
            "message is 5000000 bytes, over the limit of 1048576 bytes (limits.message_bytes)"
        );
        let p = Limits::DEFAULT.size_problem((1 << 20) + 1, false).unwrap();
        assert_eq!(p.message, "message is over the limit of 1048576 bytes (limits.message_bytes)");
    }
}
