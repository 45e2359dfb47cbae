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
//! `max_connections` wait in all, and beyond that new ones wait in the kernel's backlog. A
//! place that frees is handed to the waiting address that holds the fewest (the oldest of its
//! waiting connections): a client whose address holds none waits for the next place to
//! free, not behind every socket the addresses at their share keep waiting.

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
use tokio::sync::{Semaphore, oneshot};

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
    max: usize,
    share: usize,
}

/// A connection waiting for a place (by when it came): the place is handed to it when one
/// frees.
type Waiter = (u64, oneshot::Sender<Place>);

#[derive(Default)]
struct Table {
    served: usize,
    /// Each address's connections waiting for a place, oldest first: an address waits with
    /// at most its share, and a connection past that is closed at once, so that one address's
    /// waiting sockets never fill what moniker accepts (a new client would then wait in the
    /// kernel's queue, where its address cannot be seen). A place that frees goes to the
    /// waiting address that holds the fewest, so a client whose address holds none is next,
    /// however many sockets the others keep waiting.
    waiting: HashMap<IpAddr, VecDeque<Waiter>>,
    /// Each address's connections, oldest first: an id, and what closes it.
    by_address: HashMap<IpAddr, VecDeque<(u64, oneshot::Sender<()>)>>,
    next: u64,
}

impl Table {
    fn held_by(&self, address: &IpAddr) -> usize {
        self.by_address.get(address).map_or(0, VecDeque::len)
    }

    /// A place for `address`, counted as served.
    fn admit(&mut self, places: &Places, address: IpAddr) -> Place {
        self.served += 1;
        self.next += 1;
        let id = self.next;
        let (close, evicted) = oneshot::channel();
        self.by_address
            .entry(address)
            .or_default()
            .push_back((id, close));
        Place {
            evicted,
            _held: Held {
                places: places.clone(),
                address,
                id,
            },
        }
    }

    /// The oldest waiting connection of the address that holds the fewest places (of the
    /// oldest waiting connection among equals).
    fn next_waiter(&mut self) -> Option<(IpAddr, oneshot::Sender<Place>)> {
        let address = *self
            .waiting
            .iter()
            .filter_map(|(address, queue)| Some((address, queue.front()?.0)))
            .min_by_key(|&(address, since)| (self.held_by(address), since))?
            .0;
        let queue = self.waiting.get_mut(&address)?;
        let (_, waiter) = queue.pop_front()?;
        if queue.is_empty() {
            self.waiting.remove(&address);
        }
        Some((address, waiter))
    }
}

/// A connection's place: given back when dropped (to a waiting connection, if any);
/// `evicted` fires when another address's client takes it.
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
        let handed = {
            let mut table = lock(&self.places.inner);
            table.served -= 1;
            if let Some(own) = table.by_address.get_mut(&self.address) {
                own.retain(|(id, _)| *id != self.id);
                if own.is_empty() {
                    table.by_address.remove(&self.address);
                }
            }
            // A place taken by eviction was counted when it was taken: this one, closed for
            // it, frees nothing.
            if table.served < self.places.max {
                table
                    .next_waiter()
                    .map(|(address, waiter)| (waiter, table.admit(&self.places, address)))
            } else {
                None
            }
        };
        // Outside the lock: a waiter that is gone drops its place, which goes to the next.
        if let Some((waiter, place)) = handed {
            let _ = waiter.send(place);
        }
    }
}

impl Places {
    fn new(max: usize) -> Self {
        Self {
            inner: Arc::default(),
            max,
            share: budget::connections_per_address(max),
        }
    }

    /// A place for a connection of `address`: at once while there is room or the address is
    /// below its share (taking the oldest place of the address that holds the most), else
    /// when one frees and no waiting address holds fewer.
    /// `None` when the address has its share of connections waiting already: the connection
    /// is closed.
    async fn take(&self, address: IpAddr) -> Option<Place> {
        let handed = {
            let mut table = lock(&self.inner);
            if let Some(place) = self.try_take(&mut table, address) {
                return Some(place);
            }
            table.next += 1;
            let since = table.next;
            let queue = table.waiting.entry(address).or_default();
            if queue.len() >= self.share {
                return None;
            }
            let (waiter, handed) = oneshot::channel();
            queue.push_back((since, waiter));
            handed
        };
        handed.await.ok()
    }

    fn try_take(&self, table: &mut Table, address: IpAddr) -> Option<Place> {
        if table.served >= self.max {
            if table.held_by(&address) >= self.share {
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
        } else if !table.waiting.is_empty() {
            // Room, but others wait for it: it is theirs (handed as it frees).
            return None;
        }
        Some(table.admit(self, address))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Places {
        /// A place at once, or none.
        fn now(&self, address: IpAddr) -> Option<Place> {
            let mut table = lock(&self.inner);
            self.try_take(&mut table, address)
        }
    }

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
            held.push(places.now(attacker).expect("room"));
        }
        assert!(places.now(attacker).is_none(), "the attacker waits");
        let first = places.now(client).expect("another address gets in");
        assert!(
            held[0].evicted.try_recv().is_ok(),
            "the attacker's oldest place was taken"
        );
        // Until the attacker is down to its share, the client's address keeps getting in.
        let second = places.now(client).expect("still below its share");
        assert!(places.now(client).is_none(), "at its share, it waits");
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
                held.push(places.now([127, 0, 0, ip].into()).expect("room"));
            }
        }
        assert!(places.now([127, 0, 0, 5].into()).is_none());
        assert!(held.iter_mut().all(|p| p.evicted.try_recv().is_err()));
    }

    /// "Hold the boundary, round three": a client behind five addresses that each hold their
    /// share waited for every socket those addresses kept waiting before it (8 s in a soak).
    /// A place that frees goes to the waiting address that holds the fewest.
    #[tokio::test]
    async fn a_freed_place_goes_to_the_waiting_address_that_holds_the_fewest() {
        let places = Places::new(8);
        let mut held = Vec::new();
        for ip in 1..=4u8 {
            for _ in 0..2 {
                held.push(places.now([127, 0, 0, ip].into()).expect("room"));
            }
        }
        let wait = |ip: u8| {
            let places = places.clone();
            tokio::spawn(async move { places.take([127, 0, 0, ip].into()).await })
        };
        // The first address waits first, with its share; a third of its is closed at once.
        let attacker = [wait(1), wait(1)];
        tokio::task::yield_now().await;
        assert!(places.take([127, 0, 0, 1].into()).await.is_none());
        let client = wait(9);
        tokio::task::yield_now().await;
        assert_eq!(lock(&places.inner).waiting.len(), 2, "both addresses wait");
        // A place of the second address frees: the client's address holds none, it is next.
        drop(held.remove(2));
        let place = tokio::time::timeout(Duration::from_secs(10), client)
            .await
            .expect("the client got the place")
            .expect("join");
        assert!(place.is_some());
        assert!(
            attacker.iter().all(|a| !a.is_finished()),
            "the attacker waits on"
        );
        // The next place to free is the attacker's, oldest first.
        drop(held.remove(0));
        let [first, second] = attacker;
        let got = tokio::time::timeout(Duration::from_secs(10), first).await;
        assert!(got.expect("handed").expect("join").is_some());
        assert!(!second.is_finished());
        second.abort();
    }
}
