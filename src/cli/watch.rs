//! `circe watch`.

use std::time::Duration;

use clap::Args;

use super::output::Out;
use super::stop::Stop;
use super::{Ctx, Report, parse_interval};
use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::names::{AgentName, CursorName, TaskId};
use crate::ops::hook::{self, Handled, Hook};
use crate::ops::stream::{Filter, Follow, Start, human_line};
use crate::workspace::Workspace;

/// Follow what happens in the root: one line per event as it happens (JSON lines with
/// --json, each with the event's id), from now on, from the start, or from a saved cursor.
///
/// With --agent (or CIRCE_AGENT), only what concerns that agent: its boxes, what it did,
/// the tasks it holds, and tasks waiting that it may take; --all shows everything.
/// With --cursor NAME the position is saved as events are handed on (printed, or their
/// --exec hook exited 0): with --exec after each event, else once caught up, on stopping, and
/// at least every 256 events or second. A restart goes on from there: nothing is skipped;
/// only what a killed watcher handed on since its last save is seen again (drop repeats by
/// their id).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe watch --all --json\n  circe watch --agent brain --cursor brain --kind send,notify,route --exec '[ \"$CIRCE_BOX\" = inbox:brain ] || exit 0; tmux send-keys -t brain \"@$CIRCE_FILE\" Enter'"
)]
pub struct WatchArgs {
    /// Save the position under this name and resume from it.
    #[arg(long, value_name = "NAME")]
    pub cursor: Option<String>,
    /// Start with the first event in the log (when the cursor has no saved place).
    #[arg(long)]
    pub from_start: bool,
    /// Start after this event id (when the cursor has no saved place).
    #[arg(long, value_name = "ID", conflicts_with = "from_start")]
    pub after: Option<u64>,
    /// Only events of this task.
    #[arg(long, value_name = "TASK")]
    pub task: Option<String>,
    /// Only these kinds of event (comma separated: claim,complete,send,...).
    #[arg(long, value_delimiter = ',', value_name = "KIND")]
    pub kind: Vec<String>,
    /// Every event, even with --agent or CIRCE_AGENT set.
    #[arg(long)]
    pub all: bool,
    /// Run CMD (with sh -c) for each event instead of printing it; the event is in
    /// CIRCE_* variables and as JSON on its standard input, never in the command line.
    #[arg(long, value_parser = clap::builder::NonEmptyStringValueParser::new(), value_name = "CMD")]
    pub exec: Option<String>,
    /// With --exec: set an event aside (dead letter) after this many failed runs (needs
    /// --cursor: dead letters are kept per consumer).
    #[arg(long, value_name = "N", requires_all = ["exec", "cursor"],
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_attempts: Option<u32>,
    /// With --exec: end a run of the hook that lasts longer than this (e.g. 30s, 5m; its
    /// process group is killed) and count it as failed. Without it a hook may run for ever.
    #[arg(long, value_name = "DURATION", requires = "exec")]
    pub exec_timeout: Option<String>,
    /// Check for new events every INTERVAL (e.g. 500ms) instead of being told by inotify:
    /// for roots on NFS or FUSE, where inotify sees nothing.
    #[arg(long, value_name = "INTERVAL")]
    pub poll: Option<String>,
    /// Print what is there and exit, instead of following.
    #[arg(long)]
    pub once: bool,
}

/// The event kinds named on the command line.
pub fn kinds(names: &[String]) -> Result<Vec<EventKind>> {
    names
        .iter()
        .map(|k| {
            EventKind::parse(k).ok_or_else(|| {
                let all = crate::event::ALL_KINDS.map(EventKind::as_str);
                let near = crate::suggest::closest(k, all.iter().copied())
                    .map(|c| format!("did you mean `{c}`? "))
                    .unwrap_or_default();
                Error::usage(format!("`{k}` is not an event kind"))
                    .hint(format!("{near}the kinds: {}", all.join(", ")))
            })
        })
        .collect()
}

pub fn run(ctx: &Ctx, a: &WatchArgs) -> Result<Report> {
    // What needs no root is checked before the root is reached (a follower may wait for it).
    let task = a.task.as_deref().map(TaskId::new).transpose()?;
    let kinds = kinds(&a.kind)?;
    let cursor = a.cursor.as_deref().map(CursorName::new).transpose()?;
    let poll = a.poll.as_deref().map(parse_interval).transpose()?;
    let exec_timeout = a.exec_timeout.as_deref().map(parse_interval).transpose()?;
    // One handler for the whole run: installed, it replaces the signals' default action.
    let stop = Stop::install()?;
    let ws = if a.once { ctx.workspace()? } else { ctx.workspace_following(&|| stop.requested())? };
    let agent = if a.all {
        None
    } else {
        ctx.agent.as_deref().map(|_| ctx.acting_agent(&ws)).transpose()?
    };
    // A durable consumer of an agent moves that agent's lastSeen as it hands messages on.
    let seen_by = a.cursor.as_ref().and(agent.as_ref()).map(|(me, _)| me.clone());
    // A hook of an agent's stream is given that agent's copy of a message.
    let hook_agent = agent.as_ref().map(|(me, _)| me.to_string());
    let stale_for = agent.as_ref().map(|(me, _)| me.clone());
    let filter = Filter::new(agent, task.clone(), kinds);
    if poll.is_none()
        && let Some(fs) =
            ws.engine.local_folder().and_then(|d| crate::engine::local::remote_fs_at(&d))
    {
        eprintln!(
            "circe: the root is on {fs}: inotify may not see changes made on other hosts; pass --poll 1s"
        );
    }
    let start = match (a.after, a.from_start) {
        (Some(id), _) => Start::After(id),
        (None, true) => Start::FromStart,
        (None, false) => Start::Now,
    };
    let hook = a.exec.clone().map(|command| Hook {
        command,
        max_attempts: a.max_attempts,
        consumer: cursor.clone(),
        agent: hook_agent,
        timeout: exec_timeout,
    });
    let mut stream = Stream {
        filter,
        hook,
        seen_by,
        stale_for,
        out: Out::new(ctx.json),
        stop: &stop,
        once: a.once,
        matched: 0,
        at: None,
    };
    // A follower outlives a database server's restart: it connects again and goes on after
    // the last event it handed on (a durable cursor from its saved place).
    let mut ws = ws;
    super::retrying(
        ctx,
        &mut ws,
        &|e| e.is_transient() && !a.once,
        &|| stop.requested(),
        &mut |ws| {
            let from = stream.at.map_or(start, Start::Resume);
            // Connected again, the server may still hold this watcher's cut-off connection,
            // and with it the cursor, until it finds that connection dead: held again for a
            // while before it counts as another consumer's.
            let again = stream.at.is_some() && cursor.is_some();
            let since = std::time::Instant::now();
            loop {
                match follow_on(ws, &mut stream, cursor.clone(), from, poll) {
                    Err(e)
                        if again
                            && e.kind == crate::error::Kind::Conflict
                            && e.details.iter().any(|(k, _)| *k == "cursor")
                            && since.elapsed() < CURSOR_HELD_AGAIN
                            && !stop.requested() =>
                    {
                        std::thread::sleep(std::time::Duration::from_secs(1));
                    }
                    r => return r,
                }
            }
        },
    )?;
    let matched = stream.matched;
    // `--once` for a task that has nothing here says why, as `log --task` does.
    if a.once
        && matched == 0
        && let Some(t) = &task
    {
        super::log::unknown_task(&ws, t)?;
    }
    Ok(Report::streamed())
}

/// How long a watcher connected again tries to hold its cursor again (the server ends a
/// silent client's session within about 15 s: `engine::postgres::conn`).
const CURSOR_HELD_AGAIN: std::time::Duration = std::time::Duration::from_secs(60);

/// What a watch hands on, and how; kept across a reconnection.
struct Stream<'s> {
    filter: Filter,
    hook: Option<Hook>,
    /// A durable consumer of an agent: it moves that agent's lastSeen.
    seen_by: Option<AgentName>,
    /// An agent's stream: it hands on no event that brought only stale messages.
    stale_for: Option<AgentName>,
    out: Out,
    stop: &'s Stop,
    once: bool,
    matched: usize,
    /// The last event handed on (or passed over), or where the stream started.
    at: Option<u64>,
}

/// Follow the log from `start` (or the cursor's saved place) until told to stop, the reader
/// goes away, or (`--once`) the log's end.
fn follow_on(
    ws: &Workspace,
    s: &mut Stream<'_>,
    cursor: Option<CursorName>,
    start: Start,
    poll: Option<Duration>,
) -> Result<()> {
    let mut follow = Follow::open(ws, cursor, start, poll)?;
    // A hook's run is not repeated lightly: its cursor is saved after each event. (TEST
    // BUILDS ONLY: so is a cursor moved too early, which the kill checker must catch.)
    if s.hook.is_some() || crate::fault::test_break("cursor-early") {
        follow.save_each();
    }
    s.at = Some(follow.position());
    // Idle, the feed is asked once a second: the granularity at which a signal is noticed.
    let tick = if s.once { Duration::ZERO } else { Duration::from_secs(1) };
    loop {
        // A hook's stream prints nothing: only a printing one ends with its reader.
        if s.stop.requested() || s.hook.is_none() && super::stop::stdout_gone() {
            return Ok(());
        }
        let Some(events) = follow.next(256, Some(tick))? else {
            if s.once {
                return Ok(());
            }
            continue;
        };
        for e in events {
            if s.stop.requested() {
                return Ok(());
            }
            // TEST BUILDS ONLY: the cursor moved before the event is handed on (the kill
            // checker must then see events lost).
            let early = crate::fault::test_break("cursor-early");
            if early {
                follow.handed(e.id)?;
            }
            // A stream of an agent hands on no event that brought it only stale messages:
            // a durable consumer logs them as skipped instead.
            let wanted = s.filter.wants(ws, &e);
            let stale = match &s.stale_for {
                Some(me) if wanted => crate::ops::seq::only_stale(ws, me, &e)?,
                _ => false,
            };
            if stale {
                if let Some(me) = &s.seen_by {
                    crate::ops::seq::handed_event(ws, me, &e)?;
                }
            } else if wanted {
                s.matched += 1;
                let handled = match &s.hook {
                    Some(h) => hook::handle(ws, h, &e, &|| s.stop.requested())?,
                    // A reader that went away: end quietly, this event not handed on.
                    None if s.out.item(&human_line(&e), &e) => Handled::Done,
                    None => Handled::Stopped,
                };
                if handled == Handled::Stopped {
                    return Ok(());
                }
                if let (Some(me), Handled::Done) = (&s.seen_by, handled) {
                    crate::ops::seq::handed_event(ws, me, &e)?;
                }
            }
            if !early {
                follow.handed(e.id)?;
            }
            s.at = Some(e.id);
        }
    }
}
