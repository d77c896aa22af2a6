//! `circe init`.

use std::path::PathBuf;

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::vocab::AgentRole;
use super::{Ctx, Report};
use crate::config::DEFAULT_CONFIG;
use crate::engine::postgres::{self, Clock, Target};
use crate::engine::{Engine, RootSpec, local};
use crate::error::{Error, Result};
use crate::names::AgentName;
use crate::registry::BUILTIN_ROLES;

/// Make DIR/.circe with circe.yaml and the boxes, and one agent per built-in role, named
/// after it (coordinator, engineer, qa, scribe, eagle, rooster: the human). Safe to run
/// again: it adds what is missing and never overwrites the config. A task sent to a role
/// (`--to engineer` or `--to role:engineer`) stays claimable by every agent of that role,
/// however many are added later. With --engine URL the root is made in a database (its
/// tables, migrated when older) and DIR/.circe/circe.yaml names it; `circe --root URL init`
/// makes the root only.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe init                  # ./.circe with one agent per built-in role\n  circe init ~/team           # ~/team/.circe"
)]
pub struct InitArgs {
    /// Where to make .circe (default: the folder --root or CIRCE_ROOT names, else the
    /// current folder).
    pub dir: Option<PathBuf>,
    /// Keep the root in a database: postgres://host[:port]/database?schema=NAME (the
    /// password comes from PGPASSWORD or the password file, never from the URL).
    #[arg(long, value_name = "URL")]
    pub engine: Option<String>,
    /// For a new database root: which clock decides leases. `server` (the default): the
    /// database's, so a host with a wrong clock can neither take a task early nor stretch a
    /// lease. `client`: each host's own (CIRCE_NOW pins it; for tests and fixtures).
    #[arg(long, value_name = "server|client")]
    pub clock: Option<String>,
}

/// `circe init --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InitJson {
    /// The root's folder (`.circe`).
    pub root: String,
    /// circe.yaml was written (false: one was there and was kept).
    pub config_written: bool,
    /// The agents this run added (none when all were there).
    pub agents_added: Vec<AgentRole>,
    /// A root in a database: whose clock decides leases (`server` or `client`).
    pub clock: Option<String>,
    /// `--engine URL`: DIR/.circe/circe.yaml was written to name the database.
    pub pointer_written: bool,
    /// `--engine URL` in a folder that named the same root by another URL (through a
    /// pooler, another port): the URL it named, replaced by URL. Null otherwise.
    pub repointed_from: Option<String>,
    /// A folder root that was there: its folders (`tmp`, `locks`, `queue`, ...) and agents'
    /// boxes (`AGENTS/qa/INBOX`) that were missing and were made again.
    pub boxes_made: Vec<String>,
    /// A database root: the schema version it was migrated from (null: not migrated).
    pub migrated_from: Option<u32>,
}

/// circe.yaml of a host whose root is in a database.
pub fn pointer_text(target: &Target) -> String {
    #[derive(serde::Serialize)]
    struct Pointer {
        version: u32,
        engine: crate::config::EngineConfig,
    }
    let body = crate::yaml::to_string(&Pointer { version: 1, engine: target.engine_config() })
        .unwrap_or_default();
    format!(
        "# This root is kept in a database (PROTOCOLS.md section 18). Its settings live there:\n\
         # `circe config` shows them. The password comes from PGPASSWORD or the password file.\n{body}"
    )
}

pub fn run(ctx: &Ctx, args: &InitArgs) -> Result<Report> {
    let clock = match args.clock.as_deref() {
        None => Clock::Server,
        Some(c) => Clock::parse(c).ok_or_else(|| {
            Error::usage(format!("--clock {c}: not server or client"))
                .hint("server (the default) or client (tests: CIRCE_NOW pins it)")
        })?,
    };
    let dir = match (&args.dir, ctx.root_spec()) {
        (Some(d), _) => d.clone(),
        // `--root DIR` or `--root DIR/.circe`, as every other command reads it.
        (None, RootSpec::Path(p)) if p.file_name().is_some_and(|n| n == ".circe") => {
            p.parent().map_or_else(|| PathBuf::from("."), std::path::Path::to_path_buf)
        }
        (None, RootSpec::Path(p)) => p,
        (None, _) => PathBuf::from("."),
    };
    // `init DIR` names a folder; a database root from --root or CIRCE_ROOT beside it would
    // be made (or migrated) while DIR was left as it is.
    if let (Some(d), None, RootSpec::Url(_)) = (&args.dir, &args.engine, ctx.root_spec()) {
        return Err(Error::usage(format!(
            "{} and a database root (--root or CIRCE_ROOT) both named: which one to make?",
            d.display()
        ))
        .hint(format!(
            "`circe init --engine URL {}` makes its .circe point at the database; unset CIRCE_ROOT (or leave out --root) to make a folder root there; leave out the folder to make or migrate the database root",
            d.display()
        )));
    }
    let (target, pointer) = match (&args.engine, ctx.root_spec()) {
        (Some(url), _) => (Some(Target::from_url(url)?), true),
        (None, RootSpec::Url(url)) => (Some(Target::from_url(&url)?), false),
        (None, _) => match local::root_at(&dir).map(|r| local::open(&RootSpec::Path(r), None)) {
            Some(Ok(local::Opened::Pointer(t))) => (Some(t), false),
            _ => (None, false),
        },
    };
    if args.clock.is_some() && target.is_none() {
        return Err(Error::usage("--clock is for a root in a database").hint("pass --engine URL"));
    }
    let Some(target) = target else {
        let named = args.dir.is_some() || matches!(ctx.root_spec(), RootSpec::Path(_));
        refuse_a_second_root(&dir, named)?;
        return init_local(&dir);
    };
    // Refused before the database is touched: a refusal changes nothing.
    if let (Some(_), RootSpec::Url(u)) = (&args.engine, ctx.root_spec())
        && Target::from_url(&u)?.identity() != target.identity()
    {
        return Err(Error::usage("--root (or CIRCE_ROOT) names another database than --engine")
            .hint("pass one of them: `circe init --engine URL` makes the root at URL"));
    }
    // The folder may name this root by another URL: re-pointed below.
    let repointed = if pointer { pointer_free(&dir, &target)? } else { None };
    let (eng, _config, found) =
        postgres::init(&target, DEFAULT_CONFIG, clock, args.clock.is_some())?;
    let created = found == 0;
    let migrated_from = (!created && found < postgres::SCHEMA_VERSION).then_some(found);
    let added = add_role_agents(&eng)?;
    let pointer_written = pointer && write_pointer(&dir, &target, repointed.as_ref())?;
    let root = target.location();
    let mut human = format!(
        "circe root: {root}\nconfig: {}\n",
        if created { "stored in the database" } else { "kept as it was" }
    );
    if let Some(from) = migrated_from {
        human.push_str(&format!(
            "schema: migrated from version {from} to {}\n",
            postgres::SCHEMA_VERSION
        ));
    }
    human.push_str(&agents_text(&added));
    if let Some(old) = &repointed {
        human.push_str(&format!(
            "{} names it now by this URL (it named the same root by {})\n",
            dir.join(".circe/circe.yaml").display(),
            old.location()
        ));
    } else if pointer_written {
        human.push_str(&format!("{} names it\n", dir.join(".circe/circe.yaml").display()));
    }
    let out = InitJson {
        root,
        config_written: created,
        agents_added: added,
        clock: Some(eng.clock().as_str().to_string()),
        pointer_written,
        repointed_from: repointed.map(|t| t.location()),
        boxes_made: Vec::new(),
        migrated_from,
    };
    Ok(Report::new(human, out))
}

/// Write `dir/.circe/circe.yaml` naming `target` unless it names it already: in place of
/// the one naming the same root as `repointed`, or where there is none. Whether it wrote.
fn write_pointer(
    dir: &std::path::Path,
    target: &Target,
    repointed: Option<&Target>,
) -> Result<bool> {
    if let Some(old) = repointed {
        if !local::repoint(dir, &old.identity(), &pointer_text(target))? {
            return Err(Error::conflict(format!(
                "{} changed while circe init ran: it no longer names {}",
                dir.join(".circe/circe.yaml").display(),
                old.location()
            ))
            .hint("another command wrote it meanwhile: `circe config` shows which root it names now; run `circe init --engine URL` again"));
        }
        return Ok(true);
    }
    let (_, w) = local::init_pointer(dir, &pointer_text(target))?;
    if !w {
        let existing = local::open(&RootSpec::Path(dir.to_path_buf()), None);
        let same =
            matches!(&existing, Ok(local::Opened::Pointer(t)) if t.identity() == target.identity());
        if !same {
            return Err(Error::conflict(format!(
                "{} holds a circe.yaml that names another root",
                dir.join(".circe").display()
            ))
            .hint("`circe migrate --to URL` moves a local root into a database"));
        }
    }
    Ok(w)
}

/// A `.circe` in `dir` may only be a pointer to this very database root: by the same URL
/// (`None`), or by another that reaches the same root (the pointer's target, `Some`: it is
/// re-pointed at `target`).
fn pointer_free(dir: &std::path::Path, target: &Target) -> Result<Option<Target>> {
    let circe = dir.join(".circe");
    if local::root_at(&circe).is_none_or(|r| r != circe) {
        return Ok(None);
    }
    let held = circe.display();
    match local::open(&RootSpec::Path(circe.clone()), None) {
        Ok(local::Opened::Pointer(t)) if t.identity() == target.identity() => Ok(None),
        Ok(local::Opened::Pointer(t)) => same_root(&held.to_string(), t, target).map(Some),
        Ok(local::Opened::Local(..)) => {
            Err(Error::conflict(format!("{held} holds a local root")).hint(format!(
                "`circe migrate --to '{}'` moves it into the database; nothing was changed",
                target.url_to_pass()
            )))
        }
        Err(e) => Err(Error::conflict(format!(
            "{held} holds a circe.yaml that names no database root ({})",
            e.message
        ))
        .hint("its circe.yaml does not read: mend it (`circe validate --config` says what is wrong), or name another folder; nothing was changed")),
    }
}

/// `old`, which the folder `held` names, when it is the very root `target` reaches by
/// another URL (the same server, database and schema: `postgres::root_identity`); refused
/// (exit 4, nothing changed) when it is another root, or when `old` cannot be reached to
/// tell.
fn same_root(held: &str, old: Target, target: &Target) -> Result<Target> {
    // Either root not reached, or not asked (`pg_control_system()` revoked): circe cannot
    // tell, so nothing is changed, as before it could.
    let cannot_tell = |which: &Target, e: Error| {
        Error::conflict(format!(
            "{held} names the database root {}; circe cannot tell whether {} reaches the same root: {} cannot be asked ({})",
            old.location(),
            target.location(),
            which.location(),
            e.message
        ))
        .hint(format!(
            "run `circe init --engine URL` again once both answer (it re-points the folder when URL reaches the same root); if it does, and the old URL is gone for good, edit `url:` in {held}/circe.yaml, else remove that file to point this folder at the new root; nothing was changed"
        ))
    };
    let new = postgres::root_identity(target).map_err(|e| cannot_tell(target, e))?;
    let was = postgres::root_identity(&old).map_err(|e| cannot_tell(&old, e))?;
    if was == new {
        return Ok(old);
    }
    Err(Error::conflict(format!("{held} names another database root ({})", old.location())).hint(
        format!(
            "use that root, or remove {held}/circe.yaml to point this folder at {}; nothing was changed",
            target.location()
        ),
    ))
}

/// What init says about the agents it added.
fn agents_text(added: &[AgentRole]) -> String {
    let mut human = String::new();
    if added.is_empty() {
        human.push_str("agents: all present\n");
    } else {
        human.push_str("agents added, one per built-in role (rooster is the human):\n");
        for a in added {
            human.push_str(&format!("  {} ({})\n", a.agent, a.role));
        }
    }
    human.push_str(
        "next: `circe agent add NAME --role ROLE` for more agents; each agent starts with \
         `circe --agent NAME prime`\n",
    );
    human
}

fn add_role_agents(eng: &dyn Engine) -> Result<Vec<AgentRole>> {
    let mut added = Vec::new();
    for role in BUILTIN_ROLES {
        if eng.add_agent(&AgentName::new(role)?, role)? {
            added.push(AgentRole {
                agent: (*role).to_string(),
                role: (*role).to_string(),
                retired: false,
            });
        }
    }
    Ok(added)
}

/// `circe init` with no folder named, below a root's project or inside a linked git
/// worktree: refused. Below a root, its commands already use that root. When the main
/// worktree holds a root, the worktree's commands already use it (a root here would split
/// the team in two); when it holds none, the team's root belongs there, where every
/// worktree's commands look. Naming the folder (`circe init .`) makes one anyway. A copy of
/// a root git put in a worktree is refused either way (it would come back to life stale).
fn refuse_a_second_root(dir: &std::path::Path, named: bool) -> Result<()> {
    let dir = super::resolved(dir);
    if let Some(r) = local::root_at(&dir) {
        return local::git_copy(&r);
    }
    if named {
        return Ok(());
    }
    for top in dir.ancestors() {
        // A root above (a copy git made is refused, as every command there refuses it):
        // commands here already use it, so a root made here unasked would split the team.
        if let Some(r) = local::root_at(top) {
            local::git_copy(&r)?;
            // Inside the root's own folder: `init_local` refuses that (exit 2), naming it.
            if dir.starts_with(&r) {
                return Ok(());
            }
            return Err(Error::refused(format!(
                "{} lies below {}, whose root {} its commands already use",
                dir.display(),
                top.display(),
                r.display()
            ))
            .hint(format!(
                "nothing to make: run circe here as it is (`circe tasks` reads {}). A second root for this folder alone: `circe init .`",
                r.display()
            )));
        }
        let Some(main) = local::main_worktree(top) else { continue };
        if let Some(root) = local::root_at(&main) {
            return Err(Error::refused(format!(
                "{} is in a git worktree; its commands already use the root of the main worktree, {}",
                dir.display(),
                root.display()
            ))
            .hint(format!(
                "nothing to make: run circe here as it is (`circe tasks` reads {}). A second root for this worktree alone: `circe init .`",
                root.display()
            )));
        }
        // The main checkout has no root yet: the team's goes there, where every worktree's
        // commands look (a root made here first would be this worktree's alone, and the
        // main checkout's made later a second one).
        return Err(Error::refused(format!(
            "{} is in a git worktree; the team's root belongs in the main worktree, {}, where the commands of every worktree look for it",
            dir.display(),
            main.display()
        ))
        .hint(format!(
            "make it there: `circe init '{}'`. A root for this worktree alone: `circe init .`",
            main.display()
        )));
    }
    // A worktree whose repository moved: its root is there, only not found.
    match local::lost_worktree(&dir) {
        Some(e) => Err(Error::refused(e.message).hint(
            "run `git worktree repair` in the main checkout (circe then finds its root); a second root for this worktree alone: `circe init .`",
        )),
        None => Ok(()),
    }
}

fn init_local(dir: &std::path::Path) -> Result<Report> {
    // Never a root inside a root's own folder: commands run there would act on it, and the
    // outer root would hold its files as strays.
    if let Some(inside) = super::root_around(dir) {
        return Err(Error::usage(format!(
            "{} lies inside the root folder {}; a root there would land inside a root",
            dir.display(),
            inside.display()
        ))
        .hint("run `circe init` in the project folder that holds .circe (it keeps what is there), or name a folder outside any root"));
    }
    // A root whose circe.yaml does not parse is left as it was: said with the file's path.
    if let Some(text) = local::init_finds(dir)? {
        let cfg = dir.join(".circe/circe.yaml");
        let said = |e: Error| {
            e.map_message(|m| {
                format!(
                    "{}: {}",
                    cfg.display(),
                    m.strip_prefix("circe.yaml: ").or(m.strip_prefix("circe.yaml ")).unwrap_or(m)
                )
            })
            .hint_more("mend it (`circe init` keeps an existing circe.yaml), or move it away for the default")
        };
        let parsed = crate::config::Config::parse(&text).map_err(said)?;
        crate::registry::Registry::from_config(&parsed.registry).map_err(said)?;
    }
    let again = local::root_boxes_missing(dir);
    let (root, wrote_config) = local::init(dir, DEFAULT_CONFIG)?;
    let mut remade: Vec<String> = again.into_iter().map(str::to_string).collect();
    remade.extend(local::remake_agent_boxes(&root)?);
    let ws = crate::workspace::Workspace::open(&RootSpec::Path(root.clone()))?;
    let added = add_role_agents(ws.engine.as_ref())?;
    // Where it is, whatever folder it was named from (as `config`, `prime` and `mirror` say).
    let root = ws.engine.identity();
    let mut human = format!(
        "circe root: {root}\nconfig: {}\n",
        if wrote_config { "circe.yaml written" } else { "circe.yaml kept as it was" }
    );
    if !remade.is_empty() {
        human.push_str(&format!("boxes made again: {}\n", remade.join(", ")));
    }
    human.push_str(&agents_text(&added));
    let out = InitJson {
        root,
        config_written: wrote_config,
        agents_added: added,
        clock: None,
        pointer_written: false,
        repointed_from: None,
        boxes_made: remade,
        migrated_from: None,
    };
    Ok(Report::new(human, out))
}
