//! The server stopped at once (like a crash) and started again while claimers run: no
//! grant a client was told about is lost, no task gets two owners, a client that cannot
//! know the outcome exits 1 (never 0), and its retry with the request id returns the task
//! it got.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::{Grant, Root, check_grants, nap};
use crate::pg_cluster;

fn run(restarts: usize, claimers: usize) {
    let mut cluster = match pg_cluster::start(&[]) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let root = Root::new(&format!("{}&schema=restart", cluster.base_url()), "server", claimers);
    root.open_tasks(40);
    let stop = AtomicBool::new(false);
    let acked = Mutex::new(Vec::<Grant>::new());
    let (unknown, resolved) = (AtomicUsize::new(0), AtomicUsize::new(0));
    std::thread::scope(|s| {
        for i in 1..=claimers {
            let (root, stop, acked, unknown, resolved) =
                (&root, &stop, &acked, &unknown, &resolved);
            s.spawn(move || {
                let agent = format!("e{i}");
                let mut round = 0;
                while !stop.load(Ordering::Relaxed) {
                    round += 1;
                    let id = format!("{agent}-{round}");
                    let mut tries = 0;
                    loop {
                        let o = root
                            .run(Some(&agent), &["claim", "--next", "--request-id", &id, "--json"]);
                        match o.code {
                            0 => {
                                let g = Grant::from_json(&agent, &o.json()).unwrap();
                                if tries > 0 {
                                    resolved.fetch_add(1, Ordering::Relaxed);
                                }
                                acked.lock().unwrap().push(g.clone());
                                // Release until it is known to be done (the server may be down).
                                let e = g.epoch.to_string();
                                while root
                                    .run(Some(&agent), &["release", &g.task, "--epoch", &e])
                                    .code
                                    == 1
                                {
                                    nap(200);
                                }
                                break;
                            }
                            1 => {
                                // Unknown (or no server): retry with the same request id.
                                if tries == 0 {
                                    unknown.fetch_add(1, Ordering::Relaxed);
                                }
                                tries += 1;
                                nap(200);
                            }
                            _ => {
                                nap(20);
                                break;
                            }
                        }
                    }
                }
            });
        }
        for _ in 0..restarts {
            std::thread::sleep(Duration::from_millis(1500));
            let seen = unknown.load(Ordering::Relaxed);
            cluster.stop_immediate();
            // Down until a client has met the stopped server (at most 20 s: a loaded machine
            // starts the next claim late).
            let until = std::time::Instant::now() + Duration::from_secs(20);
            while unknown.load(Ordering::Relaxed) == seen && std::time::Instant::now() < until {
                nap(50);
            }
            cluster.restart();
        }
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, Ordering::Relaxed);
    });
    let acked = acked.into_inner().unwrap();
    let v = check_grants(&root.events(), &acked);
    eprintln!(
        "{} restarts: {} grants acknowledged, {} claims logged, {} runs exited 1, {} resolved by a retry",
        restarts,
        acked.len(),
        v.claims_logged,
        unknown.load(Ordering::Relaxed),
        resolved.load(Ordering::Relaxed)
    );
    assert!(v.double_owners.is_empty(), "double owners: {:?}", v.double_owners);
    assert!(v.missing_grants.is_empty(), "acknowledged grants lost: {:?}", v.missing_grants);
    assert!(v.epoch_regressions.is_empty(), "{:?}", v.epoch_regressions);
    assert_eq!(
        v.unacknowledged, 0,
        "every grant made was acknowledged (retries with the request id)"
    );
    assert!(unknown.load(Ordering::Relaxed) > 0, "no client saw the server go away");
    root.run(None, &["doctor"]).ok();
}

#[test]
fn a_server_restart_under_load_loses_no_grant() {
    run(1, 4);
}

/// `cargo test --test pg -- --ignored restart_full`
#[test]
#[ignore = "five restarts; run by hand"]
fn restart_full_five_times() {
    run(5, 4);
}
