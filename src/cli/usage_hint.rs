//! The hint of a command line clap could not parse: the help of the very (sub)command it
//! named (`circe help chat say`), runnable as printed, and clap's tips where they help.

use std::ffi::OsString;

use clap::CommandFactory;
use clap::error::ErrorKind;

use super::Cli;

/// Whether the command line names a command that prints one JSON object per line (the
/// streams, `demo`, `replay`: `Command::prints_lines`, which needs the parsed command
/// this line lacks; the two lists go together), so that its refusal by clap is one line
/// too.
pub(super) fn names_a_stream(args: &[OsString]) -> bool {
    let (path, _) = named_command(args);
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    matches!(path.as_slice(), ["watch" | "log" | "demo" | "replay"] | ["chat", "watch"])
}

/// The (sub)command `args` name, as far as they name one: its words (`["chat", "say"]`,
/// none for circe itself) and the command. Flags are passed over with their values.
fn named_command(args: &[OsString]) -> (Vec<String>, clap::Command) {
    let mut cmd = Cli::command();
    cmd.build();
    let mut path = Vec::new();
    let mut words = args.iter().skip(1).filter_map(|a| a.to_str());
    while let Some(w) = words.next() {
        if w == "--" {
            break;
        }
        if let Some(flag) = w.strip_prefix('-') {
            // `--root X`, `-x X`: the value is the next word (not with `--root=X`).
            let arg = match flag.strip_prefix('-') {
                Some(long) if !long.contains('=') => {
                    cmd.get_arguments().find(|a| a.get_long() == Some(long))
                }
                Some(_) => None,
                None => {
                    let mut c = flag.chars();
                    match (c.next(), c.next()) {
                        (Some(s), None) => cmd.get_arguments().find(|a| a.get_short() == Some(s)),
                        _ => None,
                    }
                }
            };
            if arg.is_some_and(|a| a.get_action().takes_values()) {
                words.next();
            }
            continue;
        }
        let Some(sub) = cmd.find_subcommand(w).cloned() else { break };
        path.push(sub.get_name().to_string());
        cmd = sub;
    }
    (path, cmd)
}

/// Does `cmd` take free text, where a word starting with `-` may be meant as a value
/// (`chat say -- -1 is wrong`, `check --run NAME -- cargo test`)?
fn takes_free_text(cmd: &clap::Command) -> bool {
    cmd.get_positionals().any(|a| a.get_num_args().is_some_and(|n| n.max_values() > 1))
}

/// clap's tip to pass a flag as a value after `--` (its text after `tip: `).
const DASH_TIP: &str = "to pass '";

/// Whether clap's tip `tip` helps on `cmd`: the `--` one only where the command takes free
/// text (for a task id it would lead to an invalid id); any other always.
fn tip_helps(cmd: &clap::Command, tip: &str) -> bool {
    !tip.starts_with(DASH_TIP) || takes_free_text(cmd)
}

/// clap's closing line, which sends to `--help`: the hint says the same of the very
/// (sub)command named, runnable as printed.
const MORE_INFO: &str = "For more information, try ";

/// clap's refusal (of `kind`) of `args` as text for people, ending as circe's errors do: in
/// a `hint:` line (circe's own advice `also`, then the help of the command named), which
/// takes the place of clap's "For more information, try '--help'.". clap's tips stay where
/// clap put them, but for its tip to pass a flag as a value after `--` where the command
/// takes no free text (`hint` drops it from the JSON too).
pub(super) fn human(
    args: &[OsString],
    kind: ErrorKind,
    rendered: &str,
    also: Option<&str>,
) -> String {
    let (path, cmd) = named_command(args);
    let mut out: Vec<String> = Vec::new();
    for line in rendered.lines() {
        let tip = line.trim_start().strip_prefix("tip: ");
        if tip.is_some_and(|t| !tip_helps(&cmd, t)) {
            // The blank line that set it apart goes with it.
            if out.last().is_some_and(|l| l.trim().is_empty()) {
                out.pop();
            }
            continue;
        }
        if line.starts_with(MORE_INFO) {
            continue;
        }
        out.push(line.to_string());
    }
    // Set apart from the usage, as clap's closing line was; right below a refusal of one
    // line, as circe's own hints are.
    if out.last().is_some_and(|l| !l.trim().is_empty()) && out.len() > 1 {
        out.push(String::new());
    }
    out.push(format!("hint: {}", own_hint(&path, kind, also).join("; ")));
    out.join("\n") + "\n"
}

/// The hint for clap's error of `kind` on `args`: clap's `tips` (its tip to pass a flag as a
/// value after `--` only where the command takes free text: for a task id it would lead to
/// an invalid id), circe's own (`also`), and the help of the command named.
pub(super) fn hint(
    args: &[OsString],
    kind: ErrorKind,
    tips: &[&str],
    also: Option<&str>,
) -> String {
    let (path, cmd) = named_command(args);
    let mut hint: Vec<String> =
        tips.iter().filter(|t| tip_helps(&cmd, t)).map(|t| (*t).to_string()).collect();
    hint.extend(own_hint(&path, kind, also));
    hint.join("; ")
}

/// circe's part of a parse error's hint: its own advice `also`, and the help of the
/// (sub)command `path` names.
fn own_hint(path: &[String], kind: ErrorKind, also: Option<&str>) -> Vec<String> {
    let mut hint: Vec<String> = also.into_iter().map(str::to_string).collect();
    let help = ["circe", "help"].into_iter().chain(path.iter().map(String::as_str));
    let help = help.collect::<Vec<_>>().join(" ");
    hint.push(match kind {
        ErrorKind::InvalidSubcommand if path.is_empty() => format!("`{help}` lists the commands"),
        ErrorKind::InvalidSubcommand => format!("`{help}` lists its subcommands"),
        _ => format!("`{help}` shows its flags"),
    });
    hint
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn the_streams_named_are_the_commands_that_print_lines() {
        for line in [
            "circe watch --once",
            "circe log",
            "circe demo",
            "circe replay x",
            "circe chat watch --once",
            "circe chat say --to qa hi",
            "circe tasks",
            "circe --json inbox",
            "circe mirror d",
        ] {
            let args: Vec<OsString> = line.split(' ').map(OsString::from).collect();
            let cli = Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(names_a_stream(&args), cli.command.prints_lines(), "{line}");
        }
    }
}
