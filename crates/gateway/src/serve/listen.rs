//! The accept loop of moniker's HTTP listeners (`/mcp` and `--metrics`). axum's own `serve`
//! takes any number of connections and gives a client all the time it likes to send its
//! request header: a few hundred sockets that each send half a header (slowloris) then hold
//! moniker without ever reaching authentication. Here a connection must send its whole
//! header within [`HEADER_TIMEOUT`], and at most `max_connections` are open at once (beyond
//! that, new ones wait in the kernel's backlog until one closes).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// How long a client has to send a request's whole header (each request of a kept-alive
/// connection too).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Open connections at most, unless `http.max_connections` says otherwise.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// Serves `app` on `listener` until `shutdown` completes, then lets the connections still open
/// finish (the caller bounds how long it waits for that).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    max_connections: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before it was taken: wait
                    // a little instead of spinning, and go on.
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Answers are small and come in more than one write: without TCP_NODELAY the second
        // write waits for the client's delayed acknowledgement.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let service = TowerToHyperService::new(app.clone());
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT);
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(tcp), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::trace!(error = %e, "HTTP connection ended");
            }
            drop(permit);
        });
    }
    graceful.shutdown().await;
    Ok(())
}
