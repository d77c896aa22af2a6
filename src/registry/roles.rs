//! `Roles`: the set of roles an intent rule names, either every role or a fixed list.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Serialize, Serializer};

/// The roles on one side (sender or recipient) of an intent rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roles {
    /// Every role, including roles added later by configuration.
    Any,
    /// Exactly these roles.
    Only(BTreeSet<String>),
}

impl Roles {
    /// A fixed list of roles.
    pub fn only<'a>(roles: impl IntoIterator<Item = &'a str>) -> Roles {
        Roles::Only(roles.into_iter().map(str::to_owned).collect())
    }

    /// Whether `role` is on this side of the rule.
    pub fn contains(&self, role: &str) -> bool {
        match self {
            Roles::Any => true,
            Roles::Only(set) => set.contains(role),
        }
    }

    /// Whether every role in `self` is also in `wider` (so `self` narrows `wider` or equals it).
    pub fn is_within(&self, wider: &Roles) -> bool {
        match (self, wider) {
            (_, Roles::Any) => true,
            (Roles::Any, Roles::Only(_)) => false,
            (Roles::Only(narrow), Roles::Only(wide)) => narrow.is_subset(wide),
        }
    }

    /// The roles named by `self` but not by `wider`; `["any"]` when `self` is `Any` and `wider` is not.
    pub fn beyond(&self, wider: &Roles) -> Vec<String> {
        match (self, wider) {
            (_, Roles::Any) => Vec::new(),
            (Roles::Any, Roles::Only(_)) => vec!["any".to_owned()],
            (Roles::Only(narrow), Roles::Only(wide)) => narrow.difference(wide).cloned().collect(),
        }
    }

    /// Human list for error messages: `any` or `coordinator, rooster`.
    pub fn listed(&self) -> String {
        match self {
            Roles::Any => "any role".to_owned(),
            Roles::Only(set) => set.iter().map(String::as_str).collect::<Vec<_>>().join(", "),
        }
    }
}

/// Compact form for tables: `any` or `coordinator|rooster`.
impl fmt::Display for Roles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Roles::Any => f.write_str("any"),
            // An intent a rule turned off (`from: []`).
            Roles::Only(set) if set.is_empty() => f.write_str("nobody"),
            Roles::Only(set) => {
                f.write_str(&set.iter().map(String::as_str).collect::<Vec<_>>().join("|"))
            }
        }
    }
}

/// JSON and YAML form: the string `"any"` or a list of role names, as in circe.yaml.
impl Serialize for Roles {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Roles::Any => s.serialize_str("any"),
            Roles::Only(set) => set.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shown as the registry table shows them: an intent turned off reads "nobody".
    #[test]
    fn shown() {
        assert_eq!(Roles::Any.to_string(), "any");
        assert_eq!(Roles::only(["coordinator", "engineer"]).to_string(), "coordinator|engineer");
        assert_eq!(Roles::only(Vec::<&str>::new()).to_string(), "nobody");
    }

    #[test]
    fn contains_and_within() {
        let ce = Roles::only(["coordinator", "engineer"]);
        let c = Roles::only(["coordinator"]);
        assert!(ce.contains("engineer"));
        assert!(!ce.contains("qa"));
        assert!(Roles::Any.contains("anything"));
        assert!(c.is_within(&ce));
        assert!(!ce.is_within(&c));
        assert!(ce.is_within(&Roles::Any));
        assert!(!Roles::Any.is_within(&ce));
        assert!(Roles::Any.is_within(&Roles::Any));
        assert_eq!(ce.beyond(&c), vec!["engineer".to_owned()]);
        assert_eq!(Roles::Any.beyond(&c), vec!["any".to_owned()]);
        assert!(c.beyond(&ce).is_empty());
    }

    #[test]
    fn renders() {
        assert_eq!(Roles::only(["rooster", "coordinator"]).to_string(), "coordinator|rooster");
        assert_eq!(Roles::Any.to_string(), "any");
        assert_eq!(Roles::only(["qa", "eagle"]).listed(), "eagle, qa");
        assert_eq!(serde_json::to_string(&Roles::Any).unwrap(), "\"any\"");
        assert_eq!(serde_json::to_string(&Roles::only(["qa"])).unwrap(), "[\"qa\"]");
    }
}
