//! Tests over the whole module: the reference examples, problems, round trips.

use proptest::prelude::*;

use super::*;
use crate::clock;

const CIRCE_EXAMPLES: [&str; 3] = [
    include_str!("testdata/circe_example_1.md"),
    include_str!("testdata/circe_example_2.md"),
    include_str!("testdata/circe_example_3.md"),
];

/// TX examples with a `timestamp` (stored) and without (drafts).
const TX_STORED: [&str; 6] = [
    include_str!("testdata/tx_ask.md"),
    include_str!("testdata/tx_ask_response.md"),
    include_str!("testdata/tx_task.md"),
    include_str!("testdata/tx_task_complete.md"),
    include_str!("testdata/tx_update.md"),
    include_str!("testdata/tx_prompt.md"),
];
const TX_DRAFTS: [&str; 5] = [
    include_str!("testdata/tx_ex1_ask.md"),
    include_str!("testdata/tx_ex1_response.md"),
    include_str!("testdata/tx_ex2_task.md"),
    include_str!("testdata/tx_ex2_complete.md"),
    include_str!("testdata/tx_ex3_update.md"),
];

fn problems(text: &str, mode: Mode) -> Vec<String> {
    parse(text, mode).expect_err("should not parse").iter().map(ToString::to_string).collect()
}

#[test]
fn circe_examples_parse_and_render_byte_identical() {
    for text in CIRCE_EXAMPLES {
        let m = parse(text, Mode::Stored).unwrap_or_else(|p| panic!("{p:?}"));
        assert_eq!(m.format, Format::Circe);
        assert_eq!(m.task_id.as_deref(), Some("AUTH-012"));
        assert!(m.body.starts_with("## Summary\n"), "{:?}", m.body);
        assert_eq!(render(&m), text);
    }
    let m = parse(CIRCE_EXAMPLES[2], Mode::Stored).unwrap();
    assert_eq!(m.from.as_deref(), Some("engineer"));
    assert_eq!(m.intent.as_deref(), Some("escalate"));
    assert_eq!(m.status_normalized(), Some("blocked"));
    assert_eq!(m.created_at, clock::parse("2025-11-21T18:15:00Z"));
    assert!(m.extra.is_empty() && m.msg_id.is_none());
}

#[test]
fn tx_examples_parse_and_round_trip() {
    for (text, mode) in TX_STORED
        .iter()
        .map(|t| (t, Mode::Stored))
        .chain(TX_DRAFTS.iter().map(|t| (t, Mode::Draft)))
    {
        let m = parse(text, mode).unwrap_or_else(|p| panic!("{p:?}\n{text}"));
        assert_eq!(m.format, Format::FrontMatter);
        assert!(m.status_normalized().is_some());
        assert_eq!(parse(&render(&m), mode), Ok(m.clone()));
        assert_eq!(render(&parse(&render(&m), mode).unwrap()), render(&m));
    }
    // Drafts lack `timestamp`, so they are not stored messages.
    assert!(parse(TX_DRAFTS[0], Mode::Stored).is_err());

    let m = parse(TX_STORED[1], Mode::Stored).unwrap();
    assert_eq!(m.from.as_deref(), Some("brain/brain"));
    assert_eq!(m.from_agent(), Some("brain"));
    assert_eq!(m.intent.as_deref(), Some("ask-response"));
    assert_eq!(m.msg_id.as_deref(), Some("response-ask-brain-001"));
    assert_eq!(m.in_reply_to.as_deref(), Some("ask-brain-001"));
    assert_eq!(m.headline.as_deref(), Some("Entry point analysis complete"));
    assert_eq!(m.extra, [("requester".to_string(), "core/core".to_string())]);
    assert!(m.body.starts_with("\n# Entry Point Analysis\n"), "{:?}", m.body);
    assert_eq!(m.status_normalized(), Some("completed"));

    let prompt = parse(TX_STORED[5], Mode::Stored).unwrap();
    assert_eq!(prompt.from.as_deref(), Some("system"));
    assert_eq!(prompt.to_agent(), Some("interviewer"));
}

#[test]
fn canonical_front_matter_renders_byte_identical() {
    let text = "---\nfrom: core/core\nto: brain/brain\ntype: task\ntask-id: AUTH-012\nstatus: start\n\
                timestamp: 2025-10-30T10:00:00Z\nmsg-id: '001'\nseq: 7\nin-reply-to: ask-001\n\
                headline: \"Review: auth # now\"\npriority: high\ndeadline: 2025-10-31T00:00:00Z\n\
                tags: [code-review, a b]\nrequester: core/core\nodd key: \"\"\n---\n\nBody\n---\nmore\n";
    let m = parse(text, Mode::Stored).unwrap_or_else(|p| panic!("{p:?}"));
    assert_eq!(m.msg_id.as_deref(), Some("001"));
    assert_eq!(m.headline.as_deref(), Some("Review: auth # now"));
    assert_eq!(m.tags, ["code-review", "a b"]);
    assert_eq!(m.extra[1], ("odd key".to_string(), String::new()));
    assert_eq!(m.body, "\nBody\n---\nmore\n");
    // `'001'` is written back plain: circe reads every value as its text.
    assert_eq!(render(&m), text.replace("'001'", "001"));
}

#[test]
fn front_matter_reads_values_as_written() {
    let text = "---\nto: qa\ntype: test\nmsg-id: 001\ntags: a, b\nrequester:\nflag: true\n---\n";
    let m = parse(text, Mode::Draft).unwrap();
    assert_eq!(m.msg_id.as_deref(), Some("001"));
    assert_eq!(m.tags, ["a", "b"]);
    assert_eq!(m.extra, [("requester".into(), String::new()), ("flag".into(), "true".into())]);
}

#[test]
fn circe_aliases_leniency_and_extra() {
    let text = "\u{feff}\n# MESSAGE  \r\nfrom: engineer-2\r\nto: all\nintent: test_results\nmsg-id: m-1\n\
                task-id: AUTH-012\nstatus: new\ncreated-at: 2025-11-21T17:00:00+01:00\nx-custom: keep: me\n\
                empty:\ntags: a, b ,,c\npriority: Urgent\n# Body without a blank line\ntext\n";
    let m = parse(text, Mode::Stored).unwrap_or_else(|p| panic!("{p:?}"));
    assert_eq!(m.msg_id.as_deref(), Some("m-1"));
    assert_eq!(m.task_id.as_deref(), Some("AUTH-012"));
    assert_eq!(m.created_at, clock::parse("2025-11-21T16:00:00Z"));
    assert_eq!(m.extra, [("x-custom".into(), "keep: me".into()), ("empty".into(), String::new())]);
    assert_eq!(m.tags, ["a", "b", "c"]);
    assert_eq!(m.priority, Some(Priority::High));
    assert_eq!(m.body, "# Body without a blank line\ntext\n");
    let canonical = render(&m);
    assert!(canonical.starts_with(
        "# MESSAGE\nfrom: engineer-2\nto: all\nintent: test_results\ntask_id: AUTH-012\n"
    ));
    assert!(canonical.contains(
        "created_at: 2025-11-21T16:00:00Z\nmsg_id: m-1\npriority: high\ntags: a, b, c\n"
    ));
    assert!(
        canonical.ends_with("x-custom: keep: me\nempty:\n\n# Body without a blank line\ntext\n")
    );
    assert_eq!(parse(&canonical, Mode::Stored), Ok(m));
}

#[test]
fn all_problems_are_collected_with_lines() {
    let text = "# MESSAGE\nfrom: Engineer\nto: a/b/c\nintent: test\nstatus: done\ncreated_at: yesterday\n\
                this is not a header\nintent: again\nmsg_id: a/b\nseq: -1\npriority: medium\ndeadline: soon\n\
                x: 1\nx: 2\ntask_id: _x\ntags: ,\n\nbody\n";
    let got = problems(text, Mode::Stored);
    let want_prefixes = [
        "line 2: field `from`: agent name `Engineer` has capital letters: names are lower case (`engineer`)",
        "line 3: field `to`: address `a/b/c` has more than one `/`",
        "line 5: field `status`: unknown status `done`",
        "line 6: field `created_at`: `yesterday` is not an RFC 3339 time",
        "line 7: not a `key: value` header line",
        "line 8: field `intent`: duplicate header",
        "line 9: field `msg_id`: message id `a/b` contains '/'",
        "line 10: field `seq`: `-1` is not a sequence number",
        "line 11: field `priority`: unknown priority `medium`",
        "line 12: field `deadline`: `soon` is not an RFC 3339 time",
        "line 14: field `x`: duplicate header",
        "line 15: field `task_id`: task id `_x` may not start with '_'",
        "line 16: field `tags`: empty value",
    ];
    assert_eq!(got.len(), want_prefixes.len(), "{got:#?}");
    for (g, w) in got.iter().zip(want_prefixes) {
        assert!(g.starts_with(w), "{g:?} does not start with {w:?}");
    }
}

#[test]
fn modes_decide_what_is_required() {
    let draft = "# MESSAGE\nto: qa\nintent: test\n\nplease test\n";
    let m = parse(draft, Mode::Draft).unwrap();
    assert_eq!(m.body, "please test\n");
    let got = problems(draft, Mode::Stored);
    assert_eq!(
        got,
        [
            "field `from`: missing required header",
            "field `status`: missing required header",
            "field `created_at`: missing required header"
        ]
    );
    assert_eq!(problems("# MESSAGE\nfrom: a\n\n", Mode::Draft).len(), 2);
    assert_eq!(
        problems("---\nfrom: a\n---\n", Mode::Draft),
        ["field `to`: missing required header", "field `type`: missing required header"]
    );
    assert!(
        problems("# MESSAGE\nfrom: all\nto: qa\nintent: test\n", Mode::Draft)[0]
            .contains("not a sender")
    );
}

/// Classic Mac OS line ends (a lone CR) make one long line that starts right: said so.
#[test]
fn lone_cr_line_ends_are_named() {
    let said = ["line 1: its lines end with a lone CR (classic Mac OS line ends)"];
    assert_eq!(problems("# MESSAGE\rfrom: a\rto: b\r\rbody\r", Mode::Draft), said);
    assert_eq!(problems("---\rto: b\r---\r\rbody\r", Mode::Draft), said);
    let imported = crate::tx::bridge::import_file(
        "1030100000-update-a--b-x.md",
        b"---\rto: b\r---\r",
        chrono::Utc::now(),
        &|_| None,
    );
    assert!(imported.is_err_and(|e| e.contains("lone CR")));
}

#[test]
fn not_a_message() {
    assert_eq!(problems("", Mode::Draft), ["empty message"]);
    assert_eq!(problems("\n\n  \n", Mode::Draft), ["empty message"]);
    assert_eq!(
        problems("\nhello\n", Mode::Draft),
        ["line 2: a message starts with `# MESSAGE` or `---`"]
    );
    assert_eq!(
        problems("# message\n", Mode::Draft),
        ["line 1: a message starts with `# MESSAGE` or `---`"]
    );
    assert_eq!(
        problems("---\nto: qa\n", Mode::Draft),
        ["line 1: front matter has no closing `---` line"]
    );
    assert_eq!(
        problems("---\n---\n", Mode::Draft),
        ["field `to`: missing required header", "field `type`: missing required header"]
    );
    assert!(
        problems("---\n- a\n---\n", Mode::Draft)[0]
            .starts_with("line 2: front matter is not valid YAML")
    );
}

#[test]
fn yaml_errors_carry_the_file_line() {
    let got = problems("---\nto: qa\ntype: test\nheadline: a: b\n---\n", Mode::Draft);
    assert_eq!(got.len(), 1);
    assert!(got[0].starts_with("line 4: front matter is not valid YAML: "), "{got:?}");
    // The hint says what to do about the line it names: quote a value holding `: `.
    let p = parse("---\nto: qa\ntype: test\nheadline: a: b\n---\n", Mode::Draft).unwrap_err();
    assert!(p[0].hint.as_deref().unwrap_or_default().contains("quote it"), "{p:?}");
    let p = parse("---\nto: qa\nheadline: \"a\n---\n", Mode::Draft).unwrap_err();
    assert!(p[0].hint.as_deref().unwrap_or_default().contains("closing quote"), "{p:?}");
    let p = parse("---\nto: qa\nrequester: [a, b]\n---\n", Mode::Draft).unwrap_err();
    assert_eq!(p[0].line, Some(3));
    assert!(p[0].hint.as_deref().unwrap().contains("only `tags` may hold a list"));
    // A list or mapping is that header's problem alone: the others are still checked.
    let got = problems(
        "---\nto: qa\ntype: test\nstatus: weird\nfoo:\n  a: 1\nbar:\n- x\n---\n",
        Mode::Draft,
    );
    assert!(got.iter().any(|p| p.contains("unknown status `weird`")), "{got:?}");
    for key in ["foo", "bar"] {
        let said = format!("field `{key}`: a list or mapping where a single value belongs");
        assert!(got.iter().any(|p| p.contains(&said)), "{got:?}");
    }
    // A required header holding a list is said once: present, of the wrong shape, not missing.
    let got = problems("---\nto: [engineer]\ntype: question\n---\nb\n", Mode::Draft);
    assert_eq!(
        got,
        ["line 2: field `to`: a list or mapping where a single value belongs"],
        "{got:?}"
    );
    // An unclosed list is broken YAML, and said so.
    let got = problems("---\nto: [qa\n---\n", Mode::Draft);
    assert!(got[0].contains("front matter is not valid YAML"), "{got:?}");
    let got =
        problems("---\nto: qa\ntype: test\nstatus: weird\ntimestamp: later\n---\n", Mode::Draft);
    assert_eq!(
        got,
        [
            "line 4: field `status`: unknown status `weird`",
            "line 5: field `timestamp`: `later` is not an RFC 3339 time"
        ]
    );
    let got = problems("---\nto: qa\ntype: test\nintent: test\n---\n", Mode::Draft);
    assert!(got[0].starts_with("line 4: field `intent`: duplicate header"), "{got:?}");
}

#[test]
fn bytes_that_are_not_utf8_are_located() {
    let mut bytes = b"# MESSAGE\nto: qa\nintent: test\n\nok\nbad \xff here\n\xfe\n".to_vec();
    let p = parse_bytes(&bytes, Mode::Draft).unwrap_err();
    let lines: Vec<_> = p.iter().map(|p| p.line).collect();
    assert_eq!(lines, [Some(6), Some(7)]);
    assert_eq!(p[0].to_string(), "line 6: not valid UTF-8");
    bytes.truncate(30);
    assert_eq!(parse_bytes(&bytes, Mode::Draft).unwrap().to_agent(), Some("qa"));
    // Problems in the rest of the text are reported too.
    let p = parse_bytes(b"# MESSAGE\nto: \xff\n\n", Mode::Draft).unwrap_err();
    assert!(p.len() >= 3, "{p:?}");
}

fn address() -> impl Strategy<Value = String> {
    let agent = "[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?";
    (proptest::option::of(agent), agent)
        .prop_map(|(mesh, a)| mesh.map_or(a.clone(), |m| format!("{m}/{a}")))
}

/// Single-line text without control characters or surrounding space, possibly empty.
fn line() -> impl Strategy<Value = String> {
    prop_oneof!["[ -~]{0,24}", "[a-z #:'\"-]{0,12}", "[^\\p{Cc}]{0,24}"]
        .prop_map(|s| s.trim().to_string())
}

fn time() -> impl Strategy<Value = chrono::DateTime<chrono::Utc>> {
    (0i64..4_000_000_000, prop_oneof![Just(0u32), 0u32..1000])
        .prop_map(|(s, ms)| chrono::DateTime::from_timestamp(s, ms * 1_000_000).unwrap_or_default())
}

fn body() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        "(?s).{0,30}",
        Just("\n".to_string()),
        Just("---\n".to_string()),
        Just("# MESSAGE\n".to_string()),
        Just("from: x\nto: y\n".to_string()),
        Just("\r\n".to_string()),
    ];
    proptest::collection::vec(fragment, 0..5).prop_map(|v| v.concat())
}

fn message() -> impl Strategy<Value = Message> {
    let circe = any::<bool>();
    let statuses: Vec<&str> =
        status::CIRCE_STATUSES.iter().chain(&status::TX_STATUSES).copied().collect();
    let ids = "[A-Za-z0-9][A-Za-z0-9._-]{0,12}";
    let heads = (
        circe,
        proptest::option::of(address().prop_filter("not a sender", |a| a != "all")),
        address(),
        "[a-z][a-z0-9_-]{0,12}",
        proptest::option::of("[A-Za-z0-9][A-Za-z0-9_-]{0,10}"),
        proptest::option::of(proptest::sample::select(statuses)),
        proptest::option::of(time()),
        proptest::option::of(ids),
        (proptest::option::of(any::<u64>()), proptest::option::of(any::<u64>())),
    );
    let tails = (
        proptest::option::of(ids),
        proptest::option::of(line().prop_filter("non-empty", |s| !s.is_empty())),
        proptest::option::of(proptest::sample::select(vec![
            Priority::High,
            Priority::Normal,
            Priority::Low,
        ])),
        proptest::option::of(time()),
        proptest::collection::vec(
            prop_oneof!["[ -+--~]{1,8}", "[^,\\p{Cc}]{1,8}"].prop_map(|s| s.trim().to_string()),
            0..3,
        ),
        proptest::collection::vec(
            (
                "[a-z][a-z0-9_-]{0,8}",
                line(),
                prop_oneof!["[ -~]{1,8}", "[^\\p{Cc}]{1,8}"],
                prop_oneof![line(), "(?s).{0,12}"],
            ),
            0..3,
        ),
        body(),
    );
    (heads, tails).prop_map(
        |(
            (circe, from, to, intent, task_id, status, created_at, msg_id, (seq, seq_epoch)),
            (in_reply_to, headline, priority, deadline, tags, extra, body),
        )| {
            let format = if circe { Format::Circe } else { Format::FrontMatter };
            let mut keep: Vec<(String, String)> = Vec::new();
            for (ck, cv, fk, fv) in extra {
                let (k, v) = if circe { (ck, cv) } else { (fk, fv) };
                let known =
                    if circe { !circe::is_extra_key(&k) } else { !front_matter::is_extra_key(&k) };
                if !known && !keep.iter().any(|(seen, _)| *seen == k) {
                    keep.push((k, v));
                }
            }
            Message {
                format,
                msg_id,
                from,
                to: Some(to),
                intent: Some(intent),
                task_id,
                status: status.map(str::to_string),
                created_at,
                in_reply_to,
                headline,
                priority,
                deadline,
                tags: tags.into_iter().filter(|t| !t.is_empty()).collect(),
                seq,
                seq_epoch,
                extra: keep,
                body,
            }
        },
    )
}

fn headerish() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        Just("# MESSAGE\n"),
        Just("---\n"),
        Just("\u{feff}"),
        Just("\r\n"),
        Just("\n"),
        Just("from: core/core\n"),
        Just("to: all\n"),
        Just("type: ask\n"),
        Just("intent: test\n"),
        Just("tags: [a, \n"),
        Just("tags:\n  - x\n  - 007\n"),
        Just("created_at: 2025-11-21T17:00:00Z\n"),
        Just("created_at: x\n"),
        Just(": \n"),
        Just("key: 'unterminated\n"),
        Just("- x\n"),
        Just("  indented: y\n"),
        Just("msg-id: 001\n"),
        Just("seq: 18446744073709551616\n"),
        Just("x: &a [1]\ny: *a\n"),
        Just("\"q\": \"\\u00e9\\n\"\n"),
        Just("<<: {a: b}\n"),
        Just("? k\n: v\n"),
    ]
    .prop_map(str::to_string);
    let start = proptest::sample::select(vec![
        "",
        "# MESSAGE\nto: all\nintent: test\n",
        "---\nto: all\ntype: ask\n",
    ]);
    (start, proptest::collection::vec(prop_oneof![fragment, "\\PC{0,8}"], 0..10))
        .prop_map(|(start, v)| format!("{start}{}", v.concat()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn generated_messages_round_trip(m in message()) {
        let text = render(&m);
        let back = parse(&text, Mode::Draft);
        prop_assert_eq!(back.as_ref(), Ok(&m), "text:\n{}", text);
        prop_assert_eq!(render(&m), text);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_bytes(&bytes, Mode::Stored);
        let _ = parse_bytes(&bytes, Mode::Draft);
    }

    #[test]
    fn whatever_parses_round_trips(text in headerish()) {
        if let Ok(m) = parse(&text, Mode::Draft) {
            let canonical = render(&m);
            let back = parse(&canonical, Mode::Draft);
            prop_assert_eq!(back.as_ref(), Ok(&m), "input:\n{:?}\ncanonical:\n{:?}", text, canonical);
            prop_assert_eq!(render(&m), canonical);
        }
    }
}
