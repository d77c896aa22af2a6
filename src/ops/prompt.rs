//! An agent's current prompt: the last TX `prompt` message it was sent (PROTOCOLS.md
//! section 16). `circe prime` shows it.

use serde::Serialize;

use crate::clock;
use crate::error::Result;
use crate::message::{self, Mode};
use crate::names::AgentName;
use crate::workspace::Workspace;

/// The prompt an agent works from.
#[derive(Debug, Clone, Serialize)]
pub struct Prompt {
    pub agent: AgentName,
    pub msg_id: Option<String>,
    /// Who set it (`system`, or a coordinator).
    pub from: Option<String>,
    pub set_at: Option<String>,
    /// The prompt's text: the message's body.
    pub text: String,
}

/// `agent`'s current prompt, if it was ever sent one.
pub fn current_prompt(ws: &Workspace, agent: &AgentName) -> Result<Option<Prompt>> {
    let Some(bytes) = ws.engine.prompt(agent)? else { return Ok(None) };
    let m = message::parse_bytes(&bytes, Mode::Draft).ok();
    Ok(Some(Prompt {
        agent: agent.clone(),
        msg_id: m.as_ref().and_then(|m| m.msg_id.clone()),
        from: m.as_ref().and_then(|m| m.from.clone()),
        set_at: m.as_ref().and_then(|m| m.created_at.map(clock::format)),
        text: m.map_or_else(|| String::from_utf8_lossy(&bytes).into_owned(), |m| m.body),
    }))
}
