//! One parsed message line: the regex's captures turned into sender, recipient, broadcast
//! list and body, with circe's reading of an ambiguous `-to-`.

use super::grammar::{self, Captures};

/// A message line as read: who to whom, who else sees it, and the text of the first line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatLine {
    pub sender: String,
    pub recipient: String,
    /// The `@ [a, b]` names: split on `,`, trimmed, empty entries dropped (`@ []` -> none).
    pub broadcast: Vec<String>,
    /// The body of the first line (group 4 of the regex, as it matched).
    pub body: String,
    /// The bracket admits more than one `sender-to-recipient` split.
    pub ambiguous: bool,
}

/// Parse one line (without its newline). `is_agent` tells which names are agents: where
/// `-to-` splits the bracket in more than one way, the one split with a known agent on
/// both sides wins; otherwise the regex's own split (the last `-to-`).
pub fn parse_line(line: &str, is_agent: &dyn Fn(&str) -> bool) -> Option<ChatLine> {
    let c = grammar::match_line(line)?;
    let (sender, recipient, ambiguous) = split_names(&c, is_agent);
    Some(ChatLine {
        sender: sender.to_string(),
        recipient: recipient.to_string(),
        broadcast: c.broadcast.map(split_broadcast).unwrap_or_default(),
        body: c.body.to_string(),
        ambiguous,
    })
}

fn split_names<'a>(c: &Captures<'a>, is_agent: &dyn Fn(&str) -> bool) -> (&'a str, &'a str, bool) {
    let all: Vec<usize> = grammar::splits(c.names).collect();
    if all.len() < 2 {
        return (c.sender, c.recipient, false);
    }
    let known: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&i| is_agent(&c.names[..i]) && is_agent(&c.names[i + 4..]))
        .collect();
    match known.as_slice() {
        [i] => (&c.names[..*i], &c.names[*i + 4..], true),
        _ => (c.sender, c.recipient, true),
    }
}

/// `a, b ,, c` -> `[a, b, c]`.
pub fn split_broadcast(s: &str) -> Vec<String> {
    s.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_string).collect()
}

/// How a line of the channel file reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineKind {
    /// Starts a message.
    Message(ChatLine),
    /// Indented (space or tab first): continues the message above, if any. Holds the text
    /// with one level of indentation removed (two spaces, else one space or tab).
    Continuation(String),
    /// Anything else: a comment (empty lines included).
    Comment,
}

/// Classify one line (newline and a trailing `\r` already removed).
pub fn classify(line: &str, is_agent: &dyn Fn(&str) -> bool) -> LineKind {
    if line.starts_with([' ', '\t']) {
        let text = line.strip_prefix("  ").unwrap_or(&line[1..]);
        return LineKind::Continuation(text.to_string());
    }
    parse_line(line, is_agent).map_or(LineKind::Comment, LineKind::Message)
}
