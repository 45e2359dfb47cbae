//! The accept loop of moniker's HTTP listeners (`/mcp` and `--metrics`). axum's own `serve`
//! takes any number of connections and gives a client all the time it likes to send its
//! request header: a few hundred sockets that each send half a header (slowloris) then hold
//! moniker without ever reaching authentication. Here a connection must send its whole
//! header within [`HEADER_TIMEOUT`], and at most `max_connections` are served at once.
//!
//! The places are shared by client address ([`budget::connections_per_address`]): while
//! there is room anyone may take more than their share, but when every place is taken, a
//! client of an address below its share takes the oldest place of the address that holds the
//! most (that connection is closed: one host without credentials cannot hold every place,
//! whatever the rate at which it renews its sockets), and a client of an address at its share
//! waits for a place to free, as every client did before: with at most its share of others
//! of its address (one more is closed at once, so that one address's waiting sockets never
//! fill what moniker accepts and push a new client into the kernel's queue); at most
//! `max_connections` wait in all, and beyond that new ones wait in the kernel's backlog.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore, oneshot};

use super::again::PollAgain;
use crate::budget;
use crate::sync::lock;

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
    let max = max_connections.max(1);
    // Served and waiting together: what moniker holds sockets for.
    let sockets = Arc::new(Semaphore::new(max * 2));
    let places = Places::new(max);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let socket = tokio::select! {
            socket = sockets.clone().acquire_owned() => match socket {
                Ok(socket) => socket,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (tcp, address) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => (tcp, peer.ip()),
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
        // Made (and watched for the shutdown) now, run once it has a place.
        let connection = connection(tcp, address, &app, &graceful);
        let places = places.clone();
        tokio::spawn(async move {
            let Some(Place { evicted, _held }) = places.take(address).await else {
                tracing::debug!(%address, "HTTP connection closed: its address has its share of connections waiting for a place");
                return;
            };
            tokio::select! {
                ended = connection => {
                    if let Err(e) = ended {
                        tracing::trace!(error = %e, "HTTP connection ended");
                    }
                }
                _ = evicted => {
                    tracing::debug!(%address, "HTTP connection closed: its address held more than its share of the places, and another address needed one");
                }
            }
            drop(socket);
        });
    }
    graceful.shutdown().await;
    Ok(())
}

/// The HTTP/1 connection of `tcp`, watched for the shutdown, polled again in place when it
/// wakes itself (its handler taking the body: see `again`).
fn connection(
    tcp: tokio::net::TcpStream,
    address: IpAddr,
    app: &Router,
    graceful: &GracefulShutdown,
) -> impl Future<Output = Result<(), hyper::Error>> + Send + 'static {
    // Answers are small and come in more than one write: without TCP_NODELAY the second
    // write waits for the client's delayed acknowledgement.
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
    }
    // Its address goes with each of its requests (a rate budget is shared by address).
    let service =
        TowerToHyperService::new(app.clone().layer(axum::Extension(ClientAddress(address))));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    PollAgain::new(graceful.watch(builder.serve_connection(TokioIo::new(tcp), service)))
}

/// The address of the client a request came from (the peer of its connection: a proxy's, when
/// one is in front).
#[derive(Debug, Clone, Copy)]
pub struct ClientAddress(pub std::net::IpAddr);

/// The places of the connections served, by client address.
#[derive(Clone)]
struct Places {
    inner: Arc<Mutex<Table>>,
    freed: Arc<Notify>,
    max: usize,
    share: usize,
}

#[derive(Default)]
struct Table {
    served: usize,
    /// Each address's connections waiting for a place: an address waits with at most its
    /// share, and a connection past that is closed at once, so that one address's waiting
    /// sockets never fill what moniker accepts (a new client would then wait in the kernel's
    /// queue, where its address cannot be seen).
    waiting: HashMap<IpAddr, usize>,
    /// Each address's connections, oldest first: an id, and what closes it.
    by_address: HashMap<IpAddr, VecDeque<(u64, oneshot::Sender<()>)>>,
    next: u64,
}

/// A connection waiting for a place, counted in its address's share of waiting ones.
struct Waits<'p> {
    places: &'p Places,
    address: IpAddr,
}

impl Drop for Waits<'_> {
    fn drop(&mut self) {
        let mut table = lock(&self.places.inner);
        if let Some(n) = table.waiting.get_mut(&self.address) {
            *n -= 1;
            if *n == 0 {
                table.waiting.remove(&self.address);
            }
        }
    }
}

/// A connection's place: given back when dropped; `evicted` fires when another address's
/// client takes it.
struct Place {
    evicted: oneshot::Receiver<()>,
    _held: Held,
}

struct Held {
    places: Places,
    address: IpAddr,
    id: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        {
            let mut table = lock(&self.places.inner);
            table.served -= 1;
            if let Some(own) = table.by_address.get_mut(&self.address) {
                own.retain(|(id, _)| *id != self.id);
                if own.is_empty() {
                    table.by_address.remove(&self.address);
                }
            }
        }
        self.places.freed.notify_one();
    }
}

impl Places {
    fn new(max: usize) -> Self {
        Self {
            inner: Arc::default(),
            freed: Arc::new(Notify::new()),
            max,
            share: budget::connections_per_address(max),
        }
    }

    /// A place for a connection of `address`: at once while there is room or the address is
    /// below its share (taking the oldest place of the address that holds the most), else
    /// when one frees.
    /// `None` when the address has its share of connections waiting already: the connection
    /// is closed.
    async fn take(&self, address: IpAddr) -> Option<Place> {
        if let Some(place) = self.try_take(address) {
            return Some(place);
        }
        {
            let mut table = lock(&self.inner);
            let waiting = table.waiting.entry(address).or_default();
            if *waiting >= self.share {
                return None;
            }
            *waiting += 1;
        }
        let _waits = Waits {
            places: self,
            address,
        };
        loop {
            let freed = self.freed.notified();
            if let Some(place) = self.try_take(address) {
                return Some(place);
            }
            freed.await;
        }
    }

    fn try_take(&self, address: IpAddr) -> Option<Place> {
        let mut table = lock(&self.inner);
        let own = table.by_address.get(&address).map_or(0, VecDeque::len);
        if table.served >= self.max {
            if own >= self.share {
                return None;
            }
            // The address that holds the most gives its oldest place, when it holds more than
            // its share (one at its share keeps what it holds: then this one waits too).
            let share = self.share;
            let victim = table
                .by_address
                .iter_mut()
                .max_by_key(|(_, held)| held.len())
                .filter(|(_, held)| held.len() > share)
                .and_then(|(_, held)| held.pop_front());
            let (_, close) = victim?;
            let _ = close.send(());
        }
        table.served += 1;
        table.next += 1;
        let id = table.next;
        let (close, evicted) = oneshot::channel();
        table
            .by_address
            .entry(address)
            .or_default()
            .push_back((id, close));
        Some(Place {
            evicted,
            _held: Held {
                places: self.clone(),
                address,
                id,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "Hold the boundary, round two", finding 4: one host held every place. When the places
    /// are full, an address below its share takes the oldest place of the one that holds the
    /// most; one at its share waits.
    #[tokio::test]
    async fn a_full_house_makes_room_for_another_address_only() {
        let places = Places::new(8);
        let attacker: IpAddr = [127, 0, 0, 2].into();
        let client: IpAddr = [127, 0, 0, 1].into();
        let mut held: Vec<Place> = Vec::new();
        for _ in 0..8 {
            held.push(places.try_take(attacker).expect("room"));
        }
        assert!(places.try_take(attacker).is_none(), "the attacker waits");
        let first = places.try_take(client).expect("another address gets in");
        assert!(
            held[0].evicted.try_recv().is_ok(),
            "the attacker's oldest place was taken"
        );
        // Until the attacker is down to its share, the client's address keeps getting in.
        let second = places.try_take(client).expect("still below its share");
        assert!(places.try_take(client).is_none(), "at its share, it waits");
        drop((first, second));
    }

    /// No one at their share gives a place: with four addresses holding a quarter each, a
    /// fifth waits.
    #[tokio::test]
    async fn an_address_at_its_share_keeps_what_it_holds() {
        let places = Places::new(8);
        let mut held = Vec::new();
        for ip in 1..=4u8 {
            for _ in 0..2 {
                held.push(places.try_take([127, 0, 0, ip].into()).expect("room"));
            }
        }
        assert!(places.try_take([127, 0, 0, 5].into()).is_none());
        assert!(held.iter_mut().all(|p| p.evicted.try_recv().is_err()));
    }
}
