//! `circe completions SHELL` and `circe man [COMMAND]`: shell completion scripts and man
//! pages generated from the command line's own definition (clap_complete, clap_mangen).

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::schema::TextJson;
use super::{Cli, Ctx, Report};
use crate::error::{Error, Result};

/// Print a shell completion script for circe.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe completions bash > ~/.local/share/bash-completion/completions/circe\n  circe completions zsh > ~/.zfunc/_circe\n  circe completions fish > ~/.config/fish/completions/circe.fish"
)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    pub shell: Shell,
}

/// Print circe's man page (roff), or one subcommand's.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe man | man -l -\n  circe man claim > circe-claim.1\n  circe man agent add | man -l -"
)]
pub struct ManArgs {
    /// A subcommand (`claim`, `agent add`); default: circe itself.
    pub command: Vec<String>,
}

/// A man page's name lives as long as the process (one per run).
fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

#[expect(clippy::unnecessary_wraps, reason = "every command returns Result<Report>")]
pub fn run_completions(_ctx: &Ctx, a: &CompletionsArgs) -> Result<Report> {
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut Cli::command(), "circe", &mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    Ok(Report::new(text.clone(), TextJson { of: a.shell.to_string(), text }))
}

pub fn run_man(_ctx: &Ctx, a: &ManArgs) -> Result<Report> {
    let mut cmd = Cli::command();
    cmd.build();
    let mut name = String::from("circe");
    for word in &a.command {
        let Some(sub) = cmd.find_subcommand(word).cloned() else {
            let known: Vec<String> =
                cmd.get_subcommands().map(|c| c.get_name().to_string()).collect();
            let e = Error::not_found(format!("no command `{name} {word}`"));
            return Err(match crate::suggest::closest(word, known.iter().map(String::as_str)) {
                Some(c) => e.hint(format!("did you mean `{c}`?")),
                None => e.hint("`circe --help` lists the commands"),
            });
        };
        name = format!("{name}-{word}");
        cmd = sub.name(clap::builder::Str::from(leak(&name)));
    }
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut buf)
        .map_err(|e| Error::internal(format!("cannot render the man page: {e}")))?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    Ok(Report::new(text.clone(), TextJson { of: name, text }))
}
