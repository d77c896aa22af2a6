//! Message file names: `YYYYMMDD_HHMMSS_from-to_intent_taskid[.N].md` (UTC). A label only;
//! the headers are the truth.

use chrono::{DateTime, NaiveDateTime, Utc};

use super::agent_of;
use crate::names;

/// The parts of a message file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileName {
    /// Seconds precision, UTC.
    pub stamp: NaiveDateTime,
    pub from: String,
    pub to: String,
    /// The intent with `_` written as `-` (`implement_feature` -> `implement-feature`).
    pub intent_label: String,
    pub task_id: Option<String>,
    /// Collision counter: 1 when the name has none, else 2 or more.
    pub n: u32,
}

const STAMP: &str = "%Y%m%d_%H%M%S";

/// The longest message file name circe makes: a folder entry holds at most 255 bytes, and
/// staging a copy puts up to 94 bytes before the name (`00000-00001~AGENTS+<agent>+WORKSPACE~`,
/// a 64-byte agent); the collision counter (up to 11 bytes) is added only in the box.
pub const MAX_NAME: usize = 160;

/// A name circe makes for a message of its own (a notice, an import) brought within
/// `MAX_NAME` bytes, `.md` kept: the task id is left out first (a cut one could name another
/// task: commands read a task id from a name without a header), then the rest is cut. The
/// name is a label; the headers are the truth.
pub fn fit(name: String) -> String {
    if name.len() <= MAX_NAME {
        return name;
    }
    let stem = name.strip_suffix(".md").unwrap_or(&name);
    // `STAMP_from-to_intent_task` (the stamp holds a `_` of its own): the task id follows
    // the fourth `_`.
    let stem = stem.match_indices('_').nth(3).map_or(stem, |(i, _)| &stem[..i]);
    if stem.len() + 3 <= MAX_NAME {
        return format!("{stem}.md");
    }
    let mut end = MAX_NAME - 3;
    while !stem.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}.md", &stem[..end])
}

/// Does `name` say that its message has no task? A name circe made without a task id, short
/// enough that the longest task id (64 bytes) would have fitted in it: `fit` drops a task id
/// only from a name that would be too long. (A file named by hand in circe's form is taken
/// at its name too.)
pub fn says_no_task(name: &str) -> bool {
    name.len() + 1 + 64 <= MAX_NAME && parse_file_name(name).is_some_and(|f| f.task_id.is_none())
}

/// Refuse a file name over `MAX_NAME` (exit 3), before anything is written.
pub fn check_length(name: &str, task_id: Option<&str>) -> crate::error::Result<()> {
    if name.len() <= MAX_NAME {
        return Ok(());
    }
    let task = task_id.map(|t| format!(" (the task id is {} bytes)", t.len())).unwrap_or_default();
    Err(crate::error::Error::refused(format!(
        "the message's file name would be {} bytes, over {MAX_NAME}{task}",
        name.len()
    ))
    .hint("the name holds both agents' names, the intent and the task id (a `-` in a name counts twice): use a shorter task id or shorter agent names; nothing was written"))
}

/// The start of the file name circe gives a message whose msg_id is `id` (a whole circe id,
/// `YYYYMMDDTHHMMSSmmmZ-xxxxxxxx`, or its start down to the hour): `YYYYMMDD_HH[MM[SS]]`.
/// circe names a message at the second it makes its id, so its copies lie under names
/// that start so (a lookup reads those first). `None` for an id of another form.
pub fn name_stamp_of_id(id: &str) -> Option<String> {
    let (day, rest) = (id.get(..8)?, id.get(8..)?);
    let time = rest.strip_prefix('T')?;
    let digits: String = time.chars().take(6).take_while(char::is_ascii_digit).collect();
    let whole = day.bytes().all(|b| b.is_ascii_digit()) && digits.len() >= 2;
    whole.then(|| format!("{day}_{digits}"))
}

/// The file name for a message. `from` and `to` may be TX `mesh/agent` addresses (the agent
/// part is used); a `-` inside a name is doubled so the single `-` between them stays
/// unambiguous. `n` of 2 or more adds a `.n` collision counter.
pub fn file_name(
    created_at: DateTime<Utc>,
    from: &str,
    to: &str,
    intent: &str,
    task_id: Option<&str>,
    n: u32,
) -> String {
    let mut out = format!(
        "{}_{}-{}_{}",
        created_at.format(STAMP),
        escape(agent_of(from)),
        escape(agent_of(to)),
        intent.replace('_', "-")
    );
    if let Some(t) = task_id {
        out.push('_');
        out.push_str(t);
    }
    if n > 1 {
        out.push('.');
        out.push_str(&n.to_string());
    }
    out.push_str(".md");
    out
}

/// `base` (a name ending in `.md`) with collision counter `n`: `base` itself for n <= 1,
/// else `stem.n.md`.
pub fn numbered(base: &str, n: u32) -> String {
    match (n, base.strip_suffix(".md")) {
        (0 | 1, _) | (_, None) => base.to_string(),
        (n, Some(stem)) => format!("{stem}.{n}.md"),
    }
}

/// The parts of a name `file_name` writes, or `None` for any other name.
pub fn parse_file_name(name: &str) -> Option<FileName> {
    let stem = name.strip_suffix(".md")?;
    let (stem, n) = match stem.rsplit_once('.') {
        Some((s, counter)) => {
            if counter.starts_with('0') || !counter.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let n: u32 = counter.parse().ok()?;
            (s, (n >= 2).then_some(n)?)
        }
        None => (stem, 1),
    };
    let stamp = NaiveDateTime::parse_from_str(stem.get(..15)?, STAMP).ok()?;
    let rest = stem.get(15..)?.strip_prefix('_')?;
    let (pair, rest) = rest.split_once('_')?;
    let (from, to) = unescape_pair(pair)?;
    let (intent_label, task_id) = match rest.split_once('_') {
        Some((i, t)) => (i, Some(t)),
        None => (rest, None),
    };
    let label_ok = intent_label.starts_with(|c: char| c.is_ascii_lowercase())
        && intent_label.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !label_ok || task_id.is_some_and(|t| names::check_task_id(t).is_err()) {
        return None;
    }
    Some(FileName {
        stamp,
        from,
        to,
        intent_label: intent_label.to_string(),
        task_id: task_id.map(str::to_string),
        n,
    })
}

fn escape(name: &str) -> String {
    name.replace('-', "--")
}

/// Splits `from-to`: `--` is a literal `-`, a single `-` the separator; exactly one separator.
fn unescape_pair(pair: &str) -> Option<(String, String)> {
    let mut parts = [String::new(), String::new()];
    let mut which = 0;
    let mut chars = pair.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '-' {
            parts[which].push(c);
        } else if chars.peek() == Some(&'-') {
            chars.next();
            parts[which].push('-');
        } else if which == 0 {
            which = 1;
        } else {
            return None;
        }
    }
    let [from, to] = parts;
    (which == 1 && names::check_agent(&from).is_ok() && names::check_agent(&to).is_ok())
        .then_some((from, to))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock;
    use proptest::prelude::*;

    fn t(s: &str) -> DateTime<Utc> {
        clock::parse(s).unwrap()
    }

    /// The name an id says is the name circe gives the message made with it.
    #[test]
    fn a_msg_id_says_the_start_of_its_messages_name() {
        let now = t("2025-11-21T17:00:05.123Z");
        let id = clock::new_msg_id(now);
        let name = file_name(now, "qa", "engineer", "inform", None, 1);
        assert!(name.starts_with(&name_stamp_of_id(&id).unwrap()), "{id} {name}");
        assert_eq!(name_stamp_of_id("20251121T1700").as_deref(), Some("20251121_1700"));
        assert_eq!(name_stamp_of_id("20251121T17").as_deref(), Some("20251121_17"));
        for other in ["20251121T1", "2025112xT170000", "task-7", "20251121_170000", ""] {
            assert_eq!(name_stamp_of_id(other), None, "{other}");
        }
    }

    /// A name says its message has no task only when a task id would have fitted in it:
    /// one `fit` took the task id out of says nothing.
    #[test]
    fn a_name_says_no_task_only_where_a_task_id_fits() {
        let at = t("2025-11-21T17:00:00Z");
        let plain = file_name(at, "engineer", "qa", "inform", None, 1);
        assert!(says_no_task(&plain), "{plain}");
        assert!(says_no_task(&numbered(&plain, 2)));
        let tasked = file_name(at, "engineer", "qa", "inform", Some("T1"), 1);
        assert!(!says_no_task(&tasked), "{tasked}");
        let long_agent = "a".repeat(64);
        let task = "T".repeat(64);
        let fitted = fit(file_name(at, &long_agent, &"b".repeat(20), "inform", Some(&task), 1));
        let parsed = parse_file_name(&fitted).expect("a fitted name is still circe's");
        assert_eq!((parsed.intent_label.as_str(), parsed.task_id), ("inform", None), "{fitted}");
        assert!(!says_no_task(&fitted), "a fitted name took its task id out: {fitted}");
        assert!(!says_no_task("notes.md"), "a name circe did not make");
    }

    #[test]
    fn spec_examples() {
        assert_eq!(
            file_name(
                t("2025-11-06T14:02:11Z"),
                "coordinator",
                "engineer",
                "implement_feature",
                Some("FEAT-021"),
                1
            ),
            "20251106_140211_coordinator-engineer_implement-feature_FEAT-021.md"
        );
        assert_eq!(
            file_name(t("2025-11-06T15:30:22Z"), "engineer", "qa", "test", Some("FEAT-021"), 0),
            "20251106_153022_engineer-qa_test_FEAT-021.md"
        );
        assert_eq!(
            file_name(
                t("2025-11-21T17:00:00Z"),
                "engineer-2",
                "qa",
                "test_results",
                Some("AUTH-012"),
                1
            ),
            "20251121_170000_engineer--2-qa_test-results_AUTH-012.md"
        );
        assert_eq!(
            file_name(t("2025-11-21T17:00:00Z"), "core/core", "brain/brain", "ask", None, 2),
            "20251121_170000_core-brain_ask.2.md"
        );
    }

    #[test]
    fn parses_names() {
        let f =
            parse_file_name("20251121_170000_engineer--2-qa_test-results_AUTH-012.2.md").unwrap();
        assert_eq!((f.from.as_str(), f.to.as_str()), ("engineer-2", "qa"));
        assert_eq!(f.intent_label, "test-results");
        assert_eq!(f.task_id.as_deref(), Some("AUTH-012"));
        assert_eq!(f.n, 2);
        assert_eq!(f.stamp.and_utc(), t("2025-11-21T17:00:00Z"));
        let g = parse_file_name("20251121_170000_core-brain_ask.md").unwrap();
        assert_eq!((g.task_id, g.n), (None, 1));
        for bad in [
            "20251121_170000_core-brain_ask",
            "20251121_170000_core-brain_ask.1.md",
            "20251121_170000_core-brain_ask.02.md",
            "20251121_170000_corebrain_ask.md",
            "20251121_170000_a-b-c_ask.md",
            "20251121_170000_-a-b_ask.md",
            "20251321_170000_a-b_ask.md",
            "20251121_170000_a-b_Ask.md",
            "20251121_170000_a-b_ask_.md",
            "1102083000-task-core--brain-abc123.md",
            "",
            "é.md",
        ] {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
    }

    fn agent() -> impl Strategy<Value = String> {
        "[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?"
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn parse_inverts_file_name(
            secs in 0i64..4_000_000_000,
            mesh in proptest::option::of(agent()),
            from in agent(),
            to in agent(),
            intent in "[a-z][a-z0-9_-]{0,12}",
            task in proptest::option::of("[A-Za-z0-9][A-Za-z0-9_-]{0,10}"),
            n in 0u32..5,
        ) {
            let at = DateTime::from_timestamp(secs, 0).unwrap();
            let addr = mesh.map_or(from.clone(), |m| format!("{m}/{from}"));
            let name = file_name(at, &addr, &to, &intent, task.as_deref(), n);
            let f = parse_file_name(&name).unwrap();
            prop_assert_eq!(f.stamp.and_utc(), at);
            prop_assert_eq!(f.from, from);
            prop_assert_eq!(f.to, to);
            prop_assert_eq!(f.intent_label, intent.replace('_', "-"));
            prop_assert_eq!(f.task_id, task);
            prop_assert_eq!(f.n, n.max(1));
        }

        #[test]
        fn parse_file_name_never_panics(s in "\\PC{0,60}") {
            let _ = parse_file_name(&s);
        }
    }

    #[test]
    fn a_name_circe_makes_leaves_its_task_id_out_to_fit() {
        let t = chrono::DateTime::parse_from_rfc3339("2025-11-21T17:00:00Z").unwrap().to_utc();
        let task = "T".repeat(64);
        let long = file_name(t, "circe", &"a".repeat(64), "update", Some(&task), 1);
        assert!(long.len() > MAX_NAME);
        let fitted = fit(long);
        assert!(fitted.len() <= MAX_NAME, "{fitted}");
        assert_eq!(parse_file_name(&fitted).and_then(|f| f.task_id), None, "{fitted}");
    }

    #[test]
    fn a_name_circe_makes_is_cut_to_fit() {
        let long = format!("{}.md", "a".repeat(300));
        let cut = fit(long);
        assert_eq!(cut.len(), MAX_NAME);
        assert_eq!(&cut[cut.len() - 3..], ".md");
        assert_eq!(fit("x.md".to_string()), "x.md");
        let wide = format!("{}.md", "é".repeat(100));
        assert!(fit(wide).len() <= MAX_NAME);
    }
}
