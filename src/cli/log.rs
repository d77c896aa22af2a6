//! `circe log`.

use std::time::Duration;

use clap::Args;

use super::output::Out;
use super::stop::Stop;
use super::{Ctx, Report, parse_interval};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::names::TaskId;
use crate::ops::stream::{Filter, Follow, Start, human_line};

/// The event log, newest last: the last --limit events (20 by default) that pass the
/// filters, read from the end of the log without scanning it whole; --follow then prints
/// what happens next, across rotations of the log.
///
/// With --agent (or CIRCE_AGENT), only what concerns that agent (exactly that agent: qa is
/// not qa-2); --all ignores it.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe log --task AUTH-012 --limit 50\n  circe log --follow --kind claim,done"
)]
pub struct LogArgs {
    /// How many events to show (0: none; with --follow, only what comes next).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub limit: usize,
    /// Every event in the log, oldest first (instead of --limit).
    #[arg(long, conflicts_with = "limit")]
    pub everything: bool,
    /// Go on printing events as they happen.
    #[arg(long)]
    pub follow: bool,
    /// Only events of this task.
    #[arg(long, value_name = "TASK")]
    pub task: Option<String>,
    /// Only these kinds of event (comma separated).
    #[arg(long, value_delimiter = ',', value_name = "KIND")]
    pub kind: Vec<String>,
    /// Only events since: a duration back from now (90s, 30m, 2h, 1d) or an RFC 3339 time.
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// Every agent's events, even with --agent or CIRCE_AGENT set.
    #[arg(long)]
    pub all: bool,
    /// With --follow: check every INTERVAL instead of being told by inotify (NFS, FUSE).
    #[arg(long, value_name = "INTERVAL")]
    pub poll: Option<String>,
}

/// `--since`: a time, or a duration back from now.
fn since(ws: &crate::workspace::Workspace, s: &str) -> Result<String> {
    if let Some(t) = crate::clock::parse(s) {
        return Ok(crate::clock::stamp_ms(t));
    }
    let d = crate::config::parse_duration(s).map_err(|_| {
        Error::usage(format!("--since `{s}` is neither a time nor a duration"))
            .hint("write e.g. 1h, 30m or 2025-11-21T17:00:00Z")
    })?;
    let back = chrono::Duration::from_std(d).unwrap_or_default();
    Ok(crate::clock::stamp_ms(ws.now() - back))
}

/// `--task` named a task with no event shown: exit 5 when it is not here (an archived task's
/// events are in the archive; a task that does not exist has none). `--follow` waits for it.
pub(super) fn unknown_task(ws: &crate::workspace::Workspace, t: &TaskId) -> Result<()> {
    if ws.engine.peek(t)?.is_some() {
        return Ok(());
    }
    // Its tombstone says so (one small read; the bundle lies in a compressed segment).
    if ws.engine.archived_task(t)?.is_some() {
        return Err(Error::not_found(format!(
            "task `{t}` was archived: the log no longer holds its events"
        ))
        .hint(format!("`circe show {t}` shows them from the archive")));
    }
    Err(crate::engine::no_task(t))
}

pub fn run(ctx: &Ctx, a: &LogArgs) -> Result<Report> {
    // What needs no root is checked before the root is reached (a follower may wait for it).
    let task = a.task.as_deref().map(TaskId::new).transpose()?;
    let kinds = super::watch::kinds(&a.kind)?;
    let poll = a.poll.as_deref().map(parse_interval).transpose()?;
    // A follower's one handler for the whole run (installed, it replaces the signals'
    // default action); a one-shot read keeps the default.
    let stop = if a.follow { Some(Stop::install()?) } else { None };
    let ws = match &stop {
        Some(s) => ctx.workspace_following(&|| s.requested())?,
        None => ctx.workspace()?,
    };
    let agent = if a.all {
        None
    } else {
        ctx.agent.as_deref().map(|_| ctx.acting_agent(&ws)).transpose()?
    };
    let mut filter = Filter::new(agent, task.clone(), kinds.clone());
    let since = a.since.as_deref().map(|s| since(&ws, s)).transpose()?;
    let newer = |e: &Event| since.as_deref().is_none_or(|s| e.ts.as_str() >= s);
    // Event times need not rise with ids (a clock stepped back; on a database root a
    // message's time is its host's): reading back goes on 10 minutes past `--since`, and
    // `--everything` reads the whole log.
    let slack = since
        .as_deref()
        .and_then(crate::clock::parse)
        .map(|t| crate::clock::stamp_ms(t - chrono::Duration::minutes(10)));
    let long_before = |e: &Event| slack.as_deref().is_some_and(|s| e.ts.as_str() < s);
    let mut out = Out::new(ctx.json);
    let last = ws.engine.last_event_id()?;
    // The last events that pass, read backwards from the end (the filter sees them in the
    // order they are found, newest first; ownership it learns that way is only a hint).
    let mut shown: Vec<Event> = Vec::new();
    if a.everything {
        let mut follow = Follow::open(&ws, None, Start::FromStart, None)?;
        while let Some(batch) = follow.next(4096, Some(Duration::ZERO))? {
            for e in batch {
                if newer(&e) && filter.wants(&ws, &e) && !out.item(&human_line(&e), &e) {
                    return Ok(Report::streamed());
                }
                follow.handed(e.id)?;
            }
        }
    } else if a.limit > 0 {
        // Events of the kinds asked for name their kind so (`"event":"claim"`): the engine
        // may pass over the other lines unparsed.
        let naming: Vec<String> =
            kinds.iter().map(|k| format!("\"event\":\"{}\"", k.as_str())).collect();
        let mut before = None;
        'back: loop {
            // One task's: the engine passes over what cannot be its events unparsed.
            let batch = match &task {
                Some(t) => ws.engine.task_events_back(t, before, 512)?,
                None if !naming.is_empty() => {
                    ws.engine.read_events_back_naming(before, 512, &naming)?
                }
                None => ws.engine.read_events_back(before, 512)?,
            };
            let Some(oldest) = batch.last() else { break };
            before = Some(oldest.id);
            // A task's batch, or a kind's, comes short only once the log's start was reached.
            let start_reached = (task.is_some() || !naming.is_empty()) && batch.len() < 512;
            for e in batch {
                if long_before(&e) {
                    break 'back;
                }
                if !newer(&e) {
                    continue;
                }
                if filter.wants(&ws, &e) {
                    shown.push(e);
                    if shown.len() == a.limit {
                        break 'back;
                    }
                }
            }
            if start_reached {
                break;
            }
        }
    }
    if shown.is_empty()
        && !a.everything
        && a.limit > 0
        && !a.follow
        && let Some(t) = &task
    {
        unknown_task(&ws, t)?;
    }
    for e in shown.iter().rev() {
        if !out.item(&human_line(e), e) {
            return Ok(Report::streamed());
        }
    }
    let Some(stop) = stop else {
        return Ok(Report::streamed());
    };
    // It outlives a database server's restart: it connects again and goes on after the
    // last event it read.
    let (mut ws, mut at) = (ws, last);
    super::retrying(ctx, &mut ws, &|e| e.is_transient(), &|| stop.requested(), &mut |ws| {
        follow(ws, &mut filter, &mut out, &stop, &mut at, poll)
    })?;
    Ok(Report::streamed())
}

/// Print what happens after event `at` (moved along) until told to stop or the reader goes.
fn follow(
    ws: &crate::workspace::Workspace,
    filter: &mut Filter,
    out: &mut Out,
    stop: &Stop,
    at: &mut u64,
    poll: Option<Duration>,
) -> Result<()> {
    let mut follow = Follow::open(ws, None, Start::After(*at), poll)?;
    while !stop.requested() && !super::stop::stdout_gone() {
        let Some(batch) = follow.next(256, Some(Duration::from_secs(1)))? else { continue };
        for e in batch {
            if filter.wants(ws, &e) && !out.item(&human_line(&e), &e) {
                return Ok(());
            }
            follow.handed(e.id)?;
            *at = e.id;
        }
    }
    Ok(())
}
