//! The `(ROLE #N): text` line form, and the unnumbered `(ROLE): text`.

/// One line of the form `(ROLE #N): text` or `(ROLE): text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeqLine {
    /// The role as written.
    pub role: String,
    /// The sequence number; `None` for the unnumbered form (the reference: treat as 0).
    pub seq: Option<u64>,
    /// The text after `: ` (leading spaces dropped).
    pub text: String,
}

impl SeqLine {
    /// Roles compare without regard to case: `lead` and `LEAD` are one sender.
    pub fn role_key(&self) -> String {
        self.role.to_ascii_uppercase()
    }
}

/// A role: letters, digits, `-` and `_`, starting and ending with a letter or digit
/// (`WORKER-A-2`).
fn is_role(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// Parse one line; `None` when it is not in either form. Malformed numbers (`(ORACLE
/// 123):`, `(ORACLE #):`, `(ORACLE #1x):`, a number past `u64`) and other brackets
/// (`[ORACLE #1]:`), or a missing colon, are not taken.
pub fn parse_line(line: &str) -> Option<SeqLine> {
    let rest = line.strip_prefix('(')?;
    let (inside, after) = rest.split_once(')')?;
    let text = after.strip_prefix(':')?.trim_start_matches(' ');
    let (role, seq) = match inside.split_once(' ') {
        None => (inside, None),
        Some((role, num)) => {
            let digits = num.trim_start_matches(' ').strip_prefix('#')?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (role, Some(digits.parse::<u64>().ok()?))
        }
    };
    is_role(role).then(|| SeqLine { role: role.to_string(), seq, text: text.to_string() })
}

/// `(ROLE #N): text`, or `(ROLE): text` without a number.
pub fn render_line(role: &str, seq: Option<u64>, text: &str) -> String {
    match seq {
        Some(n) => format!("({role} #{n}): {text}"),
        None => format!("({role}): {text}"),
    }
}
