//! The PostgreSQL engine beside the local one: a fresh-process `claim --next` against a
//! local durable root, the same root in PostgreSQL reached directly, and through PgBouncer
//! (transaction pooling), one of each per round in rotating order; then 8 claimers on the
//! database root, with a follower reading the feed by cursor (it must skip nothing).
//!
//! A throwaway cluster and a PgBouncer are started for the run (PgBouncer runs as the
//! `postgres` user; `.ci/run` installs both). Without them the section says why and is empty.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use circe::config::Durability;
use circe::engine::RootSpec;
use circe::event::Cursor;
use circe::workspace::Workspace;

use crate::pg_cluster::{self, Bouncer, Cluster};
use crate::procs::{circe, must, populate_circe, timed};
use crate::stats::{median, paired_ratio};
use crate::{Opts, circe_bin};

/// A database root (schema `schema`) holding `n` waiting tasks, moved in from a local root.
fn pg_root(dir: &Path, c: &Cluster, schema: &str, n: usize) -> String {
    let url = format!("{}&schema={schema}", c.base_url());
    let root = populate_circe(&dir.join(schema), n, 8);
    must(Command::new(circe_bin()).args(["--root"]).arg(&root).args(["migrate", "--to", &url]));
    url
}

/// The floor of a claim by a fresh process on this server (`compare --sql-claim URL SCHEMA
/// AGENT`): connect, then the one statement a hand-written claim would send
/// (`UPDATE ... WHERE task_id = (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING`, autocommit)
/// on circe's own tasks table, with none of circe's work (no configuration read, no event,
/// no message moved, no grant). Prints the task; exit 6 when none waits.
pub(crate) fn sql_claim(args: &[String]) {
    let [url, schema, agent] = args else { crate::usage("--sql-claim URL SCHEMA AGENT") };
    let config: tokio_postgres::Config = url.parse().expect("a PostgreSQL URL");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .expect("a runtime");
    let q = format!(
        "UPDATE \"{schema}\".tasks SET status = 'claimed', owner = $1, epoch = epoch + 1,
                rev = rev + 1, lease_until = now() + interval '30 minutes'
          WHERE task_id = (SELECT task_id FROM \"{schema}\".tasks WHERE status = 'new'
                           ORDER BY rank, (deadline IS NULL), deadline, updated_at, task_id
                           LIMIT 1 FOR UPDATE SKIP LOCKED)
          RETURNING task_id"
    );
    let task: Option<String> = rt.block_on(async {
        let (client, conn) = config.connect(tokio_postgres::NoTls).await.expect("connect");
        tokio::spawn(conn);
        let row = client.query_opt(&q, &[&agent.as_str()]).await.expect("the claim");
        row.map(|r| r.get(0))
    });
    match task {
        Some(t) => println!("claimed {t}"),
        None => std::process::exit(6),
    }
}

fn claim(url_or_root: &str) -> Command {
    let mut c = Command::new(circe_bin());
    c.env_clear().env("CIRCE_ROOT", url_or_root).env("CIRCE_AGENT", "w0").args(["claim", "--next"]);
    c
}

/// `workers` library claimers (one connection each) on `url` for `secs`, with a follower
/// reading the feed; returns (claims per second, events followed, events skipped).
fn throughput(url: &str, workers: usize, secs: f64) -> (f64, usize, usize) {
    let stop = AtomicBool::new(false);
    let claims = AtomicUsize::new(0);
    let mut seen = Vec::new();
    let started = Instant::now();
    std::thread::scope(|s| {
        for w in 0..workers {
            let (stop, claims) = (&stop, &claims);
            s.spawn(move || {
                let ws = Workspace::open(&RootSpec::Url(url.to_string())).expect("open");
                let (me, role) = ws.agent(Some(&format!("w{w}"))).expect("agent");
                while !stop.load(Ordering::Relaxed) {
                    match circe::ops::claim_next(&ws, &me, &role, None) {
                        Ok(_) => {
                            claims.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) if e.kind == circe::error::Kind::NothingToClaim => break,
                        Err(e) => eprintln!("postgres: w{w}: {}", e.chain()),
                    }
                }
            });
        }
        let (eng, _) = circe::engine::open(&RootSpec::Url(url.to_string())).expect("open");
        let mut cursor = Cursor::after(eng.last_event_id().expect("feed"));
        let until = Instant::now() + Duration::from_secs_f64(secs);
        while Instant::now() < until {
            for e in eng.read_events(cursor, 1000).expect("read") {
                seen.push(e.id);
                cursor = Cursor::after(e.id);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Relaxed);
    });
    #[expect(clippy::cast_precision_loss, reason = "a count of claims")]
    let rate = claims.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    let (eng, _) = circe::engine::open(&RootSpec::Url(url.to_string())).expect("open");
    let first = seen.first().copied().unwrap_or(1);
    let last = seen.last().copied().unwrap_or(0);
    let all = eng.read_events(Cursor::after(first.saturating_sub(1)), usize::MAX).expect("read");
    let skipped = all.iter().filter(|e| e.id <= last && seen.binary_search(&e.id).is_err()).count();
    (rate, seen.len(), skipped)
}

/// The whole section.
pub(crate) fn section(opts: &Opts, dir: &Path, out: &mut String) {
    let _ = writeln!(out, "\n## PostgreSQL engine\n");
    let cluster = match pg_cluster::start(&[]) {
        Ok(c) => c,
        Err(why) => {
            let _ = writeln!(out, "not measured: {why}");
            return;
        }
    };
    if opts.pg_claimers_only {
        claimers(opts, dir, &cluster, None, out);
        return;
    }
    let bouncer = match Bouncer::start(&cluster, 16) {
        Ok(b) => Some(b),
        Err(why) => {
            let _ = writeln!(out, "PgBouncer not measured: {why}");
            None
        }
    };
    let rounds = opts.rounds.max(5) * 3;
    eprintln!("postgres: populating ...");
    let local = populate_circe(&dir.join("pg-local"), rounds + 10, 8);
    let direct = pg_root(dir, &cluster, "bench_claims", 2 * rounds + 10);
    let pooled = bouncer.as_ref().map(|b| b.url("bench_claims"));
    pg_root(dir, &cluster, "bench_floor", rounds + 10);
    let mut floor_cmd = Command::new(std::env::current_exe().expect("bench binary path"));
    floor_cmd.args(["--sql-claim", &cluster.base_url(), "bench_floor", "w0"]);
    let (mut local_ms, mut direct_ms, mut pooled_ms) = (Vec::new(), Vec::new(), Vec::new());
    let mut floor_ms = Vec::new();
    for r in 0..rounds {
        let mut order: Vec<u8> = vec![0, 1, 2, 3];
        order.rotate_left(r % 4);
        for which in order {
            match (which, &pooled) {
                (0, _) => {
                    let mut cmd = circe(&local, "w0", Durability::Full);
                    cmd.args(["claim", "--next"]);
                    local_ms.push(timed(&mut cmd, false).0);
                }
                (1, _) => direct_ms.push(timed(&mut claim(&direct), false).0),
                (3, _) => {
                    let (ms, ok, _) = timed(&mut floor_cmd, false);
                    assert!(ok, "the one-statement claim failed");
                    floor_ms.push(ms);
                }
                (_, Some(u)) => pooled_ms.push(timed(&mut claim(u), false).0),
                (_, None) => {}
            }
        }
    }
    let _ = writeln!(
        out,
        "fresh-process `claim --next`, {rounds} rounds (one of each per round, order rotating), medians:\n"
    );
    let _ = writeln!(
        out,
        "| root | median ms | ratio to local (paired median) | target |\n|---|---|---|---|"
    );
    let _ = writeln!(out, "| local, durability full | {:.2} | 1.00 | |", median(&local_ms));
    if !pooled_ms.is_empty() {
        let _ = writeln!(
            out,
            "| PostgreSQL through PgBouncer | {:.2} | {:.2}x | <= 1.5x |",
            median(&pooled_ms),
            paired_ratio(&pooled_ms, &local_ms)
        );
    }
    let _ = writeln!(
        out,
        "| PostgreSQL direct (unix socket) | {:.2} | {:.2}x | <= 2.5x |",
        median(&direct_ms),
        paired_ratio(&direct_ms, &local_ms)
    );
    let _ = writeln!(
        out,
        "| floor: one SQL statement by a fresh process, direct | {:.2} | {:.2}x | |",
        median(&floor_ms),
        paired_ratio(&floor_ms, &local_ms)
    );
    let _ = writeln!(
        out,
        "\ncirce direct / the one-statement floor (paired median): {:.2}x",
        paired_ratio(&direct_ms, &floor_ms)
    );
    claimers(opts, dir, &cluster, bouncer.as_ref(), out);
}

/// `opts.workers` library claimers on a root of 40,000 tasks, directly and through `bouncer`.
fn claimers(
    opts: &Opts,
    dir: &Path,
    cluster: &Cluster,
    bouncer: Option<&Bouncer>,
    out: &mut String,
) {
    let secs = opts.secs.max(2.0);
    eprintln!("postgres: {} claimers for {secs} s ...", opts.workers);
    let busy = pg_root(dir, cluster, "bench_busy", 40_000);
    let (rate, followed, skipped) = throughput(&busy, opts.workers, secs);
    let _ = writeln!(
        out,
        "\n{} library claimers (one connection each, direct) for {secs:.0} s: {rate:.0} claims/s (target >= 1,000); \
         a follower read {followed} events by cursor meanwhile and skipped {skipped}",
        opts.workers
    );
    if let Some(b) = bouncer {
        pg_root(dir, cluster, "bench_busy_pooled", 40_000);
        let (rate, followed, skipped) = throughput(&b.url("bench_busy_pooled"), opts.workers, secs);
        let _ = writeln!(
            out,
            "{} library claimers through PgBouncer: {rate:.0} claims/s; follower read {followed}, skipped {skipped}",
            opts.workers
        );
    }
}
