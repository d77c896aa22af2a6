//! `circe prime`: what an agent reads first, generated from the registry and the root: who
//! it is, what it may send and take, what waits for it, the work loop, the exit codes.

use std::collections::BTreeMap;

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::inbox::{Claimable, claimable_text};
use super::{Ctx, Report};
use crate::error::{Kind, Result};
use crate::names::AgentName;
use crate::registry::Roles;
use crate::workspace::Workspace;

/// Start here: who you are (agent, role), what you may send to whom and which tasks you may
/// take, what waits for you now (inbox, tasks you hold, tasks you may take, questions), the
/// work loop, how to wait for work, and the exit codes. Without an agent: the root's agents.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe --agent engineer prime\n  CIRCE_AGENT=qa circe prime --json"
)]
pub struct PrimeArgs {}

/// `circe prime --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrimeJson {
    /// null without an acting agent (then only `agents` is filled in).
    pub agent: Option<String>,
    pub role: Option<String>,
    pub root: String,
    pub agents: Vec<super::vocab::AgentRole>,
    /// What this agent may send: intent, the roles it may go to, whether it opens a task.
    pub may_send: Vec<MaySend>,
    /// Task intents this agent's role may take.
    pub may_take: Vec<String>,
    /// The new messages in this agent's INBOX (what `inbox` lists under `messages`, and
    /// `wait --for inbox` waits for); null without an acting agent.
    pub inbox_count: Option<usize>,
    /// The stale ones (`inbox`'s `stale`: numbered at or below what it saw of their sender,
    /// kept, not new); null without an acting agent.
    pub stale_count: Option<usize>,
    /// Tasks this agent holds now.
    pub held: Vec<Held>,
    pub claimable: Option<Claimable>,
    /// Questions waiting for this agent's answer; null without an acting agent, and when
    /// they cannot be counted (a box of the root cannot be read: `circe questions` says why).
    pub open_questions: Option<usize>,
    /// The prompt this agent works from (the last TX `prompt` it was sent); null when none.
    pub prompt: Option<PrimePrompt>,
    /// The default lease (circe.yaml `lease`).
    pub lease: String,
    /// The work loop, one command per step.
    pub steps: Vec<String>,
    /// A coordinator's (or rooster's) part, one command per line: open tasks, follow them,
    /// put parked ones back; empty for other roles.
    pub coordinating: Vec<String>,
    /// For a coordinator (or rooster): how many tasks are blocked, parked, failed and
    /// expired (each status with at least one); empty for other roles.
    pub attention: BTreeMap<String, usize>,
    /// For a coordinator (or rooster): how many orphans wait (what retired agents left,
    /// `circe orphans`); null for other roles, and when a retired agent's box cannot be
    /// read (`circe orphans` says why).
    pub orphan_count: Option<usize>,
    pub exit_codes: BTreeMap<String, String>,
}

#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrimePrompt {
    pub msg_id: Option<String>,
    /// Who set it (`system`, or a coordinator).
    pub from: Option<String>,
    pub set_at: Option<String>,
    pub text: String,
}

#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaySend {
    pub intent: String,
    /// The roles it may go to (all of them when `to_any`).
    pub to: Vec<String>,
    /// Any role may receive it, as `registry --json` says it.
    pub to_any: bool,
    pub opens_task: bool,
}

/// The line of `prime` for a task the agent holds: its lease, and its deadline (the hard
/// end: past it the task is expired by reap, whatever was done), each said when it ran out.
fn held_line(me: &AgentName, t: &Held, now: Option<chrono::DateTime<chrono::Utc>>) -> String {
    let passed = |at: Option<&str>| {
        at.and_then(crate::clock::parse).zip(now).is_some_and(|(end, now)| end <= now)
    };
    let lease = t.lease_expires_at.as_deref().unwrap_or("-");
    let mut h = format!("  you hold {} ({}, lease until {lease}", t.task_id, t.status);
    if let Some(d) = &t.deadline {
        h.push_str(&format!(", deadline {d}"));
    }
    h.push(')');
    if passed(t.deadline.as_deref()) {
        h.push_str(&format!(
            ": its deadline passed, so it can no longer be completed and `circe reap` expires it; tell the coordinator what you have: `circe --agent {me} send --to role:coordinator --intent status_update --summary \"{}: ...\"`",
            t.task_id
        ));
    } else if passed(t.lease_expires_at.as_deref()) {
        h.push_str(&format!(
            ": it ran out; another agent may take it over: `circe --agent {me} heartbeat {}` renews it",
            t.task_id
        ));
    } else if t.deadline.is_some() {
        h.push_str(": finish it before its deadline (past it, it can no longer be completed)");
    }
    h.push('\n');
    h
}

#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Held {
    pub task_id: String,
    #[schemars(with = "super::schema_defs::StatusDef")]
    pub status: String,
    pub lease_expires_at: Option<String>,
    /// Past it the task can no longer be completed, and `circe reap` expires it.
    pub deadline: Option<String>,
}

const EXIT_CODES: [(&str, &str); 8] = [
    ("0", "ok"),
    ("1", "internal or I/O error"),
    ("2", "usage (bad flags, no root, no agent)"),
    ("3", "refused by a rule (registry, lifecycle, checks)"),
    ("4", "conflict (another agent holds it; stale epoch)"),
    ("5", "not found"),
    ("6", "nothing to claim"),
    ("7", "timed out (circe wait)"),
];

fn steps(me: &AgentName, ws: &Workspace, role: &str) -> Vec<String> {
    let reg = &ws.registry;
    // The reference flow's hand-ons first (engineer -> qa, scribe -> eagle), then any
    // task intent this role may send to another role.
    let hand_on =
        task_to_another_role(reg, role, &["test", "review_code", "audit", "document"], true);
    let report = report(reg, role);
    let a = format!("circe --agent {me}");
    let mut s = vec![
        format!("{a} claim --next --dry-run      # look first: what would I get?"),
        format!("{a} claim --next                # or: claim TASK"),
        format!("{a} status TASK in_progress"),
        format!("{a} take TASK                   # its message: INBOX -> WORKSPACE"),
        format!(
            "{a} heartbeat TASK              # before the lease ({}) runs out, blocked too",
            ws.config.lease
        ),
    ];
    // A check circe.yaml declares is run as the completion refusal says it (`--run NAME`
    // alone: any other form is refused); the `-- CMD` form only for checks it does not.
    let (declared, undeclared) = check_forms(ws, role);
    for c in &declared {
        s.push(format!(
            "{}   # when the task has it",
            crate::ops::run_check_hint(ws, me, "TASK", c)
        ));
    }
    if undeclared {
        let other = if declared.is_empty() { "" } else { "other " };
        s.push(format!(
            "{a} check TASK --run NAME -- CMD   # each {other}check its completion needs (`circe show TASK`)"
        ));
    }
    let handing_on = hand_on.is_some();
    if let Some((intent, to)) = hand_on {
        s.push(format!(
            "{a} send --to role:{to} --intent {intent} --task TASK --summary \"...\"   # hand it on"
        ));
    }
    if let Some((intent, to)) = report {
        let or = if handing_on { "or " } else { "" };
        s.push(format!(
            "{a} send --to role:{to} --intent {intent} --task TASK --summary \"...\"   # {or}report the result, as the task asks"
        ));
    }
    s.push(format!("{a} status TASK completed        # or: finish it yourself"));
    s.push(format!("{a} done TASK                    # file its messages into LOGS"));
    s
}

/// The checks circe.yaml declares that the tasks `role` may take can have (sorted), and
/// whether those tasks can have a check it does not declare. A role that takes no task
/// intent may still meet any check: every declared one, and undeclared ones.
fn check_forms(ws: &Workspace, role: &str) -> (Vec<String>, bool) {
    let reg = &ws.registry;
    let possible: std::collections::BTreeSet<&str> = reg
        .intents
        .values()
        .filter(|i| i.opens_task && reg.may_receive(role, &i.name))
        .flat_map(|i| i.required_checks.iter().map(String::as_str))
        .collect();
    if possible.is_empty() {
        return (ws.config.checks.keys().cloned().collect(), true);
    }
    let declared: Vec<String> = possible
        .iter()
        .filter(|c| crate::ops::declared_check(ws, c))
        .map(|c| (*c).to_string())
        .collect();
    let undeclared = possible.len() > declared.len();
    (declared, undeclared)
}

/// The reply the tasks `role` takes ask for (`test` asks `test_results`, `audit` an
/// `audit_report`), when it is a message this role may send to a role: (intent, role).
fn report(reg: &crate::registry::Registry, role: &str) -> Option<(String, String)> {
    reg.intents
        .values()
        .filter(|i| i.opens_task && reg.may_receive(role, &i.name))
        .filter_map(|i| reg.intent(i.expects_reply.as_deref()?))
        .filter(|r| !r.opens_task && reg.may_send(role, &r.name))
        .find_map(|r| match &r.to {
            Roles::Only(s) => s.iter().find(|t| *t != role).map(|t| (r.name.clone(), t.clone())),
            Roles::Any => None,
        })
}

/// A task intent `role` may send to another role, and that role: the `preferred` intents
/// first, then any. `by_name`: only an intent the registry lets this role send by name,
/// not one any role may send (the reference flow's hand-ons: engineer -> qa, scribe ->
/// eagle; a qa's result is never turned into a scribe's task).
fn task_to_another_role(
    reg: &crate::registry::Registry,
    role: &str,
    preferred: &[&str],
    by_name: bool,
) -> Option<(String, String)> {
    let named = |i: &crate::registry::Intent| {
        !by_name || matches!(&i.from, Roles::Only(f) if f.iter().any(|r| r == role))
    };
    preferred
        .iter()
        .filter_map(|n| reg.intent(n))
        .chain(reg.intents.values())
        .filter(|i| i.opens_task && reg.may_send(role, &i.name) && named(i))
        .find_map(|i| match &i.to {
            Roles::Only(s) => s.iter().find(|r| *r != role).map(|r| (i.name.clone(), r.clone())),
            Roles::Any => None,
        })
}

/// What a coordinator does beside the work loop: open tasks, follow their fate, answer,
/// put parked tasks back, and what cron runs.
fn coordinating(me: &AgentName, ws: &Workspace, role: &str) -> Vec<String> {
    if !ws.is_coordinator(me) {
        return Vec::new();
    }
    let open = task_to_another_role(&ws.registry, role, &["implement_feature", "fix_bug"], false);
    let a = format!("circe --agent {me}");
    let mut s = Vec::new();
    if let Some((intent, to)) = open {
        s.push(format!(
            "{a} send --to role:{to} --intent {intent} --task T-1 --summary \"...\" --deadline 2d   # open a task"
        ));
    }
    s.extend([
        format!("{a} watch                       # your tasks' fate as it happens: claims, completions, hand-ons"),
        format!("{a} wait --for status:T-1=completed   # or block on one"),
        "circe tasks                      # the board (`circe board`: live, for a person)".to_string(),
        format!("{a} questions                   # what agents ask you (`circe asks`: every ask)"),
        format!("{a} release --force TASK        # a parked task back to the queue (its lease ran out {} times)", ws.config.max_attempts),
    ]);
    // A database root keeps no archive: its cron runs reap alone.
    s.push(if ws.engine.keeps_archive() {
        "circe reap; circe archive         # from cron (`circe help protocols`: the archive)"
            .to_string()
    } else {
        "circe reap                        # from cron".to_string()
    });
    s
}

#[expect(clippy::too_many_lines, reason = "one document, written top to bottom")]
pub fn run(ctx: &Ctx, _a: &PrimeArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    let agents: Vec<super::vocab::AgentRole> = ws
        .agents()
        .iter()
        .map(|(a, r)| super::vocab::AgentRole {
            agent: a.to_string(),
            role: r.clone(),
            retired: ws.is_retired(a),
        })
        .collect();
    let root = ws.engine.location();
    let exit_codes: BTreeMap<String, String> =
        EXIT_CODES.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect();
    let codes_line =
        EXIT_CODES.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(" · ");
    if ctx.agent.is_none() {
        let mut human = format!("circe root: {root}\nagents (name, role):\n");
        for a in &agents {
            human.push_str(&format!("  {:<16} {}\n", a.agent, a.role));
        }
        human.push_str("\nact as one: circe --agent NAME prime (or set CIRCE_AGENT=NAME)\n");
        human.push_str("add one:    circe agent add NAME --role ROLE\n");
        let out = PrimeJson {
            agent: None,
            role: None,
            root,
            agents,
            may_send: Vec::new(),
            may_take: Vec::new(),
            inbox_count: None,
            stale_count: None,
            held: Vec::new(),
            claimable: None,
            open_questions: None,
            prompt: None,
            lease: ws.config.lease.clone(),
            steps: Vec::new(),
            coordinating: Vec::new(),
            attention: BTreeMap::new(),
            orphan_count: None,
            exit_codes,
        };
        return Ok(Report::new(human, out));
    }
    let (me, role) = ctx.acting_agent(&ws)?;
    let reg = &ws.registry;
    let roles: Vec<String> = reg.roles.iter().cloned().collect();
    let may_send: Vec<MaySend> = reg
        .intents
        .values()
        .filter(|i| reg.may_send(&role, &i.name))
        .map(|i| {
            let (to, to_any) = super::registry::listed(&i.to, &roles);
            MaySend { intent: i.name.clone(), to, to_any, opens_task: i.opens_task }
        })
        .collect();
    let may_take: Vec<String> = reg
        .intents
        .values()
        .filter(|i| i.opens_task && reg.may_receive(&role, &i.name))
        .map(|i| i.name.clone())
        .collect();
    // New and stale as `inbox` sorts them: a stale message wakes no `wait`.
    // Its INBOX's gists, taken once: they count it and tell whether it holds a question.
    let gists = crate::ops::seq::inbox_gists(&ws, &me)?;
    let (inbox_count, stale_count) = crate::ops::seq::counts_of(&ws, &me, &gists)?;
    let mut held = Vec::new();
    let coordinator = ws.is_coordinator(&me);
    let mut attention: BTreeMap<String, usize> = BTreeMap::new();
    // The root's clock, read once: a coordinator's counts need it, as do held tasks' lines.
    let coordinator_now = if coordinator { Some(ws.root_now()?) } else { None };
    let day_ago = coordinator_now.map(|t| t - chrono::Duration::days(1));
    // A coordinator's orphans: the waiting tasks addressed to a retired agent, counted in
    // the board's one pass, and the messages in retired agents' boxes (only those are read;
    // none at all while no agent is retired).
    let retired = if coordinator { ws.engine.retired().ok() } else { Some(Vec::new()) };
    let mut orphan_tasks = 0;
    // One pass over the board: the claimable tasks, and what this agent holds or a
    // coordinator should look at.
    let claim = super::inbox::claimable_and(&ws, &me, &role, 3, &mut |r| {
        let any_retired = retired.as_ref().is_some_and(|a| !a.is_empty());
        if any_retired && crate::ops::orphans::orphan_task(&ws, r)?.is_some() {
            orphan_tasks += 1;
        }
        let watched = matches!(
            r.status,
            crate::task::Status::Blocked
                | crate::task::Status::Parked
                | crate::task::Status::Failed
                | crate::task::Status::Expired
        );
        // A failure or an expiry of the last day: older ones were seen, and wait for the
        // archive.
        let ended = matches!(r.status, crate::task::Status::Failed | crate::task::Status::Expired);
        let recent =
            !ended || crate::clock::parse(&r.updated_at).zip(day_ago).is_some_and(|(t, d)| t > d);
        if coordinator && watched && recent {
            *attention.entry(r.status.as_str().to_string()).or_default() += 1;
        }
        if r.owner.as_deref() == Some(me.as_str()) && r.status.is_owned() {
            held.push(Held {
                task_id: r.task.to_string(),
                status: r.status.as_str().to_string(),
                lease_expires_at: r.lease_expires_at.as_deref().map(str::to_string),
                deadline: r.deadline.as_deref().map(str::to_string),
            });
        }
        Ok(())
    })?;
    let orphan_count = coordinator
        .then(|| {
            let messages =
                crate::ops::orphans::orphan_message_count(&ws, retired.as_deref()?).ok()?;
            Some(messages + orphan_tasks)
        })
        .flatten();
    // Counted over every box: one that cannot be read (another agent's, behind a link)
    // leaves the count unknown, not this agent without its start.
    let open_questions = match crate::ops::questions::open_to(&ws, &me, &gists) {
        Ok(n) => Some(n),
        Err(e) if e.kind == Kind::NotFound => Some(0),
        Err(_) => None,
    };
    let steps = steps(&me, &ws, &role);
    let prompt = crate::ops::current_prompt(&ws, &me)?.map(|p| PrimePrompt {
        msg_id: p.msg_id,
        from: p.from,
        set_at: p.set_at,
        text: p.text,
    });

    let mut h = format!("You are {me} (role {role}) in the circe root {root}.\n\n");
    if let Some(p) = &prompt {
        h.push_str(&format!(
            "Your prompt (from {}, {}):\n",
            p.from.as_deref().unwrap_or("-"),
            p.set_at.as_deref().unwrap_or("-")
        ));
        for l in p.text.trim().lines() {
            h.push_str(&format!("  {l}\n"));
        }
        h.push('\n');
    }
    let (tasks, talk): (Vec<&MaySend>, Vec<&MaySend>) = may_send.iter().partition(|m| m.opens_task);
    h.push_str("You may open tasks: ");
    h.push_str(&list(&tasks));
    h.push_str("\nYou may send: ");
    h.push_str(&list(&talk));
    h.push_str(&format!(
        "\nYou may take tasks of intent: {}\nAddress a role as role:NAME (every agent of it), one agent as agent:NAME, everyone as all.\n\n",
        if may_take.is_empty() { "none".to_string() } else { may_take.join(", ") }
    ));
    h.push_str(&format!(
        "Now:\n  inbox: {inbox_count} message{}{} (circe --agent {me} inbox)\n",
        plural(inbox_count),
        if stale_count == 0 { String::new() } else { format!(", {stale_count} stale") }
    ));
    let now = match coordinator_now {
        Some(t) => Some(t),
        None if !held.is_empty() => Some(ws.root_now()?),
        None => None,
    };
    for t in &held {
        h.push_str(&held_line(&me, t, now));
    }
    if !attention.is_empty() {
        let counts: Vec<String> = attention.iter().map(|(s, n)| format!("{n} {s}")).collect();
        let first = attention.keys().next().map_or("blocked", String::as_str);
        h.push_str(&format!(
            "  tasks for a coordinator to look at: {} (circe tasks --status {first}; each with `circe show TASK`)\n",
            counts.join(", ")
        ));
    }
    match (coordinator, orphan_count) {
        (true, Some(0)) | (false, _) => {}
        (true, Some(n)) => h.push_str(&format!(
            "  {} left by retired agents, for a coordinator to hand on (circe orphans; circe --agent {me} orphans redeliver KEY --to AGENT)\n",
            crate::ops::orphans::counted(n, "orphan", "orphans")
        )),
        (true, None) => h.push_str("  orphans: unknown (circe orphans says why)\n"),
    }
    match open_questions {
        Some(n) if n > 0 => h.push_str(&format!(
            "  {n} question{} waiting for your answer (circe --agent {me} questions)\n",
            plural(n)
        )),
        Some(_) => {}
        None => h.push_str(&format!(
            "  questions waiting for your answer: unknown (circe --agent {me} questions says why)\n"
        )),
    }
    for l in claimable_text(&me, &claim).lines() {
        h.push_str(&format!("  {l}\n"));
    }
    h.push_str("\nThe work loop:\n");
    for (i, s) in steps.iter().enumerate() {
        h.push_str(&format!("  {}. {s}\n", i + 1));
    }
    let coordinating = coordinating(&me, &ws, &role);
    if !coordinating.is_empty() {
        h.push_str("\nCoordinating:\n");
        for s in &coordinating {
            h.push_str(&format!("  {s}\n"));
        }
    }
    h.push_str(&format!(
        "\nWaiting for work: circe --agent {me} wait --for claimable (exit 7 on timeout), or run `circe --agent {me} inbox` now and then.\n\
         Questions: circe --agent {me} questions; answer with send --intent answer --in-reply-to MSG_ID (an ask: --intent ask-response).\n\
         Exit codes: {codes_line}.\n\
         More: circe help COMMAND · circe help protocols · circe schema COMMAND (the --json shapes).\n"
    ));
    let out = PrimeJson {
        agent: Some(me.to_string()),
        role: Some(role),
        root,
        agents,
        may_send,
        may_take,
        inbox_count: Some(inbox_count),
        stale_count: Some(stale_count),
        held,
        claimable: Some(claim),
        open_questions,
        prompt,
        lease: ws.config.lease.clone(),
        steps,
        coordinating,
        attention,
        orphan_count,
        exit_codes,
    };
    Ok(Report::new(h, out).warnings(super::passed_over_warnings(&ws)))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `intent (to a, b)` items, comma separated, grouping intents that go to the same roles.
fn list(items: &[&MaySend]) -> String {
    if items.is_empty() {
        return "none".to_string();
    }
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for m in items {
        let to = if m.to_any { "any".to_string() } else { m.to.join("|") };
        match groups.iter_mut().find(|(t, _)| *t == to) {
            Some((_, v)) => v.push(&m.intent),
            None => groups.push((to, vec![&m.intent])),
        }
    }
    groups
        .iter()
        .map(|(to, v)| format!("{} (to {to})", v.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}
