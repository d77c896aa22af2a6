//! Message priority, used to order claims.

use serde::Serialize;

/// How urgent a message is. Orders `High < Normal < Low`, so sorting puts urgent work first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    High,
    Normal,
    Low,
}

impl Priority {
    /// Claim order: 0 for high, 1 for normal, 2 for low.
    pub fn rank(self) -> u8 {
        match self {
            Priority::High => 0,
            Priority::Normal => 1,
            Priority::Low => 2,
        }
    }

    /// The canonical spelling, as rendered.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::High => "high",
            Priority::Normal => "normal",
            Priority::Low => "low",
        }
    }

    /// `high`, `normal`, `low`, in any case; `urgent` and TX's `critical` are read as `high`.
    pub fn parse(s: &str) -> Option<Priority> {
        match s.to_ascii_lowercase().as_str() {
            "high" | "urgent" | "critical" => Some(Priority::High),
            "normal" => Some(Priority::Normal),
            "low" => Some(Priority::Low),
            _ => None,
        }
    }
}

/// A stored priority's place in `claim --next`'s order, lowest first: `high` 0, `low` 2,
/// anything else 1. Records hold the canonical spelling; every engine ranks by this (the
/// database's generated `rank` column says the same in SQL).
pub fn rank_of(stored: &str) -> u8 {
    match stored {
        "high" => 0,
        "low" => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_orders() {
        assert_eq!(Priority::parse("HIGH"), Some(Priority::High));
        assert_eq!(Priority::parse("urgent"), Some(Priority::High));
        assert_eq!(Priority::parse("critical"), Some(Priority::High));
        assert_eq!(Priority::parse("Low"), Some(Priority::Low));
        assert_eq!(Priority::parse("medium"), None);
        let mut v = vec![Priority::Low, Priority::High, Priority::Normal];
        v.sort();
        assert_eq!(v, [Priority::High, Priority::Normal, Priority::Low]);
        assert_eq!(Priority::Low.rank(), 2);
    }
}
