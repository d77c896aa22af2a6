//! `circe archive search`: what a query matches. By id (a task id, a msg_id or its prefix of
//! 8+ characters, a file name), by date (an entry's `created_at` on a day or within a month),
//! or by text (in the member lists' fields; with `--text`, in the members themselves).

use super::Entry;

/// One search.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// A task id, msg_id (or 8+ character prefix) or file name.
    pub id: Option<String>,
    /// `YYYY-MM-DD` or `YYYY-MM`: entries created then.
    pub date: Option<String>,
    /// Words that must all appear (any case) in the entry's fields, or with `in_text` in the
    /// member's text.
    pub text: Option<String>,
    /// Look for `text` inside the archived files (decompresses the segments).
    pub in_text: bool,
}

impl Query {
    /// Could segment files hold a match? A date query skips the periods before the date's
    /// month: a segment of period P holds what was archived then (a task by the month it
    /// ended), written in P or any month before it (a task open for months, history imported
    /// from TX), never after.
    pub fn period_may_match(&self, period: &str) -> bool {
        self.date.as_deref().is_none_or(|d| d.get(..7).unwrap_or(d) <= period)
    }

    /// Does the entry match the id and date parts, and (unless the text is looked for in
    /// the member itself) the text part?
    pub fn matches(&self, e: &Entry) -> bool {
        if let Some(id) = &self.id {
            let by_task = e.task.as_deref() == Some(id.as_str());
            let by_msg = e
                .msg_id
                .as_deref()
                .is_some_and(|m| m == id || (id.len() >= 8 && m.starts_with(id.as_str())));
            let by_file =
                e.origin.as_deref().is_some_and(|o| o.rsplit('/').next() == Some(id.as_str()));
            if !(by_task || by_msg || by_file) {
                return false;
            }
        }
        if let Some(d) = &self.date
            && !e.created_at.as_deref().is_some_and(|c| c.starts_with(d.as_str()))
        {
            return false;
        }
        if let Some(t) = &self.text
            && !self.in_text
        {
            let hay = [&e.task, &e.msg_id, &e.from, &e.to, &e.intent, &e.summary, &e.origin]
                .iter()
                .filter_map(|f| f.as_deref())
                .collect::<Vec<_>>()
                .join(" ");
            return words_in(t, &hay);
        }
        true
    }
}

/// Every word of `words` appears in `hay`, ignoring case.
pub fn words_in(words: &str, hay: &str) -> bool {
    let hay = hay.to_lowercase();
    words.split_whitespace().all(|w| hay.contains(&w.to_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::EntryKind;

    fn entry() -> Entry {
        Entry {
            kind: EntryKind::Message,
            member: "s/tasks/AUTH-012/LOGS/x.md".into(),
            task: Some("AUTH-012".into()),
            origin: Some(
                "LOGS/20251121_170000_coordinator-all_implement-feature_AUTH-012.md".into(),
            ),
            bytes: 10,
            sha256: "00".into(),
            msg_id: Some("20251121T170000000Z-abcdefgh".into()),
            created_at: Some("2025-11-21T17:00:00Z".into()),
            from: Some("coordinator".into()),
            to: Some("all".into()),
            intent: Some("implement_feature".into()),
            summary: Some("Implement JWT auth".into()),
            mtime_ns: None,
            first_event: None,
            last_event: None,
        }
    }

    #[test]
    fn ids_dates_and_words() {
        let q = |id: Option<&str>, date: Option<&str>, text: Option<&str>| Query {
            id: id.map(Into::into),
            date: date.map(Into::into),
            text: text.map(Into::into),
            in_text: false,
        };
        let e = entry();
        assert!(q(Some("AUTH-012"), None, None).matches(&e));
        assert!(q(Some("20251121T170000000Z-abcdefgh"), None, None).matches(&e));
        assert!(q(Some("20251121T1700"), None, None).matches(&e), "an 8+ character prefix");
        assert!(!q(Some("2025112"), None, None).matches(&e), "too short a prefix");
        assert!(
            q(Some("20251121_170000_coordinator-all_implement-feature_AUTH-012.md"), None, None)
                .matches(&e)
        );
        assert!(!q(Some("AUTH-013"), None, None).matches(&e));
        assert!(q(None, Some("2025-11-21"), None).matches(&e));
        assert!(q(None, Some("2025-11"), None).matches(&e));
        assert!(!q(None, Some("2025-12"), None).matches(&e));
        assert!(q(None, None, Some("jwt AUTH")).matches(&e));
        assert!(!q(None, None, Some("jwt oauth")).matches(&e));
        assert!(q(None, Some("2025-11"), None).period_may_match("2025-11"));
        // A task written in November and ended in December lies in December's segment.
        assert!(q(None, Some("2025-11-02"), None).period_may_match("2025-12"));
        assert!(!q(None, Some("2026-01"), None).period_may_match("2025-12"));
        assert!(!q(None, Some("2025-11-02"), None).period_may_match("2025-10"));
        assert!(q(None, Some("2025"), None).period_may_match("2025-12"));
    }
}
