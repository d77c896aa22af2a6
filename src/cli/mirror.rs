//! `circe mirror`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use super::{Ctx, Report};
use crate::engine::local;
use crate::error::{Error, Result};

/// Write the whole root into DIR as plain files in the local layout (circe.yaml, the
/// boxes, TASKS/, LOGS/events.jsonl), read-only, so people keep ls, cat and grep on a root
/// kept in a database. Run again, it rewrites only what changed. With --watch it follows
/// the root: after every new event, and at least every --interval (heartbeats change
/// leases without an event).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe --root postgres://db/team mirror /srv/team-mirror\n  circe mirror /srv/team-mirror --watch --interval 30s"
)]
pub struct MirrorArgs {
    /// The folder to write (made if missing; refused if it holds a root).
    pub dir: PathBuf,
    /// Keep following the root until interrupted.
    #[arg(long)]
    pub watch: bool,
    /// With --watch: the longest wait between two syncs (e.g. 10s).
    #[arg(long, default_value = "10s")]
    pub interval: String,
    /// With --watch: stop after this many syncs (tests).
    #[arg(long, hide = true)]
    pub rounds: Option<u64>,
}

pub fn run(ctx: &Ctx, a: &MirrorArgs) -> Result<Report> {
    let interval = crate::config::parse_duration(&a.interval)?.max(Duration::from_millis(100));
    let ws = if a.watch { ctx.workspace_following(&|| false)? } else { ctx.workspace()? };
    super::outside_the_root(&ws, &a.dir, "a mirror", "mirror into a folder outside the root")?;
    // Nor inside another root's folder: its doctor would find the mirror's files as strays.
    // (A mirror made before is DIR itself, not a folder around it.)
    if let Some(other) = super::root_around(&a.dir)
        && !(other == super::resolved(&a.dir) && other.join(local::MIRROR_MARKER).exists())
    {
        // Nor inside a mirror (its marker there): that mirror's next run would remove it.
        if other.join(local::MIRROR_MARKER).exists() {
            return Err(Error::refused(format!(
                "{} lies inside the mirror {}: its next run would remove this one",
                a.dir.display(),
                other.display()
            ))
            .hint("mirror into a folder outside every root and every mirror"));
        }
        return Err(Error::refused(format!(
            "{} lies inside the root folder {}: a mirror there would be that root's strays",
            a.dir.display(),
            other.display()
        ))
        .hint(format!(
            "mirror into a folder outside every root; if {} is a mirror that lost its `{}` (its files read-only, no tmp/ or locks/), remove it (`chmod -R u+w` it first) and mirror again",
            other.display(),
            local::MIRROR_MARKER
        )));
    }
    // What tells the root from another, however it was reached, and how the mirror's
    // marker names it (as --root takes it); what it says to people and in JSON: the root
    // as this command reached it.
    let (identity, to_pass) = (ws.engine.identity(), ws.engine.root_to_pass());
    let of = local::MirrorOf { identity: &identity, root: &to_pass };
    let reached = ws.engine.location();
    let mut rounds = 0u64;
    // A watching mirror outlives a database server's restart: it connects again; SIGINT,
    // SIGTERM or SIGHUP end it between two rounds (exit 0), as they end the streams.
    let stop = if a.watch { Some(super::stop::Stop::install()?) } else { None };
    let stopped = || stop.as_ref().is_some_and(super::stop::Stop::requested);
    let mut out = super::output::Out::new(ctx.json);
    let mut ws = ws;
    let mut last = 0;
    loop {
        let again = |e: &Error| a.watch && e.is_transient();
        let snap = match super::retrying(ctx, &mut ws, &again, &stopped, &mut |ws| {
            ws.engine.snapshot()
        })? {
            super::Retried::Done(s) => s,
            // Stopped by a signal while the root could not be reached.
            super::Retried::Stopped(_) => return Ok(Report::streamed()),
        };
        last = snap.events.last().map_or(last, |e| e.id);
        let done = local::write_tree(&a.dir, &snap, Some(&of))?;
        rounds += 1;
        let doc = json!({"root": reached, "dir": a.dir.display().to_string(), "synced": {"written_count": done.written, "removed_count": done.removed, "unchanged_count": done.unchanged}, "last_event_id": last});
        let last_round = a.rounds.is_some_and(|n| rounds >= n);
        // One document: a single mirror, or a watch's last round said in words.
        if !a.watch || last_round && !ctx.json {
            // The mirror is the root's copy: what the root does not have goes, what was added
            // to it by hand too, and a run that removed any says how many.
            let removed = match done.removed {
                0 => String::new(),
                n => format!(", {n} removed that the root does not have"),
            };
            let human = format!(
                "{reached} mirrored into {}: {} files written, {} unchanged{removed}\n",
                a.dir.display(),
                done.written,
                done.unchanged
            );
            return Ok(Report::new(human, doc));
        }
        // Watching: one line per round (with --json, the document above on one line).
        let line =
            format!("mirror: {} written, {} removed (event {last})", done.written, done.removed);
        if ctx.json {
            out.item(&line, &doc);
        } else {
            eprintln!("{line}");
        }
        if last_round || stopped() {
            return Ok(Report::streamed());
        }
        let waited = super::retrying(ctx, &mut ws, &Error::is_transient, &stopped, &mut |ws| {
            ws.engine.wait_events(last, interval)
        })?;
        if matches!(waited, super::Retried::Stopped(_)) || stopped() {
            return Ok(Report::streamed());
        }
    }
}
