//! SIGINT, SIGTERM and SIGHUP (a terminal closed) for commands that run until stopped
//! (`watch`, `wait`, `log --follow`): the signal only raises a flag, and the command ends between two events, so
//! the cursor it saves is the place of the last event it really handed on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::error::{Error, Result};

/// Whether SIGINT, SIGTERM or SIGHUP has come.
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    pub fn install() -> Result<Stop> {
        let flag = Arc::new(AtomicBool::new(false));
        // SIGHUP too: its default action would end the stream at once, leaving a running
        // hook behind while a restarted consumer runs the same event's hook.
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            signal_hook::flag::register(sig, Arc::clone(&flag))
                .map_err(|e| Error::internal(format!("cannot handle signal {sig}: {e}")))?;
        }
        Ok(Stop(flag))
    }

    pub fn requested(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A file-size limit (`ulimit -f`) reached mid-change would end the process by SIGXFSZ, with
/// no word and whatever it had done unsaid: caught instead, the write fails (EFBIG) and the
/// command says so like any failed write (its change stands or not, as it says).
pub fn catch_file_size_limit() {
    let _ =
        signal_hook::flag::register(signal_hook::consts::SIGXFSZ, Arc::new(AtomicBool::new(false)));
}

/// Whether whoever read standard output has gone (a pipe whose reader closed): a stream that
/// prints to it ends then, even while no event comes to be written (`log --follow | head`).
pub fn stdout_gone() -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let out = std::io::stdout();
    let mut fds = [PollFd::new(&out, PollFlags::empty())];
    let zero = Timespec { tv_sec: 0, tv_nsec: 0 };
    poll(&mut fds, Some(&zero))
        .is_ok_and(|n| n > 0 && fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP))
}
