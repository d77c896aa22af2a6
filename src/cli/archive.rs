//! `circe archive` (run, search, restore, verify).

use std::io::IsTerminal;

use super::archive_json::{
    ArchiveHitJson, ArchiveJson, ArchiveRestoreJson, ArchiveSearchJson, ArchiveVerifyJson,
    BadSegmentJson,
};
use super::{Ctx, Report};
use crate::archive::query::Query;
use crate::archive::{Phase, Progress};
use crate::error::{Error, Result};
use crate::ops::archive::Options;
use clap::{Args, Subcommand};

/// Move finished work out of the hot folders into ARCHIVE/, for cron: tasks completed,
/// failed or expired more than `archive.after` ago (default 7d) with their messages, records and
/// events; messages in LOGS that no task still here names; old event-log segments no cursor
/// needs; old chat archives. Each period's segments are tar + zstd (`tar --zstd -xf` reads
/// them), with an index, and a summary per task in ARCHIVE/<period>/summaries/.
///
/// One run at a time: a second exits 4 at once naming the holder (or waits with --wait).
/// Safe to kill at any point: the next run (or `doctor --repair`) finishes or undoes it.
/// Silent unless stdout is a terminal, --verbose or --json (cron mails only errors).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe archive --dry-run               # what would move\n  circe archive                         # under cron: silent unless it fails\n  circe archive --older-than 30d --wait"
)]
pub struct ArchiveArgs {
    #[command(subcommand)]
    pub sub: Option<ArchiveSub>,
    /// Take what finished more than this long ago (1s to 365d), instead of `archive.after`.
    #[arg(long, value_name = "AGE")]
    pub older_than: Option<String>,
    /// Say what would move (counts and bytes); change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Wait for a running archive to finish instead of exiting 4.
    #[arg(long)]
    pub wait: bool,
    /// Print the summary even when stdout is not a terminal.
    #[arg(long, short)]
    pub verbose: bool,
}

#[derive(Debug, Subcommand)]
pub enum ArchiveSub {
    Search(SearchArgs),
    Restore(RestoreArgs),
    Verify(VerifyArgs),
}

/// Find archived messages and tasks by id (task id, msg_id or a prefix of 8+ characters,
/// file name), by date (`--date 2026-11` or `2026-11-21`), or by words (`--text`; with
/// `--in-files` inside the archived files themselves).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe archive search AUTH-012\n  circe archive search --date 2026-11\n  circe archive search --text jwt --in-files"
)]
pub struct SearchArgs {
    /// A task id, message id or file name.
    pub id: Option<String>,
    /// A month (`2026-11`) or a day (`2026-11-21`).
    #[arg(long, value_parser = month_or_day)]
    pub date: Option<String>,
    /// Words to look for in ids, names and summaries.
    #[arg(long)]
    pub text: Option<String>,
    /// Look for --text inside the archived files (reads the segments).
    #[arg(long)]
    pub in_files: bool,
    /// At most this many results (1 or more); how many more there are is said on stderr
    /// (and as `hit_count`, `truncated` in --json).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: u32,
}

/// `--date`: `YYYY-MM` or `YYYY-MM-DD`, a real month or day.
fn month_or_day(s: &str) -> std::result::Result<String, String> {
    let day = if s.len() == 7 { format!("{s}-01") } else { s.to_string() };
    match chrono::NaiveDate::parse_from_str(&day, "%Y-%m-%d") {
        Ok(_) if s.len() == 7 || s.len() == 10 => Ok(s.to_string()),
        _ => Err(format!("`{s}` is no month (YYYY-MM) or day (YYYY-MM-DD)")),
    }
}

/// Write an archived task's files back, byte for byte, under DIR (TASKS/<id>.status,
/// LOGS/<message>.md, ... as they lay in the root). Never replaces a file.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  circe archive restore AUTH-012 --to /tmp/auth-012")]
pub struct RestoreArgs {
    /// The archived task's id.
    pub task: String,
    /// The folder to write into (made if missing; an existing file is never replaced).
    #[arg(long, value_name = "DIR")]
    pub to: std::path::PathBuf,
}

/// Read every archived segment back and check each member against its checksum.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  circe archive verify")]
pub struct VerifyArgs {}

pub fn run(ctx: &Ctx, a: &ArchiveArgs) -> Result<Report> {
    // The run's own flags do not go with a subcommand (the global ones, `--json`, `--root`,
    // `--agent`, may stand anywhere).
    if a.sub.is_some() && (a.older_than.is_some() || a.dry_run || a.wait || a.verbose) {
        return Err(Error::usage(
            "--older-than, --dry-run, --wait and --verbose belong to `circe archive` itself, not to its search, restore or verify",
        )
        .hint("run `circe archive [FLAGS]` and `circe archive SUBCOMMAND` apart"));
    }
    match &a.sub {
        Some(ArchiveSub::Search(s)) => search(ctx, s),
        Some(ArchiveSub::Restore(r)) => restore(ctx, r),
        Some(ArchiveSub::Verify(_)) => verify(ctx),
        None => archive(ctx, a),
    }
}

fn archive(ctx: &Ctx, a: &ArchiveArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    let older_than = a
        .older_than
        .as_deref()
        .map(|s| {
            crate::config::parse_duration(s).map_err(|e| {
                Error::usage(format!("--older-than: {}", e.message)).hint("e.g. --older-than 30d")
            })
        })
        .transpose()?;
    let o = Options { older_than, dry_run: a.dry_run, wait: a.wait };
    let bar = (std::io::stderr().is_terminal() && !ctx.json).then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template("{msg:>20} [{bar:30}] {pos}/{len} (ETA {eta})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let mut phase = None;
    let mut progress = |p: Progress| {
        let Some(b) = &bar else { return };
        if phase != Some(p.phase) {
            phase = Some(p.phase);
            b.reset();
            b.set_message(p.phase.as_str());
        }
        b.set_length(p.total.max(p.done));
        b.set_position(p.done);
        if p.phase == Phase::Remove && p.total == 0 {
            b.set_length(p.done);
        }
    };
    let r = crate::ops::archive::run(&ws, &o, &mut progress);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let r = r?;
    let mut human = String::new();
    if std::io::stdout().is_terminal() || a.verbose || a.dry_run {
        let verb = if r.dry_run { "would archive" } else { "archived" };
        human = format!(
            "{verb} {} task(s), {} message(s), {} record(s), {} log segment(s) ({} events), {} chat file(s): {} bytes{}\n",
            r.tasks,
            r.messages,
            r.records,
            r.log_segments,
            r.events,
            r.chat_files,
            r.bytes,
            if r.dry_run { String::new() } else { format!(" into {} bytes", r.archived_bytes) }
        );
        for s in &r.segments {
            human.push_str(&format!("  ARCHIVE/{s}\n"));
        }
        for x in r
            .recovered
            .iter()
            .chain(&r.expired.iter().map(|e| format!("expired ARCHIVE/{e}")).collect::<Vec<_>>())
        {
            human.push_str(&format!("  {x}\n"));
        }
        if !r.kept.is_empty() {
            human.push_str(&format!("  kept (changed while archived): {}\n", r.kept.join(", ")));
        }
    }
    Ok(Report::new(human, ArchiveJson::from(r)))
}

fn search(ctx: &Ctx, s: &SearchArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    if s.id.is_none() && s.date.is_none() && s.text.is_none() {
        return Err(Error::usage("say what to look for")
            .hint("give an id, --date YYYY-MM[-DD] or --text WORDS"));
    }
    let q =
        Query { id: s.id.clone(), date: s.date.clone(), text: s.text.clone(), in_text: s.in_files };
    // The hits past --limit are counted, not kept: the output says how many more there are
    // and how to see them.
    let mut hits = Vec::new();
    let mut hit_count = 0usize;
    let passed_over = ws.engine.archive_search(&q, &mut |h| {
        hit_count += 1;
        if hits.len() < s.limit as usize {
            hits.push(h);
        }
        Ok(true)
    })?;
    let mut human = String::new();
    for h in &hits {
        let e = &h.entry;
        human.push_str(&format!(
            "{}/{}  {}  {}  {}  {}\n",
            h.period,
            h.segment,
            e.task.as_deref().unwrap_or("-"),
            e.origin.as_deref().unwrap_or(&e.member),
            e.created_at.as_deref().unwrap_or("-"),
            h.line.as_deref().or(e.summary.as_deref()).unwrap_or("")
        ));
    }
    if hits.is_empty() && passed_over.is_empty() {
        // Never the search just made again: another way to look, or why nothing is there.
        // `--text` alone matches the member lists' fields (ids, names, senders, intents,
        // summary lines), never what an archived chat line or a message's body says.
        let hint = match (s.text.is_some(), s.in_files, s.date.is_some()) {
            (true, false, _) => {
                "`--text` looks only in ids, file names, senders, recipients, intents and summary lines: add `--in-files` to look inside the archived files (chat lines, message bodies); `circe archive --dry-run` says what the next run would take"
            }
            (true, true, _) => {
                "`circe archive search --date YYYY-MM` lists a month; `circe archive --dry-run` says what the next run would take"
            }
            (false, _, true) => {
                "`circe archive search --text WORDS --in-files` looks inside the files of every segment; `circe archive --dry-run` says what the next run would take"
            }
            (false, _, false) => {
                "`circe archive search --date YYYY-MM` lists a month, `--text WORDS --in-files` looks inside the files of every segment; `circe archive --dry-run` says what the next run would take"
            }
        };
        return Err(Error::not_found("nothing in the archive matches").hint(hint));
    }
    if hits.is_empty() {
        return Err(Error::not_found(format!(
            "nothing in the archive matches, but {} segment(s) could not be read: {}",
            passed_over.len(),
            passed_over.join("; ")
        ))
        .hint("what you look for may lie there: `circe archive verify` checks every segment"));
    }
    let mut warnings: Vec<String> = passed_over
        .iter()
        .map(|p| format!("{p} (passed over; `circe archive verify` checks every segment)"))
        .collect();
    let truncated = hit_count > hits.len();
    if truncated {
        warnings.push(format!(
            "{} more hit(s) not shown: the first {} of {hit_count} are listed; `--limit {hit_count}` lists them all",
            hit_count - hits.len(),
            hits.len()
        ));
    }
    let hits = hits.into_iter().map(ArchiveHitJson::from).collect();
    Ok(Report::new(human, ArchiveSearchJson { hits, hit_count, truncated, passed_over })
        .warnings(warnings))
}

fn restore(ctx: &Ctx, r: &RestoreArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    let task = super::task_id(&r.task)?;
    let Some(b) = ws.engine.archived_bundle(&task)? else {
        return Err(Error::not_found(format!("task {task} is not in the archive")).hint(
            "`circe archive search --text WORDS` (or `--date YYYY-MM`) finds archived work",
        ));
    };
    // Not into the root itself: the task would be back on the board beside its tombstone.
    let inside = |root: &std::path::Path| {
        let to = super::resolved(&r.to);
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        to.starts_with(&root)
    };
    if ws.engine.local_folder().is_some_and(|root| inside(&root)) {
        return Err(Error::refused(format!(
            "{} is this root's own folder: a restored task would be back beside its tombstone",
            r.to.display()
        ))
        .hint(format!(
            "restore into another folder to read it; to take the work up again, open a new task (its id {task} stays archived)"
        )));
    }
    let written = crate::engine::local::write_restored(&r.to, &b.files, b.manifest.as_ref())?;
    let human: String = written.iter().map(|p| format!("{p}\n")).collect();
    let bundle = b.tombstone.members();
    Ok(Report::new(human, ArchiveRestoreJson { task_id: task.to_string(), written, bundle }))
}

fn verify(ctx: &Ctx) -> Result<Report> {
    let ws = ctx.workspace()?;
    let all = ws.engine.archive_verify()?;
    let bad: Vec<_> = all.iter().filter(|(_, e)| e.is_some()).collect();
    let mut human = String::new();
    for (s, e) in &all {
        human.push_str(&format!("{}  ARCHIVE/{s}\n", e.as_deref().unwrap_or("ok")));
    }
    let doc = ArchiveVerifyJson {
        segment_count: all.len(),
        bad: bad
            .iter()
            .map(|(s, e)| BadSegmentJson {
                segment: s.clone(),
                problem: e.clone().unwrap_or_default(),
            })
            .collect(),
    };
    if bad.is_empty() {
        Ok(Report::new(human, doc))
    } else if ctx.json {
        Ok(Report::new(human, doc).code(crate::exit_code::INTERNAL))
    } else {
        Err(Error::internal(format!(
            "{} archive segment(s) do not verify:\n{}",
            bad.len(),
            human.trim_end()
        )))
    }
}
