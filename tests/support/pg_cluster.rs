//! A throwaway PostgreSQL cluster for one test binary: `initdb` into a temp folder (as the
//! `postgres` user when the tests run as root), the server listening on a unix socket in
//! that folder only (plus TCP addresses a test asks for), and a watchdog process that stops
//! the server by its pid and removes the folder when the test binary exits, however it
//! exits. Each test gets its own schema (`fresh_url`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A running cluster.
pub struct Cluster {
    pub dir: PathBuf,
    pub bin: PathBuf,
    /// The folder holding the unix socket (`host=` in URLs).
    pub socket: PathBuf,
    pub port: u16,
    pub pid: u32,
    opts: String,
}

/// Where PostgreSQL's programs are, if installed.
pub fn bin_dir() -> Option<PathBuf> {
    let mut cands: Vec<PathBuf> =
        std::env::var_os("CIRCE_PG_BIN").map(PathBuf::from).into_iter().collect();
    if let Ok(rd) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut v: Vec<PathBuf> =
            rd.filter_map(std::result::Result::ok).map(|e| e.path().join("bin")).collect();
        v.sort();
        cands.extend(v.into_iter().rev());
    }
    cands.push(PathBuf::from("/usr/local/bin"));
    cands.push(PathBuf::from("/usr/bin"));
    cands.into_iter().find(|d| {
        d.join("initdb").is_file() && d.join("pg_ctl").is_file() && d.join("postgres").is_file()
    })
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// Run a PostgreSQL program as the user that owns the cluster.
pub fn as_owner(prog: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=postgres", "--regid=postgres", "--init-groups"]).arg(prog);
        c
    } else {
        Command::new(prog)
    }
}

/// Why PostgreSQL tests cannot run here (`None`: they can).
pub fn unavailable() -> Option<String> {
    if bin_dir().is_none() {
        return Some(
            "PostgreSQL is not installed (no initdb/pg_ctl/postgres; .ci/run installs postgresql)"
                .into(),
        );
    }
    if is_root()
        && Command::new("id").arg("postgres").output().map_or(true, |o| !o.status.success())
    {
        return Some("running as root and there is no `postgres` user to run the server as".into());
    }
    None
}

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// The cluster of this test binary, started on first use.
pub fn cluster() -> Result<&'static Cluster, String> {
    CLUSTER.get_or_init(|| start(&[])).as_ref().map_err(Clone::clone)
}

/// Start a cluster that also listens on `tcp` addresses (they share one port).
pub fn start(tcp: &[&str]) -> Result<Cluster, String> {
    start_in(None, tcp)
}

/// `start` on the unix socket only, with server settings of its own (`name=value`).
pub fn start_with(settings: &[&str]) -> Result<Cluster, String> {
    start_full(None, &[], settings)
}

/// `start`, with the server in network namespace `ns` (made by the caller).
pub fn start_in(ns: Option<&str>, tcp: &[&str]) -> Result<Cluster, String> {
    start_full(ns, tcp, &[])
}

fn start_full(ns: Option<&str>, tcp: &[&str], settings: &[&str]) -> Result<Cluster, String> {
    if let Some(why) = unavailable() {
        return Err(why);
    }
    let bin = bin_dir().expect("checked");
    let base = std::env::temp_dir().join(format!(
        "circe-pg-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).map_err(|e| e.to_string())?;
    if is_root() {
        Command::new("chown")
            .args(["postgres:postgres"])
            .arg(&base)
            .status()
            .map_err(|e| e.to_string())?;
    }
    let data = base.join("data");
    let out = as_owner(&bin.join("initdb"))
        .args(["-D"])
        .arg(&data)
        .args(["-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C"])
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!("initdb failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    if !tcp.is_empty() {
        // The test network only (10.200.x.x): hosts of the partition and race tests.
        let hba = data.join("pg_hba.conf");
        let mut text = std::fs::read_to_string(&hba).map_err(|e| e.to_string())?;
        text.push_str("host all all 10.200.0.0/16 trust\n");
        std::fs::write(&hba, text).map_err(|e| e.to_string())?;
    }
    // A port of our own for TCP tests; the socket name carries it too.
    let port = 20_000 + u16::try_from(std::process::id() % 20_000).unwrap_or(0);
    let listen = if tcp.is_empty() { String::new() } else { tcp.join(",") };
    let mut opts = format!(
        "-k {} -p {port} -c listen_addresses='{listen}' -c max_connections=200 -c fsync=on -c shared_buffers=32MB",
        base.display()
    );
    for s in settings {
        opts.push_str(" -c ");
        opts.push_str(s);
    }
    let mut ctl = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args([
                "netns",
                "exec",
                ns,
                "setpriv",
                "--reuid=postgres",
                "--regid=postgres",
                "--init-groups",
            ])
            .arg(bin.join("pg_ctl"));
            c
        }
        None => as_owner(&bin.join("pg_ctl")),
    };
    let out = ctl
        .args(["-D"])
        .arg(&data)
        .args(["-o", &opts, "-l"])
        .arg(base.join("log"))
        .args(["-w", "-t", "60", "start"])
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("pg_ctl: {e}"))?;
    if !out.status.success() {
        let log = std::fs::read_to_string(base.join("log")).unwrap_or_default();
        return Err(format!("pg_ctl start failed: {}{log}", String::from_utf8_lossy(&out.stderr)));
    }
    let pid = read_pid(&data).ok_or("no postmaster.pid")?;
    watchdog(&base);
    Ok(Cluster { dir: base.clone(), bin, socket: base, port, pid, opts })
}

static NEXT: AtomicU32 = AtomicU32::new(0);

fn read_pid(data: &Path) -> Option<u32> {
    std::fs::read_to_string(data.join("postmaster.pid")).ok()?.lines().next()?.trim().parse().ok()
}

/// A process that waits for this test binary to exit, then stops the server by the pid in
/// its postmaster.pid (SIGQUIT: immediate) and removes its folder.
fn watchdog(base: &Path) {
    let script = format!(
        "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; \
         for f in '{dir}'/bouncer-*/pgbouncer.pid; do [ -f \"$f\" ] && kill $(cat \"$f\") 2>/dev/null; done; \
         pid=$(head -n 1 '{dir}/data/postmaster.pid' 2>/dev/null); \
         if [ -n \"$pid\" ]; then kill -QUIT $pid 2>/dev/null; \
           for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 $pid 2>/dev/null || break; sleep 0.5; done; \
           kill -KILL $pid 2>/dev/null; fi; rm -rf '{dir}'",
        me = std::process::id(),
        dir = base.display()
    );
    let _ = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

impl Cluster {
    /// A URL for a schema nobody has used yet.
    pub fn fresh_url(&self) -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        format!("{}&schema=t{}_{n}", self.base_url(), std::process::id())
    }

    /// The URL of the cluster's `postgres` database, without a schema.
    pub fn base_url(&self) -> String {
        format!(
            "postgres://postgres@/postgres?host={}&port={}&connect_timeout=5",
            self.socket.display(),
            self.port
        )
    }

    /// Run SQL with psql (as a superuser), returning its output.
    pub fn psql(&self, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-h"])
            .arg(&self.socket)
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-XAtq",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ])
            .output()
            .expect("psql");
        assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Run SQL with psql in the background as application `app` (a session holding a lock,
    /// say), and wait until that session sleeps in `pg_sleep` (the SQL's last statement):
    /// whatever it took before is then held. Returns the psql process and its server pid.
    pub fn psql_holding(&self, sql: &str, app: &str) -> (std::process::Child, String) {
        let child = Command::new(self.bin.join("psql"))
            .arg("-h")
            .arg(&self.socket)
            .args(["-p", &self.port.to_string(), "-U", "postgres", "-d", "postgres", "-XAtq"])
            .args(["-c", sql])
            .env("PGAPPNAME", app)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("psql");
        let q = format!(
            "SELECT pid FROM pg_stat_activity WHERE application_name = '{app}' AND wait_event = 'PgSleep'"
        );
        let until = std::time::Instant::now() + std::time::Duration::from_secs(15);
        let mut pid = self.psql(&q).trim().to_string();
        while pid.is_empty() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(50));
            pid = self.psql(&q).trim().to_string();
        }
        assert!(!pid.is_empty(), "psql as {app} never came to its pg_sleep");
        (child, pid)
    }

    /// Stop the server at once (SIGQUIT: like a crash, no shutdown checkpoint).
    pub fn stop_immediate(&mut self) {
        let out = as_owner(&self.bin.join("pg_ctl"))
            .args(["-D"])
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "stop"])
            .output()
            .expect("pg_ctl");
        assert!(
            out.status.success(),
            "pg_ctl stop: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Start it again (same folder, port and options) and wait until it answers.
    pub fn restart(&mut self) {
        let out = as_owner(&self.bin.join("pg_ctl"))
            .args(["-D"])
            .arg(self.dir.join("data"))
            .args(["-o", &self.opts, "-l"])
            .arg(self.dir.join("log"))
            .args(["-w", "-t", "60", "start"])
            .stdout(Stdio::null())
            .output()
            .expect("pg_ctl");
        assert!(out.status.success(), "restart: {}", String::from_utf8_lossy(&out.stderr));
        if let Some(p) = read_pid(&self.dir.join("data")) {
            self.pid = p;
        }
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if Command::new(self.bin.join("pg_isready"))
                .args(["-h"])
                .arg(&self.socket)
                .args(["-p", &self.port.to_string()])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the server did not come back within 30 s");
    }
}

/// A PgBouncer in front of `c`, on a unix socket in its own folder. Returns the socket
/// folder and port; stopped by its pid when dropped.
pub struct Bouncer {
    pub dir: PathBuf,
    pub port: u16,
}

impl Bouncer {
    /// Start one whose pool holds `pool` server connections.
    pub fn start(c: &Cluster, pool: usize) -> Result<Bouncer, String> {
        Bouncer::start_ignoring(c, pool, "extra_float_digits,options")
    }

    /// Start one whose pool holds `pool` server connections and that takes the startup
    /// parameters `ignored` (refusing others it does not know).
    pub fn start_ignoring(c: &Cluster, pool: usize, ignored: &str) -> Result<Bouncer, String> {
        let exe = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .ok_or("pgbouncer is not installed (apt-get install pgbouncer)")?;
        let dir = c.dir.join(format!("bouncer-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let port = c.port + 1;
        std::fs::write(dir.join("users.txt"), "\"postgres\" \"\"\n").map_err(|e| e.to_string())?;
        let ini = format!(
            "[databases]\npostgres = host={sock} port={pg} dbname=postgres user=postgres\n\
             [pgbouncer]\nlisten_addr =\nlisten_port = {port}\nunix_socket_dir = {d}\n\
             auth_type = trust\nauth_file = {d}/users.txt\npool_mode = transaction\n\
             max_client_conn = 500\ndefault_pool_size = {pool}\n\
             ignore_startup_parameters = {ignored}\n\
             logfile = {d}/pgbouncer.log\npidfile = {d}/pgbouncer.pid\n",
            sock = c.socket.display(),
            pg = c.port,
            d = dir.display()
        );
        std::fs::write(dir.join("pgbouncer.ini"), ini).map_err(|e| e.to_string())?;
        let _ = Command::new("chown").args(["-R", "postgres:postgres"]).arg(&dir).status();
        let out = as_owner(Path::new(exe))
            .arg("-d")
            .arg(dir.join("pgbouncer.ini"))
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("pgbouncer: {}", String::from_utf8_lossy(&out.stderr)));
        }
        std::thread::sleep(Duration::from_millis(300));
        Ok(Bouncer { dir, port })
    }

    /// The URL of schema `schema` through this PgBouncer.
    pub fn url(&self, schema: &str) -> String {
        format!(
            "postgres://postgres@/postgres?host={}&port={}&schema={schema}",
            self.dir.display(),
            self.port
        )
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("pgbouncer.pid")) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
    }
}
