//! "Did you mean": the known name closest to a mistyped one (agents, roles, intents,
//! commands). The only user of `strsim`.

use crate::error::Error;

/// The candidate closest to `name`, if one is close enough to be a likely typo: same
/// letters in another case, a prefix either way (`escalation` for `escalate`), or a
/// Jaro-Winkler similarity of at least 0.85.
pub fn closest<'c>(name: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    let lower = name.to_ascii_lowercase();
    let mut best: Option<(f64, &'c str)> = None;
    for c in candidates {
        let score = if c == lower {
            2.0
        } else if lower.len() >= 4 && (c.starts_with(&lower) || lower.starts_with(c)) {
            // The longer the prefix shared, the closer (`t_69x`: `t_69` before `t_6`).
            1.5 + f64::from(u16::try_from(c.len().min(lower.len())).unwrap_or(u16::MAX)) / 1e6
        } else {
            strsim::jaro_winkler(&lower, c)
        };
        if score >= 0.85 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, c));
        }
    }
    best.map(|(_, c)| c)
}

/// `no WHAT `NAME``, exit 5, with `did you mean `X`?` when a known name is close.
pub fn not_found<'c>(
    what: &str,
    name: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Error {
    let e = Error::not_found(format!("no {what} `{}`", crate::error::one_line(name)));
    match closest(name, candidates) {
        // Listed under that very name, yet not found: something stands there that is not
        // one (a folder where a record should be).
        Some(c) if c == name => e.hint(format!(
            "something named `{c}` is there but cannot be read as a {what}: `circe doctor` says what"
        )),
        Some(c) => e.hint(format!("did you mean `{c}`?")),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn typos_find_their_name() {
        let agents = ["coordinator", "engineer", "engineer-2", "qa"];
        assert_eq!(closest("enginer", agents), Some("engineer"));
        assert_eq!(closest("Engineer", agents), Some("engineer"));
        assert_eq!(closest("coordinater", agents), Some("coordinator"));
        assert_eq!(closest("escalation", ["escalate", "inform"]), Some("escalate"));
        assert_eq!(closest("infrom", ["escalate", "inform"]), Some("inform"));
        assert_eq!(closest("zzz", agents), None);
        assert_eq!(closest("x", ["qa"]), None);
        assert_eq!(closest("team_69x", ["team_6", "team_69"]), Some("team_69"));
    }
}
