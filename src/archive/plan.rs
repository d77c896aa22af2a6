//! An archive run's journal (`ARCHIVE/journal.json`) and how an interrupted run is finished
//! (PROTOCOLS.md section 17, "The journal"). Pure: the engine reads the journal and looks at
//! the tree, this module says what to do.
//!
//! A run moves through three states, each written (temp file, fsync, rename) before its work
//! starts:
//!
//! - `staging`: segments are written into a staging folder and verified. Nothing outside the
//!   staging folder has changed. Interrupted: **roll back** (remove the staging folder).
//! - `committing`: every segment is complete and verified. Segments and summaries are moved
//!   into `ARCHIVE/<period>/`, tombstones written, then one append to `ARCHIVE/index.jsonl`
//!   names them: that append is the commit point. Interrupted: **roll forward** (each step is
//!   idempotent; what is already in place is skipped).
//! - `removing`: the originals are removed, each only if it still has the checksum its
//!   archived copy was verified against. Interrupted: **roll forward**.
//!
//! A journal that does not read is rebuilt from the tree: a staging folder whose run is not
//! in the index is rolled back; segments lying in `ARCHIVE/<period>/` that the index does not
//! name are finished (verified, then committed) or, if they do not verify, removed; and the
//! newest run in the index has its removals redone. A damaged journal never stops archiving.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Staging,
    Committing,
    Removing,
}

impl State {
    /// As the journal writes it (`staging`, `committing`, `removing`).
    pub fn as_str(self) -> &'static str {
        match self {
            State::Staging => "staging",
            State::Committing => "committing",
            State::Removing => "removing",
        }
    }
}

/// `ARCHIVE/journal.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    pub v: u32,
    /// The run's id (`YYYYMMDDTHHMMSSmmmZ`), which is part of its segments' names.
    pub run: String,
    pub state: State,
    pub pid: u32,
    pub host: String,
    pub started_at: String,
    /// The staging folder (a name in `tmp/`).
    pub staging: String,
    /// The segments of the run (`<period>/<file>`), once staged.
    #[serde(default)]
    pub segments: Vec<String>,
}

impl Journal {
    pub fn render(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// The journal; `Err` with the reason when it does not read (then it is rebuilt).
    pub fn parse(bytes: &[u8]) -> std::result::Result<Journal, String> {
        let j: Journal = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if j.v > super::FORMAT {
            return Err(format!(
                "journal format {} is newer than this circe's {}",
                j.v,
                super::FORMAT
            ));
        }
        Ok(j)
    }

    /// Who holds the run, for the error a second run gets.
    pub fn holder(&self) -> String {
        format!("pid {} on {} since {}", self.pid, self.host, self.started_at)
    }
}

/// What to do with what an interrupted run left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// No journal, no leftovers.
    Nothing,
    /// Remove the staging folder (and the journal).
    RollBack { staging: Option<String> },
    /// Finish committing these segments, then remove their originals.
    Commit { run: String, staging: String, segments: Vec<String> },
    /// Redo the removal of these committed segments' originals.
    Remove { segments: Vec<String> },
    /// The journal does not read: rebuild from the tree.
    Rebuild { why: String },
}

/// Decide from the journal (absent, or its bytes).
pub fn recovery(journal: Option<&[u8]>) -> Recovery {
    let Some(bytes) = journal else { return Recovery::Nothing };
    match Journal::parse(bytes) {
        Err(why) => Recovery::Rebuild { why },
        Ok(j) => match j.state {
            State::Staging => Recovery::RollBack { staging: Some(j.staging) },
            State::Committing => {
                Recovery::Commit { run: j.run, staging: j.staging, segments: j.segments }
            }
            State::Removing => Recovery::Remove { segments: j.segments },
        },
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    fn j(state: State) -> Journal {
        Journal {
            v: 1,
            run: "20260101T000000000Z".into(),
            state,
            pid: 7,
            host: "h".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            staging: "archive-7-x".into(),
            segments: vec!["2026-01/2026-01.20260101T000000000Z.tar.zst".into()],
        }
    }

    #[test]
    fn each_state_has_its_way_out() {
        assert_eq!(recovery(None), Recovery::Nothing);
        let text = |s| j(s).render();
        assert_eq!(
            recovery(Some(text(State::Staging).as_bytes())),
            Recovery::RollBack { staging: Some("archive-7-x".into()) }
        );
        assert!(matches!(
            recovery(Some(text(State::Committing).as_bytes())),
            Recovery::Commit { .. }
        ));
        assert!(matches!(
            recovery(Some(text(State::Removing).as_bytes())),
            Recovery::Remove { .. }
        ));
        for bad in [&b""[..], b"{", b"\x00\xff garbage", br#"{"v":9,"run":"x","state":"staging","pid":1,"host":"h","started_at":"t","staging":"s"}"#] {
            assert!(matches!(recovery(Some(bad)), Recovery::Rebuild { .. }), "{bad:?}");
        }
        assert_eq!(Journal::parse(text(State::Removing).as_bytes()).unwrap(), j(State::Removing));
        assert!(j(State::Staging).holder().contains("pid 7 on h"));
    }
}
