//! Supervision of one server: start it (or connect to it), shake hands, serve until it is
//! gone, back off, again; what happened is kept in its slot for `check` and the metrics.

use std::sync::Arc;
use std::time::Duration;

use moniker_surface::ServerId;
use tokio::sync::oneshot;

use crate::connect::{self, CallError, Sink};
use crate::gateway::{Gateway, WeakSink};
use crate::sync::lock;

/// Keeps one server running: start, handshake, serve until it exits, back off, again.
pub(crate) async fn supervise(gateway: Arc<Gateway>, id: ServerId, first: oneshot::Sender<()>) {
    let mut first = Some(first);
    let mut attempt: u32 = 0;
    let Some(slot) = gateway.slots.get(&id) else {
        return;
    };
    let sink: Arc<dyn Sink> = Arc::new(WeakSink(Arc::downgrade(&gateway)));
    let settings = gateway.settings.clone();
    loop {
        if gateway.is_stopping() {
            break;
        }
        let started = connect::start(
            &id,
            &slot.entry.spec,
            settings.guard.as_deref(),
            sink.clone(),
            settings.max_message,
            settings.start_timeout,
        )
        .await;
        match started {
            Ok(mut process) => {
                *lock(&slot.pgid) = process.pgid;
                let handshake = tokio::select! {
                    r = connect::handshake(&process.conn, settings.start_timeout) => r,
                    _ = &mut process.closed => Err(connect::HandshakeError::Call(CallError::Gone)),
                };
                match handshake {
                    Ok(listing) => {
                        attempt = 0;
                        *lock(&slot.info) = Some(process.conn.info());
                        slot.conn.store(Some(process.conn.clone()));
                        {
                            let mut status = lock(&slot.status);
                            status.up = true;
                            gateway.metrics.server_up(&id, true);
                            status.last_error = None;
                        }
                        tracing::info!(server = %id, tools = listing.tools.len(), prompts = listing.prompts.len(), "server connected");
                        gateway.update(&id, Some(listing), true);
                        if let Some(first) = first.take() {
                            let _ = first.send(());
                        }
                        tokio::select! {
                            _ = &mut process.closed => {}
                            _ = gateway.stopped() => {}
                        }
                        process.conn.close();
                        slot.conn.store(None);
                        lock(&slot.status).up = false;
                        gateway.metrics.server_up(&id, false);
                        if gateway.is_stopping() {
                            break;
                        }
                        tracing::warn!(server = %id, "server disconnected");
                        gateway.update(&id, None, false);
                    }
                    Err(e) => {
                        let reason = match &e {
                            connect::HandshakeError::Call(CallError::Gone) => {
                                "it exited during the handshake".to_owned()
                            }
                            other => other.to_string(),
                        };
                        tracing::warn!(server = %id, error = %reason, "server failed to start");
                        lock(&slot.status).last_error = Some(reason);
                        process.conn.close();
                    }
                }
                let pgid = lock(&slot.pgid).take();
                if let Some(pgid) = pgid {
                    crate::guard::end_group(pgid, Duration::from_secs(2)).await;
                }
                if let Some(child) = process.child.as_mut() {
                    let _ = child.wait().await;
                }
            }
            Err(reason) => {
                tracing::warn!(server = %id, error = %reason, "server failed to start");
                lock(&slot.status).last_error = Some(reason);
            }
        }
        if let Some(first) = first.take() {
            let _ = first.send(());
        }
        attempt += 1;
        if settings
            .restart_max_attempts
            .is_some_and(|max| attempt > max)
        {
            tracing::error!(server = %id, attempts = attempt, "server gave up after too many restarts");
            break;
        }
        let delay = settings
            .restart_initial_delay
            .saturating_mul(1u32 << (attempt - 1).min(16))
            .min(settings.restart_max_delay);
        lock(&slot.status).restarts += 1;
        gateway.metrics.server_restarted(&id);
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = gateway.stopped() => break,
        }
    }
}
