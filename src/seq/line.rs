//! The `(ROLE #N): text` line form, the unnumbered `(ROLE): text`, and circe's
//! `(ROLE #N eE): text` for a number taken in epoch E > 0 (after a reset).

/// One line of the form `(ROLE #N): text`, `(ROLE #N eE): text` or `(ROLE): text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeqLine {
    /// The role as written.
    pub role: String,
    /// The sequence number; `None` for the unnumbered form (the reference: treat as 0).
    pub seq: Option<u64>,
    /// The epoch of the sender's counter (` eE` after the number); 0 when not written.
    pub epoch: u64,
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

/// Decimal digits that fit a `u64`, nothing else.
fn number(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()
}

/// Parse one line; `None` when it is not in either form. Malformed numbers (`(ORACLE
/// 123):`, `(ORACLE #):`, `(ORACLE #1x):`, a number past `u64`, an epoch that is not ` e`
/// and digits) and other brackets (`[ORACLE #1]:`), or a missing colon, are not taken.
pub fn parse_line(line: &str) -> Option<SeqLine> {
    let rest = line.strip_prefix('(')?;
    let (inside, after) = rest.split_once(')')?;
    let text = after.strip_prefix(':')?.trim_start_matches(' ');
    let (role, seq, epoch) = match inside.split_once(' ') {
        None => (inside, None, 0),
        Some((role, num)) => {
            let num = num.trim_start_matches(' ').strip_prefix('#')?;
            let (digits, epoch) = match num.split_once(' ') {
                None => (num, 0),
                Some((digits, e)) => (digits, number(e.strip_prefix('e')?)?),
            };
            (role, Some(number(digits)?), epoch)
        }
    };
    is_role(role).then(|| SeqLine { role: role.to_string(), seq, epoch, text: text.to_string() })
}

/// `(ROLE #N): text`, or `(ROLE): text` without a number.
pub fn render_line(role: &str, seq: Option<u64>, text: &str) -> String {
    render_numbered(role, seq, 0, text)
}

/// `(ROLE #N): text`, with ` eE` after the number when the epoch is not 0.
pub fn render_numbered(role: &str, seq: Option<u64>, epoch: u64, text: &str) -> String {
    match (seq, epoch) {
        (Some(n), 0) => format!("({role} #{n}): {text}"),
        (Some(n), e) => format!("({role} #{n} e{e}): {text}"),
        (None, _) => format!("({role}): {text}"),
    }
}
