//! The servers part of the gateway: each server's slot (how to reach it, its live connection,
//! what happened to it), whose first attempt to start is still going on (what a client's first
//! listing waits for), and the gateway's stop.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use moniker_surface::{Listing, ServerId};
use tokio::sync::{Notify, watch};

use super::{Reloaded, ServerEntry, ServerStatus};
use crate::connect::{Connection, InitInfo, ServerSpec};
use crate::sync::lock;

/// One configured server: how to reach it, its live connection, what happened to it. A
/// reload that removes or changes the server retires its slot (its supervisor ends it, after
/// the calls in flight); a changed server gets a new slot.
pub(crate) struct Slot {
    pub(crate) entry: ServerEntry,
    pub(crate) conn: ArcSwapOption<Connection>,
    pub(crate) info: Mutex<Option<InitInfo>>,
    pub(crate) pgid: Mutex<Option<u32>>,
    pub(crate) status: Mutex<ServerStatus>,
    /// Its instances, one a person, when it runs once for each person (`per_person`).
    pub(crate) people: Option<Arc<crate::instances::Instances>>,
    retired: watch::Sender<bool>,
    /// Its first attempt to start is over, whatever its outcome.
    settled: watch::Sender<bool>,
    /// It refused the 2025 handshake for 2026-07-28 (its config did not say).
    found_modern: AtomicBool,
    /// What is left of its budget of refusals logged ([`Slot::said`]).
    refusals_logged: Mutex<crate::budget::Rate>,
}

impl Slot {
    /// The server failed (to start, or while serving): why, and when.
    pub(crate) fn failed(&self, reason: String) {
        let mut status = lock(&self.status);
        status.last_error = Some(reason);
        status.failed_at = Some(std::time::SystemTime::now());
    }

    /// What a sandboxed server said (an error's text, a line of its stderr), when it reads as
    /// a refusal of its sandbox: noted (for `/healthz` and `moniker doctor`) and logged, with
    /// the setting that would allow it; the setting returned. Logged when the note changes,
    /// within [`crate::budget::SANDBOX_REFUSALS_LOGGED`]: a server that says it again and again
    /// does not fill the log.
    pub(crate) fn said(&self, text: &str) -> Option<&'static str> {
        self.entry.sandbox.as_ref()?;
        let (line, setting) = crate::sandbox::likely(text)?;
        let note = format!("{line} (likely its sandbox: {setting} would allow it)");
        let mut status = lock(&self.status);
        if status.sandbox_refused.as_deref() != Some(note.as_str())
            && lock(&self.refusals_logged).take(
                crate::budget::SANDBOX_REFUSALS_LOGGED,
                std::time::Instant::now(),
            )
        {
            tracing::warn!(server = %self.entry.id, "{note}");
        }
        status.sandbox_refused = Some(note);
        Some(setting)
    }

    fn new(entry: ServerEntry) -> Arc<Self> {
        Arc::new(Self {
            people: crate::instances::Instances::of(
                crate::instances::Recipe {
                    id: entry.id.clone(),
                    spec: entry.spec.clone(),
                    sandbox: entry.sandbox.clone(),
                },
                entry.per_person.as_ref(),
            ),
            entry,
            conn: ArcSwapOption::empty(),
            info: Mutex::new(None),
            pgid: Mutex::new(None),
            status: Mutex::new(ServerStatus::default()),
            retired: watch::channel(false).0,
            settled: watch::channel(false).0,
            found_modern: AtomicBool::new(false),
            refusals_logged: Mutex::new(crate::budget::Rate::full(
                crate::budget::SANDBOX_REFUSALS_LOGGED,
                std::time::Instant::now(),
            )),
        })
    }

    /// Whether its first attempt to start is over.
    pub(crate) fn is_settled(&self) -> bool {
        *self.settled.borrow()
    }

    /// Its first attempt to start is over; `false` when it was already.
    pub(crate) fn settle(&self) -> bool {
        !self.settled.send_replace(true)
    }

    /// Resolves when its first attempt to start is over.
    pub(crate) async fn first_attempt_over(&self) {
        let mut rx = self.settled.subscribe();
        let _ = rx.wait_for(|settled| *settled).await;
    }

    /// It is spoken to in 2026-07-28: configured so, or found so.
    pub(crate) fn speaks_modern(&self) -> bool {
        self.entry.modern || self.found_modern.load(Ordering::Acquire)
    }

    pub(crate) fn found_modern(&self) {
        self.found_modern.store(true, Ordering::Release);
    }

    fn retire(&self) {
        self.retired.send_replace(true);
    }

    pub(crate) fn is_retired(&self) -> bool {
        *self.retired.borrow()
    }

    /// Resolves when the slot is retired.
    pub(crate) async fn retired(&self) {
        let mut rx = self.retired.subscribe();
        let _ = rx.wait_for(|retired| *retired).await;
    }

    /// The live connection, if there is one.
    fn live(&self) -> Option<Arc<Connection>> {
        self.conn.load_full().filter(|c| !c.is_closed())
    }
}

/// Whose first attempt to start is not over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Joining {
    /// Some server's that nothing is known of from a run before.
    pub unknown: bool,
    /// Some server's at all.
    pub any: bool,
}

/// The servers: their slots (replaced as a whole by a reload, read without a lock by every
/// call), who is still joining, and whether the gateway is stopping.
pub struct Servers {
    slots: ArcSwap<BTreeMap<ServerId, Arc<Slot>>>,
    /// Whose first attempt to start is not over yet: servers nothing is known of, and servers
    /// at all.
    joining: watch::Sender<Joining>,
    /// A client's listing waits no more for servers to join: they all have, or `list_wait`
    /// from the start is over.
    joined: AtomicBool,
    /// The same, for what the servers' listings do not say (resources, completions): every
    /// server is waited for there.
    joined_all: AtomicBool,
    /// When the servers started.
    opened: tokio::time::Instant,
    stopping: AtomicBool,
    stop: Notify,
}

impl Servers {
    pub(crate) fn new(servers: Vec<ServerEntry>) -> Self {
        let slots = servers
            .into_iter()
            .map(|entry| (entry.id.clone(), Slot::new(entry)))
            .collect();
        Self {
            slots: ArcSwap::from_pointee(slots),
            joining: watch::channel(Joining::default()).0,
            joined: AtomicBool::new(true),
            joined_all: AtomicBool::new(true),
            opened: tokio::time::Instant::now(),
            stopping: AtomicBool::new(false),
            stop: Notify::new(),
        }
    }

    /// The servers' slots now.
    pub(crate) fn slots(&self) -> Arc<BTreeMap<ServerId, Arc<Slot>>> {
        self.slots.load_full()
    }

    /// Server `id`'s slot now.
    pub(crate) fn slot(&self, id: &ServerId) -> Option<Arc<Slot>> {
        self.slots.load().get(id).cloned()
    }

    /// Whether a server makes headers from its callers (`forward`), is called with their own
    /// tokens (`auth.exchange`, `auth.per_person`) or runs once for each of them
    /// (`per_person`): else nobody needs to know who calls.
    pub(crate) fn forwards(&self) -> bool {
        self.slots.load().values().any(|slot| {
            slot.entry.per_person.is_some()
                || matches!(&slot.entry.spec, ServerSpec::Http { forward, auth, .. }
                    if !forward.is_empty() || auth.exchange.is_some() || auth.per_person)
        })
    }

    /// Whether `slot` is still the server's (not retired by a reload).
    pub(crate) fn is_current(&self, slot: &Arc<Slot>) -> bool {
        self.slots
            .load()
            .get(&slot.entry.id)
            .is_some_and(|s| Arc::ptr_eq(s, slot))
    }

    /// A new config's servers in place of the old, as a difference: an unchanged server keeps
    /// its slot, a changed or new one gets a new slot (returned, to be started), and the slots
    /// of those changed or removed are retired.
    pub(crate) fn replace(&self, servers: Vec<ServerEntry>) -> (Reloaded, Vec<Arc<Slot>>) {
        let old = self.slots.load_full();
        let mut report = Reloaded::default();
        let mut next = BTreeMap::new();
        let mut fresh = Vec::new();
        for entry in servers {
            let id = entry.id.clone();
            match old.get(&id) {
                // Its sandbox and whether it runs once for each person are part of it too.
                Some(slot)
                    if slot.entry.spec == entry.spec
                        && slot.entry.modern == entry.modern
                        && slot.entry.sandbox == entry.sandbox
                        && slot.entry.per_person == entry.per_person =>
                {
                    next.insert(id, slot.clone());
                }
                found => {
                    let changed = if found.is_some() {
                        &mut report.restarted
                    } else {
                        &mut report.added
                    };
                    changed.push(id.clone());
                    let slot = Slot::new(entry);
                    fresh.push(slot.clone());
                    next.insert(id, slot);
                }
            }
        }
        for (id, slot) in old.iter() {
            if !next.get(id).is_some_and(|s| Arc::ptr_eq(s, slot)) {
                slot.retire();
                if !next.contains_key(id) {
                    report.removed.push(id.clone());
                }
            }
        }
        self.slots.store(Arc::new(next));
        (report, fresh)
    }

    pub fn server_status(&self) -> BTreeMap<ServerId, ServerStatus> {
        self.slots
            .load()
            .iter()
            .map(|(id, slot)| (id.clone(), lock(&slot.status).clone()))
            .collect()
    }

    pub fn connection(&self, server: &ServerId) -> Option<Arc<Connection>> {
        self.slots.load().get(server)?.live()
    }

    /// The live connection to `server`; for a server still in its first attempt to start (a
    /// call on its kept listing), once it has joined, within `budget` (its start budget or the
    /// call's own time-out, whichever ends first).
    pub(crate) async fn joined_connection(
        &self,
        server: &ServerId,
        budget: Duration,
    ) -> Result<Arc<Connection>, crate::errors::Refusal> {
        let gone = || crate::errors::Refusal::ServerGone(server.clone());
        if let Some(conn) = self.connection(server) {
            return Ok(conn);
        }
        let slot = self.slot(server).ok_or_else(gone)?;
        if slot.is_settled() {
            return Err(gone());
        }
        let _ = tokio::time::timeout(budget, slot.first_attempt_over()).await;
        self.connection(server)
            .ok_or_else(|| crate::errors::Refusal::NotJoined {
                server: server.clone(),
                budget,
            })
    }

    /// How long a client may cache a listing: the smallest time any server up said of its
    /// own (a server that said none, as every 2025 server, makes it 0); 0 while a server is in
    /// its first attempt to start (the listing changes when it joins: a client that cached it
    /// would miss it).
    pub fn list_ttl(&self) -> u64 {
        if self.slots.load().values().any(|slot| !slot.is_settled()) {
            return 0;
        }
        self.connections()
            .iter()
            .map(|(conn, _)| conn.list_ttl().unwrap_or(0))
            .min()
            .unwrap_or(0)
    }

    /// Every live connection, with what its server can do.
    pub fn connections(&self) -> Vec<(Arc<Connection>, InitInfo)> {
        self.slots
            .load()
            .values()
            .filter_map(|slot| {
                let conn = slot.live()?;
                let info = conn.info();
                Some((conn, info))
            })
            .collect()
    }

    /// What servers can do, as last seen, for the capabilities moniker advertises.
    pub fn server_infos(&self) -> Vec<InitInfo> {
        self.slots
            .load()
            .values()
            .filter_map(|slot| lock(&slot.info).clone())
            .collect()
    }

    /// Keeps a live server's listing on disk, for the next start to decide names with: off the
    /// runtime's threads (a write, a sync and a rename), which serve calls.
    pub(crate) fn keep_known(&self, known: &crate::known::Known, listing: Listing) {
        let Some(slot) = self.slot(&listing.server) else {
            return;
        };
        let known = known.clone();
        let info = lock(&slot.info).clone().unwrap_or_default();
        let save = move || known.save(&slot.entry.spec, &listing, &info);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(save)),
            Err(_) => save(),
        }
    }

    /// Which servers are still in their first attempt to start; `kept`: those listed
    /// meanwhile with the listing kept from their last run.
    pub(crate) fn joining(&self, kept: &BTreeSet<ServerId>) -> Joining {
        Joining {
            unknown: !self.unknown_starting(kept).is_empty(),
            any: self.slots().values().any(|slot| !slot.is_settled()),
        }
    }

    /// The servers still in their first attempt to start with no listing kept from a run
    /// before (`kept`: those with one): a listing now would not have them.
    pub(crate) fn unknown_starting(&self, kept: &BTreeSet<ServerId>) -> Vec<ServerId> {
        self.slots()
            .values()
            .filter(|slot| !slot.is_settled() && !kept.contains(&slot.entry.id))
            .map(|slot| slot.entry.id.clone())
            .collect()
    }

    /// Which servers are starting (a client's first request waits for them: see
    /// [`Servers::joined`]).
    pub(crate) fn set_joining(&self, joining: Joining) {
        self.joined.store(!joining.unknown, Ordering::Release);
        self.joined_all.store(!joining.any, Ordering::Release);
        self.joining.send_replace(joining);
    }

    /// Who is joining now: only ever towards joined (a reload's new servers do not make the
    /// first listing wait, or be said, again).
    pub(crate) fn advance(&self, now: Joining) {
        if !now.unknown {
            self.joined.store(true, Ordering::Release);
        }
        if !now.any {
            self.joined_all.store(true, Ordering::Release);
        }
        self.joining.send_replace(now);
    }

    /// Completes once every server that nothing is known of has joined (or failed its first
    /// attempt), or `list_wait` after the start; at once ever after. `names_only`: only those
    /// servers are waited for (else every server, known or not). Whether this was the first
    /// wait to end (the one that says, in the log, which servers the listing goes without).
    pub(crate) async fn joined(&self, names_only: bool, list_wait: Duration) -> bool {
        let done = if names_only {
            &self.joined
        } else {
            &self.joined_all
        };
        if done.load(Ordering::Acquire) {
            return false;
        }
        // Boxed: the wait is over for good soon after the start, and its future would size
        // every request's task (copied as it is spawned) for ever after.
        Box::pin(self.wait_joined(names_only, list_wait)).await
    }

    /// [`Self::joined`]'s wait, when there is one.
    async fn wait_joined(&self, names_only: bool, list_wait: Duration) -> bool {
        let mut joining = self.joining.subscribe();
        let over = |j: &Joining| if names_only { !j.unknown } else { !j.any };
        let _ = tokio::time::timeout_at(self.opened + list_wait, joining.wait_for(over)).await;
        let said = self.joined.swap(true, Ordering::AcqRel);
        if !names_only {
            self.joined_all.store(true, Ordering::Release);
        }
        !said
    }

    /// How long since the servers started.
    pub(crate) fn starting_for(&self) -> Duration {
        self.opened.elapsed()
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Ends every server: SIGTERM to its process group, SIGKILL after a grace period; a
    /// sandbox's cgroup and temporary folder are removed once its group has ended.
    pub(crate) async fn shutdown(&self) {
        self.stopping.store(true, Ordering::Release);
        self.stop.notify_waiters();
        let mut ends = Vec::new();
        for slot in self.slots.load().values() {
            if let Some(conn) = slot.conn.swap(None) {
                conn.close();
            }
            if let Some(people) = &slot.people {
                people.stop_all().await;
            }
            let pgid = lock(&slot.pgid).take();
            if let Some(pgid) = pgid {
                let sandboxed = slot.entry.sandbox.is_some();
                ends.push(async move {
                    crate::guard::end_group(pgid, Duration::from_secs(3)).await;
                    if sandboxed {
                        crate::sandbox::release(pgid).await;
                    }
                });
            }
        }
        // Together: each group's grace runs at once, not one after another.
        futures_util::future::join_all(ends).await;
    }

    /// Resolves once the gateway is stopping.
    pub async fn stopped(&self) {
        let notified = self.stop.notified();
        if !self.is_stopping() {
            notified.await;
        }
    }
}
