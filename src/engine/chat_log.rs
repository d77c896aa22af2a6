//! The chat channel as an engine keeps it (PROTOCOLS.md section 13, "On a database root"):
//! numbered entries, one per message said, each with the place it has in the channel read
//! as a file (byte offset and line number), so that readers print what a local root's
//! reader prints. The local engine keeps the channel as a file beside the root instead
//! (`Engine::chat_log` is `None` there; `chat::channel` opens the file).

use std::time::Duration;

use super::SeqHold;
use crate::error::Result;

/// One message said into the channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatEntry {
    /// Its place in the channel: entries are read in id order, and ids are taken in the
    /// order appends commit (a reader of `id > N` never skips one).
    pub id: u64,
    /// Where it starts in the file it belongs to (the channel, or its archive): the byte
    /// offset and the line number of its first line.
    pub offset: u64,
    pub line: u64,
    /// The whole message: its lines, each ending in `\n`.
    pub text: String,
    /// The archive that holds it (`chat-<time>.md`); `None` while it is in the channel.
    pub archive: Option<String>,
}

/// What an archive moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatArchived {
    /// The archive's name (`chat-<time>.md`, `-2` before `.md` when taken).
    pub name: String,
    pub bytes: u64,
    pub lines: u64,
}

/// The channel kept by an engine.
pub trait ChatLog {
    /// Append one message (`text`: whole lines). With `number`, the held sequence number
    /// the text carries commits with the append, or neither happens.
    fn chat_append(&self, text: &str, number: Option<&dyn SeqHold>) -> Result<ChatEntry>;

    /// Up to `max` entries with an id above `after`, in id order, archived ones included.
    fn chat_read(&self, after: u64, max: usize) -> Result<Vec<ChatEntry>>;

    /// The newest entry's id (0: nothing was ever said).
    fn chat_last(&self) -> Result<u64>;

    /// The id the channel starts after: its archives' newest entry (0: none archived).
    fn chat_start(&self) -> Result<u64>;

    /// Wait up to `timeout` for an entry above `after`; returns the newest id.
    fn chat_wait(&self, after: u64, timeout: Duration) -> Result<u64>;

    /// Move the start of the channel into an archive named `stem.md` (or `stem-2.md`, ...),
    /// with no append in between: `split` is given the channel's text and says how many of
    /// its bytes go (it refuses a bad cut). `None` when nothing moved.
    fn chat_archive(
        &self,
        stem: &str,
        split: &dyn Fn(&[u8]) -> Result<usize>,
    ) -> Result<Option<ChatArchived>>;
}

/// `chat_archive`'s cut of entries: how many of `entries` (the channel's, in id order) lie
/// wholly before byte `split`, and the lines they hold. A cut inside an entry is refused.
pub fn cut(entries: &[ChatEntry], split: usize) -> Result<(usize, u64)> {
    let (mut bytes, mut lines, mut n) = (0usize, 0u64, 0usize);
    for e in entries {
        if bytes >= split {
            break;
        }
        bytes += e.text.len();
        lines += e.text.bytes().filter(|&b| b == b'\n').count() as u64;
        n += 1;
    }
    if bytes != split {
        return Err(crate::error::Error::internal("an archive would cut a message in two"));
    }
    Ok((n, lines))
}

/// A channel's text (or an archive's) as entries: each line that is not indented begins
/// one, and the indented lines after it belong to it (a message and its continuation lines;
/// a comment or an empty line is an entry of its own). Bytes that are not UTF-8 read as
/// U+FFFD; a last line without its newline gets one.
pub fn entries_of(data: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(data);
    let mut out: Vec<String> = Vec::new();
    for line in text.split_inclusive('\n') {
        let continues = line.starts_with([' ', '\t']);
        match out.last_mut() {
            Some(last) if continues => last.push_str(line),
            _ => out.push(line.to_string()),
        }
        if !line.ends_with('\n') {
            out.last_mut().expect("just pushed").push('\n');
        }
    }
    out
}

/// `stem.md`, then `stem-2.md`, ... : the first name `taken` does not know.
pub fn free_name(stem: &str, taken: &dyn Fn(&str) -> Result<bool>) -> Result<String> {
    let mut name = format!("{stem}.md");
    let mut k = 2;
    while taken(&name)? {
        name = format!("{stem}-{k}.md");
        k += 1;
    }
    Ok(name)
}
