//! Open asks: an `ask` (or `ask-human`) waits for its `ask-response`. One record per ask,
//! kept by the engine (`Engine::put_ask`), changed by compare-and-set on `rev`.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::names::{AgentName, MsgId, TaskId};

/// The version of the ask record format this circe writes; a newer one is refused.
pub const ASK_FORMAT: u32 = 1;

/// Where an ask stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskState {
    /// Waiting for its response.
    Open,
    /// A response (`answer`) is being delivered: settled by looking for it.
    Answering,
    Answered,
    /// Its deadline passed unanswered (`circe reap`).
    Expired,
}

impl AskState {
    pub fn as_str(self) -> &'static str {
        match self {
            AskState::Open => "open",
            AskState::Answering => "answering",
            AskState::Answered => "answered",
            AskState::Expired => "expired",
        }
    }
}

/// One ask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskRecord {
    pub v: u32,
    pub msg_id: MsgId,
    /// `ask` or `ask-human`.
    pub intent: String,
    /// Who asked (and waits).
    pub from: AgentName,
    /// The address as written (an agent, a role, `all`, `mesh/agent`).
    pub to: String,
    /// The agents it was delivered to: any of them may answer.
    pub recipients: Vec<AgentName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline: Option<String>,
    pub asked_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    pub state: AskState,
    /// The response's msg id (while answering, and once answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<AgentName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_at: Option<String>,
    /// Bumped by every write; a write names the revision it read (compare-and-set).
    pub rev: u64,
}

impl AskRecord {
    pub fn parse(text: &str) -> Result<AskRecord> {
        let rec: AskRecord = crate::yaml::from_str(text)
            .map_err(|e| Error::internal(format!("an ask record is damaged: {e}")))?;
        if rec.v > ASK_FORMAT {
            return Err(Error::refused(format!(
                "ask {} is of record format {}; this circe reads up to {ASK_FORMAT}",
                rec.msg_id, rec.v
            ))
            .hint("upgrade circe"));
        }
        Ok(rec)
    }

    pub fn render(&self) -> String {
        crate::yaml::to_string(self).unwrap_or_default()
    }

    /// Waiting for its answer (also while one is being delivered).
    pub fn is_open(&self) -> bool {
        matches!(self.state, AskState::Open | AskState::Answering)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_newer_formats() {
        let r = AskRecord {
            v: ASK_FORMAT,
            msg_id: MsgId::new("ask-001").unwrap(),
            intent: "ask".into(),
            from: AgentName::new("core").unwrap(),
            to: "brain/brain".into(),
            recipients: vec![AgentName::new("brain").unwrap()],
            task: None,
            headline: Some("What is it: x?".into()),
            asked_at: "2025-10-30T10:00:00Z".into(),
            deadline: None,
            state: AskState::Open,
            answer: None,
            answered_by: None,
            answered_at: None,
            rev: 1,
        };
        assert_eq!(AskRecord::parse(&r.render()).unwrap(), r);
        let newer = r.render().replace("v: 1", "v: 2");
        assert_eq!(AskRecord::parse(&newer).unwrap_err().kind, crate::error::Kind::Refused);
        assert!(AskRecord::parse(&r.render().replace("from: core", "from: ../x")).is_err());
    }
}
