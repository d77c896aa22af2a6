//! `circe migrate`.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::init::pointer_text;
use super::{Ctx, Report};
use crate::engine::postgres::{self, Clock, Target};
use crate::engine::{Engine, RootSpec, Snapshot, local};
use crate::error::{Error, Result};

/// Move the whole root to another engine. `--to URL`: a local root goes into a database
/// (one transaction; the schema must be empty); the old folder is renamed to
/// `<root>.migrated` with a note, and a circe.yaml naming the database takes its place, so
/// every command goes on working. `--to-local DIR`: a database root comes back as DIR/.circe
/// (writers are stopped while it is read, and the database root is marked moved). Stop the
/// agents first: a command running during the move fails rather than write to the old root.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe migrate --to postgres://db.internal/team\n  circe --root postgres://db.internal/team migrate --to-local ./team"
)]
pub struct MigrateArgs {
    /// The database to move a local root into: postgres://host/db?schema=NAME.
    #[arg(
        long,
        value_name = "URL",
        conflicts_with = "to_local",
        required_unless_present = "to_local"
    )]
    pub to: Option<String>,
    /// The folder to move a database root into (it gets a .circe).
    #[arg(long, value_name = "DIR")]
    pub to_local: Option<PathBuf>,
    /// With --to: which clock decides leases in the new root (server or client).
    #[arg(long, value_name = "server|client", requires = "to")]
    pub clock: Option<String>,
}

pub fn run(ctx: &Ctx, a: &MigrateArgs) -> Result<Report> {
    match (&a.to, &a.to_local) {
        (Some(url), None) => to_database(ctx, url, a.clock.as_deref()),
        (None, Some(dir)) => to_local(ctx, dir),
        _ => Err(Error::usage("pass --to URL or --to-local DIR")),
    }
}

/// `migrate --to` of a root that is in a database (`why`): exit 2, pointing at `--to-local`;
/// or, when that database root moved to a folder already, its refusal (exit 3, naming the
/// folder), since `--to-local` would be refused too.
fn in_a_database(ctx: &Ctx, why: String) -> Error {
    match ctx.workspace() {
        Err(moved) if moved.details.iter().any(|(k, _)| *k == "moved") => moved,
        _ => Error::usage(why).hint("`circe migrate --to-local DIR` brings it back into a folder"),
    }
}

fn to_database(ctx: &Ctx, url: &str, clock: Option<&str>) -> Result<Report> {
    let target = Target::from_url(url)?;
    // Given, it must be the clock of a root already there (as `init --engine` says).
    let given = clock.is_some();
    let clock = clock.map_or(Some(Clock::Server), Clock::parse).ok_or_else(|| {
        Error::usage("--clock: not server or client").hint("server (the default) or client")
    })?;
    let spec = ctx.root_spec();
    if let RootSpec::Url(u) = &spec {
        let at = Target::from_url(u).map_or_else(|_| "a database".to_string(), |t| t.location());
        return Err(in_a_database(
            ctx,
            format!(
                "this root is in a database already ({at}): `migrate --to` moves a root folder"
            ),
        ));
    }
    let root = local::locate(&spec)?;
    if let local::Opened::Pointer(t) = local::open(&RootSpec::Path(root.clone()), None)? {
        return Err(in_a_database(
            ctx,
            format!("this root is in a database already ({})", t.location()),
        ));
    }
    // Connected first: a database that does not answer leaves the root in place and in use
    // (set aside, every command on it would be refused while the connection timed out).
    let to = postgres::connect_for_import(&target)?;
    // SIGINT, SIGTERM or SIGHUP before the import commits puts the root back (a signal's
    // default action would leave it renamed aside, and every agent without a root).
    let stop = super::stop::Stop::install()?;
    let stopped = || stop.requested();
    let (staged, _moving) = local::retire::stage(&root)?;
    let mut archived = 0;
    let moved = (|| -> Result<(usize, usize, usize)> {
        // A command that opened the root before the rename may still be finishing.
        let budget = std::time::Duration::from_secs(10);
        let waiting = |n: usize| {
            eprintln!(
                "circe: waiting up to {} s for commands still at work on the root ({n} staged file(s) in tmp/)",
                budget.as_secs()
            );
        };
        local::retire::wait_for_commands(&staged, budget, &stopped, &waiting)?;
        let (eng, config) = local::open_at(&staged)?;
        let found = eng.doctor(false)?;
        let open: Vec<_> = found.iter().filter(|v| !v.repaired).collect();
        if let Some(v) = open.first() {
            let more = match open.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            return Err(Error::refused(format!("the root has a violation{more}: {}", v.what))
                .hint("nothing was moved: `circe doctor` lists them, `circe doctor --repair` mends what it can, and each line it leaves says what to do; then migrate again"));
        }
        let mut snap = Snapshot::read(&eng)?;
        archived = snap.tombstones.len();
        snap.chat = local::chat_copy(&staged, config.chat.path.as_deref())?;
        if stopped() {
            return Err(local::retire::interrupted());
        }
        postgres::import(to, &target, &snap, clock, given)
    })();
    let (tasks, messages, events) = match moved {
        Ok(n) => n,
        Err(e) => {
            local::retire::unstage(&staged, &root)?;
            return Err(e);
        }
    };
    let note = format!(
        "This root moved to {} ({} tasks, {} messages, {} events). circe no longer reads this folder;\n\
         its circe.yaml is now circe.yaml.migrated. The root's place holds a circe.yaml naming the database.\n\
         A database root keeps no archive: the tasks archived here before the move stay in ARCHIVE/\n\
         (their ids went along: the database root never opens one of them again).\n\
         To read them, copy this folder, rename circe.yaml.migrated to circe.yaml in the copy, and run\n\
         `circe --root COPY archive search` or `circe --root COPY show TASK` there.\n",
        target.location(),
        tasks,
        messages,
        events
    );
    let retired = local::retire::finish(&staged, &root, &note, &pointer_text(&target))?;
    let mut human = format!(
        "moved {} into {}: {tasks} tasks, {messages} messages, {events} events\n\
         old folder: {} (kept, unusable)\n{} names the database\n",
        root.display(),
        target.location(),
        retired.display(),
        root.join("circe.yaml").display()
    );
    // The archive stays behind; the ids went along with their tombstones.
    if archived > 0 {
        human.push_str(&format!(
            "{archived} archived task(s) stay in {}/ARCHIVE (their ids went along: none is opened again; MIGRATED.txt says how to read them)\n",
            retired.display()
        ));
    }
    Ok(Report::new(
        human,
        json!({"from": root.display().to_string(), "to": target.location(), "task_count": tasks,
               "message_count": messages, "event_count": events, "retired_to": retired.display().to_string(),
               "archived_count": archived}),
    ))
}

/// Refused (exit 2) when `dir` (resolved) lies inside a root's folder or is one: the root
/// moved there would land inside a root.
fn no_root_around(dir: &std::path::Path) -> Result<()> {
    if let Some(inside) = dir.parent().and_then(super::root_around) {
        return Err(Error::usage(format!(
            "{} lies inside the root folder {}; the root would land inside a root",
            dir.display(),
            inside.display()
        ))
        .hint("name a folder outside any circe root (the project folder holding .circe is fine)"));
    }
    if local::root_at(dir).is_some_and(|r| r == *dir) {
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.display().to_string(),
            _ => ".".to_string(),
        };
        return Err(Error::usage(format!(
            "{} is a root's own folder (it holds circe.yaml); the root would land inside it",
            dir.display()
        ))
        .hint(format!(
            "name the folder that holds it: `circe migrate --to-local {parent}` writes {parent}/.circe"
        )));
    }
    Ok(())
}

/// Every task of `snap` is in the folder `written` after its repair. A task whose message
/// the database lost (removed in SQL) reads, in a folder, as a send cut off before its
/// delivery, which the repair rolls back: it would be gone.
fn every_task_kept(snap: &Snapshot, written: &dyn Engine) -> Result<()> {
    let kept: std::collections::HashSet<_> = written.task_ids()?.into_iter().collect();
    let lost: Vec<String> = snap
        .tasks
        .iter()
        .filter(|t| !kept.contains(&t.rec.task_id))
        .map(|t| t.rec.task_id.to_string())
        .collect();
    if lost.is_empty() {
        return Ok(());
    }
    Err(Error::refused(format!(
        "{} task{} would not survive the move: {} (its message is in no box of the database: `circe doctor` names it, invariant 4)",
        lost.len(),
        if lost.len() == 1 { "" } else { "s" },
        lost.join(", ")
    ))
    .hint("put each one's message back in SQL, or finish the task first; nothing was moved"))
}

fn to_local(ctx: &Ctx, dir: &std::path::Path) -> Result<Report> {
    // DIR is the project: the root is written to DIR/.circe (a `.circe` named would nest).
    if dir.file_name().is_some_and(|n| n == ".circe") {
        let project = dir.parent().map_or_else(|| ".".into(), |p| p.display().to_string());
        let project = if project.is_empty() { ".".to_string() } else { project };
        return Err(Error::usage(format!(
            "{} is a root's own folder name: `--to-local DIR` writes the root to DIR/.circe, which would land in {}/.circe",
            dir.display(),
            dir.display()
        ))
        .hint(format!("name the project folder: `circe migrate --to-local '{project}'`")));
    }
    // The folder the database root was named through (its circe.yaml), if any.
    let mut pointer = None;
    let target = match ctx.root_spec() {
        RootSpec::Url(u) => Target::from_url(&u)?,
        spec => match local::open(&spec, None)? {
            local::Opened::Pointer(t) => {
                pointer = Some(local::locate(&spec)?);
                t
            }
            local::Opened::Local(..) => {
                return Err(Error::usage("this root is a folder already")
                    .hint("`circe migrate --to URL` moves it into a database"));
            }
        },
    };
    // The path the database will keep: absolute, `..` and links resolved.
    let dir = &super::resolved(dir);
    no_root_around(dir)?;
    let (eng, _) = postgres::connect(&target)?;
    // Messages in the boxes of an agent the root does not have (invariant 8) have no place
    // in a folder and would be left behind: refused until they have one. Other violations
    // go along, and the folder's `doctor --repair` mends what it can. The database's own
    // repair first logs the events of sends cut off (its journals do not go along).
    if let Some(v) = eng.doctor(true)?.iter().find(|v| !v.repaired && v.invariant == 8) {
        return Err(Error::refused(format!("the root has a violation: {}", v.what)).hint(
            "`circe agent add NAME --role ROLE` gives those messages a place (or move them in SQL); nothing was moved",
        ));
    }
    // Absolute (`dir` is): the database tells every host and folder where the root went.
    let dest = dir.join(".circe");
    // A .circe naming this very root (the usual case: migrating in the project) is set aside.
    let mut aside = None;
    if dest.exists() {
        match local::open(&RootSpec::Path(dest.clone()), None) {
            Ok(local::Opened::Pointer(t)) if t.identity() == target.identity() => {
                aside = Some(local::retire::set_aside(&dest, "pointer")?);
            }
            _ => {
                return Err(Error::conflict(format!("{} exists", dest.display()))
                    .hint("name a folder without a .circe"));
            }
        }
    }
    let to = dest.display().to_string();
    let result = eng.export(&to, &mut |snap| {
        local::write_tree(&dest, snap, None)?;
        // The channel where the configuration names it (`chat: path:`).
        let config = crate::config::Config::parse(&snap.config)?;
        local::place_channel(&dest, config.chat.path.as_deref())?;
        let (local_eng, _) = local::open_at(&dest)?;
        local_eng.doctor(true)?; // builds the claim --next index and the board
        every_task_kept(snap, &local_eng)
    });
    let snap = match result {
        Ok(s) => s,
        Err(e) => {
            // What the export wrote is no root (the database was not marked): set aside,
            // never deleted, and the pointer put back.
            let failed = dest.exists().then(|| local::retire::set_aside(&dest, "failed"));
            if let Some(a) = aside {
                local::retire::unstage(&a, &dest)?;
            }
            return Err(match failed {
                Some(Ok(f)) => e.hint_more(format!(
                    "what it wrote is set aside as {}; the database root is in use as before",
                    f.display()
                )),
                _ => e,
            });
        }
    };
    let mut human = format!(
        "moved {} into {}: {} tasks, {} messages, {} events\nthe database root is marked moved\n",
        target.location(),
        dest.display(),
        snap.tasks.len(),
        snap.message_count(),
        snap.events.len()
    );
    // A pointer left elsewhere still names the database: say so, and what to do with it.
    let same =
        |p: &std::path::Path| std::fs::canonicalize(p).ok() == std::fs::canonicalize(&dest).ok();
    let stale = pointer.filter(|p| !same(p)).map(|p| p.join("circe.yaml"));
    if let Some(p) = &stale {
        human.push_str(&format!(
            "{} still names the database; commands run there say where the root went \
             (remove it, or pass --root {})\n",
            p.display(),
            dest.display()
        ));
    }
    Ok(Report::new(
        human,
        json!({"from": target.location(), "to": to, "task_count": snap.tasks.len(),
               "message_count": snap.message_count(), "event_count": snap.events.len(),
               "stale_pointer": stale.map(|p| p.display().to_string())}),
    ))
}
