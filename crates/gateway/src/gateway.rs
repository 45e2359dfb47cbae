//! The gateway: four parts, each the owner of one job and its state — the servers (each kept
//! running by its supervisor), the naming (the rules, the listings and the view built of them),
//! the services every call goes through (the hub of clients, limits, metrics, audit, traces,
//! parked calls and tasks) and the control the operator changes while it runs (the HTTP
//! settings, the console) — and what joins them: a server's listing becomes a view the
//! sessions hear of, a reload replaces servers and rules together, a call waits for its server
//! to join.

mod control;
mod naming;
mod seal;
mod servers;
mod services;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use moniker_config::GatewaySettings;
use moniker_surface::lock::Integrity;
use moniker_surface::{Diagnostic, Listing, Rules, ServerId};

pub use control::Control;
pub(crate) use naming::Change;
pub use naming::Naming;
pub use servers::Servers;
pub(crate) use servers::{Joining, Slot};
pub use services::Services;

use crate::connect::{self, Connection, ServerSpec};

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
    /// them: [`Services::set_limits`]).
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
    /// Where what calls taught search is kept (`None`: search does not learn; the command's
    /// is [`crate::learned::default_dir`] unless `discovery.learn` is false).
    pub learned: Option<PathBuf>,
}

impl Settings {
    /// What a view is made with.
    pub(crate) fn view(&self) -> crate::view::ViewSettings {
        crate::view::ViewSettings {
            manage: self.manage,
            search_model: self.search_model.clone(),
            search_cache: self.search_cache.clone(),
            ahead: self.search_ahead,
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
    /// What a stdio server may reach (`sandbox`); `None`: everything its user may.
    pub sandbox: Option<moniker_config::Sandbox>,
    /// A stdio server run once for each person (`per_person`).
    pub per_person: Option<moniker_config::PerPerson>,
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
    /// What its sandbox likely refused it last: what it said, and the setting that would
    /// allow it ([`crate::sandbox::likely`]).
    pub sandbox_refused: Option<String>,
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

/// What a reload changed in the servers.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reloaded {
    pub added: Vec<ServerId>,
    pub removed: Vec<ServerId>,
    pub restarted: Vec<ServerId>,
}

/// The gateway: its parts, and the settings it was opened with.
pub struct Gateway {
    pub settings: Settings,
    pub servers: Servers,
    pub naming: Naming,
    pub services: Services,
    pub control: Control,
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
        Arc::new(Self {
            servers: Servers::new(servers),
            naming: Naming::new(rules, settings.store.clone(), settings.view()),
            services: Services::new(&settings, audit, telemetry),
            control: Control::default(),
            settings,
        })
    }

    /// Tells the sessions of a new view: each whose listing `change` changed hears of it. A
    /// running gateway's view is checked against the lock first (its breaking changes said once
    /// and counted).
    fn tell(&self, change: &Change) {
        if self.naming.is_started()
            && let Some(breaking) = self.naming.check_lock(&change.new)
        {
            self.services.metrics.lock_breaking(breaking);
        }
        self.naming.announce(&self.services.hub.peers(), change);
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
        self.naming.check_rules(&rules, &servers)?;
        let (report, fresh) = self.servers.replace(servers);
        let change = self.naming.replace(rules, &report);
        self.tell(&change);
        Ok((report, fresh))
    }

    /// Checks every new surface against `lock` from now on (`None`: no lock): each breaking
    /// change is logged once, with the override that keeps a renamed name, and counted in the
    /// metrics; each tool that drifted from its seal is withheld or said, as `integrity` says.
    /// The surface now is rebuilt against it at once.
    pub fn set_lock(&self, locked: Option<moniker_surface::Lock>, integrity: Integrity) {
        let change = self.naming.set_lock(locked, integrity);
        self.tell(&change);
    }

    /// Builds the surface of every server's listing once they are all in (the end of
    /// `start`): its problems, all of them, are the diagnostics.
    pub(crate) fn build_all(&self) {
        let change = self.naming.build_all();
        self.tell(&change);
    }

    /// The listings kept on disk of the servers about to start, as what is known of them
    /// until they list.
    pub(crate) fn load_known(&self) {
        if let Some(known) = &self.settings.known {
            self.naming.load_known(known, &self.servers.slots());
        }
    }

    /// Which servers are still in their first attempt to start.
    pub(crate) fn joining_now(&self) -> Joining {
        self.servers.joining(&self.naming.kept())
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
        let list_wait = self.settings.config.list_wait;
        if !self.servers.joined(names_only, list_wait).await {
            return;
        }
        let missing = self.servers.unknown_starting(&self.naming.kept());
        if !missing.is_empty() {
            let servers: Vec<&str> = missing.iter().map(ServerId::as_str).collect();
            tracing::info!(
                servers = servers.join(", "),
                starting_for = ?self.servers.starting_for(),
                "the first listing went out without these servers: they are still starting and nothing is kept of them from a run before; they join with list_changed"
            );
        }
    }

    /// Server `id`'s first attempt to start is over (it joined, or failed): it is no longer
    /// listed from its kept listing alone, and its calls waiting for it go on.
    pub(crate) fn settle(&self, slot: &Slot) {
        if !slot.settle() {
            return;
        }
        let id = &slot.entry.id;
        let listed_kept = self.naming.left_joining(id);
        self.servers.advance(self.joining_now());
        if listed_kept {
            tracing::info!(server = %id, "the server did not join: the tools kept from its last run leave the listing");
            self.tell(&self.naming.republish());
        }
    }

    /// The live connection to `server`; for a server still in its first attempt to start (a
    /// call on its kept listing), once it has joined, within its start budget or `patience`
    /// (the call's own time-out), whichever ends first.
    pub(crate) async fn joined_connection(
        &self,
        server: &ServerId,
        patience: Duration,
    ) -> Result<Arc<Connection>, crate::errors::Refusal> {
        let budget = self.settings.config.start_timeout.min(patience);
        self.servers.joined_connection(server, budget).await
    }

    /// Rebuilds the view with `listing` as the server's new one (see [`Naming::update`]);
    /// sessions hear of changes to what they see, and a live server's new listing is kept on
    /// disk for the next start.
    pub(crate) fn update(&self, server: &ServerId, listing: Option<Listing>, up: bool) {
        let updated = self.naming.update(server, listing, up);
        if let Some(change) = &updated.change {
            self.tell(change);
        }
        if let (Some(listing), Some(known), true) = (updated.keep, &self.settings.known, up) {
            self.servers.keep_known(known, listing);
        }
    }

    /// After a server (re)connects: the resources clients still follow there are followed
    /// again (a restarted server knows none of them).
    pub(crate) async fn resubscribe(&self, conn: &Arc<Connection>) {
        let mut uris: Vec<String> = Vec::new();
        for peer in self.services.hub.peers() {
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
        use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};
        // 0 -> 1: this one runs; 1 -> 2: the running one goes once more; 2: already said.
        let before = conn
            .relisting
            .fetch_update(AcqRel, Acquire, |n| Some((n + 1).min(2)))
            .unwrap_or(2);
        if before != 0 {
            return;
        }
        loop {
            self.relist_once(conn).await;
            tokio::time::sleep(crate::budget::RELIST_GAP).await;
            // 2 -> 1 and go again; 1 -> 0 and stop.
            let was = conn.relisting.fetch_sub(1, AcqRel);
            if was <= 1 || self.servers.is_stopping() || conn.is_closed() {
                if was > 1 {
                    conn.relisting.store(0, Release);
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
            Err(_) if self.servers.is_stopping() || conn.is_closed() => {}
            Err(e) => {
                // What the server answered is its own text: cut, and said less often when it
                // fails again and again.
                if let Some(n) = connect::worth_saying(&conn.said.failed_relists) {
                    let error = e.to_string();
                    let error = crate::message::at_most(&error, MAX_LOGGED_ERROR);
                    tracing::warn!(server = %conn.server, error, failures = n, "cannot list the server's tools after it said they changed: it keeps its last listing (said for the first 10 failures, then every 1,000th)");
                }
                if matches!(e, connect::HandshakeError::OverBudget { .. }) {
                    self.naming.over_budget(&conn.server, &e.to_string());
                }
            }
        }
    }

    /// Ends every server (SIGTERM to its process group, SIGKILL after a grace period), then
    /// flushes the traces.
    pub async fn shutdown(&self) {
        self.servers.shutdown().await;
        self.services.shutdown().await;
    }
}
