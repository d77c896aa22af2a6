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

/// The channel a listener's probe notifies: `circe-probe-PID` (a `-` no root's channel,
/// `circe_<schema>`, can hold).
fn probe_channel() -> String {
    format!("circe-probe-{}", std::process::id())
}

/// How long a probe's notification may take before the listener is said not to hear.
const PROBE_WAIT: Duration = Duration::from_millis(500);

/// The port the URL names, when the server says its own is another (`None`: the same, or
/// it did not say).
fn other_port(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    target: &Target,
) -> Option<(u16, String)> {
    let port = target.config.get_ports().first().copied().unwrap_or(5432);
    let told = rt.block_on(async {
        let q = client.query_one("SELECT current_setting('port')", &[]);
        tokio::time::timeout(super::conn::ROUND_TRIP, q).await
    });
    let server: String = told.ok()?.ok()?.get(0);
    (server != port.to_string()).then_some((port, server))
}

/// A URL whose port is not the server's own may go through a pooler, which does not pass
/// notifications (PgBouncer in transaction mode runs the LISTEN on a server connection it
/// then gives to others): a notification sent from a connection of its own must come back
/// to the listener. When it does not, say so once: the follower still sees every event,
/// read every second instead of at once.
fn probe(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    target: &Target,
    (port, server): (u16, String),
    heard: tokio::sync::oneshot::Receiver<()>,
) {
    let channel = probe_channel();
    let (listen, notify) = (format!("LISTEN \"{channel}\""), format!("NOTIFY \"{channel}\""));
    let unlisten = format!("UNLISTEN \"{channel}\"");
    let heard_back = rt.block_on(async {
        if !answered(client.batch_execute(&listen)).await {
            return true;
        }
        let Ok(Ok((other, conn))) =
            tokio::time::timeout(target.connect_timeout(), target.config.connect(NoTls)).await
        else {
            return true;
        };
        let running = tokio::spawn(conn);
        let sent = answered(other.batch_execute(&notify)).await;
        drop(other);
        let _ = running.await;
        let back = !sent || tokio::time::timeout(PROBE_WAIT, heard).await.is_ok_and(|r| r.is_ok());
        answered(client.batch_execute(&unlisten)).await;
        back
    });
    if !heard_back {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            crate::error::warn(&format!(
                "notifications do not come back through {} (its port {port} is not the server's own, {server}: a pooler in front?): events are read every second instead of at once; name the server with listen_port= (and listen_host=) in the URL (README, \"Running agents on several hosts\")",
                target.location()
            ));
        });
    }
}

/// `call` answered without an error within a round trip.
async fn answered<F>(call: F) -> bool
where
    F: std::future::Future<Output = std::result::Result<(), tokio_postgres::Error>>,
{
    matches!(tokio::time::timeout(super::conn::ROUND_TRIP, call).await, Ok(Ok(())))
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
            .map_err(|_| {
                Error::internal("cannot connect to listen for events: no answer").transient()
            })?
            .map_err(|e| {
                super::conn::connect_error(&target.listen_location(), &target.listen, &e)
            })?;
        let (tx, woken) = tokio::sync::mpsc::unbounded_channel();
        let (probe_tx, probe_rx) = tokio::sync::oneshot::channel();
        let mut probed = Some(probe_tx);
        let probing = probe_channel();
        rt.spawn(async move {
            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(m) = messages.next().await {
                match m {
                    Ok(AsyncMessage::Notification(n)) if n.channel() == probing => {
                        if let Some(p) = probed.take() {
                            let _ = p.send(());
                        }
                    }
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
        // The session's settings on their own (a dead listener's session ends soon on the
        // server too), first; a server that refuses one still serves the LISTEN.
        let _ = rt.block_on(async {
            tokio::time::timeout(
                super::conn::ROUND_TRIP,
                client.batch_execute(&super::conn::session_sql()),
            )
            .await
        });
        // Before the LISTEN, which stays the connection's last statement.
        if let Some(ports) =
            if target.server_apart { None } else { other_port(&rt, &client, target) }
        {
            probe(&rt, &client, target, ports, probe_rx);
        }
        let listen = format!("LISTEN \"{}\"", super::schema::channel(&target.schema));
        rt.block_on(async {
            tokio::time::timeout(super::conn::ROUND_TRIP, client.batch_execute(&listen)).await
        })
        .map_err(|_| Error::internal("cannot listen for events: no answer").transient())?
        .map_err(|e| super::conn::db_error("cannot listen for events", &e))?;
        Ok(Listener { rt, _client: client, woken })
    }

    /// Wait up to `timeout` for a notification; true when one came. When the connection
    /// is gone this waits out `timeout` (the caller reads again then, as it would after a
    /// lost notification) and `lost` says so.
    pub fn wait(&mut self, timeout: Duration) -> bool {
        let woken = &mut self.woken;
        let got = self.rt.block_on(async { tokio::time::timeout(timeout, woken.recv()).await });
        if matches!(got, Ok(None)) {
            std::thread::sleep(timeout);
            return false;
        }
        // Several commits may have notified: one wake is enough.
        while self.woken.try_recv().is_ok() {}
        matches!(got, Ok(Some(())))
    }

    /// The connection is gone: no notification will come.
    pub fn lost(&self) -> bool {
        self.woken.is_closed()
    }

    /// Wait as `wait`, on `slot`'s listener, made (again) when there is none or it lost its
    /// connection; a listener that cannot be made now leaves the wait to `timeout`.
    pub fn wait_in(slot: &mut Option<Listener>, target: &Target, timeout: Duration) -> bool {
        if slot.as_ref().is_none_or(Listener::lost) {
            *slot = Listener::start(target).ok();
        }
        if let Some(l) = slot {
            return l.wait(timeout);
        }
        std::thread::sleep(timeout);
        false
    }
}
