//! Hosts in network namespaces the test makes: the server in one, each client host in its
//! own, joined by veth pairs (server side 10.200.<i>.1, host side 10.200.<i>.2). A
//! partition is an nftables rule in the server's namespace that drops the host's packets.
//! Where namespaces cannot be made (no root, no `ip`), tests skip that part and say why.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Root, nap};
use crate::pg_cluster::{self, Cluster};

pub struct Net {
    pub server: String,
    pub hosts: Vec<String>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

impl Net {
    /// The server's namespace and `n` host namespaces, linked.
    pub fn new(n: usize) -> Result<Net, String> {
        let id = std::process::id() % 100_000;
        let net = Net {
            server: format!("cs{id}"),
            hosts: (1..=n).map(|i| format!("ch{id}x{i}")).collect(),
        };
        ip(&["netns", "add", &net.server])?;
        ip(&["-n", &net.server, "link", "set", "lo", "up"])?;
        for (i, h) in net.hosts.iter().enumerate() {
            let i = i + 1;
            let (vs, vh) = (format!("vs{id}x{i}"), format!("vh{id}x{i}"));
            ip(&["netns", "add", h])?;
            ip(&["-n", h, "link", "set", "lo", "up"])?;
            ip(&["link", "add", &vs, "type", "veth", "peer", "name", &vh])?;
            ip(&["link", "set", &vs, "netns", &net.server])?;
            ip(&["link", "set", &vh, "netns", h])?;
            ip(&["-n", &net.server, "addr", "add", &format!("10.200.{i}.1/24"), "dev", &vs])?;
            ip(&["-n", h, "addr", "add", &format!("10.200.{i}.2/24"), "dev", &vh])?;
            ip(&["-n", &net.server, "link", "set", &vs, "up"])?;
            ip(&["-n", h, "link", "set", &vh, "up"])?;
        }
        Ok(net)
    }

    /// Drop every packet from host `i` (1-based) in the server's namespace.
    pub fn partition(&self, i: usize) {
        let rules = format!(
            "table inet circe_part {{\n chain input {{\n  type filter hook input priority 0;\n  ip saddr 10.200.{i}.2 drop\n }}\n}}\n"
        );
        let ok = Command::new("ip")
            .args(["netns", "exec", &self.server, "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().expect("stdin").write_all(rules.as_bytes())?;
                c.wait()
            })
            .is_ok_and(|s| s.success());
        assert!(ok, "nft could not add the partition rule");
    }

    /// Remove the partition.
    pub fn heal(&self) {
        let _ = Command::new("ip")
            .args(["netns", "exec", &self.server, "nft", "delete", "table", "inet", "circe_part"])
            .status();
    }

    /// Host `i`'s view of the root in schema `schema` of a cluster in the server namespace.
    pub fn root(&self, c: &Cluster, i: usize, schema: &str) -> Root {
        let url = format!(
            "postgres://postgres@10.200.{i}.1:{}/postgres?connect_timeout=2&schema={schema}",
            c.port
        );
        let mut r = Root::at(&url);
        r.prefix = vec!["ip".into(), "netns".into(), "exec".into(), self.hosts[i - 1].clone()];
        r
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.hosts.iter().chain(std::iter::once(&self.server)) {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// Why namespaces cannot be used here (`None`: they can).
pub fn unavailable() -> Option<String> {
    if Command::new("nft").arg("--version").output().is_err() {
        return Some("nft (nftables) is not installed".into());
    }
    let probe = format!("circe-probe-{}", std::process::id());
    match ip(&["netns", "add", &probe]) {
        Ok(()) => {
            let _ = ip(&["netns", "del", &probe]);
            None
        }
        Err(e) => Some(format!("cannot make network namespaces: {e}")),
    }
}

/// A network of `n` hosts with a cluster in the server namespace, or the reason why not.
pub fn network(n: usize) -> Result<(Net, Cluster), String> {
    if let Some(why) = unavailable() {
        return Err(why);
    }
    let net = Net::new(n)?;
    let c = pg_cluster::start_in(Some(&net.server), &["*"])?;
    Ok((net, c))
}

#[test]
fn a_partitioned_host_fails_fast_and_is_fenced_after_healing() {
    if pg_cluster::unavailable().is_some() {
        let _ = need_pg!();
    }
    let (net, cluster) = match network(2) {
        Ok(x) => x,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let schema = "part";
    let admin = Root::new(&format!("{}&schema={schema}", cluster.base_url()), "server", 2);
    admin.open_tasks(1);
    let (host_a, host_b) = (net.root(&cluster, 1, schema), net.root(&cluster, 2, schema));
    let g = host_a.run(Some("e1"), &["claim", "T-000", "--ttl", "3s", "--json"]);
    g.ok();
    let epoch = g.json()["epoch"].as_u64().unwrap().to_string();
    let claimed = Instant::now();
    net.partition(1);
    let t = Instant::now();
    let beat = host_a.run(Some("e1"), &["heartbeat", "T-000", "--epoch", &epoch]);
    let took = t.elapsed();
    assert_eq!(beat.code, 1, "a partitioned host's command exits 1: {}", beat.stderr);
    assert!(
        took <= Duration::from_secs(3),
        "it took {took:?}, more than the connect timeout (2 s) + 1 s"
    );
    while claimed.elapsed() < Duration::from_secs(4) {
        nap(100);
    }
    host_b.run(Some("e2"), &["claim", "T-000"]).ok();
    net.heal();
    for args in [
        vec!["status", "T-000", "in_progress", "--epoch", &epoch],
        vec!["heartbeat", "T-000", "--epoch", &epoch],
        vec!["check", "T-000", "tests_passed=true", "--epoch", &epoch],
        vec!["release", "T-000", "--epoch", &epoch],
    ] {
        let out = host_a.run(Some("e1"), &args);
        assert_eq!(
            out.code, 4,
            "after healing, the old owner's {} exits 4: {}",
            args[0], out.stderr
        );
    }
    let owner = admin
        .engine()
        .peek(&circe::names::TaskId::new("T-000").unwrap())
        .unwrap()
        .unwrap()
        .rec
        .owner;
    assert_eq!(owner.unwrap().as_str(), "e2");
}
