//! A tmux server of its own, to drive a full-screen command as a person would (send-keys
//! to type, capture-pane to read the screen).

use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of our own (its own socket), killed when dropped.
pub struct Tmux {
    pub socket: String,
}

impl Tmux {
    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux is installed (.ci/run installs it)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "board"])
    }

    /// Wait (at most 15 s) until the screen shows `what`; the screen as last read.
    pub fn until(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            assert!(start.elapsed() < Duration::from_secs(15), "never saw {what}:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Start `command` in a session `board` of 160 x 40, with `env` (`NAME=VALUE` each).
    pub fn start(&self, env: &[String], command: &str) {
        let mut args = vec!["new-session", "-d", "-s", "board", "-x", "160", "-y", "40"];
        for e in env {
            args.extend(["-e", e.as_str()]);
        }
        args.push(command);
        self.run(&args);
    }

    /// Press `q` and wait (at most 10 s) until the session is gone.
    pub fn quit(&self) {
        self.keys(&["q"]);
        let start = Instant::now();
        while self.run(&["list-sessions"]).contains("board") {
            assert!(start.elapsed() < Duration::from_secs(10), "q did not end the board");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn keys(&self, keys: &[&str]) {
        self.run(&[&["send-keys", "-t", "board"][..], keys].concat());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["-L", &self.socket, "kill-server"]).output();
    }
}
