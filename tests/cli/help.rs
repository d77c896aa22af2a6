//! Help for the agents who read it: an example in every subcommand's help, every argument
//! described, the contract built into the binary, completions and man pages.

use clap::CommandFactory;

use crate::common::Env;

/// Every subcommand, with its path (`agent add`).
fn all() -> Vec<(String, clap::Command)> {
    fn walk(c: &clap::Command, prefix: &str, out: &mut Vec<(String, clap::Command)>) {
        for s in c.get_subcommands() {
            let name = format!("{prefix}{}", s.get_name());
            out.push((name.clone(), s.clone()));
            walk(s, &format!("{name} "), out);
        }
    }
    let mut out = Vec::new();
    let mut top = circe::cli::Cli::command();
    top.build();
    out.push(("circe".to_string(), top.clone()));
    walk(&top, "", &mut out);
    out
}

#[test]
fn every_subcommand_has_an_example_and_every_argument_a_description() {
    let mut missing = Vec::new();
    for (name, c) in all() {
        // clap's own `help` subcommands, and `agent`/`chat` (their leaves carry examples);
        // a command that also runs alone (`orphans`) has its own.
        if name.split(' ').any(|w| w == "help") || c.is_subcommand_required_set() && name != "circe"
        {
            continue;
        }
        let long = c.clone().render_long_help().to_string();
        if !long.contains("Example") || !long.contains("  circe ") && !long.contains(": circe ") {
            missing.push(format!("{name}: no example"));
        }
        for a in c.get_arguments() {
            let id = a.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            if a.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                missing.push(format!("{name}: argument `{id}` has no description"));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// `circe --help` lists every command with a line of its own that names what the command's
/// own help is about (a doc comment on the wrong command once moved them about, and left
/// some commands without one).
#[test]
fn every_command_in_the_list_says_what_it_does() {
    let listing = circe::cli::Cli::command().render_help().to_string();
    let words = |t: &str| -> std::collections::BTreeSet<String> {
        t.split(|ch: char| !ch.is_alphanumeric())
            .filter(|w| w.len() >= 4)
            .map(str::to_lowercase)
            .collect()
    };
    let mut wrong = Vec::new();
    for c in circe::cli::Cli::command().get_subcommands() {
        let name = c.get_name();
        let line =
            listing.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap_or_default();
        let said = line.trim_start().strip_prefix(name).unwrap_or_default().trim();
        if said.is_empty() {
            wrong.push(format!("{name}: nothing in the list"));
            continue;
        }
        let own = c.clone().render_long_help().to_string();
        let own = own.split("Usage:").next().unwrap_or_default();
        if words(said).is_disjoint(&words(own)) {
            wrong.push(format!("{name}: listed as \"{said}\", its help says \"{}\"", own.trim()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn help_points_to_the_built_in_contract_not_a_file() {
    let env = Env::bare();
    let h = env.circe(["--help"]).run();
    h.ok();
    assert!(h.stdout.contains("circe help protocols"), "{}", h.show());
    assert!(!h.stdout.contains("See PROTOCOLS.md"), "{}", h.show());
    let p = env.circe(["help", "protocols"]).run();
    p.ok();
    assert!(p.stdout.starts_with("# circe protocols"), "{}", &p.stdout[..200.min(p.stdout.len())]);
    assert!(p.stdout.contains("## 11. Exit codes"), "the whole contract");
    // With --json, as any help: `{"help": TEXT}`, exit 0.
    for args in [["--json", "help", "protocols"], ["help", "protocols", "--json"]] {
        let j = env.circe(args).run();
        j.ok();
        assert_eq!(j.json()["help"].as_str(), Some(p.stdout.as_str()), "{args:?}");
    }
    // Command groups too: their help ends with examples of their subcommands.
    for sub in ["claim", "status", "check", "send", "agent", "chat", "seq", "import", "export"] {
        let o = env.circe(["help", sub]).run();
        o.ok();
        assert!(o.stdout.contains("Examples:"), "{}", o.show());
    }
}

/// A root or an agent named in the environment is no flag the command needs: a refused
/// command line's usage leaves `--root` and `--agent` out, as it does for the flags.
#[test]
fn usage_does_not_show_the_root_or_agent_the_environment_names() {
    let env = Env::bare();
    let root = env.path().join("r");
    for vars in [&[("CIRCE_ROOT", root.to_str().unwrap())][..], &[("CIRCE_AGENT", "qa")]] {
        let mut run = env.circe(["mirror", "--watch"]);
        for (k, v) in vars {
            run = run.var(k, v);
        }
        let o = run.run();
        o.code(2);
        assert!(o.stderr.contains("Usage: circe mirror --watch <DIR>\n"), "{vars:?}: {}", o.show());
    }
}

#[test]
fn completions_and_man_pages() {
    let env = Env::bare();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = env.circe(["completions", shell]).run();
        o.ok();
        assert!(o.stdout.contains("claim"), "{shell}: {}", o.show());
    }
    let o = env.circe(["completions", "tcsh"]).run();
    o.code(2);
    let m = env.circe(["man"]).run();
    m.ok();
    assert!(
        m.stdout.starts_with(".ie \\n(.g .ds Aq") || m.stdout.contains(".TH circe"),
        "{}",
        m.show()
    );
    let m = env.circe(["man", "agent", "add"]).run();
    m.ok();
    assert!(m.stdout.contains(".TH circe-agent-add"), "{}", m.show());
    let m = env.circe(["man", "clam"]).run();
    m.code(5);
    assert!(m.stderr.contains("did you mean `claim`?"), "{}", m.show());
}

/// `--json` holds for `--version` and `--help` too: one JSON document, exit 0. A test build
/// says so in its `--version` text.
#[test]
fn version_and_help_answer_in_json_when_asked() {
    let env = Env::new();
    let o = env.circe(["--version", "--json"]).run();
    o.ok();
    assert_eq!(o.json()["name"], "circe", "{}", o.show());
    assert_eq!(o.json()["version"], env!("CARGO_PKG_VERSION"), "{}", o.show());
    let o = env.circe(["--json", "claim", "--help"]).run();
    o.ok();
    let help = o.json()["help"].as_str().unwrap_or_default().to_string();
    assert!(help.contains("Usage: circe claim") && help.contains("--request-id"), "{}", o.show());
    // A command group without its subcommand: which it has (exit 2).
    let o = env.circe(["--json", "agent"]).run();
    assert_eq!(o.code, 2, "{}", o.show());
    assert_eq!(
        o.json()["error"]["message"],
        "`circe agent` needs a subcommand: add, list, retire",
        "{}",
        o.show()
    );
    // Without --json, the text as before; this binary is a test build (`cargo test` turns
    // the `test-break` feature on), and says so, so that no benchmark takes it for a release
    // build. `cargo build` makes the plain `circe 0.2.0`.
    let o = env.circe(["--version"]).run();
    o.ok();
    assert_eq!(o.stdout, format!("circe {} (test build)\n", env!("CARGO_PKG_VERSION")));
}

/// A command line circe cannot parse is hinted at the help of the very (sub)command it
/// named, and that hint, run as printed, answers; clap's tip to pass a flag as a value after
/// `--` is kept only where a value may start with `-` (free text), not for a task id. The
/// text for people ends in the same `hint:` line as circe's other errors, in place of clap's
/// own pointer at `--help`, and says clap's tip once.
#[test]
fn a_parse_error_hints_the_help_of_its_own_command() {
    let env = Env::new();
    let cases: &[(&[&str], &str, bool)] = &[
        (&["--agent", "engineer", "claim", "--bogus"], "`circe help claim`", false),
        (
            &["--agent", "qa", "chat", "say", "--to", "coordinator", "--bogus"],
            "`circe help chat say`",
            true,
        ),
        (&["claim"], "`circe help claim`", false),
        (&["agent", "bogus"], "`circe help agent`", false),
        (&["bogus"], "`circe help`", false),
    ];
    for (args, want, tip) in cases {
        let o = env.circe([&["--json"][..], args].concat()).run();
        o.code(2);
        let hint = o.json()["error"]["hint"].as_str().unwrap_or_default().to_string();
        assert!(hint.contains(want) && !hint.contains("COMMAND"), "{want}: {}", o.show());
        assert_eq!(hint.contains("'-- --bogus'"), *tip, "{}", o.show());
        // The text for people drops the same tip where it would mislead.
        let text = env.circe(*args).run();
        text.code(2);
        assert_eq!(
            text.stderr.matches("'-- --bogus'").count(),
            usize::from(*tip),
            "{}",
            text.show()
        );
        let last = text.stderr.lines().last().unwrap_or_default();
        assert!(last.starts_with("hint: ") && last.contains(want), "{want}: {}", text.show());
        assert!(!text.stderr.contains("For more information"), "{}", text.show());
        // Run as printed (with --json, as the agent that got it would).
        let hinted = &want[1..want.len() - 1];
        let words: Vec<&str> = hinted.split(' ').skip(1).chain(["--json"]).collect();
        let h = env.circe(&words).run();
        assert_eq!(h.code, 0, "{hinted}: {}", h.show());
        assert!(h.json()["help"].is_string(), "{hinted}: {}", h.show());
    }
}

/// `circe help CMD --json` (the form every usage error's hint names) is `{"help": TEXT}`,
/// exit 0, as `circe CMD --help --json` is, for every command and subcommand.
#[test]
fn help_cmd_json_is_the_help_document_for_every_command() {
    let env = Env::bare();
    let mut forms: Vec<Vec<String>> = vec![vec!["help".into(), "--json".into()]];
    for (path, _) in
        all().into_iter().filter(|(p, _)| p != "circe" && !p.split(' ').any(|w| w == "help"))
    {
        let words: Vec<String> = path.split(' ').map(str::to_string).collect();
        forms.push([&["help".to_string()][..], &words, &["--json".to_string()]].concat());
        if words.len() == 2 {
            // `circe GROUP help SUB --json`.
            forms.push(vec![words[0].clone(), "help".into(), words[1].clone(), "--json".into()]);
        }
    }
    for args in &forms {
        let o = env.circe(args).run();
        assert_eq!(o.code, 0, "circe {}: {}", args.join(" "), o.show());
        assert!(o.json()["help"].is_string(), "circe {}: {}", args.join(" "), o.stdout);
    }
    // After a command without subcommands, `help` is its argument (a task id), not help.
    let o = env.circe(["show", "help", "--json"]).run();
    assert!(o.json()["help"].is_null() && o.json()["error"].is_object(), "{}", o.show());
}
