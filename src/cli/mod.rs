//! The command line: one file per subcommand, one `Command` enum, one exhaustive match.

mod agent;
mod archive;
mod archive_json;
mod archive_show;
mod asks;
mod board;
mod bridge;
mod chat;
mod check;
mod claim;
mod completions;
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
mod prime;
mod questions;
mod readdress;
mod reap;
mod registry;
mod release;
mod replay;
mod schema;
mod schema_defs;
mod schema_more;
mod schema_tx;
mod send;
mod seq;
mod show;
mod status;
mod stop;
mod tasks;
mod thread;
mod usage_hint;
mod validate;
mod vocab;
mod wait;
mod watch;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub use output::Report;

use crate::engine::RootSpec;
use crate::error::{Error, Result};
use crate::names::{AgentName, TaskId};
use crate::workspace::Workspace;

/// What `circe --version` prints after the name: the crate's version, and in a build with
/// the `test-break` feature (`cargo test`, `cargo bench`) ` (test build)`, so that such a
/// binary is never taken for a release build (a benchmark refuses it).
pub const VERSION: &str = if cfg!(feature = "test-break") {
    concat!(env!("CARGO_PKG_VERSION"), " (test build)")
} else {
    env!("CARGO_PKG_VERSION")
};

/// circe: coordinate a team of AI coding agents through plain files.
///
/// Folders are states, an atomic rename is a transition, YAML records hold task ownership.
/// An agent starts with `circe --agent NAME prime`: who it is, what it may do, what waits
/// for it. Exit codes: 0 ok, 1 internal/I-O, 2 usage, 3 refused by a rule, 4 conflict,
/// 5 not found, 6 nothing to claim, 7 timed out. The whole contract: `circe help protocols`.
#[derive(Debug, Parser)]
#[command(
    name = "circe",
    version = VERSION,
    max_term_width = 100,
    after_help = "Examples:\n  circe init && circe --agent coordinator prime\n  circe --agent engineer claim --next --dry-run\n  circe help protocols | less"
)]
pub struct Cli {
    /// The circe root (a folder holding circe.yaml, or one holding .circe/; or a database,
    /// postgres://host/db?schema=NAME). Default: search upwards from the current folder.
    #[arg(long, global = true, env = "CIRCE_ROOT")]
    pub root: Option<PathBuf>,
    /// The acting agent.
    #[arg(long, global = true, env = "CIRCE_AGENT")]
    pub agent: Option<String>,
    /// Machine output on stdout: one JSON document (errors too); the streams (`log`, `watch`,
    /// `chat watch`) and the narrated runs (`demo`, `replay`) print one JSON object per line.
    #[arg(long, global = true, overrides_with = "json")]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
    /// `agent` came from `CIRCE_AGENT`, not from `--agent` (errors about it say so).
    #[arg(skip)]
    pub agent_from_env: bool,
}

/// Each subcommand's arguments are built only when that subcommand runs (`defer`): circe is
/// started thousands of times a day, and a command should not pay for the others' flags.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Make a root here (.circe) with one agent per built-in role.
    Init(init::InitArgs),
    #[command(subcommand)]
    #[command(
        after_help = "Examples:\n  circe agent list\n  circe agent add engineer-2 --role engineer\n  circe --agent coordinator agent retire engineer-2"
    )]
    Agent(agent::AgentCommand),
    /// Move what is finished into ARCHIVE/ (for cron); search, restore, verify it.
    Archive(archive::ArchiveArgs),
    #[command(subcommand)]
    #[command(
        after_help = "Examples:\n  circe --agent engineer chat say --to qa \"ready for review\"\n  circe chat watch --cursor qa\n  circe chat archive"
    )]
    Chat(chat::ChatCommand),
    /// Send a message (a task intent opens a task to be claimed).
    Send(send::SendArgs),
    #[command(subcommand)]
    #[command(
        after_help = "Examples:\n  circe seq state\n  circe --agent lead seq reset\n  circe seq import message-state.json"
    )]
    Seq(seq::SeqCommand),
    /// Your messages, then the waiting tasks you may take.
    Inbox(inbox::InboxArgs),
    /// One message, or one task with its records, messages and events.
    Show(show::ShowArgs),
    /// Check message files against the grammar and the registry.
    Validate(validate::ValidateArgs),
    /// The intents, and who may send them to whom.
    Registry(registry::RegistryArgs),
    /// Take a task (--next: the best one you may take; --dry-run: look first).
    Claim(claim::ClaimArgs),
    /// Print the root's configuration, or replace it (--set).
    Config(config::ConfigArgs),
    /// Give a task back to the queue.
    Release(release::ReleaseArgs),
    /// Move a task you hold: in_progress, blocked, completed, failed.
    Status(status::StatusArgs),
    /// Extend your lease on a task you hold.
    Heartbeat(heartbeat::HeartbeatArgs),
    /// Record one of a task's checks, by running its command.
    Check(check::CheckArgs),
    /// Move a root into a database, or out of one.
    Migrate(migrate::MigrateArgs),
    /// Write a root kept in a database into a folder, as plain files.
    Mirror(mirror::MirrorArgs),
    /// Start on a message: INBOX -> WORKSPACE.
    Take(move_msg::TakeArgs),
    /// File a message (or a finished task's messages) into LOGS.
    Done(move_msg::DoneArgs),
    /// The board: every task with status, owner, lease and checks.
    Tasks(tasks::TasksArgs),
    /// Check every invariant of the root (--repair mends).
    Doctor(doctor::DoctorArgs),
    /// Return tasks whose lease ran out to the queue (for cron).
    Reap(reap::ReapArgs),
    /// The asks waiting for their answer: who asked whom, and until when.
    Asks(asks::AsksArgs),
    /// A whole conversation as a tree, from its first message through every reply.
    Thread(thread::ThreadArgs),
    /// What retired agents left: messages in their boxes, tasks addressed to them.
    Orphans(orphans::OrphansArgs),
    /// Address a waiting task anew (as a coordinator): to another role or agent.
    Readdress(readdress::ReaddressArgs),
    #[command(subcommand)]
    #[command(after_help = "Examples:\n  circe import tx ../tx-messages")]
    Import(bridge::ImportCommand),
    #[command(subcommand)]
    #[command(after_help = "Examples:\n  circe export tx ../tx-messages")]
    Export(bridge::ExportCommand),
    /// The reference's whole message flow, narrated, in a temporary root.
    Demo(demo::DemoArgs),
    /// Replay a fixture (fixtures/<case>/steps) in a temporary root.
    Replay(replay::ReplayArgs),
    /// Start here: who you are, what you may do, what waits for you.
    Prime(prime::PrimeArgs),
    /// Questions nobody has answered yet.
    Questions(questions::QuestionsArgs),
    /// The live board for people: tasks, inboxes, events as they happen.
    Board(board::BoardArgs),
    /// The JSON Schema of a command's --json output.
    Schema(schema::SchemaArgs),
    /// A shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsArgs),
    /// circe's man page, or a subcommand's.
    Man(completions::ManArgs),
    /// Follow what happens: one line per event, resumable with --cursor.
    Watch(watch::WatchArgs),
    /// Block until something happens (inbox, claimable, a reply, a status).
    Wait(wait::WaitArgs),
    /// The event log: the newest events, or follow it.
    Log(log::LogArgs),
    /// The saved cursors of watchers, and how far behind they are.
    Cursors(cursors::CursorsArgs),
}

/// Global options every subcommand sees.
pub struct Ctx {
    pub root: Option<PathBuf>,
    pub agent: Option<String>,
    /// `agent` came from `CIRCE_AGENT`, not from `--agent`.
    pub agent_from_env: bool,
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
        match crate::ops::rule_name_errors(&ws).into_iter().next() {
            Some(e) => Err(e),
            None => Ok(ws),
        }
    }

    /// A follower's root (`watch`, `log --follow`, `wait`, `mirror --watch`): a database
    /// that cannot be reached when it starts is waited for as after a restart (said on
    /// stderr), until `stop` says to end, which gives the error that kept it out.
    pub fn workspace_following(&self, stop: &dyn Fn() -> bool) -> Result<Workspace> {
        match self.workspace() {
            Err(e) if e.is_transient() => reconnect(self, &e, stop)?.ok_or(e),
            r => r,
        }
    }

    /// The root without the routing check: for the commands that set a root up or look at
    /// it (`agent`, `config`, `import`, `validate`, `doctor`), so rules may name agents not
    /// added yet.
    pub fn workspace_for_setup(&self) -> Result<Workspace> {
        Workspace::open(&self.root_spec())
    }

    /// The workspace and the acting agent (name, role).
    pub fn acting(&self) -> Result<(Workspace, AgentName, String)> {
        let ws = self.workspace()?;
        let (name, role) = self.acting_agent(&ws)?;
        Ok((ws, name, role))
    }

    /// The acting agent (name, role) in `ws`: it must exist (`Workspace::agent`). A name
    /// that came from `CIRCE_AGENT` is said to, when it is refused: nobody typed it.
    pub fn acting_agent(&self, ws: &Workspace) -> Result<(AgentName, String)> {
        ws.agent(self.agent.as_deref()).map_err(|e| {
            if self.agent_from_env && self.agent.is_some() {
                e.map_message(|m| format!("{m} (from CIRCE_AGENT)"))
                    .hint_more("`--agent NAME` overrides CIRCE_AGENT")
            } else {
                e
            }
        })
    }
}

/// Run one parsed command line.
pub fn run(cli: Cli) -> Result<Report> {
    // An empty `CIRCE_AGENT=` (a harness that clears a variable by setting it to nothing) is
    // no agent named, as an unset one is.
    let agent = cli.agent.filter(|a| !a.is_empty());
    let ctx = Ctx { root: cli.root, agent, agent_from_env: cli.agent_from_env, json: cli.json };
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
        Command::Readdress(a) => readdress::run(&ctx, &a),
        Command::Import(a) => bridge::run_import(&ctx, &a),
        Command::Export(a) => bridge::run_export(&ctx, &a),
        Command::Demo(a) => demo::run(&ctx, &a),
        Command::Replay(a) => replay::run(&ctx, &a),
        Command::Prime(a) => prime::run(&ctx, &a),
        Command::Questions(a) => questions::run(&ctx, &a),
        Command::Board(a) => board::run(&ctx, &a),
        Command::Schema(a) => schema::run(&ctx, &a),
        Command::Completions(a) => completions::run_completions(&ctx, &a),
        Command::Man(a) => completions::run_man(&ctx, &a),
        Command::Watch(a) => watch::run(&ctx, &a),
        Command::Wait(a) => wait::run(&ctx, &a),
        Command::Log(a) => log::run(&ctx, &a),
        Command::Cursors(a) => cursors::run(&ctx, &a),
    }
}

/// Parse the process arguments, run, print, and return the exit code.
pub fn main() -> u8 {
    stop::catch_file_size_limit();
    let code = parse_and_run();
    // Output that could not be written (a full disk) is no success, whatever was done.
    match output::stdout_failure() {
        Some(why) if code == 0 => {
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                format!("error: cannot write the output to stdout: {why}\nhint: what the command did stands (`circe log` shows it); free the space or write elsewhere, and run a report again\n").as_bytes(),
            );
            crate::exit_code::INTERNAL
        }
        _ => code,
    }
}

/// An environment variable set so that it cannot be what was meant.
fn env_refusal() -> Option<Error> {
    // An empty `CIRCE_ROOT=` would read as `--root` given without a value (even beside a
    // `--root` on the command line): said as it is.
    if std::env::var_os("CIRCE_ROOT").is_some_and(|r| r.is_empty()) {
        return Some(Error::usage("CIRCE_ROOT is set but empty").hint(
            "unset it (circe then looks upwards from the current folder for a root) or name a root in it",
        ));
    }
    // A `CIRCE_NOW` that does not read would leave the real clock running unsaid.
    // Set but empty is the real clock, as unset.
    let now = std::env::var_os("CIRCE_NOW").filter(|v| !v.is_empty())?;
    crate::clock::pinned(now.to_str()).is_none().then(|| {
        Error::usage(format!("CIRCE_NOW `{}` is not an RFC 3339 time", now.to_string_lossy()))
            .hint("write e.g. CIRCE_NOW=2026-01-01T12:00:00Z (a test's pinned clock), or unset it for the real one")
    })
}

/// clap says only that some argument is not UTF-8: those that are not, said (a path may
/// be one and be taken; the one refused is among them).
fn not_utf8(args: &[std::ffi::OsString]) -> Option<Error> {
    let bad: Vec<String> = args
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, a)| a.to_str().is_none())
        .map(|(i, a)| format!("argument {i}, `{}`,", a.to_string_lossy()))
        .collect();
    if bad.is_empty() {
        return None;
    }
    Some(Error::usage(format!(
        "{} not UTF-8 (shown with `\u{FFFD}` for each byte that is not)",
        bad.join(" and ") + if bad.len() == 1 { " is" } else { " are" }
    ))
    .hint("circe's names, ids, summaries and flags are UTF-8: convert the text (`iconv -f latin1 -t utf-8`), or pass a body with --body-file"))
}

fn parse_and_run() -> u8 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let json = args.iter().any(|a| a == "--json");
    // `circe help protocols`: the contract, built into the binary (an installed circe has
    // no PROTOCOLS.md beside it).
    // With --json anywhere, it is `{"help": TEXT}` as any help is.
    let words: Vec<&std::ffi::OsString> = args.iter().skip(1).filter(|a| *a != "--json").collect();
    if words.len() == 2 && words[0] == "help" && words[1] == "protocols" {
        use std::io::Write;
        // A reader that went away (`| head`) ends it quietly.
        let text = if json {
            let doc = serde_json::json!({ "help": PROTOCOLS });
            serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
        } else {
            PROTOCOLS.to_string()
        };
        if let Err(e) = std::io::stdout().lock().write_all(text.as_bytes()) {
            output::stdout_failed(&e);
        }
        return 0;
    }
    let args = match json.then(|| help_as_flag(&args[0], &words)).flatten() {
        Some(rewritten) => rewritten,
        None => args.clone(),
    };
    if let Some(e) = env_refusal() {
        output::print_error(&e, json, false);
        return crate::exit_code::USAGE;
    }
    let cli = match parse(&args) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if let Some(err) =
                (e.kind() == ErrorKind::InvalidUtf8).then(|| not_utf8(&args)).flatten()
            {
                output::print_error(&err, json, false);
                return crate::exit_code::USAGE;
            }
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let missing = e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand;
                if json && !missing {
                    return help_json(&e);
                }
                if json {
                    output::print_error(&needs_subcommand(&e.render().to_string()), true, false);
                    return crate::exit_code::USAGE;
                }
                if !json {
                    if let Err(io) = e.print() {
                        output::stdout_failed(&io);
                    }
                    return if missing { crate::exit_code::USAGE } else { 0 };
                }
            }
            if json {
                // The first line of clap's message names the flag or value at fault.
                let text = e.render().to_string();
                // clap's message up to its usage line, on one line (a missing argument is
                // named on the line after "were not provided:").
                let body = text.split("\n\nUsage:").next().unwrap_or_default();
                let body = body.split("\n\nFor more information").next().unwrap_or_default();
                // Its `tip:` lines are hints, not the message.
                let (tips, lines): (Vec<&str>, Vec<&str>) = body
                    .strip_prefix("error: ")
                    .unwrap_or(body)
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .partition(|l| l.starts_with("tip: "));
                let tips: Vec<&str> = tips.iter().map(|t| &t["tip: ".len()..]).collect();
                let dashes = forgot_dashes(&args, e.kind());
                let hint = usage_hint::hint(&args, e.kind(), &tips, dashes);
                let err = Error::usage(lines.join(" ")).detail("clap", e.kind().to_string());
                // A stream's refusal is one line, as everything it prints is.
                let one_line = usage_hint::names_a_stream(&args);
                output::print_error(&err.hint(hint), true, one_line);
                return crate::exit_code::USAGE;
            }
            let dashes = forgot_dashes(&args, e.kind());
            let text = usage_hint::human(&args, e.kind(), &e.render().to_string(), dashes);
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), text.as_bytes());
            return crate::exit_code::USAGE;
        }
    };
    let json = cli.json;
    let lines = cli.command.prints_lines();
    match run(cli) {
        Ok(report) => {
            report.print(json);
            report.code
        }
        Err(e) => {
            output::print_error(&e, json, lines);
            e.exit_code()
        }
    }
}

/// The command line, as `Cli::try_parse_from` reads it, noting where the acting agent's
/// name came from (`--agent` or `CIRCE_AGENT`).
fn parse(args: &[std::ffi::OsString]) -> std::result::Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let mut cmd = Cli::command();
    let mut m = match cmd.try_get_matches_from_mut(args) {
        Ok(m) => m,
        Err(e) => return Err(without_env_in_usage(e, args)),
    };
    let from_env = m.value_source("agent") == Some(clap::parser::ValueSource::EnvVariable);
    let mut cli = Cli::from_arg_matches_mut(&mut m).map_err(|e| e.format(&mut cmd))?;
    cli.agent_from_env = from_env;
    Ok(cli)
}

/// clap's refusal of `args` with the usage it shows for that very line: clap counts a
/// value from `CIRCE_ROOT` or `CIRCE_AGENT` as given, and lists it in the usage of a missing
/// argument or a conflict (`circe mirror --root <ROOT> <DIR>`) as if the command needed it.
/// The same line parsed with neither read from the environment gives the same refusal
/// without them; any other outcome keeps clap's first.
fn without_env_in_usage(e: clap::Error, args: &[std::ffi::OsString]) -> clap::Error {
    use clap::CommandFactory;
    let set = |v: &str| std::env::var_os(v).is_some_and(|v| !v.is_empty());
    if !set("CIRCE_ROOT") && !set("CIRCE_AGENT") {
        return e;
    }
    let none: Option<&'static str> = None;
    let mut cmd = Cli::command().mut_arg("root", |a| a.env(none)).mut_arg("agent", |a| a.env(none));
    match cmd.try_get_matches_from_mut(args) {
        Err(again) if again.kind() == e.kind() => again,
        _ => e,
    }
}

/// `circe check T --run NAME cargo test`: the command's words were read as circe's own. Said
/// with the fix (clap's own message names only the stray word).
fn forgot_dashes(
    args: &[std::ffi::OsString],
    kind: clap::error::ErrorKind,
) -> Option<&'static str> {
    use clap::error::ErrorKind;
    let has = |w: &str| args.iter().any(|a| a == w);
    // The subcommand: the first word after the global flags (and their values).
    let mut words = args.iter().skip(1).filter_map(|a| a.to_str());
    let mut sub = None;
    while let Some(w) = words.next() {
        match w {
            "--root" | "--agent" => {
                words.next();
            }
            w if w.starts_with('-') => {}
            w => {
                sub = Some(w);
                break;
            }
        }
    }
    let stray = matches!(kind, ErrorKind::UnknownArgument | ErrorKind::ArgumentConflict);
    (stray && sub == Some("check") && has("--run") && !has("--")).then_some(
        "the command to run goes after `--`: circe check TASK --run NAME -- COMMAND ARGS",
    )
}

/// A command group run without its subcommand, said from clap's help text: which
/// subcommands it has.
fn needs_subcommand(help: &str) -> Error {
    let path = help.lines().find_map(|l| l.strip_prefix("Usage: ")).map_or_else(
        || "circe".to_string(),
        |u| u.split(" [").next().unwrap_or(u).split(" <").next().unwrap_or(u).trim().to_string(),
    );
    let subs: Vec<&str> = help
        .split("\nCommands:\n")
        .nth(1)
        .map(|c| {
            c.lines()
                .take_while(|l| l.starts_with("  "))
                .filter_map(|l| l.split_whitespace().next())
                .filter(|n| *n != "help")
                .collect()
        })
        .unwrap_or_default();
    Error::usage(format!("`{path}` needs a subcommand: {}", subs.join(", ")))
        .detail("clap", "missing subcommand")
        .hint(format!("`{path} --help` says what each does"))
}

/// `circe help CMD --json` (and `circe GROUP help CMD --json`) as `circe CMD --help --json`:
/// clap's `help` takes only command names, and every usage error's hint names `circe help
/// CMD` (`usage_hint`). `help` after a command without subcommands is that command's argument (a task
/// id) and is left alone. `words`: the arguments less the program and `--json`.
fn help_as_flag(
    program: &std::ffi::OsString,
    words: &[&std::ffi::OsString],
) -> Option<Vec<std::ffi::OsString>> {
    let group = |w: &std::ffi::OsString| {
        use clap::CommandFactory;
        let mut cmd = Cli::command();
        cmd.build();
        cmd.find_subcommand(w).is_some_and(|c| c.get_subcommands().any(|s| s.get_name() != "help"))
    };
    let help_at = words.iter().position(|w| *w == "help").filter(|p| match p {
        0 => true,
        1 => group(words[0]),
        _ => false,
    });
    help_at.map(|p| {
        std::iter::once(program.clone())
            .chain(words.iter().enumerate().filter(|(i, _)| *i != p).map(|(_, w)| (*w).clone()))
            .chain(["--help".into(), "--json".into()])
            .collect()
    })
}

/// `--version` and `--help` with `--json`: `{"name", "version"}` or `{"help"}`.
fn help_json(e: &clap::Error) -> u8 {
    let doc = if e.kind() == clap::error::ErrorKind::DisplayVersion {
        serde_json::json!({"name": "circe", "version": env!("CARGO_PKG_VERSION")})
    } else {
        serde_json::json!({ "help": e.render().to_string() })
    };
    let text = serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
    if let Err(e) = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes()) {
        output::stdout_failed(&e);
    }
    0
}

impl Command {
    /// Whether its `--json` output is JSON lines (one object per line), as its error is then.
    fn prints_lines(&self) -> bool {
        matches!(
            self,
            Command::Watch(_)
                | Command::Log(_)
                | Command::Demo(_)
                | Command::Replay(_)
                | Command::Chat(chat::ChatCommand::Watch(_))
        )
    }
}

/// What to say of the tasks the last board scan passed over (`Engine::passed_over`: a
/// `.status` that does not parse, or was removed by hand), so that none drops out of a
/// report without a word.
pub fn passed_over_warnings(ws: &crate::workspace::Workspace) -> Vec<String> {
    ws.engine
        .passed_over()
        .iter()
        .map(|p| {
            let t = &p.task;
            format!(
                "task {t} is not shown: {} (`circe doctor` says more; put it back from a backup, `circe log --task {t}` has its last status)",
                p.problem
            )
        })
        .collect()
}

/// PROTOCOLS.md, the whole contract, as `circe help protocols` prints it.
pub const PROTOCOLS: &str = include_str!("../../PROTOCOLS.md");

/// A follower whose database connection broke (`lost`, a transient error: the server
/// restarting, the network) opens the root again, every 250 ms at first and at most every
/// 5 s, saying so on stderr, until it is back (or `stop` says to end: `None`). An error
/// that will not pass by itself ends the follower.
pub fn reconnect(
    ctx: &Ctx,
    lost: &Error,
    stop: &dyn Fn() -> bool,
) -> Result<Option<crate::workspace::Workspace>> {
    eprintln!("circe: {}; connecting again", lost.message);
    let mut backoff = Backoff::default();
    let mut said = std::time::Instant::now();
    loop {
        let until = std::time::Instant::now() + backoff.pause();
        while std::time::Instant::now() < until {
            if stop() {
                return Ok(None);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        match ctx.workspace() {
            Ok(ws) => {
                eprintln!("circe: connected again");
                return Ok(Some(ws));
            }
            Err(e) if e.is_transient() => {
                if said.elapsed() >= std::time::Duration::from_secs(30) {
                    eprintln!("circe: still cannot connect ({}); trying on", e.message);
                    said = std::time::Instant::now();
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// The pauses between tries to open a root that cannot be reached: 250 ms at first, then
/// twice the last, at most 5 s (`reconnect`, and the live board while it is offline).
pub struct Backoff(std::time::Duration);

impl Default for Backoff {
    fn default() -> Self {
        Backoff(std::time::Duration::from_millis(250))
    }
}

impl Backoff {
    /// The next pause.
    pub fn pause(&mut self) -> std::time::Duration {
        let now = self.0;
        self.0 = (self.0 * 2).min(std::time::Duration::from_secs(5));
        now
    }
}

/// How `retrying` ended.
pub enum Retried<T> {
    Done(T),
    /// `stop` said to end while the root could not be reached: the error that broke it.
    Stopped(Error),
}

/// Run `work` on the root; when it fails with an error `again` accepts (one that may pass:
/// the server restarting), open the root again (`reconnect`, into `ws`) and run it again,
/// until it ends otherwise. The followers' one loop (`watch`, `log --follow`, `wait`,
/// `mirror --watch`).
pub fn retrying<T>(
    ctx: &Ctx,
    ws: &mut crate::workspace::Workspace,
    again: &dyn Fn(&Error) -> bool,
    stop: &dyn Fn() -> bool,
    work: &mut dyn FnMut(&crate::workspace::Workspace) -> Result<T>,
) -> Result<Retried<T>> {
    loop {
        match work(ws) {
            Err(e) if again(&e) => match reconnect(ctx, &e, stop)? {
                Some(opened) => *ws = opened,
                None => return Ok(Retried::Stopped(e)),
            },
            r => return r.map(Retried::Done),
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
    let bad = || {
        Error::usage(format!(
            "`{s}` is not an interval: a whole number with ms, s, m, h or d, from 1ms to 365d"
        ))
        .hint("write e.g. 500ms, 2s or 10m")
    };
    let d = match s.trim().strip_suffix("ms") {
        Some(ms) => ms.parse().map(std::time::Duration::from_millis).map_err(|_| bad())?,
        None => crate::config::parse_duration(s).map_err(|_| bad())?,
    };
    if d.is_zero() || d > crate::config::MAX_DURATION {
        return Err(bad());
    }
    Ok(d)
}

/// A task id typed on the command line.
pub fn task_id(s: &str) -> Result<TaskId> {
    TaskId::new(s)
}

/// Refused (exit 3) when `dir` lies inside the root's folder, where what `what` writes would
/// be read as the root's own files (strays in its boxes, copies of its messages).
pub(crate) fn outside_the_root(
    ws: &Workspace,
    dir: &std::path::Path,
    what: &str,
    hint: &str,
) -> Result<()> {
    let Some(root) = ws.engine.local_folder() else { return Ok(()) };
    let (inside, root) =
        (crate::engine::local::resolved(dir), crate::engine::local::resolved(&root));
    if inside.starts_with(&root) {
        return Err(Error::refused(format!(
            "{} lies inside the root {}: {what} there would be read as the root's own files",
            dir.display(),
            root.display()
        ))
        .hint(hint.to_string()));
    }
    Ok(())
}

/// The root folder `dir` is or lies inside (itself a root's folder: a `.circe` holding
/// circe.yaml), if any: a root made there would land inside a root. `dir` is resolved.
pub(crate) fn root_around(dir: &std::path::Path) -> Option<PathBuf> {
    let dir = resolved(dir);
    dir.ancestors()
        .find(|a| crate::engine::local::root_at(a).is_some_and(|r| r == *a))
        .map(std::path::Path::to_path_buf)
}

/// `path` made absolute with its links resolved as far as it exists (a folder to be made
/// is its nearest existing ancestor, resolved, and the rest).
pub(crate) fn resolved(path: &std::path::Path) -> std::path::PathBuf {
    let joined = std::env::current_dir().map_or_else(|_| path.to_path_buf(), |d| d.join(path));
    // `..` and `.` taken out first (a folder to be made has no links to follow).
    let mut abs = std::path::PathBuf::new();
    for c in joined.components() {
        match c {
            std::path::Component::ParentDir => {
                abs.pop();
            }
            std::path::Component::CurDir => {}
            other => abs.push(other),
        }
    }
    let mut rest = Vec::new();
    let mut at = abs.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(real, |p, part| p.join(part));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent;
            }
            _ => return abs,
        }
    }
}
