//! Tests of the header scan on big inputs: the limits are enforced (and nothing past them
//! is parsed), and the linear duplicate check finds exactly what a pairwise check finds.

use proptest::prelude::*;

use super::*;

fn circe(extra: &[String]) -> String {
    let mut s = String::from("# MESSAGE\nto: qa\nintent: inform\n");
    for l in extra {
        s.push_str(l);
        s.push('\n');
    }
    s.push_str("\nbody\n");
    s
}

fn front_matter(extra: &[String]) -> String {
    let mut s = String::from("---\nto: qa\ntype: inform\n");
    for l in extra {
        s.push_str(l);
        s.push('\n');
    }
    s.push_str("---\nbody\n");
    s
}

fn lines(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("x-{i}: v")).collect()
}

fn limited(text: &str, limits: &Limits) -> Result<Message, Vec<Problem>> {
    parse_limited(text.as_bytes(), Some(text.len() as u64), Mode::Draft, limits)
}

#[test]
fn the_header_limit_counts_every_header_line_in_both_formats() {
    let limits = Limits { header_lines: 20, ..Limits::DEFAULT };
    for make in [circe, front_matter] {
        // `to`, `intent` and 18 more: exactly 20.
        limited(&make(&lines(18)), &limits).unwrap();
        let p = limited(&make(&lines(19)), &limits).unwrap_err();
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].limit, Some("limits.header_lines"));
        // Line 1 opens the block, so its 21st line is file line 22.
        assert_eq!(p[0].line, Some(22));
        assert!(p[0].to_string().contains("over the limit of 20 lines"), "{}", p[0]);
        // Without limits the same text parses.
        parse(&make(&lines(19)), Mode::Draft).unwrap();
    }
}

#[test]
fn nothing_past_the_header_limit_is_parsed() {
    let limits = Limits { header_lines: 20, ..Limits::DEFAULT };
    // Past the limit: a bad line, a duplicate, a bad value. None of them is reported.
    let mut extra = lines(30);
    extra.extend(["not a header".into(), "to: qa".into(), "created_at: soon".into()]);
    for text in [circe(&extra), front_matter(&extra[..30])] {
        let p = limited(&text, &limits).unwrap_err();
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].limit, Some("limits.header_lines"));
    }
    // A front matter that never closes is cut at the limit too.
    let open = format!("---\nto: qa\n{}", "x: [\n".repeat(1000));
    let p = limited(&open, &limits).unwrap_err();
    assert_eq!((p.len(), p[0].limit), (1, Some("limits.header_lines")), "{p:?}");
}

#[test]
fn the_size_limit_is_checked_before_parsing() {
    let limits = Limits { message_bytes: 1024, ..Limits::DEFAULT };
    let text = circe(&[format!("headline: {}", "h".repeat(2000))]);
    let p = limited(&text, &limits).unwrap_err();
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].limit, Some("limits.message_bytes"));
    assert!(p[0].message.contains(&format!("is {} bytes", text.len())), "{}", p[0]);
    // A capped read: 1025 bytes of a longer stream whose size is unknown.
    let p = parse_limited(&text.as_bytes()[..1025], None, Mode::Draft, &limits).unwrap_err();
    assert_eq!(p[0].message, "message is over the limit of 1024 bytes (limits.message_bytes)");
    // Not even garbage past the limit is looked at.
    let p = parse_limited(&[0xff; 1025], Some(1025), Mode::Draft, &limits).unwrap_err();
    assert_eq!((p.len(), p[0].limit), (1, Some("limits.message_bytes")));
    // At the limit exactly: parsed.
    let fits = circe(&[format!("headline: {}", "h".repeat(1024 - circe(&[]).len() - 11))]);
    assert_eq!(fits.len(), 1024);
    limited(&fits, &limits).unwrap();
}

#[test]
fn duplicates_far_apart_are_each_reported_at_their_line() {
    let mut extra = lines(150);
    extra.insert(100, "x-3: again".into()); // file line 104
    extra.push("x-149: again".into()); // file line 155
    extra.push("task-id: T-1".into());
    extra.push("task_id: T-2".into()); // an alias of the line before: 157
    let got: Vec<String> =
        parse(&circe(&extra), Mode::Draft).unwrap_err().iter().map(ToString::to_string).collect();
    assert_eq!(
        got,
        [
            "line 104: field `x-3`: duplicate header",
            "line 155: field `x-149`: duplicate header",
            "line 157: field `task_id`: duplicate header",
        ]
    );
    // Front matter: two spellings of one field far down are a duplicate, at the second
    // spelling's line; an exact repeat is a YAML error.
    let mut extra = lines(150);
    extra.push("intent: inform".into());
    let p = parse(&front_matter(&extra), Mode::Draft).unwrap_err();
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].line, Some(154));
    assert!(p[0].message.starts_with("duplicate header"), "{}", p[0]);
    extra.push("x-7: again".into());
    assert!(parse(&front_matter(&extra), Mode::Draft).is_err());
}

/// Known keys (in both spellings) with valid values, and extra keys.
const KEYS: [&str; 10] =
    ["task_id", "task-id", "msg_id", "msg-id", "headline", "x", "y", "x-y", "x_y", "zz"];

fn value_of(key: &str) -> &'static str {
    match key {
        "task_id" | "task-id" => "T-1",
        "msg_id" | "msg-id" => "m-1",
        _ => "v",
    }
}

proptest! {
    /// The set-based check agrees with the pairwise one on every sequence of keys.
    #[test]
    fn the_duplicate_check_matches_a_pairwise_check(picks in prop::collection::vec(0..KEYS.len(), 0..40)) {
        let keys: Vec<&str> = picks.iter().map(|&i| KEYS[i]).collect();
        let extra: Vec<String> = keys.iter().map(|k| format!("{k}: {}", value_of(k))).collect();
        // Pairwise: a key is a duplicate when an earlier key names the same field (known
        // keys: `-` and `_` alike) or is the same extra key.
        let same = |a: &str, b: &str| match (Field::from_circe_key(a), Field::from_circe_key(b)) {
            (Some(x), Some(y)) => x == y,
            (None, None) => a == b,
            _ => false,
        };
        let want: Vec<usize> = (0..keys.len())
            .filter(|&i| (0..i).any(|j| same(keys[j], keys[i])))
            .map(|i| i + 4)
            .collect();
        let got: Vec<usize> = match parse(&circe(&extra), Mode::Draft) {
            Ok(_) => Vec::new(),
            Err(p) => p.iter().filter(|p| p.message == "duplicate header").filter_map(|p| p.line).collect(),
        };
        prop_assert_eq!(got, want);
    }
}
