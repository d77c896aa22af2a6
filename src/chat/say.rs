//! `circe chat say`: check the names, build the whole message, append it in one write.

use super::line::parse_line;
use super::message::ChatMessage;
use super::render::{normalise_text, render};
use crate::error::{Error, Result};
use crate::names::AgentName;
use crate::seq::render_numbered;
use crate::workspace::Workspace;

/// Who may be addressed: an agent of this root, or `all`.
fn check_agent(ws: &Workspace, name: &str, what: &str) -> Result<()> {
    if ws.is_agent_named(name) || (what == "recipient" && name == "all") {
        return Ok(());
    }
    let hint = if name == "all" {
        "`all` is for the recipient (--to all); a copy names agents".to_string()
    } else {
        let all = ws.agents();
        let near = crate::suggest::closest(name, all.keys().map(AgentName::as_str));
        let near = near.map(|c| format!("did you mean `{c}`? ")).unwrap_or_default();
        format!("{near}`circe agent list` shows the agents; `circe agent add` makes one")
    };
    Err(Error::not_found(format!("no agent `{name}` in this root ({what})")).hint(hint))
}

/// A name as the chat line holds it: `agent:NAME` is NAME; `role:NAME` is refused, naming
/// the role's agents (a line names agents, as the reference writes it).
fn chat_name<'n>(ws: &Workspace, name: &'n str, what: &str) -> Result<&'n str> {
    if let Some(a) = name.strip_prefix(crate::address::AGENT) {
        return Ok(a);
    }
    let Some(role) = name.strip_prefix("role:") else { return Ok(name) };
    let agents: Vec<String> = ws.agents_with_role(role).iter().map(ToString::to_string).collect();
    let hint = match agents.split_first() {
        None => "`circe agent list` shows the agents and their roles".to_string(),
        Some(_) if what == "cc" => format!("name them: --cc {}", agents.join(",")),
        Some((first, rest)) if !rest.is_empty() => {
            format!("name them: --to {first} --cc {}", rest.join(","))
        }
        Some((first, _)) => format!("name the agent: --to {first}"),
    };
    Err(Error::usage(format!(
        "the chat names agents, not roles ({what} `{name}`): a line reads `[sender-to-recipient] @ [a, b]`"
    ))
    .hint(format!("{hint} (or --to all)")))
}

/// Append a message from `me` to `to` (copied to `cc`) and return it as read back.
/// With `line_number` the message's line is counted (a read of the file up to it; an
/// engine that keeps the channel knows it anyway). With
/// `numbered` it starts `(ME #N): ` with `me`'s next sequence number, which commits with the
/// append (PROTOCOLS.md section 14).
pub fn say(
    ws: &Workspace,
    me: &AgentName,
    to: &str,
    cc: &[String],
    text: &str,
    line_number: bool,
    numbered: bool,
) -> Result<ChatMessage> {
    // Refused because the counter moved while this append held it: nothing was written.
    crate::seq::numbered_again(me.as_str(), || {
        say_once(ws, me, to, cc, text, line_number, numbered)
    })
}

fn say_once(
    ws: &Workspace,
    me: &AgentName,
    to: &str,
    cc: &[String],
    text: &str,
    line_number: bool,
    numbered: bool,
) -> Result<ChatMessage> {
    let me_name = me;
    let me = me.as_str();
    // Names as `send` takes them: `agent:NAME` is the agent; a role is spelled out.
    let to = chat_name(ws, to, "recipient")?;
    let cc: Vec<String> =
        cc.iter().map(|c| chat_name(ws, c, "cc").map(str::to_string)).collect::<Result<_>>()?;
    let cc = cc.as_slice();
    check_agent(ws, to, "recipient")?;
    for c in cc {
        check_agent(ws, c, "cc")?;
    }
    let mut lines = normalise_text(text)?;
    let hold = if numbered { Some(ws.engine.seq_hold(me_name)?) } else { None };
    if let Some(h) = &hold {
        let next = h.next();
        let role = me.to_ascii_uppercase();
        lines[0] = render_numbered(&role, Some(next.last), next.epoch, &lines[0]);
    }
    let bytes = render(me, to, cc, &lines);
    // The line must read back as meant: with names that contain `-to-`, circe's reader
    // splits by the known agents first, and another tool by the reference's regex alone
    // (its last `-to-`): both must read it so.
    let first = bytes.lines().next().unwrap_or_default();
    let is_agent = |n: &str| ws.is_agent_named(n) || n == "all";
    let back = parse_line(first, &is_agent)
        .ok_or_else(|| Error::internal("the rendered line does not parse"))?;
    let plain = parse_line(first, &|_| false)
        .ok_or_else(|| Error::internal("the rendered line does not parse"))?;
    if let Some(other) = [&back, &plain].into_iter().find(|b| b.sender != me || b.recipient != to) {
        return Err(Error::refused(format!(
            "`[{me}-to-{to}]` would read back as from {} to {}",
            other.sender, other.recipient
        ))
        .hint("agent names containing `-to-` make the line ambiguous: say it as another agent, or retire one of them and add it again under a name without `-to-`"));
    }
    if let Some(log) = ws.engine.chat_log() {
        let e = log.chat_append(&bytes, hold.as_deref())?;
        let mut m = ChatMessage::new(back, e.line);
        m.message = lines.join("\n");
        return Ok(m);
    }
    let chat = super::channel(ws)?;
    if let Some(fs) = chat.remote_fs() {
        return Err(Error::refused(format!(
            "{} is on {fs}: appends from several hosts can tear there",
            chat.path().display()
        ))
        .hint("keep the chat channel on a local filesystem (`chat: path:` in circe.yaml)"));
    }
    chat.ensure_dir()?;
    let a = match &hold {
        Some(h) => chat.append_numbered(h.as_ref(), bytes.as_bytes(), line_number)?,
        None => chat.append(bytes.as_bytes(), line_number)?,
    };
    let mut m = ChatMessage::new(back, a.lines_before.map_or(0, |n| n + 1));
    m.message = lines.join("\n");
    Ok(m)
}
