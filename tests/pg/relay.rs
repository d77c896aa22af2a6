//! A small relay between clients and the server: it adds latency (each chunk waits before
//! it is passed on) and counts round trips (turns: the client speaking again after the
//! server answered). Every circe operation is meant to be one or two round trips after
//! connecting; the relay counts them on the wire instead of timing them.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::Root;

/// Who spoke last on a connection, and the turns counted so far.
#[derive(Default)]
struct Wire {
    /// 1: the client spoke last, 2: the server.
    last: AtomicU64,
    turns: AtomicU64,
}

pub struct Relay {
    pub port: u16,
    wire: Arc<Wire>,
    /// The clients' ends of the connections relayed so far (`cut` ends them).
    clients: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    /// Listen on 127.0.0.1 and pass each connection to the unix socket `socket`, every
    /// chunk delayed by `delay`.
    pub fn start(socket: PathBuf, delay: Duration) -> Relay {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let wire = Arc::new(Wire::default());
        let w = wire.clone();
        let clients = Arc::new(Mutex::new(Vec::new()));
        let held = clients.clone();
        std::thread::spawn(move || {
            for client in l.incoming() {
                let Ok(client) = client else { break };
                let Ok(server) = UnixStream::connect(&socket) else { continue };
                held.lock().unwrap().push(client.try_clone().unwrap());
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (wa, wb) = (w.clone(), w.clone());
                std::thread::spawn(move || pump(client, server, delay, &wa, 1));
                std::thread::spawn(move || pump_back(s2, c2, delay, &wb));
            }
        });
        Relay { port, wire, clients }
    }

    /// End every connection relayed so far, without a word from the server (as a network
    /// that drops them would, seen from the client).
    pub fn cut(&self) {
        for c in self.clients.lock().unwrap().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Round trips seen since the last call.
    pub fn take_turns(&self) -> u64 {
        self.wire.turns.swap(0, Ordering::Relaxed)
    }
}

fn pump(mut from: TcpStream, mut to: UnixStream, delay: Duration, w: &Wire, me: u64) {
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        if w.last.swap(me, Ordering::Relaxed) != me {
            w.turns.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(delay);
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

fn pump_back(mut from: UnixStream, mut to: TcpStream, delay: Duration, w: &Wire) {
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        w.last.store(2, Ordering::Relaxed);
        std::thread::sleep(delay);
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

#[test]
fn each_operation_is_one_or_two_round_trips_over_a_slow_link() {
    let c = need_pg!();
    let url = c.fresh_url();
    let admin = Root::new(&url, "server", 1);
    admin.open_tasks(3);
    let socket = c.socket.join(format!(".s.PGSQL.{}", c.port));
    let relay = Relay::start(socket, Duration::from_millis(5));
    let schema = url.rsplit("schema=").next().unwrap();
    let slow = Root::at(&format!(
        "postgres://postgres@127.0.0.1:{}/postgres?connect_timeout=5&schema={schema}",
        relay.port
    ));
    // A bare connection and open: the handshake and the open query.
    slow.run(None, &["agent", "list"]).ok();
    let base = relay.take_turns();
    let mut seen = Vec::new();
    for (agent, args) in [
        ("e1", vec!["claim", "--next"]),
        ("e1", vec!["status", "T-000", "in_progress"]),
        ("e1", vec!["heartbeat", "T-000"]),
        ("e1", vec!["release", "T-000"]),
    ] {
        slow.run(Some(agent), &args).ok();
        let turns = relay.take_turns();
        seen.push((args[0], turns.saturating_sub(base)));
    }
    eprintln!("round trips after the open: {seen:?} (open alone: {base})");
    for (what, turns) in &seen {
        // A claim prints its task's summary: the commit answers with the message it moved.
        assert!(*turns <= 2, "{what} took {turns} round trips after opening the root");
    }
}

/// A claim whose connection breaks while it waits for the task's row (before anything was
/// sent to commit) says nothing was changed, not that its outcome is unknown; the task is
/// still there to claim.
#[test]
fn a_claim_cut_off_before_its_commit_says_nothing_was_changed() {
    let c = need_pg!();
    let url = c.fresh_url();
    let admin = Root::new(&url, "server", 1);
    admin.open_tasks(1);
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let socket = c.socket.join(format!(".s.PGSQL.{}", c.port));
    let relay = Relay::start(socket, Duration::ZERO);
    let cut_off = Root::at(&format!(
        "postgres://postgres@127.0.0.1:{}/postgres?connect_timeout=5&schema={schema}",
        relay.port
    ));
    let out = std::thread::scope(|s| {
        // Another session holds the task's row for 3 s.
        s.spawn(|| {
            c.psql(&format!(
                "BEGIN; SELECT 1 FROM {schema}.tasks WHERE task_id = 'T-000' FOR UPDATE; SELECT pg_sleep(3); COMMIT;"
            ))
        });
        std::thread::sleep(Duration::from_millis(500));
        let claim = cut_off.command(Some("e1"), &["claim", "T-000", "--json"]).spawn().unwrap();
        std::thread::sleep(Duration::from_secs(1));
        relay.cut();
        crate::common::Out::from(&claim.wait_with_output().unwrap())
    });
    assert_eq!(out.code, 1, "{out:?}");
    let details = &out.json()["error"]["details"];
    assert_eq!(details["committed"], serde_json::json!(false), "{}", out.stdout);
    assert!(details.get("outcome").is_none(), "{}", out.stdout);
    let shown = admin.run(None, &["show", "T-000", "--json"]);
    assert_eq!(shown.ok().json()["task"]["status"], "new", "{}", shown.stdout);
}
