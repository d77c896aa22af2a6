//! `--against OLD`: the circe binary under test against another circe binary (say, the one
//! built from the previous commit), on the commands whose speed matters most: `claim <id>`
//! and `claim --next`, and `send` (a task, to one agent, to all), durable. Both work on identical copies of one root, in
//! alternating order, and the report gives each side's median and the median of the
//! per-round ratios new/old.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::procs::{circe_env, populate_circe, task_id, timed};
use crate::stats::{median, paired_ratio};
use crate::{Opts, circe_bin};
use circe::config::Durability;

pub(crate) fn against(opts: &Opts, old: &Path, out: &mut String) {
    let _ = writeln!(
        out,
        "\n## Against another binary (durable, paired, {} rounds)\n\nnew: {}\nold: {}\n\n\
         | size | op | new median ms | old median ms | new/old (paired) |\n|---:|---|---:|---:|---:|",
        opts.rounds,
        circe_bin().display(),
        old.display()
    );
    for &n in &opts.sizes {
        let dir = opts.dir.join(format!("ab{n}"));
        eprintln!("against: populating {n} tasks ...");
        let root_new = populate_circe(&dir.join("new"), n, 2);
        let copy = Command::new("cp").arg("-a").arg(dir.join("new")).arg(dir.join("old")).status();
        assert!(copy.is_ok_and(|s| s.success()), "cannot copy the root");
        let root_old = dir.join("old/.circe");
        // An older binary refuses keys it does not know: give it the config without them.
        let cfg = root_old.join("circe.yaml");
        let text = std::fs::read_to_string(&cfg).expect("read circe.yaml");
        let known: String = text
            .lines()
            .filter(|l| !l.starts_with("escalation:") && !l.starts_with("chat:"))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&cfg, known).expect("write circe.yaml");
        let bins = [(circe_bin(), root_new.as_path()), (old, root_old.as_path())];
        let mut by_id = [Vec::new(), Vec::new()];
        let mut next = [Vec::new(), Vec::new()];
        let mut relaxed = [Vec::new(), Vec::new()];
        let (mut open, mut one, mut all) =
            ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
        for r in 0..opts.rounds {
            let order: [usize; 2] = if r % 2 == 0 { [0, 1] } else { [1, 0] };
            for &k in &order {
                let (bin, root) = bins[k];
                let run = |agent: &str, args: &[&str], d: Durability| {
                    let mut c = circe_env(Command::new(bin), root, agent, d);
                    c.args(args);
                    let (ms, ok, _) = timed(&mut c, false);
                    assert!(ok, "{} {args:?} failed", bin.display());
                    ms
                };
                by_id[k].push(run("w0", &["claim", &task_id(n - 1 - r)], Durability::Full));
                next[k].push(run("w1", &["claim", "--next"], Durability::Full));
                let t = task_id(n / 2 - r);
                relaxed[k].push(run("w0", &["claim", &t], Durability::Relaxed));
                let task = format!("AB-{r}");
                let inform = ["send", "--intent", "inform", "--summary", "x", "--to"];
                open[k].push(run(
                    "coordinator",
                    &[
                        "send",
                        "--to",
                        "all",
                        "--intent",
                        "implement_feature",
                        "--task",
                        &task,
                        "--summary",
                        "x",
                    ],
                    Durability::Full,
                ));
                one[k].push(run("coordinator", &[&inform[..], &["w0"]].concat(), Durability::Full));
                all[k].push(run(
                    "coordinator",
                    &[&inform[..], &["all"]].concat(),
                    Durability::Full,
                ));
            }
        }
        for (op, s) in [
            ("claim <id>", &by_id),
            ("claim --next", &next),
            ("claim <id>, relaxed", &relaxed),
            ("send (create a task)", &open),
            ("send to one agent", &one),
            ("send to all", &all),
        ] {
            let _ = writeln!(
                out,
                "| {n} | {op} | {:.3} | {:.3} | {:.3} |",
                median(&s[0]),
                median(&s[1]),
                paired_ratio(&s[0], &s[1])
            );
        }
    }
}
