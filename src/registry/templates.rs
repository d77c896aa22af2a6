//! Message templates, one per built-in intent, embedded from `templates/<intent>.md`.
//!
//! An agent copies one, edits it and sends it with `circe send --file`, so header values are
//! valid as written (`to: role:engineer`, `task_id: TASK-001`); placeholders appear only in the body.

macro_rules! embedded {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../../templates/", $name, ".md")))),*]
    };
}

use super::Registry;
use crate::message::{Message, Problem};

/// The task id every template writes, a placeholder to be replaced.
pub const TEMPLATE_TASK_ID: &str = "TASK-001";

/// `(intent, template text)` for every built-in intent.
const TEMPLATES: &[(&str, &str)] = embedded![
    "implement_feature",
    "fix_bug",
    "refactor",
    "review_code",
    "test",
    "audit",
    "document",
    "status_update",
    "request_help",
    "claim_task",
    "release_task",
    "coordinate",
    "question",
    "answer",
    "escalate",
    "inform",
    "test_results",
    "audit_report",
    "approval_request",
    "ask",
    "ask-human",
    "ask-response",
    "task",
    "task-complete",
    "update",
    "prompt",
];

/// The message template for `intent`, if it is a built-in intent.
pub fn template(intent: &str) -> Option<&'static str> {
    TEMPLATES.iter().find(|(name, _)| *name == intent).map(|(_, text)| *text)
}

/// The placeholder lines of `intent`'s template (`<...>`, or `- <...>`), trimmed.
fn placeholders(intent: &str) -> Vec<&'static str> {
    template(intent).map_or_else(Vec::new, |text| {
        text.lines()
            .map(str::trim)
            .filter(|l| l.trim_start_matches("- ").starts_with('<') && l.ends_with('>'))
            .collect()
    })
}

/// What shows that a draft is a template copied and not filled in, for `send --file` to
/// refuse and `validate --draft` to report (the one check both make): in a message that
/// opens a task, the templates' task id (a task that is really named so is opened with
/// `--task`); and every body line that is still one of its intent's placeholders. Each is
/// named by its line in `text`, the draft as written; none when it is filled in.
pub fn not_filled_in(reg: &Registry, m: &Message, text: &str) -> Vec<Problem> {
    let intent = m.intent.as_deref().unwrap_or_default();
    let mut out = Vec::new();
    let opens = reg.intent(intent).is_some_and(|i| i.opens_task);
    let id_left = opens && m.task_id.as_deref() == Some(TEMPLATE_TASK_ID);
    if id_left {
        let at = text.lines().position(|l| {
            l.split_once(':').is_some_and(|(k, v)| {
                matches!(k.trim(), "task_id" | "task-id") && v.trim() == TEMPLATE_TASK_ID
            })
        });
        out.push(
            Problem::new(
                at.map(|i| i + 1),
                None,
                format!("`task_id: {TEMPLATE_TASK_ID}` is the template's placeholder"),
            )
            .hint("set `task_id:` to the task's own id (the one you hold, to hand it on)"),
        );
    }
    let holders = placeholders(intent);
    for (n, line) in text.lines().enumerate().skip(body_start(text)) {
        let l = line.trim();
        if holders.contains(&l) {
            out.push(
                Problem::new(
                    Some(n + 1),
                    None,
                    format!("`{l}` is still the template's placeholder"),
                )
                .hint("fill in the template: write what the placeholder asks for in its place"),
            );
        }
    }
    out
}

/// The index of a message's first body line in `text`: after the closing `---` of a front
/// matter (TX), else after the blank line that ends the header block (CIRCE). The header
/// holds none of a template's placeholders.
fn body_start(text: &str) -> usize {
    let mut lines = text.lines().map(|l| l.trim_start_matches('\u{feff}').trim_end());
    if lines.next() == Some("---") {
        return lines.position(|l| l == "---").map_or(0, |i| i + 2);
    }
    text.lines().position(|l| l.trim().is_empty()).map_or(0, |i| i + 1)
}

/// Every template as `(intent, text)`, in registry table order.
pub fn templates() -> impl Iterator<Item = (&'static str, &'static str)> {
    TEMPLATES.iter().copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names;
    use crate::registry::Registry;

    /// The header lines (after `# MESSAGE`, up to the first blank line) as key/value pairs.
    fn header(text: &str) -> Vec<(&str, &str)> {
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("# MESSAGE"));
        lines
            .take_while(|l| !l.is_empty())
            .map(|l| l.split_once(": ").unwrap_or_else(|| panic!("bad header line {l:?}")))
            .collect()
    }

    fn get<'t>(h: &[(&str, &'t str)], key: &str) -> Option<&'t str> {
        h.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    #[test]
    fn every_builtin_intent_has_a_template_and_no_extra() {
        let reg = Registry::builtin();
        for name in reg.intents.keys() {
            assert!(template(name).is_some(), "no template for {name}");
        }
        assert_eq!(templates().count(), reg.intents.len());
        assert!(template("deploy").is_none());
    }

    #[test]
    fn template_headers_are_valid_and_allowed() {
        let reg = Registry::builtin();
        let replies: Vec<&str> =
            reg.intents.values().filter_map(|i| i.expects_reply.as_deref()).collect();
        for (name, text) in templates() {
            let h = header(text);
            assert_eq!(get(&h, "intent"), Some(name), "{name}: intent header");
            let intent = reg.intent(name).unwrap();
            let from = get(&h, "from").unwrap();
            let to = get(&h, "to").unwrap();
            assert!(reg.may_send(from, name), "{name}: from {from} not allowed");
            // A template addresses a role (`role:NAME`), never one agent.
            let role = to.strip_prefix("role:");
            assert!(to == "all" || role.is_some(), "{name}: to {to} is not a role");
            assert!(role.is_none_or(|r| reg.may_receive(r, name)), "{name}: to {to} not allowed");
            assert!(
                ["new", "in_progress", "completed", "blocked"]
                    .contains(&get(&h, "status").unwrap()),
                "{name}: status"
            );
            match get(&h, "task_id") {
                Some(id) => assert!(names::check_task_id(id).is_ok(), "{name}: task_id {id}"),
                None => assert!(!intent.needs_task_id, "{name}: needs a task_id header"),
            }
            if let Some(id) = get(&h, "in_reply_to") {
                assert!(names::check_msg_id(id).is_ok(), "{name}: in_reply_to {id}");
                assert!(replies.contains(&name), "{name}: in_reply_to on a non-reply intent");
            } else {
                assert!(
                    !replies.contains(&name) || name == "status_update",
                    "{name}: a reply needs in_reply_to"
                );
            }
            assert!(h.iter().all(|(_, v)| !v.contains('<')), "{name}: placeholder in header");
            assert!(text.contains("\n\n## "), "{name}: body sections");
        }
    }

    #[test]
    fn the_body_starts_after_the_header_block_or_the_front_matter() {
        assert_eq!(body_start("# MESSAGE\nto: x\n\n<a>\n"), 3);
        assert_eq!(body_start("---\nto: x\ntype: update\n---\n<a>\n\nb\n"), 4);
        assert_eq!(body_start("\u{feff}---\r\nto: x\r\n---\r\n<a>\r\n"), 3);
        // A placeholder in the first paragraph of a TX draft's body is found.
        let reg = Registry::builtin();
        let text = "---\nto: coordinator\ntype: update\n---\n## Summary\n<one line: what changed; no reply expected>\n\n## Details\nreal\n";
        let m = crate::message::parse_limited(
            text.as_bytes(),
            None,
            crate::message::Mode::Draft,
            &crate::message::Limits::DEFAULT,
        )
        .unwrap();
        let left = not_filled_in(&reg, &m, text);
        assert_eq!(left.iter().map(|p| p.line).collect::<Vec<_>>(), [Some(6)]);
    }
}
