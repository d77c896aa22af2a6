//! The chat line grammar: a hand-written matcher equal to the reference's regex
//!
//! ```text
//! ^\[([a-zA-Z0-9_-]+)-to-([a-zA-Z0-9_-]+)\](?:\s*@\s*\[([^\]]*)\])?\s*:\s*(.+)$
//! ```
//!
//! with the `regex` crate's semantics (leftmost-first captures, Unicode `\s`, `.` is any
//! character but `\n`, `$` the end of the text). A property test in `tests` compares it with
//! the `regex` crate on arbitrary text (PROTOCOLS.md "The chat channel" says why there is no
//! regex engine in the binary).

/// The four capture groups of a matching line, as slices of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Captures<'a> {
    /// Group 1 and 2 split at the last `-to-` that leaves both sides non-empty (the greedy
    /// group 1 of the regex).
    pub sender: &'a str,
    pub recipient: &'a str,
    /// Group 3: the text between `@ [` and the first `]` after it, when present.
    pub broadcast: Option<&'a str>,
    /// Group 4: the body.
    pub body: &'a str,
    /// The whole bracket between `[` and `]` (`sender-to-recipient`), for other splits.
    pub names: &'a str,
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Skip `\s*` (Unicode White_Space, as the regex crate's `\s`) from byte `i` of `s`.
fn skip_ws(s: &str, i: usize) -> usize {
    s[i..].find(|c: char| !c.is_whitespace()).map_or(s.len(), |k| i + k)
}

/// Every byte index `i` where the bracket `names` splits into `names[..i]` `-to-`
/// `names[i + 4..]` with both sides non-empty, in increasing order.
pub fn splits(names: &str) -> impl Iterator<Item = usize> + '_ {
    let b = names.as_bytes();
    (1..b.len().saturating_sub(4)).filter(move |&i| &b[i..i + 4] == b"-to-")
}

/// Match one line against the reference regex; `None` when it does not match.
pub fn match_line(s: &str) -> Option<Captures<'_>> {
    let b = s.as_bytes();
    if b.first() != Some(&b'[') {
        return None;
    }
    // `[N+-to-N+]`: every character up to the first non-name byte is a name byte (`-`, `t`
    // and `o` are name bytes too), and that byte must be `]`.
    let close = 1 + b[1..].iter().position(|&c| !is_name_byte(c))?;
    if b[close] != b']' {
        return None;
    }
    let names = &s[1..close];
    // The regex's group 1 is greedy: the last possible split wins. What follows `]` does not
    // depend on the split, so if the last split fails there, every split fails.
    let split = splits(names).last()?;
    let (sender, recipient) = (&names[..split], &names[split + 4..]);
    let mut i = skip_ws(s, close + 1);
    let mut broadcast = None;
    if b.get(i) == Some(&b'@') {
        // The optional group: `@\s*\[` then everything up to the first `]`. If it is not
        // there, the group is skipped and `\s*:` needs a `:` where this `@` stands: no match.
        let open = skip_ws(s, i + 1);
        if b.get(open) != Some(&b'[') {
            return None;
        }
        let end = open + 1 + b[open + 1..].iter().position(|&c| c == b']')?;
        broadcast = Some(&s[open + 1..end]);
        i = skip_ws(s, end + 1);
    }
    if b.get(i) != Some(&b':') {
        return None;
    }
    let rest = &s[i + 1..];
    Some(Captures { sender, recipient, broadcast, body: body_of(rest)?, names })
}

/// `\s*(.+)$` on the text after the colon: the greedy `\s*` gives back only what `.+` needs.
fn body_of(rest: &str) -> Option<&str> {
    let w = skip_ws(rest, 0);
    let tail = &rest[w..];
    if !tail.is_empty() {
        return (!tail.contains('\n')).then_some(tail);
    }
    // Only whitespace after the colon: `.+` takes the last whitespace character, unless it
    // is a newline (which `.` does not match, and every earlier start would include it).
    let (k, last) = rest.char_indices().next_back()?;
    (last != '\n').then_some(&rest[k..])
}
