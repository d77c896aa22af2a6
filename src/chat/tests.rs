//! The reference's examples and parsing rules (shared/reference 004), line by line.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::grammar::match_line;
use super::line::{LineKind, classify, parse_line};
use super::render::{normalise_text, render};
use super::scanner::{Position, Scanner};

fn nobody(_: &str) -> bool {
    false
}

/// The JSON of every message in `text` read whole, timestamp left out.
fn read_all(text: &str, first_line_only: bool, known: &dyn Fn(&str) -> bool) -> Vec<Value> {
    let mut s = Scanner::new(Position::START, first_line_only);
    let (taken, mut found) = s.feed(text.as_bytes(), known);
    assert_eq!(taken, text.rfind('\n').map_or(0, |i| i + 1), "whole lines only");
    found.extend(s.finish());
    found
        .into_iter()
        .map(|f| {
            let mut v: Value = serde_json::from_str(&f.message.json_line("T")).unwrap();
            assert_eq!(v["timestamp"], "T");
            v.as_object_mut().unwrap().remove("timestamp");
            v
        })
        .collect()
}

fn one(line: &str) -> Value {
    let v = read_all(&format!("{line}\n"), false, &nobody);
    assert_eq!(v.len(), 1, "{line:?} -> {v:?}");
    v[0].clone()
}

#[test]
fn reference_direct_message() {
    assert_eq!(
        one("[sender-to-recipient]: message content here"),
        json!({"sender": "sender", "recipient": "recipient", "broadcast": [], "message": "message content here", "line_number": 1})
    );
    assert_eq!(
        one("[coder-to-reviewer]: Please review changes in src/auth.rs — added JWT validation"),
        json!({"sender": "coder", "recipient": "reviewer", "broadcast": [], "message": "Please review changes in src/auth.rs — added JWT validation", "line_number": 1})
    );
}

#[test]
fn reference_broadcast_and_acknowledgment() {
    assert_eq!(
        one("[sender-to-recipient] @ [target1, target2]: message content here"),
        json!({"sender": "sender", "recipient": "recipient", "broadcast": ["target1", "target2"], "message": "message content here", "line_number": 1})
    );
    assert_eq!(
        one(
            "[reviewer-to-coder] @ [developer, manager]: Approved with minor suggestions — see inline comments"
        ),
        json!({"sender": "reviewer", "recipient": "coder", "broadcast": ["developer", "manager"], "message": "Approved with minor suggestions — see inline comments", "line_number": 1})
    );
    assert_eq!(
        one("[reviewer-to-coder] @ [developer]: Acknowledged — starting review"),
        json!({"sender": "reviewer", "recipient": "coder", "broadcast": ["developer"], "message": "Acknowledged — starting review", "line_number": 1})
    );
}

#[test]
fn reference_json_example_at_line_42() {
    let mut text = String::new();
    for i in 1..42 {
        text.push_str(if i % 2 == 0 { "\n" } else { "a comment\n" });
    }
    text.push_str("[coder-to-reviewer]: Please review changes in src/auth.rs\n");
    let mut s = Scanner::new(Position::START, false);
    let (_, found) = s.feed(text.as_bytes(), &nobody);
    assert!(found.is_empty());
    let f = s.finish().unwrap();
    let line = f.message.json_line("2026-02-17T10:05:00.123Z");
    // Field for field, in the reference's order.
    assert_eq!(
        line,
        r#"{"timestamp":"2026-02-17T10:05:00.123Z","sender":"coder","recipient":"reviewer","broadcast":[],"message":"Please review changes in src/auth.rs","line_number":42}"#
    );
}

const MULTI: &str = "[coder-to-reviewer]: Review needed for auth module
  Changes:
  - Added JWT validation in src/auth.rs
  - Updated middleware in src/middleware.rs
  - Added tests in tests/auth_test.rs
";

#[test]
fn reference_multi_line_message() {
    let v = read_all(MULTI, false, &nobody);
    assert_eq!(
        v,
        [json!({"sender": "coder", "recipient": "reviewer", "broadcast": [], "line_number": 1,
            "message": "Review needed for auth module\nChanges:\n- Added JWT validation in src/auth.rs\n- Updated middleware in src/middleware.rs\n- Added tests in tests/auth_test.rs"})]
    );
    // The reference server: the first line is the message, continuation lines are ignored.
    let v = read_all(MULTI, true, &nobody);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0]["message"], "Review needed for auth module");
}

#[test]
fn rule_1_must_start_with_a_bracket() {
    assert!(match_line(" [a-to-b]: x").is_none());
    assert!(match_line("x[a-to-b]: x").is_none());
    assert!(match_line("(a-to-b): x").is_none());
    assert!(match_line("[a-to-b]: x").is_some());
}

#[test]
fn rule_2_names_are_alphanumeric_hyphen_underscore() {
    let c = match_line("[Coder_2-to-re-viewer_X9]: x").unwrap();
    assert_eq!((c.sender, c.recipient), ("Coder_2", "re-viewer_X9"));
    for bad in ["[co der-to-b]: x", "[a.b-to-c]: x", "[a-to-b/c]: x", "[é-to-b]: x", "[-to-b]: x"]
    {
        assert!(match_line(bad).is_none(), "{bad}");
    }
}

#[test]
fn rule_3_to_is_required() {
    for bad in ["[coder]: x", "[coder-reviewer]: x", "[coder-TO-reviewer]: x", "[coder-to-]: x"] {
        assert!(match_line(bad).is_none(), "{bad}");
    }
}

#[test]
fn rule_4_broadcast_targets_are_comma_separated() {
    assert_eq!(one("[a-to-b] @ [ x ,y,, z ]: hi")["broadcast"], json!(["x", "y", "z"]));
    assert_eq!(one("[a-to-b] @ []: hi")["broadcast"], json!([]));
    assert_eq!(one("[a-to-b] @ [ , ]: hi")["broadcast"], json!([]));
    // Spaces around `@` are optional.
    assert_eq!(one("[a-to-b]@[x]: hi")["broadcast"], json!(["x"]));
    assert_eq!(one("[a-to-b]   @   [x]  :  hi")["broadcast"], json!(["x"]));
    // `@` without a bracket list is no message at all.
    assert!(match_line("[a-to-b] @ x: hi").is_none());
    assert!(match_line("[a-to-b] @ [x: hi").is_none());
}

#[test]
fn rule_5_the_body_follows_the_colon() {
    assert_eq!(one("[a-to-b]: hello")["message"], "hello");
    assert_eq!(one("[a-to-b]:hello")["message"], "hello");
    assert_eq!(one("[a-to-b] :   hello  ")["message"], "hello  ");
    assert_eq!(one("[a-to-b]: a: b: c")["message"], "a: b: c");
    // Only spaces after the colon: the regex still matches; `.+` takes the last space.
    assert_eq!(one("[a-to-b]:   ")["message"], " ");
    // Nothing after the colon: no match.
    assert!(match_line("[a-to-b]:").is_none());
    assert!(match_line("[a-to-b] hello").is_none());
}

#[test]
fn rule_6_empty_and_other_lines_are_comments() {
    let text = "\n# notes\nplain text\n[not a message]\n  indented without a message\n";
    assert!(read_all(text, false, &nobody).is_empty());
    assert_eq!(classify("", &nobody), LineKind::Comment);
}

#[test]
fn a_name_containing_to_takes_the_regex_split_unless_agents_decide() {
    // The regex's group 1 is greedy: the last `-to-`.
    let c = match_line("[coder-to-go-to-market]: x").unwrap();
    assert_eq!((c.sender, c.recipient), ("coder-to-go", "market"));
    let v = one("[coder-to-go-to-market]: x");
    assert_eq!(
        (&v["sender"], &v["recipient"], &v["ambiguous"]),
        (&json!("coder-to-go"), &json!("market"), &json!(true))
    );
    // Known agents on both sides of exactly one split win.
    let known = |n: &str| matches!(n, "coder" | "go-to-market");
    let l = parse_line("[coder-to-go-to-market]: x", &known).unwrap();
    assert_eq!(
        (l.sender.as_str(), l.recipient.as_str(), l.ambiguous),
        ("coder", "go-to-market", true)
    );
    // Both splits known: the regex's split.
    let all = |n: &str| matches!(n, "coder" | "go-to-market" | "coder-to-go" | "market");
    let l = parse_line("[coder-to-go-to-market]: x", &all).unwrap();
    assert_eq!((l.sender.as_str(), l.recipient.as_str()), ("coder-to-go", "market"));
    // One split only: not ambiguous, no field in the JSON.
    assert!(one("[a-to-b]: x").get("ambiguous").is_none());
}

#[test]
fn lines_count_like_grep_with_bom_crlf_and_bad_bytes() {
    let text = b"\xef\xbb\xbf[a-to-b]: one\r\n\r\n\xff comment\n[c-to-d]: tw\xffo\r\n";
    let mut s = Scanner::new(Position::START, false);
    let (_, mut found) = s.feed(text, &nobody);
    found.extend(s.finish());
    assert_eq!(found.len(), 2);
    assert_eq!((found[0].message.line_number, found[0].message.message.as_str()), (1, "one"));
    assert_eq!(
        (found[1].message.line_number, found[1].message.message.as_str()),
        (4, "tw\u{fffd}o")
    );
    assert_eq!(s.next(), Position { offset: text.len() as u64, line: 5 });
}

#[test]
fn a_partial_last_line_is_never_a_message() {
    let mut s = Scanner::new(Position::START, false);
    let (taken, found) = s.feed(b"[a-to-b]: hel", &nobody);
    assert_eq!((taken, found.len()), (0, 0));
    assert!(s.finish().is_none());
    // The message waits for a line that is not indented; the first byte is enough.
    let (taken, found) = s.feed(b"[a-to-b]: hello\n  more\n", &nobody);
    assert_eq!((taken, found.len()), (23, 0));
    let (_, found) = s.feed(b"[", &nobody);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].message.message, "hello\nmore");
    assert_eq!(found[0].resume, Position { offset: 23, line: 3 });
    assert_eq!(s.resume(), s.next());
}

#[test]
fn a_pending_message_holds_the_resume_position() {
    let mut s = Scanner::new(Position::START, false);
    let (_, found) = s.feed(b"[a-to-b]: one\n[a-to-b]: two\n  more\n", &nobody);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].resume, Position { offset: 14, line: 2 });
    assert_eq!(s.resume(), Position { offset: 14, line: 2 });
    let f = s.finish().unwrap();
    assert_eq!(f.message.message, "two\nmore");
    assert_eq!(f.resume, s.next());
}

#[test]
fn say_text_reads_back_exactly() {
    let cases = [
        "hello",
        "  first line indented\nsecond",
        "a\n\n  indented\n\tTab\nlast  \n\n",
        "windows\r\nline\r\n",
    ];
    for text in cases {
        let lines = normalise_text(text).unwrap();
        let cc = vec!["x".to_string(), "y".to_string()];
        let rendered = render("coder", "qa", &cc, &lines);
        let v = read_all(&rendered, false, &nobody);
        assert_eq!(v.len(), 1, "{rendered:?}");
        assert_eq!(v[0]["message"], lines.join("\n"), "{rendered:?}");
        assert_eq!(v[0]["broadcast"], json!(["x", "y"]));
    }
    assert!(normalise_text(" \n\n").is_err());
}

/// Any short text from the grammar's own characters (and some others).
fn noise() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        Just("[".to_string()),
        Just("]".to_string()),
        Just("-to-".to_string()),
        Just("@".to_string()),
        Just(":".to_string()),
        Just(" ".to_string()),
        Just(",".to_string()),
        Just("\t".to_string()),
        Just("\n".to_string()),
        Just("\r".to_string()),
        Just("\u{a0}".to_string()),
        Just("\u{2003}".to_string()),
        Just("é".to_string()),
        "[a-c_-]{1,3}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(atom, 0..6).prop_map(|v| v.concat())
}

/// Whitespace as `\s` sees it, or nothing.
fn ws() -> impl Strategy<Value = String> {
    prop::collection::vec(prop_oneof![Just(" "), Just("\t"), Just("\u{a0}"), Just("\n")], 0..3)
        .prop_map(|v| v.concat())
}

/// Lines shaped like messages, each part sometimes replaced by noise, so that matches,
/// near misses and several `-to-` are all common.
fn line_strategy() -> impl Strategy<Value = String> {
    let name = prop::collection::vec(
        prop_oneof![Just("-to-".to_string()), "[a-cA_0-]{1,3}".prop_map(|s| s)],
        1..5,
    )
    .prop_map(|v| v.concat());
    let maybe = |s: &'static str| prop_oneof![4 => Just(s.to_string()), 1 => noise()];
    let cc = prop_oneof![
        2 => Just(String::new()),
        2 => (ws(), ws(), "[a-c ,]{0,6}", maybe("]")).prop_map(|(a, b, l, c)| format!("{a}@{b}[{l}{c}")),
        1 => noise(),
    ];
    let shaped = (maybe("["), name, maybe("]"), cc, ws(), maybe(":"), ws(), noise()).prop_map(
        |(o, n, c, cc, w1, colon, w2, body)| format!("{o}{n}{c}{cc}{w1}{colon}{w2}{body}"),
    );
    prop_oneof![3 => shaped, 1 => noise()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5_000))]

    /// The hand-written matcher captures exactly what the reference regex captures.
    #[test]
    fn matcher_equals_the_reference_regex(line in line_strategy()) {
        thread_local! {
            static RE: regex::Regex = regex::Regex::new(
                r"^\[([a-zA-Z0-9_-]+)-to-([a-zA-Z0-9_-]+)\](?:\s*@\s*\[([^\]]*)\])?\s*:\s*(.+)$",
            ).unwrap();
        }
        let want = RE.with(|re| re.captures(&line).map(|c| {
            (c[1].to_string(), c[2].to_string(), c.get(3).map(|m| m.as_str().to_string()), c[4].to_string())
        }));
        let got = match_line(&line).map(|c| {
            (c.sender.to_string(), c.recipient.to_string(), c.broadcast.map(str::to_string), c.body.to_string())
        });
        prop_assert_eq!(got, want);
    }

    #[test]
    fn any_bytes_scan_without_panic(data in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut s = Scanner::new(Position::START, false);
        let (taken, _) = s.feed(&data, &nobody);
        prop_assert!(taken <= data.len());
        let _ = s.finish();
    }
}
