//! Fault injection for the torture suite: named crash points and failing I/O calls.
//!
//! `CIRCE_CRASH_AT=<point>` ends the process abruptly (exit 86, no destructors, no cleanup)
//! when it reaches that named step (`<point>#k`: the k-th time). `CIRCE_FAIL_IO=<n>` makes the n-th store mutation
//! (write, fsync, rename, unlink) fail with EIO, `CIRCE_FAIL_IO_ERRNO` picks another errno
//! (28 = ENOSPC). Both are read once; without them each check is one relaxed load.
//!
//! TEST BUILDS ONLY: with the cargo feature `test-break` (which `cargo test` turns on
//! through the crate's dev-dependency on itself; a release build never has it),
//! `CIRCE_TEST_BREAK=<name>` turns off one safety mechanism so the torture suite
//! (tests/torture) can show that each checker catches a broken variant: `clobber` makes
//! `rename_noclobber` a plain rename and task locks no-ops; `no-reconcile` stops commands
//! rolling forward what a crashed predecessor left; `events-nolock` appends events without
//! the log's lock; `cursor-early` makes `watch` save its cursor before printing the event;
//! `archive-no-recover` stops an archive run finishing what an interrupted one left;
//! `archive-ignore-cursors` lets the archive move log segments a cursor still needs.
//! `seq-race` numbers a sender's messages without its lock (and lets a new counter entry
//! replace an emptied one; on a database root, its delivery compares no counter), so two
//! sends can take one number; `pg-seq-nolock` takes no lock on a database root but keeps
//! the comparison; `msgid-unheld` looks for an earlier copy of a message id before taking
//! the sender's hold (either engine); `seq-roll-forward` delivers a
//! numbered send that never reached its commit point instead of undoing it (and only when
//! its sender sends again, after a retry has looked for it).
//! The database engine's: `pg-unlocked`
//! (no row lock, no version check, a missing ticket ignored), `pg-client-clock` (leases by
//! the client's clock on a server-clock root), `pg-forget-request` (claims do not store
//! their request id), `pg-lost-reply` (a commit that succeeded is reported as of unknown
//! outcome, as when the connection breaks after COMMIT), `pg-outbox-apart` (a change's
//! outbox delivered after its task's commit), `pg-ask-nocas` (an ask's write compares no
//! revision), `pg-chat-race` (a chat append reads the channel's head without its lock), `pg-schema-v2` (init makes and circe accepts
//! schema version 2), `pg-no-flush` (a task's commit answered before it is on disk),
//! `pg-read-unflushed` (a read of the feed shows events not yet on disk). And the domain's `no-fence`: owner writes skip the owner and epoch
//! checks; `ask-unheld`: an answer holds nothing (`ask-slow-answer` pauses one under way).
//! The TX routing's: `no-outbox` stops commands finishing a task's outbox that a crash cut
//! short; `outbox-dup` delivers an outbox message without looking for an earlier copy;
//! `no-finish` stops a send landing a committed delivery a crash left before it looks for an
//! earlier copy of its message; `no-journal` keeps no journal of a delivery's events, so a
//! command cut off between the delivery and its events loses them; `no-sender-settle` leaves
//! a sender's cut-off events to followers and doctor instead of its next send (either
//! engine), so they may be logged after its later messages; `no-task-journal` keeps
//! none of a task change's events, so a change cut off between its records and its events
//! loses them; `no-roll` leaves a change cut off between its ticket's rename and its records
//! to be inferred from where the ticket lies (a reap or a park repaired as a release).
//! `chat-archive-slow` pauses a chat archive between its two renames, `doctor-slow-tasks`
//! a doctor between its listing of TASKS and the first task's lock, and `begin-slow` a task
//! transaction between its look for the task and its lock (scenes, not faults).

use std::io;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

struct Faults {
    crash_at: Option<String>,
    fail_io: Option<u64>,
    errno: i32,
    broken: Option<String>,
}

fn faults() -> &'static Faults {
    static F: OnceLock<Faults> = OnceLock::new();
    F.get_or_init(|| Faults {
        crash_at: std::env::var("CIRCE_CRASH_AT").ok().filter(|s| !s.is_empty()),
        fail_io: std::env::var("CIRCE_FAIL_IO").ok().and_then(|s| s.parse().ok()),
        errno: std::env::var("CIRCE_FAIL_IO_ERRNO").ok().and_then(|s| s.parse().ok()).unwrap_or(5),
        broken: if cfg!(feature = "test-break") {
            std::env::var("CIRCE_TEST_BREAK").ok().filter(|s| !s.is_empty())
        } else {
            None
        },
    })
}

/// Exit code of a process killed at a crash point.
pub const CRASH_EXIT: i32 = 86;

/// A named step of a command. Crashes here when `CIRCE_CRASH_AT` names it (`name#k`: the
/// k-th time the command reaches it, for a step a command passes more than once).
pub fn crash_point(name: &str) {
    static REACHED: AtomicU64 = AtomicU64::new(0);
    let Some(at) = faults().crash_at.as_deref() else { return };
    let (point, nth) = match at.rsplit_once('#') {
        Some((p, k)) => (p, k.parse::<u64>().unwrap_or(1)),
        None => (at, 1),
    };
    if point == name && REACHED.fetch_add(1, Ordering::Relaxed) + 1 == nth {
        eprintln!("circe: crash point {at} reached (CIRCE_CRASH_AT)");
        std::process::exit(CRASH_EXIT);
    }
}

/// Called before every store mutation; fails the n-th one when `CIRCE_FAIL_IO` says so.
pub fn io_step() -> io::Result<()> {
    static N: AtomicU64 = AtomicU64::new(0);
    let f = faults();
    if let Some(target) = f.fail_io {
        let n = N.fetch_add(1, Ordering::Relaxed) + 1;
        if n == target {
            return Err(io::Error::from_raw_os_error(f.errno));
        }
    }
    Ok(())
}

/// TEST BUILDS ONLY: is the safety mechanism `name` deliberately broken
/// (`CIRCE_TEST_BREAK`)? Always false without the `test-break` feature.
pub fn test_break(name: &str) -> bool {
    cfg!(feature = "test-break")
        && faults().broken.as_deref().is_some_and(|b| b.split(',').any(|n| n == name))
}
