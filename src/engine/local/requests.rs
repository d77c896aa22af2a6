//! The grants of claims made with a request id: `queue/requests`, one line per grant,
//! `<agent> <request id> <task> <epoch>`, appended (and fsynced) before the claim's commit
//! point. A line whose claim never committed is harmless: a grant counts only while the
//! task's record names the agent at that epoch (the caller checks). Not derived, so
//! `doctor --repair` keeps it when it rebuilds queue/.

use super::atomic;
use super::root::{Store, io_err};
use crate::error::{Error, Result};
use crate::names::{AgentName, TaskId};

/// The file's name under queue/.
pub const FILE: &str = "requests";

/// Remember that `agent`'s claim `request` is about to make `task` its own at `epoch`.
pub(super) fn record(
    store: &Store,
    agent: &str,
    request: &str,
    task: &TaskId,
    epoch: u64,
) -> Result<()> {
    crate::names::check_request_id(request)?;
    let p = store.root.join("queue").join(FILE);
    atomic::append_line(&p, format!("{agent} {request} {task} {epoch}\n").as_bytes(), store.sync)
        .map_err(io_err("cannot append to", &p))
}

/// The newest grant recorded for `agent`'s request `request`.
pub(super) fn find(
    store: &Store,
    agent: &AgentName,
    request: &str,
) -> Result<Option<(TaskId, u64)>> {
    crate::names::check_request_id(request)?;
    let p = store.root.join("queue").join(FILE);
    let bytes = match atomic::read_regular(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("cannot read", &p, e)),
    };
    let text = String::from_utf8_lossy(&bytes);
    Ok(text.lines().rev().find_map(|line| {
        let mut fields = line.split(' ');
        let (who, req) = (fields.next()?, fields.next()?);
        let (task, epoch) = (fields.next()?, fields.next()?);
        (who == agent.as_str() && req == request)
            .then(|| Some((TaskId::new(task).ok()?, epoch.parse().ok()?)))
            .flatten()
    }))
}
