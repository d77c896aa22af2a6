//! Rendering a message back to text in its own format, in the canonical header order.

use std::fmt::Write as _;

use super::{Field, Format, Message};

/// The message as text: canonical header order, absent fields omitted, body verbatim.
pub fn render(m: &Message) -> String {
    match m.format {
        Format::Circe => render_circe(m),
        Format::FrontMatter => render_front_matter(m),
    }
}

fn render_circe(m: &Message) -> String {
    let mut out = String::from("# MESSAGE\n");
    for f in Field::ALL {
        if let Some(v) = f.text(m) {
            let _ = writeln!(out, "{}: {v}", f.circe_key());
        }
    }
    for (k, v) in &m.extra {
        if v.is_empty() {
            let _ = writeln!(out, "{k}:");
        } else {
            let _ = writeln!(out, "{k}: {v}");
        }
    }
    out.push('\n');
    out.push_str(&m.body);
    out
}

fn render_front_matter(m: &Message) -> String {
    let mut out = String::from("---\n");
    for f in Field::ALL {
        if f == Field::Tags {
            if !m.tags.is_empty() {
                let tags: Vec<String> = m.tags.iter().map(|t| scalar(t, true)).collect();
                let _ = writeln!(out, "tags: [{}]", tags.join(", "));
            }
        } else if let Some(v) = f.text(m) {
            let _ = writeln!(out, "{}: {}", f.front_matter_key(), scalar(&v, false));
        }
    }
    for (k, v) in &m.extra {
        let _ = writeln!(out, "{}: {}", scalar(k, true), scalar(v, false));
    }
    out.push_str("---\n");
    out.push_str(&m.body);
    out
}

/// A YAML scalar that reads back as exactly `s`: plain when that is safe, else double-quoted.
/// `flow` also quotes the characters that end a plain scalar inside `[...]`.
fn scalar(s: &str, flow: bool) -> String {
    if is_plain(s, flow) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            ' ' => out.push(' '),
            c if c.is_control()
                || c.is_whitespace()
                || c == '\u{feff}'
                || u32::from(c) > 0xffff =>
            {
                if u32::from(c) > 0xffff {
                    let _ = write!(out, "\\U{:08x}", u32::from(c));
                } else {
                    let _ = write!(out, "\\u{:04x}", u32::from(c));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Plain when it starts with a letter, digit or `/`, holds only printable ASCII, ends in
/// neither space nor `:`, and holds no `: ` or ` #`. YAML type inference does not matter:
/// circe reads every value as the text written.
fn is_plain(s: &str, flow: bool) -> bool {
    let Some(first) = s.chars().next() else { return false };
    (first.is_ascii_alphanumeric() || first == '/')
        && s.chars().all(|c| c.is_ascii_graphic() || c == ' ')
        && !s.ends_with([' ', ':'])
        && !s.contains(": ")
        && !s.contains(" #")
        && !(flow && s.contains([',', '[', ']', '{', '}']))
        && !matches!(s, "null" | "Null" | "NULL")
}
