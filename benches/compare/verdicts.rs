//! The targets of issue 4, checked against this run.

use std::fmt::Write as _;

use crate::Opts;
use crate::contention::Contention;
use crate::stats::{Samples, paired_ratio};

pub(crate) fn verdicts(opts: &Opts, samples: &Samples, cont: &[Contention], out: &mut String) {
    let _ = writeln!(out, "\n## Targets (durable = circe with fsync on)\n");
    let get = |op: usize, n: usize, v: &str| -> Option<&[f64]> {
        samples.get(&(op, n)).and_then(|m| m.get(v)).map(Vec::as_slice)
    };
    let line = |out: &mut String, what: &str, ratio: Option<f64>, limit: f64| {
        let _ = match ratio {
            Some(r) => writeln!(
                out,
                "- {what}: {:.2} (limit {limit}) -> {}",
                r,
                if r <= limit { "MET" } else { "MISSED" }
            ),
            None => writeln!(out, "- {what}: not measured (size not in --sizes)"),
        };
    };
    for &n in &opts.sizes {
        let r = get(1, n, "circe").zip(get(1, n, "sqlite claim")).map(|(a, b)| paired_ratio(a, b));
        line(out, &format!("claim <id> / sqlite3 claim at {n}"), r, 1.0);
    }
    let small = opts.sizes.first().copied().unwrap_or(0);
    let big = opts.sizes.last().copied().unwrap_or(0);
    let r = get(1, big, "circe").zip(get(1, small, "circe")).map(|(a, b)| paired_ratio(a, b));
    line(out, &format!("claim <id> at {big} / at {small}"), r, 1.2);
    let at = if opts.sizes.contains(&10_000) { 10_000 } else { big };
    let r = get(3, at, "circe").zip(get(3, at, "mv claim")).map(|(a, b)| paired_ratio(a, b));
    line(out, &format!("claim --next / mv claim at {at}"), r, 2.0);
    let r = get(4, at, "circe").zip(get(4, at, "sqlite list")).map(|(a, b)| paired_ratio(a, b));
    line(out, &format!("tasks / sqlite3 list at {at}"), r, 1.0);
    if let Some(c) = cont.first() {
        #[expect(clippy::cast_precision_loss)]
        let rate = c.claims as f64 / c.secs;
        let ok = rate >= 1000.0 && c.double == 0 && c.lost == 0;
        let _ = writeln!(
            out,
            "- {} workers, durable: {rate:.0} claims/s (target 1000), {} double grants, {} lost -> {}",
            opts.workers,
            c.double,
            c.lost,
            if ok { "MET" } else { "MISSED" }
        );
    }
}
