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
//! place that frees is handed to the oldest waiting connection of an address below its
//! share, else to the oldest waiting one: a client whose address is below its share does not
//! wait behind every socket the addresses at their share keep waiting.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::Request;
use axum::response::Response;
use hyper::body::Incoming;
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

/// What answers the requests of one connection, from the address of its client.
pub trait Service:
    tower_service::Service<
        Request<Incoming>,
        Response = Response,
        Error = std::convert::Infallible,
        Future: Send + 'static,
    > + Clone
    + Send
    + 'static
{
}

impl<S> Service for S where
    S: tower_service::Service<
            Request<Incoming>,
            Response = Response,
            Error = std::convert::Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + 'static
{
}

/// Serves on `listener` until `shutdown` completes, each connection with the service
/// `service_for` makes for its client's address, then lets the connections still open finish
/// (the caller bounds how long it waits for that).
pub async fn serve<S: Service>(
    listener: TcpListener,
    service_for: impl Fn(IpAddr) -> S,
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
        let connection = connection(tcp, service_for(address), &graceful);
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

/// The HTTP/1 connection of `tcp`, answered by `service`, watched for the shutdown, polled
/// again in place when it wakes itself (its handler taking the body: see `again`).
fn connection(
    tcp: tokio::net::TcpStream,
    service: impl Service,
    graceful: &GracefulShutdown,
) -> impl Future<Output = Result<(), hyper::Error>> + Send + 'static {
    // Answers are small and come in more than one write: without TCP_NODELAY the second
    // write waits for the client's delayed acknowledgement.
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
    }
    let service = TowerToHyperService::new(service);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    PollAgain::new(graceful.watch(builder.serve_connection(TokioIo::new(tcp), service)))
}

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
    /// oldest waiting connection of an address below its share, else to the oldest: a client
    /// does not wait behind the sockets that addresses at their share keep waiting.
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

    /// The waiting connection a freed place goes to: the oldest of those whose address holds
    /// less than its share, else the oldest. Age alone among each kind, so none waits
    /// forever. Connections gone while they waited are dropped on the way.
    fn next_waiter(&mut self, share: usize) -> Option<(IpAddr, oneshot::Sender<Place>)> {
        loop {
            let address = *self
                .waiting
                .iter()
                .filter_map(|(address, queue)| Some((address, queue.front()?.0)))
                .min_by_key(|&(address, since)| (self.held_by(address) >= share, since))?
                .0;
            let queue = self.waiting.get_mut(&address)?;
            let (_, waiter) = queue.pop_front()?;
            if queue.is_empty() {
                self.waiting.remove(&address);
            }
            if !waiter.is_closed() {
                return Some((address, waiter));
            }
        }
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
                    .next_waiter(self.places.share)
                    .map(|(address, waiter)| (waiter, table.admit(&self.places, address)))
            } else {
                None
            }
        };
        // Outside the lock: a waiter gone since it was chosen drops its place, which goes to
        // the next.
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
    /// handed to it when one frees (waiting connections of addresses below their share
    /// first).
    /// `None` when the address has its share of connections waiting already: the connection
    /// is closed.
    async fn take(&self, address: IpAddr) -> Option<Place> {
        let handed = {
            let mut table = lock(&self.inner);
            if let Some(place) = self.try_take(&mut table, address) {
                return Some(place);
            }
            if table.waiting.get(&address).map_or(0, VecDeque::len) >= self.share {
                return None;
            }
            table.next += 1;
            let since = table.next;
            let (waiter, handed) = oneshot::channel();
            table
                .waiting
                .entry(address)
                .or_default()
                .push_back((since, waiter));
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
        }
        Some(table.admit(self, address))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::poll;
    use std::task::Poll;

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

    /// Eight places, full: four addresses (127.0.0.1 to .4) with their share, two each.
    fn full_house(places: &Places) -> Vec<Place> {
        (1..=4u8)
            .flat_map(|ip| [ip, ip])
            .map(|ip| places.now([127, 0, 0, ip].into()).expect("room"))
            .collect()
    }

    /// No one at their share gives a place: with four addresses holding a quarter each, a
    /// fifth waits.
    #[tokio::test]
    async fn an_address_at_its_share_keeps_what_it_holds() {
        let places = Places::new(8);
        let mut held = full_house(&places);
        assert!(places.now([127, 0, 0, 5].into()).is_none());
        assert!(held.iter_mut().all(|p| p.evicted.try_recv().is_err()));
    }

    /// The place a waiting connection was handed (kept: dropped, it would free again).
    fn handed(polled: Poll<Option<Place>>) -> Place {
        match polled {
            Poll::Ready(Some(place)) => place,
            Poll::Ready(None) => panic!("closed instead of handed a place"),
            Poll::Pending => panic!("still waiting"),
        }
    }

    /// What the table counts: connections served, and the addresses with some waiting.
    fn counts(places: &Places) -> (usize, usize) {
        let table = lock(&places.inner);
        (table.served, table.waiting.len())
    }

    /// A client behind five addresses that each held their share waited for every socket
    /// those addresses kept waiting before it (8 s in a soak). A place that frees goes to the
    /// oldest waiting connection of an address below its share first.
    #[tokio::test]
    async fn a_freed_place_goes_first_to_an_address_below_its_share() {
        let places = Places::new(8);
        let mut held = full_house(&places);
        // The first address (at its share) waits first, with its share of waiting ones; one
        // more of its is closed at once.
        let mut attacker = [
            Box::pin(places.take([127, 0, 0, 1].into())),
            Box::pin(places.take([127, 0, 0, 1].into())),
        ];
        for waiting in &mut attacker {
            assert!(poll!(waiting.as_mut()).is_pending());
        }
        assert!(places.take([127, 0, 0, 1].into()).await.is_none());
        let mut client = Box::pin(places.take([127, 0, 0, 9].into()));
        assert!(poll!(client.as_mut()).is_pending());
        assert_eq!(counts(&places), (8, 2));
        // A place of the second address frees: the client's address is below its share.
        drop(held.remove(2));
        let client = handed(poll!(client.as_mut()));
        for waiting in &mut attacker {
            assert!(
                poll!(waiting.as_mut()).is_pending(),
                "the attacker waits on"
            );
        }
        // One of the first address's frees: it is below its share now, its oldest is next.
        drop(held.remove(0));
        let [mut first, second] = attacker;
        let first = handed(poll!(first.as_mut()));
        assert_eq!(counts(&places), (8, 1));
        // The other waiter goes away; the next place to free has no one to go to.
        drop(second);
        drop(held.remove(0));
        assert_eq!(counts(&places), (7, 0));
        drop((held, client, first));
        assert_eq!(counts(&places), (0, 0));
    }

    /// A connection gone while it waited is passed over: the place goes to the next.
    #[tokio::test]
    async fn a_place_passes_over_a_connection_gone_while_it_waited() {
        let places = Places::new(8);
        let mut held = full_house(&places);
        let mut gone = Box::pin(places.take([127, 0, 0, 5].into()));
        assert!(poll!(gone.as_mut()).is_pending());
        let mut next = Box::pin(places.take([127, 0, 0, 6].into()));
        assert!(poll!(next.as_mut()).is_pending());
        drop(gone);
        drop(held.remove(0));
        let next = handed(poll!(next.as_mut()));
        assert_eq!(counts(&places), (8, 0));
        drop((held, next));
        assert_eq!(counts(&places), (0, 0));
    }

    /// A place taken by eviction is counted once: the evicted connection closing frees
    /// nothing, the next to close frees one, handed to who waits; all closed, none is left.
    #[tokio::test]
    async fn an_eviction_and_a_hand_off_leave_the_count_right() {
        let places = Places::new(8);
        let attacker: IpAddr = [127, 0, 0, 1].into();
        let mut held: Vec<Place> = (0..8)
            .map(|_| places.now(attacker).expect("room"))
            .collect();
        let client = places.now([127, 0, 0, 2].into()).expect("it evicts");
        assert_eq!(counts(&places), (9, 0));
        let mut waits = Box::pin(places.take(attacker));
        assert!(poll!(waits.as_mut()).is_pending());
        let mut evicted = held.remove(0);
        assert!(evicted.evicted.try_recv().is_ok());
        drop(evicted);
        assert_eq!(counts(&places), (8, 1), "the evicted one frees nothing");
        assert!(poll!(waits.as_mut()).is_pending());
        drop(held.remove(0));
        let waits = handed(poll!(waits.as_mut()));
        assert_eq!(counts(&places), (8, 0));
        drop((held, client, waits));
        assert_eq!(counts(&places), (0, 0));
        assert!(lock(&places.inner).by_address.is_empty());
    }
}
