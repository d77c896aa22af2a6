//! The one error type of circe. Its kind decides the exit code; see `exit_code`.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::exit_code;

/// What sort of failure this is; maps one to one onto an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Internal,
    Usage,
    Refused,
    Conflict,
    NotFound,
    NothingToClaim,
    TimedOut,
}

impl Kind {
    pub fn exit_code(self) -> u8 {
        match self {
            Kind::Internal => exit_code::INTERNAL,
            Kind::Usage => exit_code::USAGE,
            Kind::Refused => exit_code::REFUSED,
            Kind::Conflict => exit_code::CONFLICT,
            Kind::NotFound => exit_code::NOT_FOUND,
            Kind::NothingToClaim => exit_code::NOTHING_TO_CLAIM,
            Kind::TimedOut => exit_code::TIMED_OUT,
        }
    }

    /// Stable lowercase name used in `--json` error output.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Internal => "internal",
            Kind::Usage => "usage",
            Kind::Refused => "refused",
            Kind::Conflict => "conflict",
            Kind::NotFound => "not_found",
            Kind::NothingToClaim => "nothing_to_claim",
            Kind::TimedOut => "timed_out",
        }
    }
}

/// The detail `Error::transient` sets.
const TRANSIENT: &str = "transient";

/// A failure with a message (lowercase fragment), an optional hint, and an optional cause.
#[derive(Debug)]
pub struct Error {
    pub kind: Kind,
    pub message: String,
    pub hint: Option<String>,
    /// Extra machine-readable facts (e.g. the current owner on a conflict).
    /// Facts a program acts on, each a JSON value of its own type (a flag a boolean, an
    /// epoch a number).
    pub details: Vec<(&'static str, serde_json::Value)>,
    pub source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What `Error::committed` adds to the hint.
const COMMITTED: &str = "the change itself was made and stands; only its events are missing from the log: mend what the error names (`circe doctor` shows it), after which new events are logged";

impl Error {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into(), hint: None, details: Vec::new(), source: None }
    }
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Kind::Usage, message)
    }
    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(Kind::Refused, message)
    }

    /// `what` (a file) holds `bytes` that are not UTF-8: refused, naming the line of the
    /// first bad byte, or saying it is UTF-16 (a byte-order mark `FF FE` / `FE FF`).
    pub fn not_utf8(what: impl std::fmt::Display, bytes: &[u8]) -> Self {
        if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
            return Error::refused(format!("{what} is UTF-16, not UTF-8"))
                .hint("save it as UTF-8 (an editor's \"save with encoding\", or `iconv -f UTF-16 -t UTF-8`)");
        }
        let good = std::str::from_utf8(bytes).err().map_or(bytes.len(), |e| e.valid_up_to());
        // The bytes before the first bad one are UTF-8: their lines counted as text.
        let line = 1 + String::from_utf8_lossy(&bytes[..good]).matches('\n').count();
        Error::refused(format!("{what}: line {line} is not UTF-8")).hint(
            "save it as UTF-8 (a Latin-1 byte such as `é` written by an older editor is one cause)",
        )
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(Kind::Conflict, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Kind::NotFound, message)
    }
    pub fn nothing_to_claim(message: impl Into<String>) -> Self {
        Self::new(Kind::NothingToClaim, message)
    }
    pub fn timed_out(message: impl Into<String>) -> Self {
        Self::new(Kind::TimedOut, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Kind::Internal, message)
    }

    /// An I/O failure about `path`; the OS error becomes the cause.
    pub fn io(context: impl fmt::Display, path: impl Into<PathBuf>, source: io::Error) -> Self {
        let path = path.into();
        let mut e = Self::new(Kind::Internal, format!("{context} {}", path.display()));
        if source.raw_os_error() == Some(28) {
            e.hint = Some("the disk is full: free space and run the command again".into());
        } else if source.kind() == io::ErrorKind::PermissionDenied {
            // The path may lie outside the root (an export's folder, a chat channel's).
            e.hint = Some(format!(
                "check this user's permissions on {} and the folders above it",
                path.display()
            ));
        } else if source.raw_os_error() == Some(27) {
            e.hint = Some("a file-size limit (`ulimit -f`) stopped the write: raise it".into());
        } else if source.raw_os_error() == Some(30) {
            e.hint = Some(
                "the filesystem is mounted read-only: a change needs it writable (reports still read it)"
                    .into(),
            );
        } else if source.raw_os_error() == Some(40) {
            // ELOOP from O_NOFOLLOW: circe never follows a link where it keeps its files.
            e.hint = Some("a symbolic link stands there, and circe never follows one: `circe doctor --repair` moves it to LOGS/quarantine/".into());
            e.details.push(("planted", true.into()));
        } else if source.kind() == std::io::ErrorKind::InvalidInput
            && source.to_string() == "not a regular file"
        {
            // A FIFO, a device or a folder where circe keeps a file (refused, never opened
            // for reading: a FIFO would block).
            e.hint = Some("it is no regular file (a pipe, a device or a folder?): `circe doctor --repair` moves it to LOGS/quarantine/ (`circe doctor` names it)".into());
            e.details.push(("planted", true.into()));
        }
        e.source = Some(Box::new(source));
        e
    }

    #[must_use]
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Rewrite the message.
    #[must_use]
    pub fn map_message(mut self, f: impl FnOnce(&str) -> String) -> Self {
        self.message = f(&self.message);
        self
    }

    /// Add `more` to the hint (after `; ` when there is one already).
    #[must_use]
    pub fn hint_more(mut self, more: impl Into<String>) -> Self {
        let more = more.into();
        self.hint = Some(match self.hint.take() {
            // A hint that ends a sentence (`did you mean `x`?`) is followed, not joined.
            Some(h) if h.ends_with(['?', '.', '!']) => format!("{h} {more}"),
            Some(h) => format!("{h}; {more}"),
            None => more,
        });
        self
    }

    /// Mark a failed append of the events of a change already made (past its commit
    /// point): the change stands (detail `committed`), only its events are missing.
    #[must_use]
    pub fn committed(self) -> Self {
        // Marked once: a caller marking what the engine marked already adds nothing.
        if self.is_committed() {
            return self;
        }
        self.detail("committed", true).hint_more(COMMITTED)
    }

    /// Was this an I/O failure to write where this user may not (permissions) or nobody may
    /// (a read-only mount)? A reader may then go on without its derived files.
    pub fn is_not_writable(&self) -> bool {
        self.source.as_ref().and_then(|s| s.downcast_ref::<io::Error>()).is_some_and(|e| {
            e.kind() == io::ErrorKind::PermissionDenied
                || e.raw_os_error() == Some(rustix::io::Errno::ROFS.raw_os_error())
        })
    }

    /// Is this the failure of something after a change that stands (detail `committed`)?
    pub fn is_committed(&self) -> bool {
        self.details.iter().any(|(k, v)| *k == "committed" && *v == true)
    }

    /// Mark the failure of a delivery that landed nothing (detail `committed` false): it
    /// failed as a whole, whatever a journal or a staged copy may suggest, and may be sent
    /// again.
    #[must_use]
    pub fn not_delivered(mut self) -> Self {
        self.details.retain(|(k, _)| *k != "committed");
        self.detail("committed", false)
    }

    /// The failure of a delivery whose journal says it stands (`stands`): marked `committed`,
    /// unless the failure says either way already.
    #[must_use]
    pub fn standing_if(self, stands: bool) -> Self {
        if stands && !self.is_committed() && !self.is_not_delivered() {
            self.detail("committed", true)
        } else {
            self
        }
    }

    /// Was this marked as a delivery that landed nothing (`not_delivered`)?
    pub fn is_not_delivered(&self) -> bool {
        self.details.iter().any(|(k, v)| *k == "committed" && *v == false)
    }

    /// Take `committed` back where the events were all a command did: `instead` says what
    /// stands.
    #[must_use]
    pub fn not_committed(mut self, instead: &str) -> Self {
        self.details.retain(|(k, _)| *k != "committed");
        self.hint = self
            .hint
            .map(|h| h.replace(&format!("; {COMMITTED}"), "").replace(COMMITTED, ""))
            .filter(|h| !h.is_empty());
        self.hint_more(instead)
    }

    #[must_use]
    /// Set a detail (replacing one of the same key: a fact has one value).
    pub fn detail(mut self, key: &'static str, value: impl Into<serde_json::Value>) -> Self {
        self.details.retain(|(k, _)| *k != key);
        self.details.push((key, value.into()));
        self
    }

    #[must_use]
    /// A refusal, conflict or not-found of a command on the task `task`: its `task_id` among
    /// the details (kept when set already), so a program learns which task without reading
    /// the message.
    pub fn about_task(self, task: &str) -> Self {
        let fits = matches!(self.kind, Kind::Refused | Kind::Conflict | Kind::NotFound);
        if !fits || self.details.iter().any(|(k, _)| *k == "task_id") {
            return self;
        }
        self.detail("task_id", task.to_string())
    }

    pub fn exit_code(&self) -> u8 {
        self.kind.exit_code()
    }

    /// Say that the error may pass by itself (the connection to a database server broke,
    /// or the server is stopping or starting): detail `transient`. A follower (`watch`,
    /// `mirror --watch`) connects again and goes on; a one-shot command exits 1.
    #[must_use]
    pub fn transient(self) -> Self {
        self.detail(TRANSIENT, true)
    }

    /// See `transient`.
    pub fn is_transient(&self) -> bool {
        self.details.iter().any(|(k, v)| *k == TRANSIENT && *v == true)
    }

    /// The message followed by every cause, joined with ": ".
    pub fn chain(&self) -> String {
        let mut out = self.message.clone();
        let mut cur: Option<&(dyn std::error::Error + 'static)> =
            self.source.as_deref().map(|s| s as &(dyn std::error::Error + 'static));
        while let Some(c) = cur {
            out.push_str(": ");
            out.push_str(&c.to_string());
            cur = c.source();
        }
        out
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|s| s as &(dyn std::error::Error + 'static))
    }
}

/// Warnings said while a full-screen view holds the terminal (`hold_warnings`), kept until
/// it gives the terminal back.
static HELD: std::sync::Mutex<Option<Vec<String>>> = std::sync::Mutex::new(None);

/// Say `warning: MSG` on stderr, now or, while a full-screen view holds the terminal, once
/// it ends.
pub fn warn(msg: &str) {
    let mut held = HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match held.as_mut() {
        Some(list) => list.push(msg.to_string()),
        None => eprintln!("warning: {msg}"),
    }
}

/// Warnings are kept from now until the guard is dropped, then said.
pub fn hold_warnings() -> HeldWarnings {
    let mut held = HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    held.get_or_insert_with(Vec::new);
    HeldWarnings(())
}

/// See `hold_warnings`.
pub struct HeldWarnings(());

impl Drop for HeldWarnings {
    fn drop(&mut self) {
        let kept = HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        for msg in kept.unwrap_or_default() {
            eprintln!("warning: {msg}");
        }
    }
}

/// `s` with its line breaks and tabs written as `\n`, `\r` and `\t`: a value quoted in a
/// message stays on its line (a newline in it could fake a `hint:` line). The rest is kept as
/// it is: the terminal's output escapes what cannot be shown (`cli::output`), and the JSON
/// keeps the text (section 11).
pub fn one_line(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains(['\n', '\r', '\t']) {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(s.replace('\n', "\\n").replace('\r', "\\r").replace('\t', "\\t"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_said_while_held_waits_for_the_guard() {
        let held = hold_warnings();
        warn("kept for later");
        let kept = HELD.lock().unwrap().clone().unwrap_or_default();
        assert!(kept.iter().any(|m| m == "kept for later"), "{kept:?}");
        drop(held);
        assert!(HELD.lock().unwrap().is_none());
    }
}
