//! The allowlists for agent names, role names, task ids, intents and message ids.
//!
//! Checked before any path is built from a name (FS_RULES 11). PROTOCOLS.md "Names" mirrors this.

use crate::error::{Error, Result};

/// Longest name circe accepts, in bytes.
pub const MAX_LEN: usize = 64;

/// Agent and role names: lowercase letters, digits and `-`; starts and ends with a letter or digit.
pub fn check_agent(name: &str) -> Result<()> {
    check(name, "agent name", is_lower_alnum, |c| is_lower_alnum(c) || c == '-', true)
        .map_err(|e| e.hint("agent names use a-z, 0-9 and '-', start and end with a letter or digit, at most 64 bytes"))
}

/// TX mesh names follow the agent-name rule.
pub fn check_mesh(name: &str) -> Result<()> {
    check(name, "mesh name", is_lower_alnum, |c| is_lower_alnum(c) || c == '-', true).map_err(|e| {
        e.hint("mesh names use a-z, 0-9 and '-', start and end with a letter or digit, at most 64 bytes")
    })
}

/// Role names follow the agent-name rule.
pub fn check_role(name: &str) -> Result<()> {
    check(name, "role name", is_lower_alnum, |c| is_lower_alnum(c) || c == '-', true).map_err(|e| {
        e.hint("role names use a-z, 0-9 and '-', start and end with a letter or digit")
    })
}

/// Task ids: letters, digits, `-` and `_`; starts with a letter or digit (e.g. `AUTH-012`).
pub fn check_task_id(id: &str) -> Result<()> {
    check(id, "task id", |c| c.is_ascii_alphanumeric(), |c| c.is_ascii_alphanumeric() || c == '-' || c == '_', false)
        .map_err(|e| e.hint("task ids use A-Z, a-z, 0-9, '-' and '_', start with a letter or digit, at most 64 bytes"))
}

/// Intents: lowercase letters, digits, `_` and `-`; starts with a letter (`implement_feature`, `task-complete`).
pub fn check_intent(name: &str) -> Result<()> {
    check(name, "intent", |c| c.is_ascii_lowercase(), |c| is_lower_alnum(c) || c == '_' || c == '-', false)
        .map_err(|e| e.hint("intents use a-z, 0-9, '_' and '-' and start with a letter; `circe registry` lists them"))
}

/// Message ids: letters, digits, `.`, `_` and `-`; starts with a letter or digit; at most 128 bytes.
pub fn check_msg_id(id: &str) -> Result<()> {
    const RULE: &str = "message ids use A-Z, a-z, 0-9, '.', '_' and '-', start with a letter or digit, at most 128 bytes";
    if id.len() > 2 * MAX_LEN {
        return Err(
            Error::refused(format!("message id is {} bytes long, over 128", id.len())).hint(RULE)
        );
    }
    check_chars(
        id,
        "message id",
        |c| c.is_ascii_alphanumeric(),
        |c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'),
        false,
    )
    .map_err(|e| if e.hint.is_some() { e } else { e.hint(RULE) })
}

/// Request ids (a claim's, for its retry): one word of printable ASCII, 1 to 128 bytes (the
/// local engine keeps it as a field of a line). The same rule for every engine.
pub fn check_request_id(request: &str) -> Result<()> {
    let wrong = if request.is_empty() {
        "is empty".to_string()
    } else if request.len() > 128 {
        format!("is {} bytes long", request.len())
    } else if let Some(c) = request.chars().find(|c| !c.is_ascii_graphic()) {
        match c {
            ' ' => "holds a space".to_string(),
            c if c.is_ascii() => format!("holds the control character {c:?}"),
            c => format!("holds `{c}`, which is not ASCII"),
        }
    } else {
        return Ok(());
    };
    Err(Error::usage(format!(
        "request id `{request}` {wrong}: a request id is one word of 1-128 printable ASCII characters"
    ))
    .hint("use letters, digits and -_.: (circe prints the ids it makes)"))
}

/// Cursor names (a consumer's saved place): letters, digits, `-` and `_`; starts with a
/// letter or digit (the task-id rule).
pub fn check_cursor(name: &str) -> Result<()> {
    check(name, "cursor name", |c| c.is_ascii_alphanumeric(), |c| c.is_ascii_alphanumeric() || c == '-' || c == '_', false)
        .map_err(|e| e.hint("cursor names use A-Z, a-z, 0-9, '-' and '_', start with a letter or digit, at most 64 bytes"))
}

/// Check names: lowercase letters, digits and `_`; starts with a letter (`tests_passed`).
pub fn check_check(name: &str) -> Result<()> {
    check(name, "check name", |c| c.is_ascii_lowercase(), |c| is_lower_alnum(c) || c == '_', false)
        .map_err(|e| {
            e.hint("check names use a-z, 0-9 and '_' and start with a letter, like tests_passed")
        })
}

fn is_lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn check(
    name: &str,
    what: &str,
    first: fn(char) -> bool,
    rest: fn(char) -> bool,
    alnum_end: bool,
) -> Result<()> {
    if name.len() > MAX_LEN {
        return Err(Error::refused(format!("{what} is {} bytes long, over {MAX_LEN}", name.len())));
    }
    check_chars(name, what, first, rest, alnum_end)
}

fn check_chars(
    name: &str,
    what: &str,
    first: fn(char) -> bool,
    rest: fn(char) -> bool,
    alnum_end: bool,
) -> Result<()> {
    let refused = chars_refused(name, what, first, rest, alnum_end);
    // A name typed in capitals that is one in lower case is told that form.
    let lower = name.to_ascii_lowercase();
    if refused.is_err()
        && lower != name
        && chars_refused(&lower, what, first, rest, alnum_end).is_ok()
    {
        // The text as given: the terminal's output escapes what cannot be shown, and the
        // JSON keeps it as it is (section 11).
        return Err(Error::refused(format!(
            "{what} `{}` has capital letters: names are lower case (`{}`)",
            crate::error::one_line(name),
            crate::error::one_line(&lower)
        )));
    }
    refused
}

fn chars_refused(
    name: &str,
    what: &str,
    first: fn(char) -> bool,
    rest: fn(char) -> bool,
    alnum_end: bool,
) -> Result<()> {
    let shown = crate::error::one_line(name);
    let Some(c0) = name.chars().next() else {
        return Err(Error::refused(format!("{what} is empty")));
    };
    // A capital that is allowed in lower case is told as such.
    let capital =
        |c: char, ok: fn(char) -> bool| c.is_ascii_uppercase() && ok(c.to_ascii_lowercase());
    if !first(c0) {
        if capital(c0, first) {
            return Err(Error::refused(format!(
                "{what} `{shown}` starts with a capital letter: names are lower case"
            )));
        }
        return Err(Error::refused(format!(
            "{what} `{shown}` may not start with '{}'",
            crate::error::one_line(&c0.to_string())
        )));
    }
    if let Some(bad) = name.chars().find(|&c| !rest(c)) {
        if capital(bad, rest) {
            return Err(Error::refused(format!(
                "{what} `{shown}` contains a capital letter ('{bad}'): names are lower case"
            )));
        }
        return Err(Error::refused(format!(
            "{what} `{shown}` contains '{}'",
            crate::error::one_line(&bad.to_string())
        )));
    }
    if alnum_end && name.ends_with('-') {
        return Err(Error::refused(format!("{what} `{shown}` may not end with '-'")));
    }
    Ok(())
}

/// A string that passed one of the checks above. The only ways to make one are `new` (which
/// checks) and deserializing (which checks too), so a value of these types is always a legal
/// name: the engine builds paths and keys only from them.
macro_rules! checked_name {
    ($(#[$doc:meta])* $name:ident, $check:path) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn new(s: impl Into<String>) -> Result<$name> {
                let s = s.into();
                $check(&s)?;
                Ok($name(s))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = Error;
            fn try_from(s: String) -> Result<$name> {
                $name::new(s)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = Error;
            fn try_from(s: &str) -> Result<$name> {
                $name::new(s)
            }
        }

        impl From<$name> for String {
            fn from(n: $name) -> String {
                n.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

checked_name!(
    /// An agent's name (`engineer-2`).
    AgentName,
    check_agent
);
checked_name!(
    /// A task id (`AUTH-012`).
    TaskId,
    check_task_id
);
checked_name!(
    /// A message id (`20251121T170000000Z-k3v9x2m1`, or a TX id like `ask-brain-001`).
    MsgId,
    check_msg_id
);
checked_name!(
    /// A check's name (`tests_passed`).
    CheckName,
    check_check
);
checked_name!(
    /// A consumer's cursor name (`--cursor brain`).
    CursorName,
    check_cursor
);
checked_name!(
    /// An intent's name (`implement_feature`, `task-complete`).
    IntentName,
    check_intent
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents() {
        for ok in ["engineer", "engineer-2", "qa", "a", "x--y"] {
            assert!(check_agent(ok).is_ok(), "{ok}");
        }
        let long = "a".repeat(65);
        for bad in ["", "../x", "a/b", "-a", ".a", "A", "a_b", "a-", "a b", "a\0b", long.as_str()] {
            assert!(check_agent(bad).is_err(), "{bad:?}");
        }
        // A capital is told as such, also when something else is wrong too.
        let msg = |n: &str| check_agent(n).unwrap_err().message;
        assert!(msg("My_Mesh").contains("starts with a capital letter"), "{}", msg("My_Mesh"));
        assert!(msg("my_Mesh").contains("contains '_'"), "{}", msg("my_Mesh"));
        assert!(msg("myMesh_").contains("contains a capital letter ('M')"), "{}", msg("myMesh_"));
        assert!(check_mesh("My").unwrap_err().message.starts_with("mesh name"));
    }

    #[test]
    fn task_ids() {
        for ok in ["AUTH-012", "FEAT_21", "x"] {
            assert!(check_task_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", "../x", "a/b", "-a", ".a", "a.b", "_a"] {
            assert!(check_task_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn checked_types_refuse_bad_names() {
        assert!(TaskId::new("AUTH-012").is_ok());
        assert!(TaskId::new("../x").is_err());
        assert!(CheckName::new("tests_passed").is_ok());
        assert!(CheckName::new("Tests").is_err());
        assert!(CheckName::new("tests-passed").is_err());
        let bad: std::result::Result<AgentName, _> = serde_json::from_str("\"a/b\"");
        assert!(bad.is_err(), "deserializing checks the name too");
        let good: AgentName = serde_json::from_str("\"qa\"").unwrap();
        assert_eq!(good, "qa");
    }

    #[test]
    fn intents_and_ids() {
        assert!(check_intent("implement_feature").is_ok());
        assert!(check_intent("task-complete").is_ok());
        assert!(check_intent("Fix").is_err());
        assert!(check_msg_id("ask-brain-001").is_ok());
        assert!(check_msg_id("a/b").is_err());
        assert!(check_msg_id(&"a".repeat(129)).is_err());
        // Every refusal says the rule.
        for bad in ["a/b", ".abc", &"a".repeat(129)] {
            let hint = check_msg_id(bad).unwrap_err().hint.unwrap_or_default();
            assert!(hint.contains("message ids use"), "{bad}: {hint}");
        }
    }
}
