//! The command line: one file per subcommand, one `Command` enum, one exhaustive match.

mod agent;
mod archive;
mod archive_show;
mod asks;
mod bridge;
mod chat;
mod check;
mod claim;
mod config;
mod cursors;
mod demo;
mod doctor;
mod heartbeat;
mod inbox;
mod init;
mod log;
mod migrate;
mod mirror;
mod move_msg;
mod orphans;
mod output;
mod reap;
mod registry;
mod release;
mod replay;
mod send;
mod seq;
mod show;
mod status;
mod stop;
mod tasks;
mod thread;
mod validate;
mod wait;
mod watch;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub use output::Report;

use crate::engine::RootSpec;
use crate::error::{Error, Result};
use crate::names::{AgentName, TaskId};
use crate::workspace::Workspace;

/// circe: coordinate a team of AI coding agents through plain files.
///
/// Folders are states, an atomic rename is a transition, YAML records hold task ownership.
/// Exit codes: 0 ok, 1 internal/I-O, 2 usage, 3 refused by a rule, 4 conflict, 5 not found,
/// 6 nothing to claim. See PROTOCOLS.md.
#[derive(Debug, Parser)]
#[command(name = "circe", version, max_term_width = 100)]
pub struct Cli {
    /// The circe root (a folder holding circe.yaml, or one holding .circe/; or a database,
    /// postgres://host/db?schema=NAME). Default: search upwards from the current folder.
    #[arg(long, global = true, env = "CIRCE_ROOT")]
    pub root: Option<PathBuf>,
    /// The acting agent.
    #[arg(long, global = true, env = "CIRCE_AGENT")]
    pub agent: Option<String>,
    /// Machine output on stdout (one JSON document; errors too).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Init(init::InitArgs),
    #[command(subcommand)]
    Agent(agent::AgentCommand),
    Archive(archive::ArchiveArgs),
    #[command(subcommand)]
    Chat(chat::ChatCommand),
    Send(send::SendArgs),
    #[command(subcommand)]
    Seq(seq::SeqCommand),
    Inbox(inbox::InboxArgs),
    Show(show::ShowArgs),
    Validate(validate::ValidateArgs),
    Registry(registry::RegistryArgs),
    Claim(claim::ClaimArgs),
    Config(config::ConfigArgs),
    Release(release::ReleaseArgs),
    Status(status::StatusArgs),
    Heartbeat(heartbeat::HeartbeatArgs),
    Check(check::CheckArgs),
    Migrate(migrate::MigrateArgs),
    Mirror(mirror::MirrorArgs),
    Take(move_msg::TakeArgs),
    Done(move_msg::DoneArgs),
    Tasks(tasks::TasksArgs),
    Doctor(doctor::DoctorArgs),
    Reap(reap::ReapArgs),
    Asks(asks::AsksArgs),
    Thread(thread::ThreadArgs),
    Orphans(orphans::OrphansArgs),
    #[command(subcommand)]
    Import(bridge::ImportCommand),
    #[command(subcommand)]
    Export(bridge::ExportCommand),
    Demo(demo::DemoArgs),
    Replay(replay::ReplayArgs),
    Watch(watch::WatchArgs),
    Wait(wait::WaitArgs),
    Log(log::LogArgs),
    Cursors(cursors::CursorsArgs),
}

/// Global options every subcommand sees.
pub struct Ctx {
    pub root: Option<PathBuf>,
    pub agent: Option<String>,
    pub json: bool,
}

impl Ctx {
    /// Which root `--root`/`CIRCE_ROOT` names (else: search upwards).
    pub fn root_spec(&self) -> RootSpec {
        self.root.as_ref().map_or(RootSpec::Search, |p| RootSpec::parse(p.as_os_str()))
    }

    /// The root, its routing rules checked against its agents and roles (section 16).
    pub fn workspace(&self) -> Result<Workspace> {
        let ws = Workspace::open(&self.root_spec())?;
        if !ws.config.routing.is_empty() {
            crate::ops::route::check_names(&ws)?;
        }
        Ok(ws)
    }

    /// The root without the routing check: for the commands that set a root up or look at
    /// it (`agent`, `import`, `validate`, `doctor`), so rules may name agents not added yet.
    pub fn workspace_for_setup(&self) -> Result<Workspace> {
        Workspace::open(&self.root_spec())
    }

    /// The workspace and the acting agent (name, role).
    pub fn acting(&self) -> Result<(Workspace, AgentName, String)> {
        let ws = self.workspace()?;
        let (name, role) = ws.agent(self.agent.as_deref())?;
        Ok((ws, name, role))
    }
}

/// Run one parsed command line.
pub fn run(cli: Cli) -> Result<Report> {
    let ctx = Ctx { root: cli.root, agent: cli.agent, json: cli.json };
    match cli.command {
        Command::Init(a) => init::run(&ctx, &a),
        Command::Agent(a) => agent::run(&ctx, &a),
        Command::Archive(a) => archive::run(&ctx, &a),
        Command::Chat(a) => chat::run(&ctx, &a),
        Command::Send(a) => send::run(&ctx, &a),
        Command::Seq(a) => seq::run(&ctx, &a),
        Command::Inbox(a) => inbox::run(&ctx, &a),
        Command::Show(a) => show::run(&ctx, &a),
        Command::Validate(a) => validate::run(&ctx, &a),
        Command::Registry(a) => registry::run(&ctx, &a),
        Command::Claim(a) => claim::run(&ctx, &a),
        Command::Config(a) => config::run(&ctx, &a),
        Command::Release(a) => release::run(&ctx, &a),
        Command::Status(a) => status::run(&ctx, &a),
        Command::Heartbeat(a) => heartbeat::run(&ctx, &a),
        Command::Check(a) => check::run(&ctx, &a),
        Command::Migrate(a) => migrate::run(&ctx, &a),
        Command::Mirror(a) => mirror::run(&ctx, &a),
        Command::Take(a) => move_msg::run_take(&ctx, &a),
        Command::Done(a) => move_msg::run_done(&ctx, &a),
        Command::Tasks(a) => tasks::run(&ctx, &a),
        Command::Doctor(a) => doctor::run(&ctx, &a),
        Command::Reap(a) => reap::run(&ctx, &a),
        Command::Asks(a) => asks::run(&ctx, &a),
        Command::Thread(a) => thread::run(&ctx, &a),
        Command::Orphans(a) => orphans::run(&ctx, &a),
        Command::Import(a) => bridge::run_import(&ctx, &a),
        Command::Export(a) => bridge::run_export(&ctx, &a),
        Command::Demo(a) => demo::run(&ctx, &a),
        Command::Replay(a) => replay::run(&ctx, &a),
        Command::Watch(a) => watch::run(&ctx, &a),
        Command::Wait(a) => wait::run(&ctx, &a),
        Command::Log(a) => log::run(&ctx, &a),
        Command::Cursors(a) => cursors::run(&ctx, &a),
    }
}

/// Parse the process arguments, run, print, and return the exit code.
pub fn main() -> u8 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let json = args.iter().any(|a| a == "--json");
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    crate::exit_code::USAGE
                } else {
                    0
                };
            }
            if json {
                output::print_error(&Error::usage(e.kind().to_string()), true);
            }
            let _ = e.print();
            return crate::exit_code::USAGE;
        }
    };
    let json = cli.json;
    match run(cli) {
        Ok(report) => {
            report.print(json);
            report.code
        }
        Err(e) => {
            output::print_error(&e, json);
            e.exit_code()
        }
    }
}

/// Parse an optional `--ttl` value (1s to 365d, `config::parse_duration`).
pub fn ttl(s: Option<&str>) -> Result<Option<std::time::Duration>> {
    s.map(|s| {
        crate::config::parse_duration(s).map_err(|mut e| {
            e.message = format!("--ttl: {}", e.message);
            e
        })
    })
    .transpose()
}

/// `500ms`, or a duration as `lease` takes it (`2s`, `1m`): `--poll`, `--timeout`.
pub fn parse_interval(s: &str) -> Result<std::time::Duration> {
    let d = match s.trim().strip_suffix("ms") {
        Some(ms) => ms.parse().map(std::time::Duration::from_millis).map_err(|_| {
            Error::usage(format!("`{s}` is not an interval")).hint("write e.g. 500ms or 2s")
        })?,
        None => crate::config::parse_duration(s)?,
    };
    if d.is_zero() {
        return Err(Error::usage("an interval must be more than 0").hint("write e.g. 500ms or 2s"));
    }
    Ok(d)
}

/// A task id typed on the command line.
pub fn task_id(s: &str) -> Result<TaskId> {
    TaskId::new(s)
}
