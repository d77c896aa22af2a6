//! SIGINT and SIGTERM for commands that run until stopped (`watch`, `wait`, `log
//! --follow`): the signal only raises a flag, and the command ends between two events, so
//! the cursor it saves is the place of the last event it really handed on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};

/// Whether SIGINT or SIGTERM has come.
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    pub fn install() -> Result<Stop> {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, Arc::clone(&flag))
                .map_err(|e| Error::internal(format!("cannot handle signal {sig}: {e}")))?;
        }
        Ok(Stop(flag))
    }

    pub fn requested(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
