//! A checker shown failing on a broken variant must catch it every time the test runs, but
//! a race is a matter of timing: one short run on a loaded machine can pass through the
//! window without hitting it. `until_caught` plays the run again, each time longer or
//! wider (the attempt number is passed in), until the checker reports something or the
//! tries run out. The test still fails when the checker is blind: every try comes back
//! empty.

use std::time::{Duration, Instant};

/// Runs `attempt(0)`, `attempt(1)`, ... until one returns problems, at most `tries` times
/// and no new try after `budget`; returns the last try's problems (empty: never caught).
pub fn until_caught<T>(
    what: &str,
    tries: usize,
    budget: Duration,
    mut attempt: impl FnMut(usize) -> Vec<T>,
) -> Vec<T> {
    let start = Instant::now();
    let mut got = Vec::new();
    for i in 0..tries.max(1) {
        if i > 0 && start.elapsed() > budget {
            break;
        }
        got = attempt(i);
        if !got.is_empty() {
            if i > 0 {
                eprintln!("{what}: caught on try {} of {tries}", i + 1);
            }
            break;
        }
        eprintln!("{what}: try {} of {tries} saw nothing, trying again", i + 1);
    }
    got
}
