//! A watcher's saved place in the channel (`.circe/cursors/chat/<name>`): which file
//! (device, inode), the byte offset and line number to read on from, and a check of the
//! bytes just before the offset that tells a file rewritten in place. One JSON line.

use serde::{Deserialize, Serialize};

use super::scanner::Position;
use crate::engine::local::FileId;
use crate::error::{Error, Result};

/// The cursor format this circe reads and writes.
pub const CURSOR_VERSION: u32 = 1;

/// How many bytes before the offset `check` covers.
pub const CHECK_SPAN: u64 = 64;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub version: u32,
    pub dev: u64,
    pub ino: u64,
    pub offset: u64,
    pub line: u64,
    /// FNV-1a (64 bit, hex) of the up to `CHECK_SPAN` bytes before `offset`.
    pub check: String,
    /// When it was saved (RFC 3339, ms), for `circe cursors`; absent in a cursor an older
    /// circe saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_at: Option<String>,
}

impl Cursor {
    pub fn new(id: FileId, at: Position, before: &[u8]) -> Cursor {
        Cursor {
            version: CURSOR_VERSION,
            dev: id.dev,
            ino: id.ino,
            offset: at.offset,
            line: at.line,
            check: check_of(before),
            saved_at: Some(crate::clock::stamp_ms(crate::clock::now())),
        }
    }

    pub fn id(&self) -> FileId {
        FileId { dev: self.dev, ino: self.ino }
    }

    pub fn position(&self) -> Position {
        Position { offset: self.offset, line: self.line }
    }

    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default() + "\n"
    }

    /// Read a saved cursor. A newer format is refused (an older circe must not misread
    /// it); anything unreadable is `Ok(None)` with the reason, and the caller starts over.
    pub fn parse(name: &str, bytes: &[u8]) -> Result<std::result::Result<Cursor, String>> {
        let v: serde_json::Value = match serde_json::from_slice(bytes) {
            Ok(v) => v,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let version = v.get("version").and_then(serde_json::Value::as_u64).unwrap_or(0);
        if version > u64::from(CURSOR_VERSION) {
            return Err(Error::refused(format!(
                "cursor `{name}` has format version {version}; this circe reads {CURSOR_VERSION}"
            ))
            .hint("use a newer circe, or another --cursor name"));
        }
        Ok(serde_json::from_value(v).map_err(|e| e.to_string()))
    }
}

/// 64-bit FNV-1a as 16 hex digits.
pub fn check_of(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_newer_versions_are_refused() {
        let c = Cursor::new(FileId { dev: 1, ino: 2 }, Position { offset: 10, line: 3 }, b"abc");
        let back = Cursor::parse("w", c.to_line().as_bytes()).unwrap().unwrap();
        assert_eq!(back, c);
        assert!(Cursor::parse("w", b"").unwrap().is_err());
        assert!(Cursor::parse("w", br#"{"version":1}"#).unwrap().is_err());
        // One an older circe saved, with no time, reads.
        let old = br#"{"version":1,"dev":1,"ino":2,"offset":10,"line":3,"check":"00"}"#;
        assert_eq!(Cursor::parse("w", old).unwrap().unwrap().saved_at, None);
        let e = Cursor::parse("w", br#"{"version":2,"dev":1}"#).unwrap_err();
        assert!(e.message.contains("version 2"), "{}", e.message);
        assert_ne!(check_of(b"abc"), check_of(b"abd"));
        assert_eq!(check_of(b""), "cbf29ce484222325");
    }

    #[test]
    fn cursor_names() {
        use crate::names::CursorName;
        for ok in ["w", "agent-1", "A_b-9"] {
            assert!(CursorName::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-x", ".x", "a/b", "..", "a b", &"x".repeat(65)] {
            assert!(CursorName::new(bad).is_err(), "{bad}");
        }
    }
}
