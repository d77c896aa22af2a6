//! The live board across a server restart: shown as it was, marked as not connected, while
//! the server is away; read again and followed once it is back.

use crate::common::{BIN, Root};
use crate::pg_cluster;
use crate::tmux::Tmux;

#[test]
fn the_live_board_rides_out_a_server_restart() {
    let mut cluster = match pg_cluster::start(&[]) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let url = format!("{}&schema=board", cluster.base_url());
    let root = Root::new(&url, "server", 1);
    root.open_task("T-001", "before");
    let tmux = Tmux { socket: format!("circe-pg-test-{}", std::process::id()) };
    start(&tmux, &url);
    tmux.until("the board with T-001", |s| s.contains("circe board") && s.contains("T-001"));
    cluster.stop_immediate();
    let s = tmux.until("the board marked as not connected", |s| s.contains("NOT CONNECTED"));
    assert!(s.contains("T-001"), "the board as it was is no longer shown:\n{s}");
    cluster.restart();
    root.open_task("T-002", "after");
    tmux.until("the board connected again, with T-002", |s| {
        s.contains("T-002") && !s.contains("NOT CONNECTED") && s.contains("tasks shown of 2")
    });
    tmux.quit();
    // Started while the server is down, it waits for it, as a follower does.
    cluster.stop_immediate();
    start(&tmux, &url);
    tmux.until("the board waiting for the server", |s| s.contains("connecting again"));
    cluster.restart();
    tmux.until("the board, once the server is up", |s| s.contains("T-002"));
    tmux.quit();
}

fn start(tmux: &Tmux, url: &str) {
    tmux.start(&[format!("CIRCE_ROOT={url}")], &format!("{BIN} board"));
}
