//! The full-screen board (ratatui over crossterm: the only code that uses them). One loop:
//! draw, take a key if one is waiting, else wait on the event feed for up to 100 ms; a wake
//! reads the new events and re-reads only what they name (`Model::follow`), and every 5 s
//! the held tasks' leases, which a heartbeat moves without an event (`Model::leases`).

use std::time::Duration;

use ratatui::crossterm::event::{self, Event as TermEvent, KeyCode, KeyEventKind};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row as TRow, Table, TableState};
use ratatui::{DefaultTerminal, Frame};

use super::model::{Model, event_line};
use crate::cli::Ctx;
use crate::cli::tasks::{DUE, cells_with_due};
use crate::error::{Error, Result};
use crate::names::TaskId;
use crate::task::Status;
use crate::task::lifecycle::ALL_STATUSES;
use crate::workspace::Workspace;

/// What the screen is doing.
struct View {
    filter: String,
    typing: bool,
    status: Option<Status>,
    table: TableState,
}

#[expect(clippy::needless_pass_by_value, reason = "used as map_err(term_err)")]
fn term_err(e: std::io::Error) -> Error {
    Error::internal(format!("terminal: {e}"))
}

pub fn run(ctx: &Ctx, ws: Workspace, model: Model) -> Result<()> {
    // SIGTERM or SIGHUP ends the board as `q` does: the terminal is given back as it was
    // (its default action would leave it raw, on the alternate screen).
    let stop = crate::cli::stop::Stop::install()?;
    // A warning said meanwhile would be drawn over: it is said once the screen is back.
    let _held = crate::error::hold_warnings();
    let mut terminal = ratatui::try_init().map_err(term_err)?;
    let r = sessions(ctx, ws, model, &mut terminal, &stop);
    ratatui::try_restore().map_err(term_err)?;
    r
}

/// The board connected, then (when the connection breaks: the server restarting, the
/// network) shown as it was last read, marked so, while the root is opened again; once it
/// is back, read whole again. Only `q` or an error that will not pass by itself ends it.
fn sessions(
    ctx: &Ctx,
    mut ws: Workspace,
    mut model: Model,
    terminal: &mut DefaultTerminal,
    stop: &crate::cli::stop::Stop,
) -> Result<()> {
    let mut view =
        View { filter: String::new(), typing: false, status: None, table: TableState::default() };
    view.table.select(Some(0));
    let mut view = Wrap { v: view, open: None };
    loop {
        let lost = match connected(&ws, &mut model, &mut view, terminal, stop) {
            Ok(()) => return Ok(()),
            Err(e) if e.is_transient() => e,
            Err(e) => return Err(e),
        };
        match offline(ctx, &ws, &model, &mut view, terminal, &lost, stop)? {
            Some((w, m)) => (ws, model) = (w, m),
            None => return Ok(()),
        }
    }
}

/// While the root cannot be reached: the board as last read, a key still answered, the root
/// opened again every 250 ms at first and at most every 5 s. `None`: `q` was pressed.
fn offline(
    ctx: &Ctx,
    ws: &Workspace,
    model: &Model,
    view: &mut Wrap,
    terminal: &mut DefaultTerminal,
    lost: &Error,
    stop: &crate::cli::stop::Stop,
) -> Result<Option<(Workspace, Model)>> {
    let since = chrono::Utc::now().format("%H:%M:%S UTC");
    let mut backoff = crate::cli::Backoff::default();
    let mut next = std::time::Instant::now() + backoff.pause();
    let mut why = lost.message.clone();
    // Drawn on a key or a new reason, else once a second (as the connected board).
    let (mut changed, mut drawn) = (true, std::time::Instant::now());
    loop {
        if stop.requested() {
            return Ok(None);
        }
        if changed || drawn.elapsed() >= Duration::from_secs(1) {
            let banner = format!("NOT CONNECTED since {since}: {why}; connecting again (q quits)");
            terminal.draw(|f| draw(f, ws, model, view, Some(&banner))).map_err(term_err)?;
            (changed, drawn) = (false, std::time::Instant::now());
        }
        if event::poll(Duration::from_millis(100)).map_err(term_err)? {
            if let TermEvent::Key(k) = event::read().map_err(term_err)?
                && k.kind == KeyEventKind::Press
                && !key(view, model, k.code)
            {
                return Ok(None);
            }
            changed = true;
            continue;
        }
        if std::time::Instant::now() < next {
            continue;
        }
        let back = ctx.workspace().and_then(|w| Model::load(&w).map(|m| (w, m)));
        match back {
            Ok(b) => return Ok(Some(b)),
            Err(e) if e.is_transient() => {
                changed |= why != e.message;
                why = e.message;
            }
            Err(e) => return Err(e),
        }
        next = std::time::Instant::now() + backoff.pause();
    }
}

/// The board while its root answers. `Ok`: `q` was pressed.
fn connected(
    ws: &Workspace,
    model: &mut Model,
    view: &mut Wrap,
    terminal: &mut DefaultTerminal,
    stop: &crate::cli::stop::Stop,
) -> Result<()> {
    // The board has no `--poll`: a watcher that cannot start says what it can do instead.
    let mut feed = ws.engine.subscribe(None).map_err(|e| match e.hint {
        Some(ref h) if h.contains("--poll") => {
            let first =
                h.split(", or pass --poll").next().filter(|p| !p.starts_with("pass --poll"));
            let h = first.unwrap_or("the file watcher cannot start here").to_string();
            e.hint(format!("{h}; `circe board --once` prints the board without watching"))
        }
        _ => e,
    })?;
    // Subscribed first, then read: nothing appended meanwhile is missed.
    model.follow(ws)?;
    // Heartbeats log no event: the held tasks' leases are read again this often.
    let every = Duration::from_secs(5);
    let mut leases_read = std::time::Instant::now();
    // Drawn when something changed (an event, a key, the terminal), else once a second
    // (ages and leases count on): an idle board at 10,000 tasks costs no third of a core.
    let mut drawn: Option<std::time::Instant> = None;
    let mut changed = true;
    loop {
        if stop.requested() {
            return Ok(());
        }
        if leases_read.elapsed() >= every {
            model.leases(ws)?;
            leases_read = std::time::Instant::now();
            changed = true;
        }
        if changed || drawn.is_none_or(|d| d.elapsed() >= Duration::from_secs(1)) {
            terminal.draw(|f| draw(f, ws, model, view, None)).map_err(term_err)?;
            drawn = Some(std::time::Instant::now());
            changed = false;
        }
        if event::poll(Duration::ZERO).map_err(term_err)? {
            if let TermEvent::Key(k) = event::read().map_err(term_err)?
                && k.kind == KeyEventKind::Press
                && !key(view, model, k.code)
            {
                return Ok(());
            }
            changed = true;
            continue;
        }
        if feed.wait(Some(Duration::from_millis(100)))? {
            model.follow(ws)?;
            changed = true;
        }
    }
}

/// The view and the task opened in it.
struct Wrap {
    v: View,
    open: Option<String>,
}

/// The tasks shown: the status chosen with `s`, and the `/` filter.
fn shown<'m>(model: &'m Model, v: &View) -> Vec<&'m crate::task::Row<'static>> {
    model
        .tasks
        .values()
        .filter(|r| v.status.is_none_or(|s| s == r.status))
        .filter(|r| {
            v.filter.is_empty()
                || [&*r.task, r.owner.as_deref().unwrap_or(""), &*r.intent, &*r.to]
                    .iter()
                    .any(|f| f.contains(v.filter.as_str()))
        })
        .collect()
}

/// Handle a key; `false` to quit.
fn key(w: &mut Wrap, model: &Model, code: KeyCode) -> bool {
    let v = &mut w.v;
    if v.typing {
        match code {
            KeyCode::Enter | KeyCode::Esc => v.typing = false,
            KeyCode::Backspace => {
                v.filter.pop();
            }
            KeyCode::Char(c) => v.filter.push(c),
            _ => {}
        }
        v.table.select(Some(0));
        return true;
    }
    let n = shown(model, v).len();
    match code {
        KeyCode::Char('q') => return false,
        KeyCode::Esc => w.open = None,
        KeyCode::Char('/') => {
            v.typing = true;
            v.filter.clear();
        }
        KeyCode::Char('s') => {
            v.status = match v.status {
                None => Some(ALL_STATUSES[0]),
                Some(s) => ALL_STATUSES
                    .iter()
                    .position(|x| *x == s)
                    .and_then(|i| ALL_STATUSES.get(i + 1))
                    .copied(),
            };
            v.table.select(Some(0));
        }
        KeyCode::Down | KeyCode::Char('j') => {
            let i = v.table.selected().unwrap_or(0);
            v.table.select(Some((i + 1).min(n.saturating_sub(1))));
        }
        KeyCode::Up | KeyCode::Char('k') => {
            let i = v.table.selected().unwrap_or(0);
            v.table.select(Some(i.saturating_sub(1)));
        }
        KeyCode::Enter => {
            let rows = shown(model, v);
            w.open = v.table.selected().and_then(|i| rows.get(i)).map(|r| r.task.to_string());
        }
        _ => {}
    }
    true
}

/// Draw the board; `lost`: the root cannot be reached (said in place of the title, and
/// an opened task is not read).
fn draw(f: &mut Frame, ws: &Workspace, model: &Model, w: &mut Wrap, lost: Option<&str>) {
    let [top, middle, bottom, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(6),
        Constraint::Length(10),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let v = &mut w.v;
    let rows = shown(model, v);
    let title = format!(
        "circe board  {}  {} tasks shown of {}  status: {}  filter: {}{}",
        ws.engine.location(),
        rows.len(),
        model.tasks.len(),
        v.status.map_or("all", Status::as_str),
        if v.filter.is_empty() && !v.typing { "-" } else { &v.filter },
        if v.typing { "_" } else { "" }
    );
    match lost {
        Some(l) => f.render_widget(
            Paragraph::new(format!("circe board  {}  {l}", ws.engine.location()))
                .style(Style::new().add_modifier(Modifier::REVERSED)),
            top,
        ),
        None => f.render_widget(Paragraph::new(title), top),
    }
    // STALE (the INBOX's stale messages, apart from the new ones) when an agent has one.
    let stale = super::any_stale(&model.agents);
    let [left, right] =
        Layout::horizontal([Constraint::Min(40), Constraint::Length(if stale { 40 } else { 34 })])
            .areas(middle);
    // DUE when a task on the board has a deadline, as `board --once` shows it.
    let due = model.tasks.values().any(|r| r.deadline.is_some());
    match &w.open {
        Some(t) => detail(f, lost.is_none().then_some(ws), model, t, left),
        None => task_table(f, &rows, (model.now(), due), &mut v.table, left),
    }
    let agents: Vec<TRow> = model
        .agents
        .iter()
        .map(|a| {
            let mut cells = vec![
                Cell::from(a.agent.as_str()),
                Cell::from(a.role.as_str()),
                Cell::from(super::count(a.inbox_count)),
            ];
            if stale {
                cells.push(Cell::from(super::count(a.stale_count)));
            }
            let row = TRow::new(cells);
            // Retired: dimmed (the panel has no room for `board --once`'s "(retired)").
            if a.retired { row.style(Style::new().add_modifier(Modifier::DIM)) } else { row }
        })
        .collect();
    let mut widths = vec![Constraint::Min(12), Constraint::Length(11), Constraint::Length(5)];
    let mut header = vec!["AGENT", "ROLE", "INBOX"];
    if stale {
        widths.push(Constraint::Length(5));
        header.push("STALE");
    }
    let t = Table::new(agents, widths)
        .header(TRow::new(header).style(Style::new().add_modifier(Modifier::BOLD)))
        .block(Block::new().borders(Borders::ALL).title("agents"));
    f.render_widget(t, right);
    let shown_events = usize::from(bottom.height.saturating_sub(2));
    let lines: Vec<Line> = model
        .events
        .iter()
        .rev()
        .take(shown_events)
        .rev()
        .map(|e| Line::from(event_line(e)))
        .collect();
    f.render_widget(
        Paragraph::new(lines).block(Block::new().borders(Borders::ALL).title("latest events")),
        bottom,
    );
    let help = if v.typing {
        "type to filter · Enter/Esc done · Backspace"
    } else {
        "q quit · ↑↓/jk select · Enter open · Esc back · / filter · s status"
    };
    f.render_widget(Paragraph::new(help), keys);
}

/// The tasks shown; `due`: with the DUE column (time left before the deadline), as
/// `board --once` has it when a task on the board has a deadline.
fn task_table(
    f: &mut Frame,
    rows: &[&crate::task::Row<'static>],
    (now, due): (chrono::DateTime<chrono::Utc>, bool),
    state: &mut TableState,
    area: Rect,
) {
    let now = now.timestamp();
    let keep = |i: usize| due || i != DUE;
    let body: Vec<TRow> = rows
        .iter()
        .map(|r| {
            let cells = cells_with_due(r, now).into_iter().enumerate();
            TRow::new(
                cells.filter(|(i, _)| keep(*i)).map(|(_, c)| Cell::from(c)).collect::<Vec<_>>(),
            )
        })
        .collect();
    let widths = [
        Constraint::Min(10),
        Constraint::Length(11),
        Constraint::Length(12),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Min(16),
    ];
    let header =
        ["TASK", "STATUS", "OWNER", "PRI", "AGE", "LEASE", "DUE", "CHECKS", "INTENT -> TO"];
    let widths: Vec<Constraint> =
        widths.into_iter().enumerate().filter(|(i, _)| keep(*i)).map(|(_, w)| w).collect();
    let header: Vec<&str> =
        header.into_iter().enumerate().filter(|(i, _)| keep(*i)).map(|(_, h)| h).collect();
    let t = Table::new(body, widths)
        .header(TRow::new(header).style(Style::new().add_modifier(Modifier::BOLD)))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .block(Block::new().borders(Borders::ALL).title("tasks"));
    f.render_stateful_widget(t, area, state);
}

/// One task opened: its record read now (`ws`; `None` while the root cannot be reached).
fn detail(f: &mut Frame, ws: Option<&Workspace>, model: &Model, task: &str, area: Rect) {
    let mut lines: Vec<Line> = Vec::new();
    let st = match (ws, TaskId::new(task)) {
        (Some(ws), Ok(t)) => ws.engine.peek(&t).map_err(|e| e.message),
        (None, _) => Err("the root cannot be reached now".to_string()),
        (_, Err(e)) => Err(e.message),
    };
    match st {
        Err(why) => lines.push(Line::from(format!("task {task} cannot be read: {why}"))),
        Ok(None) => lines.push(Line::from(format!("task {task} is gone"))),
        Ok(Some(st)) => {
            for l in st.rec.render().lines() {
                lines.push(Line::from(l.to_string()));
            }
            lines.push(Line::from("checks:"));
            for (name, passed) in &st.checks {
                let how = match (passed, st.rec.asserted.contains(name)) {
                    (true, true) => " (asserted, not run)",
                    (true, false) => " (run)",
                    (false, _) => "",
                };
                lines.push(Line::from(format!("  {name}: {passed}{how}")));
            }
            lines.push(Line::from("events:"));
            for e in
                model.events.iter().filter(|e| e.task.as_ref().is_some_and(|t| t.as_str() == task))
            {
                lines.push(Line::from(format!("  {}", event_line(e))));
            }
        }
    }
    let p = Paragraph::new(lines)
        .block(Block::new().borders(Borders::ALL).title(format!("task {task} (Esc: back)")));
    f.render_widget(p, area);
}
