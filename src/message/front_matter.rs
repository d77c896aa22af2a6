//! The TX format: a YAML mapping between `---` lines, then the body.
//!
//! Values are read as the text written (`001` stays `001`, `true` stays `true`), so only
//! `tags` may hold a list; any other non-scalar value is a problem.

use std::collections::HashMap;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::parse::lines;
use super::{Field, Format, Limits, Message, Problem, field};
use crate::yaml;

/// Parses front-matter text (first line `---`), pushing every problem. A block longer than
/// `limits.header_lines` is not read past the limit. Linear in the block (YAML aside).
pub(super) fn parse(
    text: &str,
    limits: &Limits,
    problems: &mut Vec<Problem>,
) -> Option<(Message, Vec<Field>)> {
    let mut all = lines(text);
    let (_, _, _, block_start) = all.next()?;
    let mut close = None;
    for (n, (no, line, start, end)) in all.enumerate() {
        if line.trim_end() == "---" {
            close = Some((no, start, end));
            break;
        }
        if n >= limits.header_lines {
            problems.push(limits.header_problem(no));
            return None;
        }
    }
    let Some((close_no, block_end, body_start)) = close else {
        problems.push(
            Problem::new(Some(1), None, "front matter has no closing `---` line")
                .hint("end the YAML header with a line holding only `---`"),
        );
        return None;
    };
    let block = &text[block_start..block_end];
    let key_lines = key_lines(block);
    let entries = match yaml::from_str::<Entries>(block) {
        Ok(e) => e.0,
        Err(e) => {
            // Valid YAML with a list or mapping where a header takes one value: that
            // header's problem alone, and the others are still read and checked.
            let Some(kept) = without_nested(block, &key_lines, problems) else {
                problems.push(yaml_problem(&e.to_string(), close_no));
                return None;
            };
            match yaml::from_str::<Entries>(&kept) {
                Ok(e) => e.0,
                Err(e) => {
                    problems.push(yaml_problem(&e.to_string(), close_no));
                    return None;
                }
            }
        }
    };
    let mut m = Message::new(Format::FrontMatter);
    let mut seen: Vec<Field> = Vec::new();
    for (key, value) in entries {
        let line = key_lines.get(key.as_str()).copied();
        let problem = |msg: String, hint: Option<String>| {
            Problem::new(line, Some(&key), msg).maybe_hint(hint)
        };
        match Field::from_front_matter_key(&key) {
            Some(f) if seen.contains(&f) => {
                problems.push(problem(
                    "duplicate header (another spelling of it is present)".into(),
                    None,
                ));
            }
            Some(f) => {
                seen.push(f);
                let set = match value {
                    Value::Text(s) => f.set(&mut m, &s),
                    Value::Null => Err(("empty value".into(), None)),
                    Value::List(tags) => field::set_tags(&mut m, tags),
                };
                if let Err((msg, hint)) = set {
                    problems.push(problem(msg, hint));
                }
            }
            None => {
                let v = match value {
                    Value::Text(s) => s,
                    Value::Null | Value::List(_) => String::new(),
                };
                m.extra.push((key, v));
            }
        }
    }
    m.body = text[body_start..].to_string();
    Some((m, seen))
}

/// `block` without its top-level keys (other than `tags`) whose values are lists or
/// mappings, each told as a problem; `None` when the block is no YAML mapping or has none.
fn without_nested(
    block: &str,
    key_lines: &HashMap<&str, usize>,
    problems: &mut Vec<Problem>,
) -> Option<String> {
    let shapes = yaml::from_str::<Shapes>(block).ok()?.0;
    let nested: Vec<&str> =
        shapes.iter().filter(|(k, n)| *n && k != "tags").map(|(k, _)| k.as_str()).collect();
    if nested.is_empty() {
        return None;
    }
    let mut kept = String::with_capacity(block.len());
    let mut skipping = false;
    for (_, l, start, end) in lines(block) {
        let top = !l.is_empty() && !l.starts_with([' ', '\t', '#', '-']);
        if top {
            let key = l.split_once(':').map_or(l, |(k, _)| k).trim().trim_matches(['"', '\'']);
            skipping = nested.contains(&key);
        }
        if !skipping {
            kept.push_str(&block[start..end]);
        }
    }
    for key in nested {
        problems.push(
            Problem::new(
                key_lines.get(key).copied(),
                Some(key),
                "a list or mapping where a single value belongs",
            )
            .hint(
                "only `tags` may hold a list; other values are single lines (quote them if needed)",
            ),
        );
    }
    Some(kept)
}

/// The top-level keys of a mapping, each with whether its value is a list or mapping.
struct Shapes(Vec<(String, bool)>);

impl<'de> Deserialize<'de> for Shapes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Shapes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shapes, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    out.push((key, map.next_value::<Shape>()?.0));
                }
                Ok(Shapes(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Whether a value is a list or mapping (true) or a scalar.
struct Shape(bool);

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Shape;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Shape, E> {
                Ok(Shape(false))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Shape, E> {
                Ok(Shape(false))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Shape, E> {
                Ok(Shape(false))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Shape, E> {
                Ok(Shape(false))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Shape, E> {
                Ok(Shape(false))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Shape, E> {
                Ok(Shape(false))
            }
            fn visit_none<E: de::Error>(self) -> Result<Shape, E> {
                Ok(Shape(false))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
                while seq.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(Shape(true))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
                while map.next_entry::<de::IgnoredAny, de::IgnoredAny>()?.is_some() {}
                Ok(Shape(true))
            }
        }
        d.deserialize_any(V)
    }
}

/// Whether `key` can be written as a front-matter extra header.
#[cfg(test)]
pub(super) fn is_extra_key(key: &str) -> bool {
    Field::from_front_matter_key(key).is_none()
}

/// The file line of each top-level key (its first occurrence), found by a plain scan
/// (YAML line 1 is file line 2).
fn key_lines(block: &str) -> HashMap<&str, usize> {
    let mut out = HashMap::new();
    for (no, l, _, _) in lines(block).filter(|(_, l, _, _)| !l.starts_with([' ', '\t', '#', '-'])) {
        if let Some((key, _)) = l.split_once(':') {
            let key = key.trim().trim_matches(['"', '\'']);
            out.entry(key).or_insert(no + 1);
        }
    }
    out
}

/// serde-saphyr reports `error: line N column M: what`; N counts from the line after `---`.
fn yaml_problem(err: &str, close_no: usize) -> Problem {
    let rest = err.strip_prefix("error: ").unwrap_or(err);
    let located = rest.strip_prefix("line ").and_then(|r| {
        let (n, r) = r.split_once(' ')?;
        let n: usize = n.parse().ok()?;
        let r = r.strip_prefix("column ")?;
        let (_, what) = r.split_once(": ")?;
        Some((n, what))
    });
    let (line, what) = match located {
        Some((n, what)) => (Some((n + 1).min(close_no)), what),
        None => (None, rest),
    };
    let mut p = Problem::new(line, None, format!("front matter is not valid YAML: {what}"));
    if what.contains("expected string scalar") {
        p = p.hint(
            "only `tags` may hold a list; other values are single lines (quote them if needed)",
        );
    } else if what.contains("mapping values are not allowed") {
        p = p.hint("a value holding `: ` reads as a mapping: quote it, as in `summary: \"a: b\"`");
    } else if what.contains("quoted scalar") {
        p = p.hint("a quoted value ends on its own line with its closing quote");
    }
    p
}

/// A front-matter value as written.
enum Value {
    Text(String),
    Null,
    List(Vec<String>),
}

/// The top-level mapping, in file order.
struct Entries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of header keys to values")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Entries, E> {
                Ok(Entries(Vec::new()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value = if key == "tags" {
                        map.next_value::<Tags>()?.0
                    } else {
                        match map.next_value::<Scalar>()?.0 {
                            Some(s) => Value::Text(s),
                            None => Value::Null,
                        }
                    };
                    out.push((key, value));
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A scalar read as its text, `None` for null.
struct Scalar(Option<String>);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Option::<String>::deserialize(d).map(Scalar)
    }
}

/// `tags`: a list of scalars, or one scalar (split on commas later).
struct Tags(Value);

impl<'de> Deserialize<'de> for Tags {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Tags;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tag or a list of tags")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Tags, E> {
                Ok(Tags(Value::Text(v.to_string())))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Tags, E> {
                Ok(Tags(Value::Text(v.to_string())))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Tags, E> {
                Ok(Tags(Value::Text(v.to_string())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Tags, E> {
                Ok(Tags(Value::Text(v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Tags, E> {
                Ok(Tags(Value::Text(v.to_string())))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Tags, E> {
                Ok(Tags(Value::Null))
            }
            fn visit_none<E: de::Error>(self) -> Result<Tags, E> {
                Ok(Tags(Value::Null))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tags, A::Error> {
                let mut out = Vec::new();
                while let Some(Scalar(t)) = seq.next_element::<Scalar>()? {
                    out.push(t.unwrap_or_default());
                }
                Ok(Tags(Value::List(out)))
            }
        }
        d.deserialize_any(V)
    }
}
