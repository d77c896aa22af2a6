//! The known header fields: their spellings in both formats and the checks on their values.

use super::{Message, Priority, status};
use crate::{clock, names};

/// A known header. Order of `ALL` is the canonical render order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    From,
    To,
    Intent,
    TaskId,
    Status,
    CreatedAt,
    MsgId,
    Seq,
    SeqEpoch,
    InReplyTo,
    Headline,
    Priority,
    Deadline,
    Tags,
}

/// What is wrong with a value: a message and maybe a hint.
pub type Refusal = (String, Option<String>);

impl Field {
    pub const ALL: [Field; 14] = [
        Field::From,
        Field::To,
        Field::Intent,
        Field::TaskId,
        Field::Status,
        Field::CreatedAt,
        Field::MsgId,
        Field::Seq,
        Field::SeqEpoch,
        Field::InReplyTo,
        Field::Headline,
        Field::Priority,
        Field::Deadline,
        Field::Tags,
    ];

    /// The CIRCE spelling.
    pub fn circe_key(self) -> &'static str {
        match self {
            Field::From => "from",
            Field::To => "to",
            Field::Intent => "intent",
            Field::TaskId => "task_id",
            Field::Status => "status",
            Field::CreatedAt => "created_at",
            Field::MsgId => "msg_id",
            Field::Seq => "seq",
            Field::SeqEpoch => "seq_epoch",
            Field::InReplyTo => "in_reply_to",
            Field::Headline => "headline",
            Field::Priority => "priority",
            Field::Deadline => "deadline",
            Field::Tags => "tags",
        }
    }

    /// The TX front-matter spelling.
    pub fn front_matter_key(self) -> &'static str {
        match self {
            Field::Intent => "type",
            Field::TaskId => "task-id",
            Field::CreatedAt => "timestamp",
            Field::MsgId => "msg-id",
            Field::InReplyTo => "in-reply-to",
            Field::SeqEpoch => "seq-epoch",
            other => other.circe_key(),
        }
    }

    /// A CIRCE header key: the CIRCE spelling, with `-` accepted for `_`.
    pub fn from_circe_key(key: &str) -> Option<Field> {
        let key = key.replace('-', "_");
        Field::ALL.into_iter().find(|f| f.circe_key() == key)
    }

    /// A front-matter key: TX or CIRCE spelling, `-` and `_` interchangeable.
    pub fn from_front_matter_key(key: &str) -> Option<Field> {
        match key.replace('-', "_").as_str() {
            "type" => Some(Field::Intent),
            "timestamp" => Some(Field::CreatedAt),
            other => Field::ALL.into_iter().find(|f| f.circe_key() == other),
        }
    }

    /// Checks `value` and stores it in `m`. `tags` takes a comma-separated list.
    pub fn set(self, m: &mut Message, value: &str) -> Result<(), Refusal> {
        if value.is_empty() {
            return Err(("empty value".into(), None));
        }
        let text = || Some(value.to_string());
        match self {
            Field::From => {
                check_address(value)?;
                if value == "all" {
                    return Err(("`all` is a recipient, not a sender".into(), None));
                }
                m.from = text();
            }
            Field::To => {
                check_address(value)?;
                m.to = text();
            }
            Field::Intent => {
                names::check_intent(value).map_err(refusal)?;
                m.intent = text();
            }
            Field::TaskId => {
                names::check_task_id(value).map_err(refusal)?;
                m.task_id = text();
            }
            Field::Status => {
                if !status::is_known(value) {
                    return Err((
                        format!("unknown status `{}`", crate::error::one_line(value)),
                        Some(format!(
                            "use one of {} (TX: {})",
                            status::CIRCE_STATUSES.join(", "),
                            status::TX_STATUSES.join(", ")
                        )),
                    ));
                }
                m.status = text();
            }
            Field::CreatedAt => m.created_at = Some(time(value)?),
            Field::Deadline => m.deadline = Some(time(value)?),
            Field::MsgId => {
                names::check_msg_id(value).map_err(refusal)?;
                m.msg_id = text();
            }
            Field::InReplyTo => {
                names::check_msg_id(value).map_err(refusal)?;
                m.in_reply_to = text();
            }
            Field::Seq => {
                let n = value.parse::<u64>().map_err(|_| {
                    (format!("`{}` is not a sequence number", crate::error::one_line(value)), None)
                })?;
                m.seq = Some(n);
            }
            Field::SeqEpoch => {
                let n = value.parse::<u64>().map_err(|_| {
                    (format!("`{}` is not a sequence epoch", crate::error::one_line(value)), None)
                })?;
                m.seq_epoch = Some(n);
            }
            Field::Headline => {
                if value.chars().any(char::is_control) {
                    return Err(("headline contains a control character".into(), None));
                }
                m.headline = text();
            }
            Field::Priority => {
                m.priority = Some(Priority::parse(value).ok_or_else(|| {
                    (
                        format!("unknown priority `{}`", crate::error::one_line(value)),
                        Some("use high, normal or low".into()),
                    )
                })?);
            }
            Field::Tags => {
                let tags: Vec<String> = value
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect();
                set_tags(m, tags)?;
            }
        }
        Ok(())
    }

    /// The value as rendered, `None` when absent. Tags are joined with `, `.
    pub fn text(self, m: &Message) -> Option<String> {
        match self {
            Field::From => m.from.clone(),
            Field::To => m.to.clone(),
            Field::Intent => m.intent.clone(),
            Field::TaskId => m.task_id.clone(),
            Field::Status => m.status.clone(),
            Field::CreatedAt => m.created_at.map(clock::format),
            Field::MsgId => m.msg_id.clone(),
            Field::Seq => m.seq.map(|n| n.to_string()),
            Field::SeqEpoch => m.seq_epoch.map(|n| n.to_string()),
            Field::InReplyTo => m.in_reply_to.clone(),
            Field::Headline => m.headline.clone(),
            Field::Priority => m.priority.map(|p| p.as_str().to_string()),
            Field::Deadline => m.deadline.map(clock::format),
            Field::Tags => (!m.tags.is_empty()).then(|| m.tags.join(", ")),
        }
    }
}

/// Tags are non-empty, trimmed, and hold no comma or control character.
pub fn set_tags(m: &mut Message, tags: Vec<String>) -> Result<(), Refusal> {
    if tags.is_empty() {
        return Err(("empty value".into(), None));
    }
    for t in &tags {
        if t.is_empty() || t.trim() != t || t.contains(',') || t.chars().any(char::is_control) {
            return Err((
                format!("bad tag `{}`", crate::error::one_line(t)),
                Some(
                    "tags are non-empty and hold no comma, control character or surrounding space"
                        .into(),
                ),
            ));
        }
    }
    m.tags = tags;
    Ok(())
}

/// `agent`, `role`, `all`, `role:NAME`, `agent:NAME`, or TX `mesh/agent`; every name follows
/// the agent-name rule (`address::check`).
fn check_address(addr: &str) -> Result<(), Refusal> {
    crate::address::check(addr).map_err(refusal)
}

fn time(value: &str) -> Result<chrono::DateTime<chrono::Utc>, Refusal> {
    clock::parse(value).ok_or_else(|| {
        (
            format!("`{}` is not an RFC 3339 time", crate::error::one_line(value)),
            Some("write UTC like 2025-11-21T17:00:00Z (a year from 0000 to 9999)".into()),
        )
    })
}

#[expect(clippy::needless_pass_by_value, reason = "used as a map_err adapter")]
fn refusal(e: crate::error::Error) -> Refusal {
    (e.message.clone(), e.hint.clone())
}
