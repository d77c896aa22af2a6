//! Parsing a message from text or bytes: format detection, required fields, all problems at once.

use super::{Field, Format, Limits, Message, Problem, circe, front_matter};

/// What a parsed text is expected to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A message as it lies in a box: `from`, `to`, `intent`, `status` and `created_at` are
    /// required; `msg_id` may be missing from hand-made files.
    Stored,
    /// What an agent hands to `circe send --file`: only `to` and `intent` are required; the
    /// caller fills in the rest.
    Draft,
}

/// Parses a message in either format, reporting every problem found. No limits: for
/// text that is bounded already; what comes from a box or a user goes through
/// `parse_limited`.
pub fn parse(text: &str, mode: Mode) -> Result<Message, Vec<Problem>> {
    parse_text(text, mode, &Limits::NONE)
}

/// Parses `bytes` within `limits`: at most `limits.message_bytes` bytes (`bytes` may hold
/// one more: a capped read) and `limits.header_lines` header lines. `size` is the whole
/// input's size when known (a file's length); `None` for a stream cut at the cap. Over a
/// limit: that one problem, and nothing past the limit is parsed.
pub fn parse_limited(
    bytes: &[u8],
    size: Option<u64>,
    mode: Mode,
    limits: &Limits,
) -> Result<Message, Vec<Problem>> {
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    let (size, exact) = size.map_or((read, false), |s| (s.max(read), true));
    if let Some(p) = limits.size_problem(size, exact) {
        return Err(vec![p]);
    }
    parse_bytes_with(bytes, mode, limits)
}

fn parse_text(text: &str, mode: Mode, limits: &Limits) -> Result<Message, Vec<Problem>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut problems = Vec::new();
    let first = text.split('\n').next().unwrap_or("");
    let message = if first.trim_end() == "---" {
        front_matter::parse(text, limits, &mut problems)
    } else {
        circe::parse(text, limits, &mut problems)
    };
    if let Some((m, seen)) = &message {
        require(m, seen, mode, &mut problems);
    }
    match message {
        Some((m, _)) if problems.is_empty() => Ok(m),
        _ => Err(problems),
    }
}

/// Like `parse`, but takes bytes: each line holding bytes that are not UTF-8 is a problem.
pub fn parse_bytes(bytes: &[u8], mode: Mode) -> Result<Message, Vec<Problem>> {
    parse_bytes_with(bytes, mode, &Limits::NONE)
}

fn parse_bytes_with(bytes: &[u8], mode: Mode, limits: &Limits) -> Result<Message, Vec<Problem>> {
    let mut bad_lines = Vec::new();
    let mut line = 1;
    for chunk in bytes.utf8_chunks() {
        line += chunk.valid().matches('\n').count();
        if !chunk.invalid().is_empty() && bad_lines.last() != Some(&line) {
            bad_lines.push(line);
        }
    }
    if bad_lines.is_empty() {
        return std::str::from_utf8(bytes)
            .map_err(|_| vec![Problem::new(None, None, "text is not UTF-8")])
            .and_then(|text| parse_text(text, mode, limits));
    }
    let mut problems: Vec<Problem> = bad_lines
        .into_iter()
        .map(|l| Problem::new(Some(l), None, "not valid UTF-8").hint("save the file as UTF-8"))
        .collect();
    if let Err(more) = parse_text(&String::from_utf8_lossy(bytes), mode, limits) {
        problems.extend(more);
    }
    Err(problems)
}

/// Reports required fields that are absent; one present with a bad value was reported already.
fn require(m: &Message, seen: &[Field], mode: Mode, problems: &mut Vec<Problem>) {
    let required: &[Field] = match mode {
        Mode::Stored => &[Field::From, Field::To, Field::Intent, Field::Status, Field::CreatedAt],
        Mode::Draft => &[Field::To, Field::Intent],
    };
    for &f in required {
        let key = match m.format {
            Format::Circe => f.circe_key(),
            Format::FrontMatter => f.front_matter_key(),
        };
        // Present with a value of the wrong shape (a list): said already, not missing.
        let said = problems.iter().any(|p| p.field.as_deref() == Some(key));
        if !seen.contains(&f) && !said {
            problems.push(
                Problem::new(None, Some(key), "missing required header")
                    .hint(format!("add a `{key}:` line to the header block")),
            );
        }
    }
}

/// Lines of `text` as (1-based number, content without `\n`, start offset, end offset after `\n`).
pub(super) fn lines(text: &str) -> impl Iterator<Item = (usize, &str, usize, usize)> {
    let mut start = 0;
    text.split_inclusive('\n').enumerate().map(move |(i, l)| {
        let s = start;
        start += l.len();
        (i + 1, l.strip_suffix('\n').unwrap_or(l), s, start)
    })
}
