//! The gateway: the servers (each kept running by its supervisor), the current view of the
//! surface built from their listings, and the routing of what servers send on their own to
//! the clients it concerns (through the [`Hub`], which knows clients only as peers).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use moniker_config::GatewaySettings;
use moniker_surface::discovery::Mode;
use moniker_surface::lock::{Drift, Integrity};
use moniker_surface::{Diagnostic, Kind, Listing, Rules, ServerId, Surface, build};
use tokio::sync::{Notify, watch};

use crate::connect::{self, Connection, InitInfo, ServerSpec};
use crate::hub::Hub;
use crate::sync::lock;
use crate::view::View;

/// The most of a server's error text a log line holds.
const MAX_LOGGED_ERROR: usize = 1024;

/// How the gateway runs: the config's `gateway:` section (its defaults are written there), and
/// what the command line decides.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Timeouts, restarts and paging.
    pub config: GatewaySettings,
    /// The executable that runs `__guard` (the moniker binary); `None` starts servers directly.
    pub guard: Option<PathBuf>,
    /// Show moniker's toolset management tools.
    pub manage: bool,
    /// The toolset store to open (`None`: no run-time toolsets).
    pub store: Option<PathBuf>,
    /// The toolset every new session starts with.
    pub default_toolset: Option<String>,
    /// `call_timeout` and `max_in_flight` of servers, tools and prompts (a reload replaces
    /// them: [`Gateway::set_limits`]).
    pub limits: moniker_config::CallLimits,
    /// The audit log, when on (opened by `start`; a reload does not change it).
    pub audit: Option<moniker_config::AuditSettings>,
    /// Where traces go, when they are on (started by `start`).
    pub telemetry: Option<crate::telemetry::Export>,
    /// What gives `search_tools` its semantic half (`discovery.model`: a model run whole, or a
    /// static embedding table); `None`: the shipped table. Read when the command starts; a
    /// reload keeps it.
    pub search_model: Option<moniker_surface::search::Meaning>,
    /// Where built search indexes are kept between runs (`None`: nowhere; the command's is
    /// [`crate::view::IndexFiles::default_dir`]).
    pub search_cache: Option<PathBuf>,
    /// Build the search index ahead of the first search, when the surface changes (`serve`);
    /// otherwise the first search builds it.
    pub search_ahead: bool,
    /// Where servers' last listings are kept between runs (`None`: nowhere; the command's is
    /// [`crate::known::Known::default_dir`]): written by every command that starts servers,
    /// read by [`Gateway::open`].
    pub known: Option<crate::known::Known>,
}

impl Settings {
    /// What a view is made with.
    pub(crate) fn view(&self) -> crate::view::ViewSettings {
        crate::view::ViewSettings {
            manage: self.manage,
            search_model: self.search_model.clone(),
            search_cache: self.search_cache.clone(),
        }
    }
}

/// A server to connect to.
#[derive(Clone)]
pub struct ServerEntry {
    pub id: ServerId,
    pub spec: ServerSpec,
    /// It speaks MCP 2026-07-28, statelessly.
    pub modern: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the surface is invalid")]
    Invalid(Vec<Diagnostic>),
    /// The audit log cannot be written, or traces cannot be exported: what was asked for
    /// is never silently off.
    #[error("{0}")]
    Setup(String),
}

/// The state of one server, for `check` and status.
#[derive(Debug, Clone, Default)]
pub struct ServerStatus {
    pub up: bool,
    pub restarts: u64,
    pub last_error: Option<String>,
    /// When `last_error` happened.
    pub failed_at: Option<std::time::SystemTime>,
    /// Waiting to start again (the restart delay), or given up (`restart_max_attempts`).
    pub next: Next,
}

/// What comes next for a server that is not up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Next {
    /// Starting, or up.
    #[default]
    Start,
    /// Waiting out the restart delay.
    Restart,
    /// No more restarts.
    GivenUp,
}

/// One configured server: how to reach it, its live connection, what happened to it. A
/// reload that removes or changes the server retires its slot (its supervisor ends it, after
/// the calls in flight); a changed server gets a new slot.
pub(crate) struct Slot {
    pub(crate) entry: ServerEntry,
    pub(crate) conn: ArcSwapOption<Connection>,
    pub(crate) info: Mutex<Option<InitInfo>>,
    pub(crate) pgid: Mutex<Option<u32>>,
    pub(crate) status: Mutex<ServerStatus>,
    retired: watch::Sender<bool>,
    /// Its first attempt to start is over, whatever its outcome.
    settled: watch::Sender<bool>,
    /// It refused the 2025 handshake for 2026-07-28 (its config did not say).
    found_modern: AtomicBool,
}

impl Slot {
    /// The server failed (to start, or while serving): why, and when.
    pub(crate) fn failed(&self, reason: String) {
        let mut status = lock(&self.status);
        status.last_error = Some(reason);
        status.failed_at = Some(std::time::SystemTime::now());
    }

    fn new(entry: ServerEntry) -> Arc<Self> {
        Arc::new(Self {
            entry,
            conn: ArcSwapOption::empty(),
            info: Mutex::new(None),
            pgid: Mutex::new(None),
            status: Mutex::new(ServerStatus::default()),
            retired: watch::channel(false).0,
            settled: watch::channel(false).0,
            found_modern: AtomicBool::new(false),
        })
    }

    /// Whether its first attempt to start is over.
    pub(crate) fn is_settled(&self) -> bool {
        *self.settled.borrow()
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
}

/// Whose first attempt to start is not over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Joining {
    /// Some server's that nothing is known of from a run before.
    pub unknown: bool,
    /// Some server's at all.
    pub any: bool,
}

/// A lock, and the breaking changes against it already in the log.
struct LockWatch {
    lock: moniker_surface::Lock,
    /// What a tool that drifted from the lock gets.
    integrity: Integrity,
    reported: BTreeSet<String>,
    /// The tools that drift from the lock now.
    drift: Vec<Drift>,
}

/// What a reload changed in the servers.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reloaded {
    pub added: Vec<ServerId>,
    pub removed: Vec<ServerId>,
    pub restarted: Vec<ServerId>,
}

#[derive(Default)]
pub(crate) struct State {
    /// The last valid listing of every server that ever connected.
    listings: BTreeMap<ServerId, Listing>,
    up: BTreeSet<ServerId>,
    /// Servers whose first attempt to start is not over, listed meanwhile with the listing
    /// kept from their last run: a client's first listing does not depend on how fast they
    /// start, and their calls wait for them (within their start budget).
    joining: BTreeSet<ServerId>,
    /// What the last build said.
    diagnostics: Vec<Diagnostic>,
    /// Servers whose listing was refused after start, and why.
    refused: BTreeMap<ServerId, Vec<Diagnostic>>,
    /// The refused listings themselves: each joins once it fits (the server it collided with
    /// changed its list, or a reload renamed it).
    held: BTreeMap<ServerId, Listing>,
    /// Names two servers (or a server and the config, or moniker) claim: served by none of
    /// the servers until the config decides, with why, by server.
    contested: BTreeMap<ServerId, Vec<Diagnostic>>,
    /// The contested names already said in the log.
    said: BTreeSet<String>,
}

/// The most rounds of taking contested names out: each takes out every name the build before
/// found claimed twice, so a second round is needed only where an action tool or an alias
/// named a tool taken out.
const CONTEST_ROUNDS: usize = 4;

/// The surface of `listings` by rule, never by time: an item whose own name another claims too
/// is not served: two servers' tools of one name, neither; a server's tool under a name the
/// config writes (an alias, an action tool, an override's name, even for an item not listed
/// now) or moniker's own tool's, the server's tool. On the first start as on later ones,
/// whichever server answered first; the rest of each server's listing serves. The diagnostics of the
/// names taken out are returned, by server: the fix the config needs is in them.
fn build_by_rule(
    rules: &Rules,
    listings: &[&Listing],
) -> (moniker_surface::Built, BTreeMap<ServerId, Vec<Diagnostic>>) {
    let mut built = build(rules, listings);
    let mut contested: BTreeMap<ServerId, Vec<Diagnostic>> = BTreeMap::new();
    let mut out: BTreeSet<(&'static str, String, String)> = BTreeSet::new();
    let mut names: BTreeSet<String> = BTreeSet::new();
    for _ in 0..CONTEST_ROUNDS {
        if built.surface.is_some() {
            break;
        }
        let before = out.len();
        for d in built.errors() {
            for c in &d.contested {
                out.insert((c.section, c.server.clone(), c.origin.clone()));
                names.insert(c.name.clone());
                if let Ok(server) = c.server.parse::<ServerId>() {
                    let said = contested.entry(server).or_default();
                    if !said.contains(d) {
                        said.push(d.clone());
                    }
                }
            }
        }
        if out.len() == before {
            break;
        }
        let kept: Vec<Listing> = listings.iter().map(|l| without(l, &out)).collect();
        built = build(
            &without_members(rules, &names),
            &kept.iter().collect::<Vec<_>>(),
        );
    }
    (built, contested)
}

/// `rules` whose action tools no longer name the members in `names` (taken out by rule: their
/// action is then not offered, rather than the action tool refused whole).
fn without_members<'r>(rules: &'r Rules, names: &BTreeSet<String>) -> std::borrow::Cow<'r, Rules> {
    let named = |rule: &moniker_surface::ActionRule| {
        rule.tools.values().any(|m| names.contains(m.as_str()))
    };
    if !rules.actions.values().any(named) {
        return std::borrow::Cow::Borrowed(rules);
    }
    let mut rules = rules.clone();
    for rule in rules.actions.values_mut() {
        rule.tools
            .retain(|_, member| !names.contains(member.as_str()));
    }
    rules.actions.retain(|_, rule| !rule.tools.is_empty());
    std::borrow::Cow::Owned(rules)
}

/// `listing` without the items `out` names (section, server, origin name).
fn without(listing: &Listing, out: &BTreeSet<(&'static str, String, String)>) -> Listing {
    #[derive(serde::Deserialize)]
    struct Named {
        name: String,
    }
    let server = listing.server.as_str();
    let kept = |section: &'static str, items: &[Box<serde_json::value::RawValue>]| {
        items
            .iter()
            .filter(|item| {
                serde_json::from_str::<Named>(item.get()).map_or(true, |n| {
                    !out.contains(&(section, server.to_owned(), n.name))
                })
            })
            .cloned()
            .collect()
    };
    Listing {
        server: listing.server.clone(),
        tools: kept("tools", &listing.tools),
        prompts: kept("prompts", &listing.prompts),
        version: listing.version.clone(),
    }
}

/// Whether two listings of a server say the same, byte for byte.
fn same_listing(a: &Listing, b: &Listing) -> bool {
    let same = |x: &[Box<serde_json::value::RawValue>], y: &[Box<serde_json::value::RawValue>]| {
        x.len() == y.len() && x.iter().zip(y).all(|(x, y)| x.get() == y.get())
    };
    same(&a.tools, &b.tools) && same(&a.prompts, &b.prompts)
}

/// Lets each held listing in, in the order of the servers' ids, when it makes the surface
/// valid together with those in already.
fn admit_held(state: &mut State, rules: &Rules) {
    let held: Vec<ServerId> = state.held.keys().cloned().collect();
    for id in held {
        let Some(listing) = state.held.remove(&id) else {
            continue;
        };
        let previous = state.listings.insert(id.clone(), listing);
        let listings: Vec<&Listing> = state.listings.values().collect();
        if build_by_rule(rules, &listings).0.surface.is_some() {
            tracing::info!(server = %id, "the server's held listing fits now: it joins");
            state.refused.remove(&id);
            continue;
        }
        let listing = match previous {
            Some(previous) => state.listings.insert(id.clone(), previous),
            None => state.listings.remove(&id),
        };
        if let Some(listing) = listing {
            state.held.insert(id, listing);
        }
    }
}

pub struct Gateway {
    /// The naming rules: replaced as a whole by a reload.
    rules: ArcSwap<Rules>,
    pub(crate) catalog: crate::toolsets::Catalog,
    pub settings: Settings,
    /// The servers: replaced as a whole by a reload (read without a lock by every call).
    slots: ArcSwap<BTreeMap<ServerId, Arc<Slot>>>,
    /// Why the last config reload was refused (the previous config still serves).
    config_error: Mutex<Option<String>>,
    /// The HTTP transport's tokens and allow-lists: replaced by a reload.
    http: ArcSwap<moniker_config::HttpConfig>,
    /// Ticks when `http` is replaced: the HTTP transport then ends the sessions the new
    /// tokens no longer allow.
    http_changed: watch::Sender<()>,
    /// The surface lock every new surface is checked against (`serve` with a `moniker.lock`).
    lock: Mutex<Option<LockWatch>>,
    /// 2026-07-28 calls waiting for their client's input, by their `requestState`.
    pub(crate) parked: crate::parked::Parking,
    /// Tasks clients started, by the id moniker gave them: the principal that started each,
    /// and its toolset. Only that principal, under the same toolset, reaches a task.
    pub(crate) tasks: Mutex<crate::tasks::Owners>,
    state: Mutex<State>,
    view: ArcSwap<View>,
    /// The clients, as peers, and the progress tokens in flight.
    pub hub: Hub,
    /// The views' search indexes, built one at a time.
    pub(crate) indexer: Arc<crate::view::Indexer>,
    pub metrics: crate::metrics::Metrics,
    /// The limits on calls in force.
    pub(crate) limits: crate::limits::Limits,
    /// Where finished calls are written, when the audit log is on.
    pub(crate) audit: Option<crate::audit::Audit>,
    /// The last calls' audit lines, kept once the console is on (its Activity page).
    pub(crate) recent: std::sync::OnceLock<crate::audit::Recent>,
    /// `serve --console`: the console is on whatever the config says.
    console_forced: AtomicBool,
    /// Where calls' spans go, when traces are on.
    pub(crate) telemetry: Option<crate::telemetry::Telemetry>,
    /// `start` is over: from now on the surface's problems are only in the log. Before, they
    /// are the caller's to show (`start` returns them), so they are logged at debug level.
    started: AtomicBool,
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

impl Gateway {
    /// A gateway with its servers' slots and an empty view; nothing runs yet (`start`, in
    /// `supervise`, starts the servers).
    pub(crate) fn new(
        rules: Rules,
        servers: Vec<ServerEntry>,
        settings: Settings,
        audit: Option<crate::audit::Audit>,
        telemetry: Option<crate::telemetry::Telemetry>,
    ) -> Arc<Self> {
        let slots = servers
            .into_iter()
            .map(|entry| (entry.id.clone(), Slot::new(entry)))
            .collect();
        let catalog =
            crate::toolsets::Catalog::new(rules.toolsets.sets.clone(), settings.store.clone());
        let parked = crate::parked::Parking::new(settings.config.call_timeout);
        let limits = crate::limits::Limits::new(&settings.limits);
        Arc::new(Self {
            rules: ArcSwap::from_pointee(rules),
            catalog,
            settings,
            slots: ArcSwap::from_pointee(slots),
            config_error: Mutex::new(None),
            http: ArcSwap::from_pointee(moniker_config::HttpConfig::default()),
            http_changed: watch::channel(()).0,
            lock: Mutex::new(None),
            recent: std::sync::OnceLock::new(),
            console_forced: AtomicBool::new(false),
            parked,
            tasks: Mutex::new(crate::tasks::Owners::default()),
            state: Mutex::new(State::default()),
            view: ArcSwap::from_pointee(View::new(
                Surface::default(),
                BTreeSet::new(),
                &crate::view::ViewSettings::default(),
            )),
            hub: Hub::default(),
            indexer: Arc::default(),
            metrics: crate::metrics::Metrics::default(),
            limits,
            audit,
            telemetry,
            started: AtomicBool::new(false),
            joining: watch::channel(Joining::default()).0,
            joined: AtomicBool::new(true),
            joined_all: AtomicBool::new(true),
            opened: tokio::time::Instant::now(),
            stopping: AtomicBool::new(false),
            stop: Notify::new(),
        })
    }

    /// The servers' slots now.
    pub(crate) fn slots(&self) -> Arc<BTreeMap<ServerId, Arc<Slot>>> {
        self.slots.load_full()
    }

    /// Whether a server makes headers from its callers (`forward`): else nobody needs to
    /// know who calls.
    pub(crate) fn forwards(&self) -> bool {
        self.slots.load().values().any(|slot| {
            matches!(&slot.entry.spec, ServerSpec::Http { forward, .. } if !forward.is_empty())
        })
    }

    /// Whether `slot` is still the server's (not retired by a reload).
    pub(crate) fn is_current(&self, slot: &Arc<Slot>) -> bool {
        self.slots
            .load()
            .get(&slot.entry.id)
            .is_some_and(|s| Arc::ptr_eq(s, slot))
    }

    /// A new config's rules and servers in place of the old, as a difference (see
    /// [`Gateway::reload`]): the slots of the servers to start are returned with the report.
    ///
    /// Rules that would make the surface invalid with the listings at hand change nothing:
    /// their diagnostics are returned.
    pub(crate) fn replace(
        &self,
        rules: Rules,
        servers: Vec<ServerEntry>,
    ) -> Result<(Reloaded, Vec<Arc<Slot>>), Vec<Diagnostic>> {
        {
            let state = self.state();
            let kept: Vec<&Listing> = state
                .listings
                .iter()
                .filter(|(id, _)| servers.iter().any(|s| &s.id == *id))
                .map(|(_, l)| l)
                .collect();
            let built = build_by_rule(&rules, &kept).0;
            if built.surface.is_none() {
                return Err(built.diagnostics);
            }
        }
        let old = self.slots.load_full();
        let mut report = Reloaded::default();
        let mut next = BTreeMap::new();
        let mut fresh = Vec::new();
        for entry in servers {
            let id = entry.id.clone();
            match old.get(&id) {
                Some(slot)
                    if slot.entry.spec == entry.spec && slot.entry.modern == entry.modern =>
                {
                    next.insert(id, slot.clone());
                }
                found => {
                    if found.is_some() {
                        report.restarted.push(id.clone());
                    } else {
                        report.added.push(id.clone());
                    }
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
        let old_sets = self.catalog.sets();
        self.catalog.set_static(rules.toolsets.sets.clone());
        self.rules.store(Arc::new(rules));
        self.slots.store(Arc::new(next));
        self.rebuild(&old_sets, |state| {
            for id in report.removed.iter().chain(&report.restarted) {
                state.joining.remove(id);
            }
            for id in &report.removed {
                state.listings.remove(id);
                state.held.remove(id);
                state.refused.remove(id);
                state.up.remove(id);
            }
            for id in &report.restarted {
                state.up.remove(id);
            }
        });
        Ok((report, fresh))
    }

    /// The limits on calls of a new config: new calls are held to them (calls in progress
    /// keep the caps they were let through under).
    pub fn set_limits(&self, limits: &moniker_config::CallLimits) {
        self.limits.set(limits);
    }

    /// Checks every new surface against `lock` from now on (`None`: no lock): each breaking
    /// change is logged once, with the override that keeps a renamed name, and counted in the
    /// metrics; each tool that drifted from its seal is withheld or said, as `integrity` says.
    /// The surface now is rebuilt against it at once.
    pub fn set_lock(&self, locked: Option<moniker_surface::Lock>, integrity: Integrity) {
        *lock(&self.lock) = locked.map(|locked| LockWatch {
            lock: locked,
            integrity,
            reported: BTreeSet::new(),
            drift: Vec::new(),
        });
        let sets = self.catalog.sets();
        self.rebuild(&sets, |_| {});
    }

    /// The tools that drift from the lock now, and whether they are withheld (`None`: there
    /// is no lock).
    pub fn drift(&self) -> Option<(Vec<Drift>, Integrity)> {
        lock(&self.lock)
            .as_ref()
            .map(|w| (w.drift.clone(), w.integrity))
    }

    /// Turns the console on whatever the config says (`serve --console`).
    pub fn force_console(&self) {
        self.console_forced.store(true, Ordering::Release);
    }

    /// Whether the console is on: `http.console`, or `serve --console`.
    pub fn console_on(&self) -> bool {
        self.console_forced.load(Ordering::Acquire) || self.http().console
    }

    /// Keeps the last calls' audit lines from now on (the console's Activity page).
    pub fn recent_calls_kept(&self) {
        self.recent.get_or_init(Default::default);
    }

    /// The last calls' audit lines, newest last (none before [`Gateway::recent_calls_kept`]).
    pub fn recent_calls(&self) -> Vec<String> {
        self.recent
            .get()
            .map(crate::audit::Recent::lines)
            .unwrap_or_default()
    }

    /// Seals `surface` against the lock, if there is one: the tools that drift from it are
    /// withheld under `integrity: block`.
    fn seal(&self, surface: &mut Surface, state: &State) {
        let mut guard = lock(&self.lock);
        let Some(watch) = guard.as_mut() else {
            return;
        };
        let listings: Vec<&Listing> = state.listings.values().collect();
        watch.drift = moniker_surface::lock::drift(&watch.lock, surface, &listings);
        if watch.integrity == Integrity::Block {
            let why: std::collections::HashMap<(Kind, moniker_surface::Origin), Arc<str>> = watch
                .drift
                .iter()
                .map(|d| ((d.kind, d.origin.clone()), Arc::from(d.refusal())))
                .collect();
            moniker_surface::lock::withhold(surface, &why);
        }
    }

    fn check_lock(&self, view: &View) {
        let mut guard = lock(&self.lock);
        let Some(watch) = guard.as_mut() else {
            return;
        };
        // A name of a server that is down is not gone: it comes back with its server.
        let breaking: Vec<moniker_surface::Breaking> =
            moniker_surface::lock::compare(&watch.lock, &view.surface)
                .into_iter()
                .filter(|b| match b {
                    moniker_surface::Breaking::Gone { server, .. } => {
                        view.serving.iter().any(|up| up.as_str() == server)
                    }
                    _ => true,
                })
                .collect();
        let mut now = BTreeSet::new();
        for b in &breaking {
            let text = b.to_string();
            if !watch.reported.contains(&text) {
                match b {
                    moniker_surface::Breaking::Gone { fix: Some(fix), .. } => {
                        tracing::warn!(
                            code = b.code(),
                            "{text}; to keep the old names working, add to the config:\n{}",
                            fix.yaml
                        );
                    }
                    _ => tracing::warn!(code = b.code(), "{text} (against moniker.lock)"),
                }
            }
            now.insert(text);
        }
        for d in &watch.drift {
            let text = d.to_string();
            if !watch.reported.contains(&text) {
                match watch.integrity {
                    Integrity::Warn => tracing::warn!(
                        code = d.code(),
                        "{text}; served (integrity: warn): `moniker lock --diff` shows what changed"
                    ),
                    Integrity::Block => tracing::warn!(code = d.code(), "{}", d.refusal()),
                }
            }
            now.insert(text);
        }
        watch.reported = now;
        self.metrics.lock_breaking(breaking.len());
    }

    /// The HTTP transport's settings now.
    pub fn http(&self) -> Arc<moniker_config::HttpConfig> {
        self.http.load_full()
    }

    /// New tokens and allow-lists for the HTTP transport: the next request is checked with
    /// them, and a session ends when its token is removed or bound to another toolset.
    pub fn set_http(&self, settings: moniker_config::HttpConfig) {
        self.http.store(Arc::new(settings));
        self.http_changed.send_replace(());
    }

    /// Ticks at each [`Gateway::set_http`].
    pub fn http_changes(&self) -> watch::Receiver<()> {
        self.http_changed.subscribe()
    }

    /// Notes why a new config was refused (`None`: the last one applied).
    pub fn set_config_error(&self, error: Option<String>) {
        *lock(&self.config_error) = error;
    }

    /// Why the last config reload was refused, if it was.
    pub fn config_error(&self) -> Option<String> {
        lock(&self.config_error).clone()
    }

    /// The first build is over: the surface's problems go to the log from now on.
    pub(crate) fn set_started(&self) {
        self.started.store(true, Ordering::Release);
    }

    /// Which servers are starting (a client's first request waits for them: see
    /// [`Gateway::joined`]).
    pub(crate) fn set_joining(&self, joining: Joining) {
        self.joined.store(!joining.unknown, Ordering::Release);
        self.joined_all.store(!joining.any, Ordering::Release);
        self.joining.send_replace(joining);
    }

    /// Which servers are still in their first attempt to start.
    pub(crate) fn joining_now(&self, state: &State) -> Joining {
        Joining {
            unknown: !self.unknown_starting(state).is_empty(),
            any: self.slots().values().any(|slot| !slot.is_settled()),
        }
    }

    /// Which servers are starting when `open` starts them all.
    pub(crate) fn joining_at_start(&self) -> Joining {
        self.joining_now(&self.state())
    }

    /// The servers still in their first attempt to start with no listing kept from a run
    /// before: a listing now would not have them.
    fn unknown_starting(&self, state: &State) -> Vec<ServerId> {
        self.slots()
            .values()
            .filter(|slot| !slot.is_settled() && !state.joining.contains(&slot.entry.id))
            .map(|slot| slot.entry.id.clone())
            .collect()
    }

    /// Completes once every server that nothing is known of has joined (or failed its first
    /// attempt), or `gateway.list_wait` after the start: what a client lists before that would
    /// miss servers a moment from joining (a server known from its last run is listed with
    /// that listing meanwhile). At once ever after. The first listing that goes out without
    /// some server says which, and why, in the log.
    ///
    /// `names_only`: the request is answered from names (a listing, a call, which waits for
    /// its own server); else (resources, completions) every server is waited for, known or not.
    pub(crate) async fn joined(&self, names_only: bool) {
        let done = if names_only {
            &self.joined
        } else {
            &self.joined_all
        };
        if done.load(Ordering::Acquire) {
            return;
        }
        let deadline = self.opened + self.settings.config.list_wait;
        let mut joining = self.joining.subscribe();
        let over = |j: &Joining| if names_only { !j.unknown } else { !j.any };
        let _ = tokio::time::timeout_at(deadline, joining.wait_for(over)).await;
        let said = self.joined.swap(true, Ordering::AcqRel);
        if !names_only {
            self.joined_all.store(true, Ordering::Release);
        }
        if said {
            return;
        }
        let missing = self.unknown_starting(&self.state());
        if !missing.is_empty() {
            let servers: Vec<&str> = missing.iter().map(ServerId::as_str).collect();
            tracing::info!(
                servers = servers.join(", "),
                starting_for = ?self.opened.elapsed(),
                "the first listing went out without these servers: they are still starting and nothing is kept of them from a run before; they join with list_changed"
            );
        }
    }

    /// Server `id`'s first attempt to start is over (it joined, or failed): it is no longer
    /// listed from its kept listing alone, and its calls waiting for it go on.
    pub(crate) fn settle(&self, slot: &Slot) {
        if slot.settled.send_replace(true) {
            return;
        }
        let rules = self.rules();
        let (old, new) = {
            let mut state = self.state();
            let id = &slot.entry.id;
            let listed_kept = state.joining.remove(id) && !state.up.contains(id);
            // Only ever towards joined: a reload's new servers do not make the first listing
            // wait (or be said) again.
            let now = self.joining_now(&state);
            if !now.unknown {
                self.joined.store(true, Ordering::Release);
            }
            if !now.any {
                self.joined_all.store(true, Ordering::Release);
            }
            self.joining.send_replace(now);
            if !listed_kept {
                return;
            }
            tracing::info!(server = %id, "the server did not join: the tools kept from its last run leave the listing");
            self.publish(&mut state, &rules, Vec::new())
        };
        self.announce(&old, &new, None);
    }

    /// The live connection to `server`; for a server still in its first attempt to start (a
    /// call on its kept listing), once it has joined, within its start budget or `patience`
    /// (the call's own time-out), whichever ends first.
    pub(crate) async fn joined_connection(
        &self,
        server: &ServerId,
        patience: Duration,
    ) -> Result<Arc<Connection>, crate::errors::Refusal> {
        let gone = || crate::errors::Refusal::ServerGone(server.clone());
        if let Some(conn) = self.connection(server) {
            return Ok(conn);
        }
        let slot = self.slots.load().get(server).cloned().ok_or_else(gone)?;
        if slot.is_settled() {
            return Err(gone());
        }
        let budget = self.settings.config.start_timeout.min(patience);
        let _ = tokio::time::timeout(budget, slot.first_attempt_over()).await;
        self.connection(server)
            .ok_or_else(|| crate::errors::Refusal::NotJoined {
                server: server.clone(),
                budget,
            })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub fn view(&self) -> Arc<View> {
        self.view.load_full()
    }

    /// The names of every toolset that can be equipped (static and saved).
    pub fn toolset_names(&self) -> std::collections::BTreeSet<String> {
        self.catalog.sets().into_keys().collect()
    }

    /// What toolset `name` selects in `view` (empty when it cannot be resolved).
    pub fn toolset(&self, name: &str, view: &View) -> moniker_surface::toolsets::Selection {
        crate::toolsets::Equipped::new(name, &view.surface, &view.serving, &self.catalog.sets())
            .selection
    }

    /// The rules the surface is built with.
    pub fn rules(&self) -> Arc<Rules> {
        self.rules.load_full()
    }

    /// The last valid listing of every server that connected.
    pub fn listings(&self) -> Vec<Listing> {
        self.state().listings.values().cloned().collect()
    }

    /// The diagnostics of the last build (warnings, or errors that were kept out).
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        self.state().diagnostics.clone()
    }

    pub fn server_status(&self) -> BTreeMap<ServerId, ServerStatus> {
        self.slots
            .load()
            .iter()
            .map(|(id, slot)| (id.clone(), lock(&slot.status).clone()))
            .collect()
    }

    pub fn connection(&self, server: &ServerId) -> Option<Arc<Connection>> {
        self.slots
            .load()
            .get(server)?
            .conn
            .load_full()
            .filter(|c| !c.is_closed())
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
                let conn = slot.conn.load_full().filter(|c| !c.is_closed())?;
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

    /// Rebuilds the view with `listing` as the server's new one. When that makes the surface
    /// invalid (a name another server has), the server's last valid listing stays (or it is
    /// left out), the refused one is held, and the problem is logged with its fix; a held
    /// listing joins as soon as it fits. Sessions hear of changes to what they see.
    pub(crate) fn update(&self, server: &ServerId, listing: Option<Listing>, up: bool) {
        let started = self.started.load(Ordering::Acquire);
        let rules = self.rules();
        // A listing taken that differs from the one before (the one kept on disk, at start) is
        // kept on disk in its place.
        let mut keep = None;
        let (old, new) = {
            let mut state = self.state();
            if up {
                state.up.insert(server.clone());
            } else {
                state.up.remove(server);
            }
            let Some(listing) = listing else {
                let (old, new) = self.publish(&mut state, &rules, Vec::new());
                drop(state);
                self.announce(&old, &new, None);
                return;
            };
            state.held.remove(server);
            let previous = state.listings.insert(server.clone(), listing);
            // Borrowed, not cloned: a rebuild costs no copy of any server's listing.
            let built = self.build_state(&mut state, &rules);
            if built.surface.is_some() {
                state.refused.remove(server);
                let taken = &state.listings[server];
                if previous.is_none_or(|p| !same_listing(&p, taken)) {
                    keep = Some(taken.clone());
                }
                if state.held.is_empty() {
                    self.publish_built(&mut state, built)
                } else {
                    admit_held(&mut state, &rules);
                    self.publish(&mut state, &rules, Vec::new())
                }
            } else if !started {
                // While a one-shot command's servers start, every listing is kept whatever it
                // makes of the surface: the command judges the surface of them all once they
                // are all in, so that every problem is reported.
                state.diagnostics = built.diagnostics;
                return;
            } else {
                // A running gateway keeps serving: the server keeps its last valid listing (or
                // none), and the problem is said, with its fix, until it fits.
                for d in built.errors() {
                    tracing::warn!(server = %server, "{d}");
                }
                let refused = match previous {
                    Some(previous) => {
                        tracing::warn!(server = %server, "the server's new listing is refused: it keeps its last valid one");
                        state.listings.insert(server.clone(), previous)
                    }
                    None => {
                        tracing::warn!(server = %server, "the server's listing is refused: its tools and prompts are left out until the names fit");
                        state.listings.remove(server)
                    }
                };
                if let Some(refused) = refused {
                    state.held.insert(server.clone(), refused);
                }
                state
                    .refused
                    .insert(server.clone(), built.errors().cloned().collect());
                self.publish(&mut state, &rules, built.diagnostics)
            }
        };
        self.announce(&old, &new, None);
        if let Some(listing) = keep.filter(|_| up) {
            self.keep_known(listing);
        }
    }

    /// Keeps a live server's listing on disk, for the next start to decide names with: off the
    /// runtime's threads (a write, a sync and a rename), which serve calls.
    fn keep_known(&self, listing: Listing) {
        let Some(known) = self.settings.known.clone() else {
            return;
        };
        let Some(slot) = self.slots().get(&listing.server).cloned() else {
            return;
        };
        let info = lock(&slot.info).clone().unwrap_or_default();
        let save = move || known.save(&slot.entry.spec, &listing, &info);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(save)),
            Err(_) => save(),
        }
    }

    /// The listings kept on disk of the servers about to start, as what is known of them
    /// until they list: each in the order of their ids, when it fits with those before it.
    pub(crate) fn load_known(&self) {
        let Some(known) = &self.settings.known else {
            return;
        };
        let rules = self.rules();
        let mut state = self.state();
        for slot in self.slots().values() {
            let Some((listing, info)) = known.load(&slot.entry.id, &slot.entry.spec) else {
                continue;
            };
            let id = slot.entry.id.clone();
            state.listings.insert(id.clone(), listing);
            let listings: Vec<&Listing> = state.listings.values().collect();
            if build_by_rule(&rules, &listings).0.surface.is_none() {
                tracing::debug!(server = %id, "the server's kept listing does not fit the config: it decides no name");
                state.listings.remove(&id);
                continue;
            }
            *lock(&slot.info) = Some(info);
            state.joining.insert(id);
        }
    }

    /// Builds the surface of every server's listing once they are all in (the end of
    /// `start`): its problems, all of them, are the diagnostics.
    pub(crate) fn build_all(&self) {
        self.rebuild(&self.catalog.sets(), |_| {});
    }

    /// The servers whose last listing was refused since start (it would have made the
    /// surface invalid: a name taken twice), with why: they serve their last valid listing, or
    /// nothing.
    pub fn refused_listings(&self) -> BTreeMap<ServerId, Vec<Diagnostic>> {
        self.state().refused.clone()
    }

    /// Rebuilds the view after `change` to the state (a reload: new rules, servers gone);
    /// `old_sets` are the toolsets before the reload.
    fn rebuild(
        &self,
        old_sets: &BTreeMap<String, moniker_surface::ToolsetRule>,
        change: impl FnOnce(&mut State),
    ) {
        let rules = self.rules();
        let (old, new) = {
            let mut state = self.state();
            change(&mut state);
            admit_held(&mut state, &rules);
            self.publish(&mut state, &rules, Vec::new())
        };
        self.announce(&old, &new, Some(old_sets));
    }

    /// Builds the surface of the state's listings by rule ([`build_by_rule`]), keeping which
    /// names are contested, and saying each new one once in the log (a running gateway's).
    fn build_state(&self, state: &mut State, rules: &Rules) -> moniker_surface::Built {
        let listings: Vec<&Listing> = state.listings.values().collect();
        let (built, contested) = build_by_rule(rules, &listings);
        let now: BTreeSet<String> = contested
            .values()
            .flatten()
            .map(ToString::to_string)
            .collect();
        if self.started.load(Ordering::Acquire) {
            for d in contested.values().flatten() {
                let text = d.to_string();
                if !state.said.contains(&text) {
                    tracing::warn!(
                        "{text}\nthe name is served by none of the servers that claim it until the config decides"
                    );
                    state.said.insert(text);
                }
            }
        }
        state.said.retain(|t| now.contains(t));
        state.contested = contested;
        built
    }

    /// The names two servers (or a server and the config) claim, served by none of them, with
    /// why and the fix, by server.
    pub fn contested_names(&self) -> BTreeMap<ServerId, Vec<Diagnostic>> {
        self.state().contested.clone()
    }

    /// Builds the surface from the state's listings and makes it the view; `errors` are
    /// earlier errors to keep visible (to `check` and `start`).
    fn publish(
        &self,
        state: &mut State,
        rules: &Rules,
        errors: Vec<Diagnostic>,
    ) -> (Arc<View>, Arc<View>) {
        let mut built = self.build_state(state, rules);
        if !self.started.load(Ordering::Acquire) {
            // A one-shot command fails fast on a name claimed twice (the seeds' rule): the
            // contested names are errors of its surface, whatever would serve meanwhile.
            for d in state.contested.values().flatten() {
                if !built.diagnostics.contains(d) {
                    built.diagnostics.push(d.clone());
                }
            }
        }
        if built.surface.is_none() && self.started.load(Ordering::Acquire) {
            // Rules that make every listing together invalid (a reload's): the errors are
            // logged, and what is valid serves. (Before start, they are `start`'s to return.)
            for d in built.errors() {
                tracing::error!("{d}");
            }
        }
        built
            .diagnostics
            .extend(errors.into_iter().filter(Diagnostic::is_error));
        self.publish_built(state, built)
    }

    fn publish_built(
        &self,
        state: &mut State,
        built: moniker_surface::Built,
    ) -> (Arc<View>, Arc<View>) {
        if self.started.load(Ordering::Acquire) {
            for d in built.diagnostics.iter().filter(|d| !d.is_error()) {
                tracing::warn!("{d}");
            }
        }
        state.diagnostics = built.diagnostics;
        let mut surface = built.surface.unwrap_or_default();
        self.seal(&mut surface, state);
        tracing::debug!(
            tools = surface.listed(Kind::Tool).count(),
            "surface rebuilt"
        );
        let serving = state.up.union(&state.joining).cloned().collect();
        let new = Arc::new(View::new(surface, serving, &self.settings.view()));
        let old = self.view.swap(new.clone());
        old.supersede();
        if self.settings.search_ahead && self.searches(&new) {
            self.indexer.want(&new);
        }
        if self.started.load(Ordering::Acquire) {
            self.check_lock(&new);
        }
        (old, new)
    }

    /// Whether a session may search `view`: its discovery mode is search, or a toolset's.
    fn searches(&self, view: &View) -> bool {
        let search = |d: &moniker_surface::discovery::Discovery| d.mode == Mode::Search;
        search(view.surface.discovery())
            || self
                .catalog
                .sets()
                .values()
                .any(|t| t.discovery.as_ref().is_some_and(search))
    }

    /// Tells each session whose listing changed from `old` to `new`: a session with a toolset
    /// sees only that toolset's part (compared once per toolset).
    /// `old_sets` are the toolsets `old` was seen with, when a reload changed them.
    fn announce(
        &self,
        old: &View,
        new: &View,
        old_sets: Option<&BTreeMap<String, moniker_surface::ToolsetRule>>,
    ) {
        let peers = self.hub.peers();
        if peers.is_empty() {
            return;
        }
        let sets = self.catalog.sets();
        let old_sets = old_sets.unwrap_or(&sets);
        let mut changed: BTreeMap<Option<String>, (bool, bool)> = BTreeMap::new();
        for peer in peers {
            let toolset = peer.toolset();
            let (tools, prompts) =
                *changed
                    .entry(toolset.clone())
                    .or_insert_with(|| match &toolset {
                        None => (
                            old.tools_result != new.tools_result,
                            old.prompts_result != new.prompts_result,
                        ),
                        Some(name) => {
                            let before = crate::toolsets::Equipped::new(
                                name,
                                &old.surface,
                                &old.serving,
                                old_sets,
                            );
                            let after = crate::toolsets::Equipped::new(
                                name,
                                &new.surface,
                                &new.serving,
                                &sets,
                            );
                            let differs = |kind| {
                                before.render(&old.surface, kind, &[])
                                    != after.render(&new.surface, kind, &[])
                            };
                            (differs(Kind::Tool), differs(Kind::Prompt))
                        }
                    });
            if tools {
                peer.list_changed(Kind::Tool);
            }
            if prompts {
                peer.list_changed(Kind::Prompt);
            }
        }
    }

    /// After a server (re)connects: the resources clients still follow there are followed
    /// again (a restarted server knows none of them).
    pub(crate) async fn resubscribe(&self, conn: &Arc<Connection>) {
        let mut uris: Vec<String> = Vec::new();
        for peer in self.hub.peers() {
            uris.extend(peer.subscriptions_on(&conn.server));
        }
        if conn.is_modern() {
            for uri in &uris {
                conn.follow(uri, true);
            }
            return;
        }
        uris.sort();
        uris.dedup();
        for uri in uris {
            let timeout = self.settings.config.call_timeout;
            if let Err(e) = conn.subscribe(&uri, true, timeout).await {
                tracing::debug!(server = %conn.server, uri, error = %e, "resources/subscribe again failed");
            }
        }
    }

    /// The server said its list changed: it is listed again, unless a relist is running (then
    /// one more follows it, whatever number of notes came meanwhile), at most once a
    /// [`crate::budget::RELIST_GAP`].
    pub(crate) async fn relist(&self, conn: &Arc<Connection>) {
        use std::sync::atomic::Ordering::AcqRel;
        // 0 -> 1: this one runs; 1 -> 2: the running one goes once more; 2: already said.
        let before = conn
            .relisting
            .fetch_update(AcqRel, Ordering::Acquire, |n| Some((n + 1).min(2)))
            .unwrap_or(2);
        if before != 0 {
            return;
        }
        loop {
            self.relist_once(conn).await;
            tokio::time::sleep(crate::budget::RELIST_GAP).await;
            // 2 -> 1 and go again; 1 -> 0 and stop.
            let was = conn.relisting.fetch_sub(1, AcqRel);
            if was <= 1 || self.is_stopping() || conn.is_closed() {
                if was > 1 {
                    conn.relisting.store(0, Ordering::Release);
                }
                return;
            }
        }
    }

    async fn relist_once(&self, conn: &Arc<Connection>) {
        match connect::list(conn, &conn.info(), self.settings.config.call_timeout).await {
            Ok(listing) => self.update(&conn.server, Some(listing), true),
            // moniker's own shutdown (or the server's going away) ends the listing: the
            // supervisor reports what happened to the server.
            Err(_) if self.is_stopping() || conn.is_closed() => {}
            Err(e) => {
                // What the server answered is its own text: cut, and said less often when it
                // fails again and again.
                if let Some(n) = connect::worth_saying(&conn.failed_relists) {
                    let error = e.to_string();
                    let error = crate::message::at_most(&error, MAX_LOGGED_ERROR);
                    tracing::warn!(server = %conn.server, error, failures = n, "cannot list the server's tools after it said they changed: it keeps its last listing (said for the first 10 failures, then every 1,000th)");
                }
                if matches!(e, connect::HandshakeError::OverBudget { .. }) {
                    self.over_budget(&conn.server, &e.to_string());
                }
            }
        }
    }

    /// Server `server`'s listing is past its budget: said in `/healthz` (and `doctor`) with the
    /// refused listings, until a listing of the server's is taken.
    pub(crate) fn over_budget(&self, server: &ServerId, why: &str) {
        let diagnostic = Diagnostic::error("budget::listing", why.to_owned())
            .help("the server keeps its last listing (or none): see the budgets in the guide (docs/src/security.md)");
        self.state()
            .refused
            .insert(server.clone(), vec![diagnostic]);
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Ends every server: SIGTERM to its process group, SIGKILL after a grace period.
    pub async fn shutdown(&self) {
        self.stopping.store(true, Ordering::Release);
        self.stop.notify_waiters();
        let mut ends = Vec::new();
        for slot in self.slots.load().values() {
            if let Some(conn) = slot.conn.swap(None) {
                conn.close();
            }
            let pgid = lock(&slot.pgid).take();
            if let Some(pgid) = pgid {
                ends.push(crate::guard::end_group(pgid, Duration::from_secs(3)));
            }
        }
        for end in ends {
            end.await;
        }
        if let Some(telemetry) = &self.telemetry {
            telemetry.shutdown().await;
        }
    }

    pub(crate) async fn stopped(&self) {
        let notified = self.stop.notified();
        if !self.is_stopping() {
            notified.await;
        }
    }
}
