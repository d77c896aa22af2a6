//! `--exec CMD`: a command run once per event, for `watch` and `wait`.
//!
//! CMD is run by `sh -c` exactly as given; the event reaches it only as data: environment
//! variables (`CIRCE_EVENT_ID`, `CIRCE_EVENT_KIND`, `CIRCE_TASK`, `CIRCE_EVENT_AGENT`, `CIRCE_BOX`,
//! `CIRCE_FILE`, ...) and the event as one JSON line on its standard input. Nothing from a
//! message is ever put into the command line, so a `to:` holding `;rm -rf ~` stays a string.
//! One hook runs at a time per consumer; a failing one is retried with backoff and reported;
//! after `max_attempts` failures the event is set aside (dead letter) and the stream goes on.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::event::{Event, EventKind};
use crate::names::CursorName;
use crate::workspace::Workspace;

/// How a hook is run.
pub struct Hook {
    pub command: String,
    /// Give up on an event after this many failed runs (`None`: retry for ever).
    pub max_attempts: Option<u32>,
    /// The consumer's cursor: where its dead letters are kept (required with
    /// `max_attempts`).
    pub consumer: Option<CursorName>,
    /// The agent the stream is for: `CIRCE_BOX`/`CIRCE_FILE` name its own copy.
    pub agent: Option<String>,
    /// A run that lasts longer is ended (its process group killed) and counts as failed.
    pub timeout: Option<Duration>,
}

/// How one run of a hook ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ran {
    /// It exited 0.
    Ok,
    /// It failed: how ("exit status 3", "killed by signal 9", "ran past its 5s").
    Failed(String),
    /// The consumer was told to stop while it ran: it was ended, and the event is not
    /// handed on (the next run of the consumer hands it again).
    Stopped,
}

/// What became of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// The hook exited 0.
    Done,
    /// It failed `max_attempts` times: set aside.
    SetAside,
    /// The consumer was told to stop while retrying.
    Stopped,
}

/// The first retry waits this long; each next one twice as long, up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The environment a hook sees for `e`, run for `agent` (its own copy of a message).
pub fn environment(ws: &Workspace, e: &Event, agent: Option<&str>) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("CIRCE_EVENT_ID", e.id.to_string()),
        ("CIRCE_EVENT_KIND", e.event.as_str().to_string()),
        // Who did it. `CIRCE_AGENT` stays the agent the stream is for: a `circe` command
        // the hook runs acts as that agent, never as whoever caused the event.
        ("CIRCE_EVENT_AGENT", e.agent.clone()),
        ("CIRCE_TS", e.ts.clone()),
    ];
    if let Some(a) = agent {
        env.push(("CIRCE_AGENT", a.to_string()));
    }
    if let Some(t) = &e.task {
        env.push(("CIRCE_TASK", t.to_string()));
    }
    if let Some(s) = e.to {
        env.push(("CIRCE_STATUS", s.as_str().to_string()));
    }
    if let Some(m) = &e.msg_id {
        env.push(("CIRCE_MSG_ID", m.clone()));
    }
    if let Some(f) = e.file_for(agent) {
        env.push(("CIRCE_BOX", f.mailbox.clone()));
        let path = crate::boxes::Mailbox::from_label(&f.mailbox)
            .and_then(|b| ws.engine.message_path(&b, &f.file));
        let shown = path.map_or_else(|| f.file.clone(), |p| p.display().to_string());
        env.push(("CIRCE_FILE", shown));
    }
    // The root the stream reads, so that a `circe` command the hook runs acts on it too.
    let root =
        ws.engine.local_folder().map_or_else(|| ws.engine.location(), |r| r.display().to_string());
    env.push(("CIRCE_ROOT", root));
    env
}

/// Run `command` once with `e`, in a process group of its own. It is ended (the group
/// killed: `sh` and whatever it started) when it runs past `timeout` (a failed run) or when
/// `stop` says the consumer is told to stop (`Ran::Stopped`).
pub fn run_once(
    ws: &Workspace,
    command: &str,
    e: &Event,
    agent: Option<&str>,
    timeout: Option<Duration>,
    stop: &dyn Fn() -> bool,
) -> Result<Ran> {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .envs(environment(ws, e, agent))
        .stdin(Stdio::piped())
        // stdout is circe's data channel: the hook's output goes to stderr.
        .stdout(std::io::stderr())
        .process_group(0)
        .spawn()
        .map_err(|err| {
            Error::internal(format!("cannot run the hook: {err}")).hint("is `sh` on PATH?")
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        // A hook that does not read its input is fine: a closed pipe is not an error.
        let _ = stdin.write_all(format!("{}\n", e.to_line()).as_bytes());
    }
    let lost = |err: std::io::Error| Error::internal(format!("the hook was lost: {err}"));
    let started = std::time::Instant::now();
    let mut nap = Duration::from_millis(1);
    loop {
        if let Some(status) = child.try_wait().map_err(lost)? {
            return Ok(if status.success() { Ran::Ok } else { Ran::Failed(ended(status)) });
        }
        let late = timeout.is_some_and(|t| started.elapsed() >= t);
        if late || stop() {
            end_group(&child);
            let _ = child.wait();
            return Ok(match timeout.filter(|_| late) {
                Some(t) => Ran::Failed(format!("ran longer than --exec-timeout {t:?}")),
                None => Ran::Stopped,
            });
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(50));
    }
}

/// End a hook: SIGTERM to its process group; once its shell has ended (or a second later),
/// SIGKILL to whatever of the group is left. The shell is reaped only afterwards (by the
/// caller): until then its pid, the group's id, cannot be given to another process, so
/// the signals reach the hook's group and nothing else.
fn end_group(child: &std::process::Child) {
    use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process_group, waitid};
    let Some(group) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) else {
        return;
    };
    let _ = kill_process_group(group, Signal::TERM);
    let look = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    for _ in 0..100 {
        // Exited (a zombie, not reaped), or not ours to look at any more.
        if !matches!(waitid(WaitId::Pid(group), look), Ok(None)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = kill_process_group(group, Signal::KILL);
}

/// How a hook that failed ended.
fn ended(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        (None, None) => status.to_string(),
    }
}

/// Is `e` this consumer's own dead-letter notice? Its hook never gets those: a hook that
/// fails on everything would otherwise set aside its own notices for ever.
pub fn own_notice(hook: &Hook, e: &Event) -> bool {
    e.event == EventKind::DeadLetter
        && e.consumer.is_some()
        && e.consumer.as_deref() == hook.consumer.as_ref().map(CursorName::as_str)
}

/// Hand `e` to the hook until it succeeds, retrying with backoff; set it aside after
/// `max_attempts` failures. `stop` is asked between attempts.
pub fn handle(ws: &Workspace, hook: &Hook, e: &Event, stop: &dyn Fn() -> bool) -> Result<Handled> {
    if own_notice(hook, e) {
        return Ok(Handled::Done);
    }
    let mut attempt = 0u32;
    let mut pause = FIRST_BACKOFF;
    loop {
        let why = match run_once(ws, &hook.command, e, hook.agent.as_deref(), hook.timeout, stop)? {
            Ran::Ok => return Ok(Handled::Done),
            Ran::Stopped => return Ok(Handled::Stopped),
            Ran::Failed(why) => why,
        };
        attempt += 1;
        if hook.max_attempts.is_some_and(|m| attempt >= m) {
            set_aside(ws, hook, e, attempt)?;
            eprintln!(
                "circe: event {} set aside after {attempt} failed hook runs (the last: {why})",
                e.id
            );
            return Ok(Handled::SetAside);
        }
        eprintln!(
            "circe: the hook failed for event {} ({why}, attempt {attempt}); retrying in {} ms",
            e.id,
            pause.as_millis()
        );
        let until = std::time::Instant::now() + pause;
        while std::time::Instant::now() < until {
            if stop() {
                return Ok(Handled::Stopped);
            }
            std::thread::sleep(Duration::from_millis(50).min(pause));
        }
        pause = (pause * 2).min(MAX_BACKOFF);
    }
}

/// The dead letter: the event kept in the consumer's dead-letter list, and a `dead_letter`
/// event in the log naming it.
fn set_aside(ws: &Workspace, hook: &Hook, e: &Event, attempts: u32) -> Result<()> {
    let consumer = hook.consumer.clone().ok_or_else(|| {
        Error::usage("--max-attempts needs --cursor: dead letters are kept per consumer")
    })?;
    ws.engine.dead_letter(&consumer, e)?;
    let mut note = Event::now(EventKind::DeadLetter, crate::event::CIRCE);
    note.task.clone_from(&e.task);
    note.attempts = Some(attempts);
    note.consumer = Some(consumer.to_string());
    note.what = Some(format!(
        "event {} set aside by consumer {consumer}: its hook failed {attempts} times",
        e.id
    ));
    ws.engine.append_events(vec![note])?;
    Ok(())
}
