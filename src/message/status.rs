//! Message statuses: the CIRCE set, the TX set, and the mapping from TX to CIRCE.

/// Statuses CIRCE writes.
pub const CIRCE_STATUSES: [&str; 6] =
    ["new", "claimed", "in_progress", "blocked", "completed", "failed"];

/// Statuses TX writes; each maps onto a CIRCE status (see `normalize`).
pub const TX_STATUSES: [&str; 6] =
    ["start", "in-progress", "complete", "approved", "rejected", "blocked"];

/// The CIRCE status for a CIRCE or TX status as written, or `None` when it is neither.
pub fn normalize(status: &str) -> Option<&'static str> {
    if let Some(s) = CIRCE_STATUSES.iter().find(|s| **s == status) {
        return Some(s);
    }
    match status {
        "start" => Some("new"),
        "in-progress" => Some("in_progress"),
        "complete" | "approved" => Some("completed"),
        "rejected" => Some("failed"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_status_maps_into_the_circe_set() {
        for s in CIRCE_STATUSES.iter().chain(&TX_STATUSES) {
            let n = normalize(s).unwrap();
            assert!(CIRCE_STATUSES.contains(&n), "{s} -> {n}");
        }
        assert_eq!(normalize("in-progress"), Some("in_progress"));
        assert_eq!(normalize("rejected"), Some("failed"));
        assert_eq!(normalize("approved"), Some("completed"));
        assert_eq!(normalize("done"), None);
        assert_eq!(normalize("New"), None);
    }
}
