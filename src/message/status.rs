//! Message statuses: the CIRCE set, the TX set, and what each means for a task.
//!
//! A header's `status` is accepted when it is a CIRCE or a TX word (`is_known`). `normalize`
//! says which task status a word names, if any: TX's `ready-for-next-iteration` is a routing
//! key ("loop back") and names none.

/// Statuses CIRCE writes.
pub const CIRCE_STATUSES: [&str; 6] =
    ["new", "claimed", "in_progress", "blocked", "completed", "failed"];

/// Statuses TX writes: reference 000's list, `pending` (TX's own files) and the routing keys
/// `failed` and `ready-for-next-iteration`.
pub const TX_STATUSES: [&str; 9] = [
    "start",
    "pending",
    "in-progress",
    "complete",
    "approved",
    "rejected",
    "blocked",
    "failed",
    "ready-for-next-iteration",
];

/// Is `status` a word circe accepts in a header (CIRCE or TX, spelled exactly)?
pub fn is_known(status: &str) -> bool {
    CIRCE_STATUSES.contains(&status) || TX_STATUSES.contains(&status)
}

/// The CIRCE task status a CIRCE or TX word names, or `None` when it names none (an unknown
/// word, or the routing key `ready-for-next-iteration`).
pub fn normalize(status: &str) -> Option<&'static str> {
    if let Some(s) = CIRCE_STATUSES.iter().find(|s| **s == status) {
        return Some(s);
    }
    match status {
        "start" | "pending" => Some("new"),
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
    fn every_known_status_maps_into_the_circe_set_or_is_a_routing_key() {
        for s in CIRCE_STATUSES.iter().chain(&TX_STATUSES) {
            assert!(is_known(s), "{s}");
            match normalize(s) {
                Some(n) => assert!(CIRCE_STATUSES.contains(&n), "{s} -> {n}"),
                None => assert_eq!(*s, "ready-for-next-iteration"),
            }
        }
        assert_eq!(normalize("in-progress"), Some("in_progress"));
        assert_eq!(normalize("rejected"), Some("failed"));
        assert_eq!(normalize("approved"), Some("completed"));
        assert_eq!(normalize("pending"), Some("new"));
        assert_eq!(normalize("done"), None);
        assert_eq!(normalize("New"), None);
        assert!(!is_known("done") && !is_known("Complete"));
    }
}
