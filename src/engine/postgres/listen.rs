//! Waking followers of the feed: a connection of its own that LISTENs on the root's
//! channel (a task's commit and `append_events` NOTIFY it with the newest id when they
//! commit). LISTEN needs a server connection of its own, which PgBouncer in transaction mode does not
//! give, so it connects to `listen_host`/`listen_port` when the URL names them. A
//! notification only wakes the reader: what is new is read from the table by id.

use std::time::Duration;

use futures_util::StreamExt;
use tokio_postgres::{AsyncMessage, Client, NoTls};

use super::target::Target;
use crate::error::{Error, Result};

pub struct Listener {
    rt: tokio::runtime::Runtime,
    _client: Client,
    woken: tokio::sync::mpsc::UnboundedReceiver<()>,
}

impl Listener {
    /// Connect and LISTEN on the root's channel.
    pub fn start(target: &Target) -> Result<Listener> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| Error::internal(format!("cannot start the database client: {e}")))?;
        let limit = target.connect_timeout() + Duration::from_millis(500);
        let (client, mut connection) = rt
            .block_on(async { tokio::time::timeout(limit, target.listen.connect(NoTls)).await })
            .map_err(|_| Error::internal("cannot connect to listen for events: no answer"))?
            .map_err(|e| Error::internal(format!("cannot connect to listen for events: {e}")))?;
        let (tx, woken) = tokio::sync::mpsc::unbounded_channel();
        rt.spawn(async move {
            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(m) = messages.next().await {
                match m {
                    Ok(AsyncMessage::Notification(_)) => {
                        if tx.send(()).is_err() {
                            break;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        });
        let listen = format!("LISTEN \"{}\"", super::schema::channel(&target.schema));
        rt.block_on(async {
            tokio::time::timeout(super::conn::ROUND_TRIP, client.batch_execute(&listen)).await
        })
        .map_err(|_| Error::internal("cannot listen for events: no answer"))?
        .map_err(|e| Error::internal(format!("cannot listen for events: {e}")))?;
        Ok(Listener { rt, _client: client, woken })
    }

    /// Wait up to `timeout` for a notification; true when one came.
    pub fn wait(&mut self, timeout: Duration) -> bool {
        let woken = &mut self.woken;
        let got = self.rt.block_on(async { tokio::time::timeout(timeout, woken.recv()).await });
        // Several commits may have notified: one wake is enough.
        while self.woken.try_recv().is_ok() {}
        matches!(got, Ok(Some(())))
    }
}
