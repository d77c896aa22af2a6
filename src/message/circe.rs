//! The CIRCE format: a `# MESSAGE` line, `key: value` headers, a blank line, the body.

use std::collections::HashSet;

use super::parse::lines;
use super::{Field, Format, Limits, Message, Problem};

/// Parses CIRCE text into a message, pushing every problem; `None` when it is no message at
/// all, or its header block is longer than `limits.header_lines` (not read further).
/// Linear in the text: duplicates are found with a set.
pub(super) fn parse(
    text: &str,
    limits: &Limits,
    problems: &mut Vec<Problem>,
) -> Option<(Message, Vec<Field>)> {
    let mut all = lines(text);
    loop {
        let Some((no, line, _, _)) = all.next() else {
            problems.push(
                Problem::new(None, None, "empty message")
                    .hint("start the file with `# MESSAGE` or `---`"),
            );
            return None;
        };
        if line.trim().is_empty() {
            continue;
        }
        if line.trim_end() == "# MESSAGE" {
            break;
        }
        // Lines ended by a lone CR (classic Mac OS) read as one line that starts right.
        let lone_cr = line.contains('\r') && !line.trim_end().contains('\n');
        let starts = ["# MESSAGE\r", "---\r"].iter().any(|s| line.trim_start().starts_with(s));
        if lone_cr && starts {
            problems.push(
                Problem::new(
                    Some(no),
                    None,
                    "its lines end with a lone CR (classic Mac OS line ends)",
                )
                .hint("save the file with LF (or CRLF) line ends"),
            );
            return None;
        }
        problems.push(
            Problem::new(Some(no), None, "a message starts with `# MESSAGE` or `---`")
                .hint("put `# MESSAGE` on the first line, then `key: value` headers"),
        );
        return None;
    }
    let mut m = Message::new(Format::Circe);
    let mut seen: Vec<Field> = Vec::new();
    let mut extra_keys: HashSet<&str> = HashSet::new();
    let mut body_start = text.len();
    for (n, (no, line, start, end)) in all.enumerate() {
        if line.trim().is_empty() {
            body_start = end;
            break;
        }
        if line.starts_with('#') {
            body_start = start;
            break;
        }
        if n >= limits.header_lines {
            problems.push(limits.header_problem(no));
            return None;
        }
        let Some((key, value)) = split_header(line) else {
            problems.push(Problem::new(Some(no), None, "not a `key: value` header line").hint(
                "header keys use a-z, 0-9, '_' and '-'; end the header block with a blank line",
            ));
            continue;
        };
        match Field::from_circe_key(key) {
            Some(f) if seen.contains(&f) => {
                problems.push(Problem::new(Some(no), Some(key), "duplicate header"));
            }
            Some(f) => {
                seen.push(f);
                if let Err((msg, hint)) = f.set(&mut m, value) {
                    problems.push(Problem::new(Some(no), Some(key), msg).maybe_hint(hint));
                }
            }
            None if !extra_keys.insert(key) => {
                problems.push(Problem::new(Some(no), Some(key), "duplicate header"));
            }
            None => m.extra.push((key.to_string(), value.to_string())),
        }
    }
    m.body = text[body_start..].to_string();
    Some((m, seen))
}

/// `key: value` with a key matching `[a-z][a-z0-9_-]*`; the value is trimmed.
fn split_header(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.split_once(':')?;
    let mut chars = key.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    ok.then(|| (key, value.trim()))
}

/// Whether `key` can be written as a CIRCE extra header.
#[cfg(test)]
pub(super) fn is_extra_key(key: &str) -> bool {
    split_header(&format!("{key}:")).is_some() && Field::from_circe_key(key).is_none()
}
