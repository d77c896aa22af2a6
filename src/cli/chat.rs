//! `circe chat say|watch|archive`: the chat channel (PROTOCOLS.md "The chat channel").

use std::io::Write;

use clap::{Args, Subcommand};
use serde_json::json;

use super::{Ctx, Report};
use crate::chat::{self, follow::WatchOptions};
use crate::engine::local::read_stdin_capped;
use crate::error::{Error, Result};

/// Talk in the chat channel: say, watch, archive.
///
/// One append-only file of `[sender-to-recipient] @ [a, b]: text` lines (`.circe/chat.md`,
/// or `chat: path:` in circe.yaml; on a database root, kept in the database).
#[derive(Debug, Subcommand)]
pub enum ChatCommand {
    Say(SayArgs),
    Watch(WatchArgs),
    Archive(ArchiveArgs),
}

/// Append one message from the acting agent.
///
/// Further lines of the text (from standard input when no TEXT is given) become continuation lines, indented by two spaces. Many
/// agents may say at once: each message is one write under the channel's lock.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe --agent engineer chat say --to qa --cc coordinator \"please test src/auth.rs\"\n  printf 'Changes:\\n- JWT\\n' | circe --agent engineer chat say --to qa"
)]
pub struct SayArgs {
    /// The recipient: an agent (`NAME` or `agent:NAME`; a role's agents are named one by
    /// one), or `all`.
    #[arg(long)]
    pub to: String,
    /// Agents who should see it too, comma separated (`@ [a, b]`).
    #[arg(long, value_delimiter = ',')]
    pub cc: Vec<String>,
    /// Number the line `(ME #N): text` with my next sequence number (always, with
    /// `chat: {seq: true}` in circe.yaml).
    #[arg(long)]
    pub seq: bool,
    /// The text (words are joined with spaces). Without it, standard input is read.
    pub text: Vec<String>,
}

/// Print every message as a JSON line, as it arrives.
///
/// The reference server's fields: timestamp, sender, recipient, broadcast, message,
/// line_number; one object per line. Without --cursor it
/// starts at the end of the file, like the reference; with --cursor NAME it goes on from
/// where the last watcher of that name stopped (a line may repeat after a crash, none is
/// lost). The output is JSON lines with or without --json.
///
/// With --agent (or CIRCE_AGENT), lines numbered `(SENDER #N): ` that are meant for that
/// agent follow its lastSeen: a stale one (N at or below what the agent last saw of the
/// sender) is not printed (a note on stderr). With --cursor too, each printed line moves
/// the agent's lastSeen and each stale one is logged as skipped.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe chat watch --cursor qa\n  circe chat watch --once --from-start"
)]
pub struct WatchArgs {
    /// Save the position under .circe/cursors/chat/NAME (once all is read, and every 256
    /// lines while catching up), and resume from it.
    #[arg(long, value_name = "NAME")]
    pub cursor: Option<String>,
    /// Start at the first line (when there is no saved cursor yet).
    #[arg(long)]
    pub from_start: bool,
    /// The reference server's reading: a message is its first line only, printed as soon
    /// as that line is complete; continuation lines are ignored.
    #[arg(long)]
    pub first_line_only: bool,
    /// Print what is there and exit instead of following the file.
    #[arg(long)]
    pub once: bool,
    /// Re-read every INTERVAL (e.g. 500ms, 2s) instead of waiting for inotify: for NFS and
    /// other filesystems where inotify sees nothing.
    #[arg(long, value_name = "INTERVAL")]
    pub poll: Option<String>,
}

/// Move the finished part of the channel into .circe/LOGS/chat/.
///
/// The file becomes LOGS/chat/chat-<time>.md (by rename, under the writers' lock; nothing
/// being appended is lost). Watchers and cursors follow
/// the moved lines.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  circe chat archive\n  circe chat archive --before 120")]
pub struct ArchiveArgs {
    /// Keep line N and everything after it (N must start a message or comment, not continue
    /// one); default: archive everything.
    #[arg(long, value_name = "N")]
    pub before: Option<u64>,
}

pub fn run(ctx: &Ctx, cmd: &ChatCommand) -> Result<Report> {
    match cmd {
        ChatCommand::Say(a) => say(ctx, a),
        ChatCommand::Watch(a) => watch(ctx, a),
        ChatCommand::Archive(a) => {
            let ws = ctx.workspace()?;
            let done = chat::archive::run(&ws, a.before)?;
            let human = match &done.archive {
                Some(p) if done.lines == 1 => format!("archived 1 line to {p}"),
                Some(p) => format!("archived {} lines to {p}", done.lines),
                None => "nothing to archive".to_string(),
            };
            Ok(Report::new(human, &done))
        }
    }
}

fn say(ctx: &Ctx, a: &SayArgs) -> Result<Report> {
    let (ws, me, _role) = ctx.acting()?;
    let text = if a.text.is_empty() {
        let c = read_stdin_capped(ws.config.limits.message_bytes)?;
        if c.bytes.len() > ws.config.limits.message_bytes {
            return Err(Error::refused(format!(
                "the message on standard input is over {} bytes (limits.message_bytes)",
                ws.config.limits.message_bytes
            ))
            .hint("say less, or raise limits.message_bytes in circe.yaml"));
        }
        String::from_utf8(c.bytes).map_err(|_| {
            Error::refused("the message on standard input is not UTF-8")
                .hint("chat messages are UTF-8 text")
        })?
    } else {
        a.text.join(" ")
    };
    let cc: Vec<String> =
        a.cc.iter().map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect();
    let numbered = a.seq || ws.config.chat.seq;
    let m = chat::say::say(&ws, &me, &a.to, &cc, &text, ctx.json, numbered)?;
    let now = crate::clock::stamp_ms(crate::clock::now());
    let human = format!("said to {} in {}", m.recipient, chat::place(&ws)?);
    Ok(Report::new(human, json!(m.json(&now))))
}

fn watch(ctx: &Ctx, a: &WatchArgs) -> Result<Report> {
    let mut ws = ctx.workspace()?;
    let poll = a.poll.as_deref().map(parse_interval).transpose()?;
    let opts = WatchOptions {
        cursor: a.cursor.clone(),
        from_start: a.from_start,
        first_line_only: a.first_line_only,
        once: a.once,
        poll,
        agent: ctx.agent.as_deref().map(|_| ctx.acting_agent(&ws).map(|(a, _)| a)).transpose()?,
        reader_gone: Some(super::stop::stdout_gone),
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut note = |s: &str| {
        let _ = writeln!(std::io::stderr(), "{s}");
    };
    // On a database root it outlives a server's restart: it connects again and goes on
    // after the last line it handed on (as `watch` does).
    let mut resume = None;
    super::retrying(ctx, &mut ws, &|e| e.is_transient() && !a.once, &|| false, &mut |ws| {
        chat::follow::watch(ws, &opts, &mut resume, &mut out, &mut note)
    })?;
    Ok(Report::streamed())
}

use super::parse_interval;
