//! `circe config`.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::{Ctx, Report};
use crate::config::Config;
use crate::engine::local::{self, read_input_file, read_stdin_capped};
use crate::error::{Error, Result};

/// Print the root's configuration (circe.yaml; for a root in a database, the copy stored
/// there, which every host reads). `--set FILE` replaces it after checking it; it reads
/// only the new file, so it also replaces a circe.yaml broken by hand.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe config > circe.yaml.new\n  circe config --set circe.yaml.new"
)]
pub struct ConfigArgs {
    /// The new configuration (`-` for standard input).
    #[arg(long, value_name = "FILE")]
    pub set: Option<PathBuf>,
}

pub fn run(ctx: &Ctx, a: &ConfigArgs) -> Result<Report> {
    let Some(path) = &a.set else {
        // A setup command: routing rules that name no agent yet are what it may have to fix.
        let ws = match ctx.workspace_for_setup() {
            Ok(ws) => ws,
            Err(e) => return print_broken(ctx, e),
        };
        let text = ws.engine.config_text()?;
        let warnings: Vec<String> = inapplicable(&ws).into_iter().collect();
        return Ok(Report::new(
            text.clone(),
            json!({"config": text, "broken": false, "warnings": warnings}),
        )
        .warnings(warnings));
    };
    // The new file is read and checked first: its errors come before the root's.
    // circe.yaml is small: a stream is read up to 1 MiB.
    let bytes = if path.as_os_str() == "-" {
        read_stdin_capped(1 << 20)?.bytes
    } else {
        read_input_file(path)?
    };
    let text =
        String::from_utf8(bytes).map_err(|e| Error::not_utf8(path.display(), e.as_bytes()))?;
    // Its errors name the file given (they say circe.yaml, what it is to become).
    let given = if path.as_os_str() == "-" {
        "standard input".to_string()
    } else {
        path.display().to_string()
    };
    let parsed = Config::parse(&text).map_err(|mut e| {
        if let Some(rest) = e.message.strip_prefix("circe.yaml: ") {
            e.message = format!("{given} (the new circe.yaml): {rest}");
        }
        e
    })?;
    if parsed.engine.is_some() {
        return Err(Error::refused("the new configuration names an engine")
            .hint("`engine:` belongs in a host's .circe/circe.yaml, not in the root's settings"));
    }
    crate::registry::Registry::from_config(&parsed.registry)?;
    // A folder root that lacks only circe's own folders (tmp/, locks/, queue/: they hold
    // nothing to keep) gets them again, once the new file passed: the file is written
    // through tmp/, and every command needs them.
    let made = match local::own_folders_missing(&ctx.root_spec()) {
        Some((root, which)) => {
            if let Some(chat) = parsed.chat.path.as_deref() {
                crate::chat::path_fits(&root, chat)?;
            }
            local::make_own_folders(&root, &which)?;
            which
        }
        None => Vec::new(),
    };
    let mut was_broken = false;
    match ctx.workspace_for_setup() {
        Ok(ws) => {
            if let (Some(root), Some(chat)) =
                (ws.engine.local_folder(), parsed.chat.path.as_deref())
            {
                crate::chat::path_fits(&root, chat)?;
            }
            ws.engine.set_config(&text)?;
        }
        // A root whose configuration keeps it from opening (it does not parse, or its
        // registry is refused) opens for nothing else: this is the way out, replaced whole.
        Err(e) => {
            match crate::engine::replace_broken_config(&ctx.root_spec(), &text, |t| {
                refusal(t).is_some()
            })? {
                Some(_) => was_broken = true,
                None => return Err(e),
            }
        }
    }
    let ws = ctx.workspace_for_setup()?;
    // Rules may name agents not added yet (a setup adds them next), so they are set; but
    // what every command will refuse until then is said now, not at the next command.
    let mut warnings = Vec::new();
    for e in crate::ops::rule_name_errors(&ws) {
        let hint = e.hint.map(|h| format!(" ({h})")).unwrap_or_default();
        warnings.push(format!(
            "{}{hint}; until then other commands refuse to run: add it (`circe agent add`) or set circe.yaml again",
            e.message
        ));
    }
    // A role taken out while agents have it: they can act no more.
    for e in ws.agents_with_unknown_role() {
        let hint = e.hint.map(|h| format!(" ({h})")).unwrap_or_default();
        warnings.push(format!("{}{hint}; every command acting as it refuses", e.message));
    }
    warnings.extend(inapplicable(&ws));
    let broken =
        if was_broken { " (the configuration there kept the root from opening)" } else { "" };
    let mut human = format!("configuration of {} replaced{broken}\n", ws.engine.location());
    if !made.is_empty() {
        human.push_str(&format!("boxes made again: {}\n", made.join(", ")));
    }
    Ok(Report::new(
        human,
        json!({"root": ws.engine.location(), "replaced": true, "broken": was_broken, "boxes_made": made, "warnings": warnings}),
    )
    .warnings(warnings))
}

/// The settings a database root's configuration sets that do not apply there: `durability`
/// other than `full` (the server keeps each commit durable) and `archive` (for folder
/// roots); `None` on a folder root, or when it sets neither.
fn inapplicable(ws: &crate::workspace::Workspace) -> Option<String> {
    if ws.engine.local_folder().is_some() {
        return None;
    }
    let c = &ws.config;
    let mut set = Vec::new();
    if c.durability != "full" {
        set.push(format!("`durability: {}` (the server keeps each commit durable)", c.durability));
    }
    if c.archive.after.is_some() || c.archive.keep.is_some() {
        set.push("`archive` (`circe archive` is for folder roots)".to_string());
    }
    (!set.is_empty()).then(|| {
        format!("on a database root {} does not apply; the rest is in force", set.join(" and "))
    })
}

/// Why the configuration `text` keeps a root from opening (it does not parse, names an
/// engine, or its registry is refused); `None` when it would open.
fn refusal(text: &str) -> Option<Error> {
    let parsed = match Config::parse(text) {
        Ok(c) => c,
        Err(e) => return Some(e),
    };
    if parsed.engine.is_some() {
        return Some(Error::refused(
            "it names an engine (`engine:` belongs only in a folder that points at a database)",
        ));
    }
    crate::registry::Registry::from_config(&parsed.registry).err()
}

/// `circe config` on a root that did not open: when what keeps it from opening is its
/// configuration, that configuration is printed as stored, for mending (`--set` replaces
/// it), with the reason as a warning; else the opening's error.
fn print_broken(ctx: &Ctx, e: Error) -> Result<Report> {
    // A file `config --set` does not replace (a folder pointing at a database, whose URL
    // may hold a password the opening never prints) keeps the opening's error: it names
    // the file and says it is mended by hand.
    let Ok(Some((text, true))) = crate::engine::stored_config(&ctx.root_spec()) else {
        return Err(e);
    };
    let Some(why) = refusal(&text) else {
        return Err(e);
    };
    let warning = format!(
        "this configuration keeps the root from opening ({}): mend it and replace it whole with `circe config --set FILE`",
        why.message.strip_prefix("circe.yaml: ").unwrap_or(&why.message)
    );
    Ok(Report::new(
        text.clone(),
        json!({"config": text, "broken": true, "warnings": [warning.clone()]}),
    )
    .warnings(vec![warning]))
}
