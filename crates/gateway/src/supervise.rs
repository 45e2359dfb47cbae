//! Supervision of one server: start it (or connect to it), shake hands, serve until it is
//! gone, back off, again. What happened is kept in its slot for `check`, `list` and `call`,
//! and in the metrics; why a server failed is said as a user would say it (command not found,
//! permission denied, exited with status N and its last lines of stderr).

use std::sync::Arc;
use std::time::Duration;

use moniker_surface::{Diagnostic, Rules, ServerId};

use crate::connect::{self, CallError, HandshakeError, Sink, Started};
use crate::deliver::WeakSink;
use crate::gateway::{Gateway, Next, Reloaded, ServerEntry, Settings, Slot, StartError};
use crate::sync::lock;

impl Gateway {
    /// Starts every server in parallel, each under its supervisor, waits for each one's first
    /// attempt and builds the surface of them all (for a one-shot command: `check`, `list`,
    /// `call`). Servers that fail to start are reported and left out (and retried in the
    /// background); an invalid surface is an error.
    pub async fn start(
        rules: Rules,
        servers: Vec<ServerEntry>,
        settings: Settings,
    ) -> Result<Arc<Self>, StartError> {
        let gateway = Self::launch(rules, servers, settings).await?;
        let diagnostics = gateway.naming.diagnostics();
        if diagnostics.iter().any(Diagnostic::is_error) {
            gateway.shutdown().await;
            return Err(StartError::Invalid(diagnostics));
        }
        gateway.check_default_toolset().await?;
        gateway.naming.set_started();
        Ok(gateway)
    }

    /// A gateway that serves at once (`serve`): its names are decided from what is known of
    /// the servers (their listings kept from the last run, [`Settings::known`]); the servers
    /// start in the background and join as they list, each announced to the sessions with
    /// `list_changed`. A server whose names collide with those of a server known or joined
    /// before it is held out, its fix in the log and `/healthz`, until its names fit. A server
    /// known from its last run is listed with that listing while it starts (its calls wait for
    /// it); a client's first listing waits for the others at most `gateway.list_wait`.
    pub async fn open(
        rules: Rules,
        servers: Vec<ServerEntry>,
        settings: Settings,
    ) -> Result<Arc<Self>, StartError> {
        let gateway = Self::prepare(rules, servers, settings)?;
        gateway.load_known();
        gateway.build_all();
        gateway.check_default_toolset().await?;
        gateway.naming.set_started();
        gateway.servers.set_joining(gateway.joining_now());
        for slot in gateway.servers.slots().values() {
            tokio::spawn(supervise(gateway.clone(), slot.clone()));
        }
        Ok(gateway)
    }

    /// The toolset every session starts with exists (and its includes resolve).
    async fn check_default_toolset(self: &Arc<Self>) -> Result<(), StartError> {
        let Some(name) = &self.settings.default_toolset else {
            return Ok(());
        };
        let view = self.naming.view();
        if let Err(diagnostics) =
            moniker_surface::toolsets::select(&view.surface, name, &self.naming.catalog.sets())
        {
            self.shutdown().await;
            return Err(StartError::Invalid(diagnostics));
        }
        Ok(())
    }

    /// The gateway, its audit log and its traces, with no server started.
    fn prepare(
        rules: Rules,
        servers: Vec<ServerEntry>,
        settings: Settings,
    ) -> Result<Arc<Self>, StartError> {
        let audit = settings
            .audit
            .as_ref()
            .map(crate::audit::Audit::open)
            .transpose()
            .map_err(StartError::Setup)?;
        let telemetry = settings
            .telemetry
            .as_ref()
            .map(crate::telemetry::Telemetry::start)
            .transpose()
            .map_err(StartError::Setup)?;
        Ok(Gateway::new(rules, servers, settings, audit, telemetry))
    }

    /// Starts the servers and builds the surface of their first listings, valid or not:
    /// [`Naming::diagnostics`](crate::gateway::Naming::diagnostics) says what is wrong with it, [`Servers::server_status`](crate::gateway::Servers::server_status) how
    /// each server fared. For a report (`moniker doctor`); [`Gateway::start`] serves.
    pub async fn launch(
        rules: Rules,
        servers: Vec<ServerEntry>,
        settings: Settings,
    ) -> Result<Arc<Self>, StartError> {
        let gateway = Self::prepare(rules, servers, settings)?;
        let slots = gateway.servers.slots();
        for slot in slots.values() {
            tokio::spawn(supervise(gateway.clone(), slot.clone()));
        }
        for slot in slots.values() {
            slot.first_attempt_over().await;
        }
        // Every server's first listing is in (or its first attempt over): the surface of them
        // all, built once.
        gateway.build_all();
        Ok(gateway)
    }

    /// Applies a new config's rules and servers as a difference: servers added are started,
    /// removed ones stopped, changed ones restarted (only those; calls in flight on them
    /// finish first); the rules and the config's toolsets apply at once. Sessions hear of it
    /// only when what they see changed.
    ///
    /// Rules that would make the surface invalid with the listings at hand change nothing:
    /// their diagnostics are returned.
    pub fn reload(
        self: &Arc<Self>,
        rules: Rules,
        servers: Vec<ServerEntry>,
    ) -> Result<Reloaded, Vec<Diagnostic>> {
        let (report, fresh) = self.replace(rules, servers)?;
        for slot in fresh {
            tokio::spawn(supervise(self.clone(), slot));
        }
        Ok(report)
    }
}

/// How one run of a server ended.
enum Run {
    /// It connected, served, and is gone (or moniker is stopping).
    Served,
    /// It did not get as far as serving: why.
    Failed(String),
    /// It refused the 2025 handshake for 2026-07-28: started again at once, speaking that.
    Modern,
}

impl Gateway {
    /// The connection a call of `caller` goes on: the server's, or for a server run once for
    /// each person, the caller's own instance ([`crate::instances`]), started here as the
    /// server's are.
    pub(crate) async fn connection_for(
        self: &Arc<Self>,
        server: &ServerId,
        patience: Duration,
        caller: Option<&crate::identity::Caller>,
    ) -> Result<Arc<connect::Connection>, crate::errors::Refusal> {
        let slot = self.servers.slot(server);
        let Some((slot, people)) = slot.and_then(|s| s.people.clone().map(|p| (s, p))) else {
            if let Some(conn) = self.servers.connection(server) {
                return Ok(conn);
            }
            // Boxed: only a server still joining is waited for, and the wait's future would
            // size every call's task (copied as it is spawned).
            return Box::pin(self.joined_connection(server, patience)).await;
        };
        let starter = crate::instances::Starter {
            guard: self.settings.guard.as_deref(),
            sink: Arc::new(WeakSink(Arc::downgrade(self))),
            timeout: self.settings.config.start_timeout,
            modern: slot.speaks_modern(),
        };
        // Boxed: starting a person's instance is kilobytes of future, which every call's task
        // would otherwise carry (and copy as it is spawned).
        Box::pin(people.for_caller(starter, connect::on_behalf(caller), patience)).await
    }
}

/// Keeps one server running: start, handshake, serve until it exits, back off, again, until
/// moniker stops or a reload retires the slot. The slot is settled once the first attempt is
/// over, whatever its outcome.
pub(crate) async fn supervise(gateway: Arc<Gateway>, slot: Arc<Slot>) {
    let mut attempt: u32 = 0;
    let id = slot.entry.id.clone();
    let slot = &slot;
    let sink: Arc<dyn Sink> = Arc::new(WeakSink(Arc::downgrade(&gateway)));
    let config = &gateway.settings.config;
    while !gateway.servers.is_stopping() && !slot.is_retired() {
        match run(&gateway, &id, slot, &sink).await {
            Run::Modern if !slot.speaks_modern() => {
                slot.found_modern();
                continue;
            }
            Run::Modern => {
                let reason = "the server refused the 2026-07-28 protocol it asked for".to_owned();
                tracing::warn!(server = %id, error = %reason, "server failed to start");
                slot.failed(reason);
            }
            Run::Served => attempt = 0,
            Run::Failed(reason) => {
                tracing::warn!(server = %id, error = %reason, "server failed to start");
                // Its last words may be its sandbox's refusal (a path, a connection).
                slot.said(&reason);
                slot.failed(reason);
            }
        }
        gateway.settle(slot);
        if gateway.servers.is_stopping() || slot.is_retired() {
            break;
        }
        attempt += 1;
        if config.restart_max_attempts.is_some_and(|max| attempt > max) {
            tracing::error!(server = %id, attempts = attempt, "server gave up after too many restarts");
            lock(&slot.status).next = Next::GivenUp;
            break;
        }
        let delay = config
            .restart_initial_delay
            .saturating_mul(1u32 << (attempt - 1).min(16))
            .min(config.restart_max_delay);
        {
            let mut status = lock(&slot.status);
            status.restarts += 1;
            status.next = Next::Restart;
        }
        gateway.services.metrics.server_restarted(&id);
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = gateway.servers.stopped() => break,
            _ = slot.retired() => break,
        }
        lock(&slot.status).next = Next::Start;
    }
    // Stopped (or retired) before a first attempt ended: nothing waits for it any more.
    gateway.settle(slot);
    if let Some(people) = &slot.people {
        people.stop_all().await;
    }
    if slot.is_retired() {
        tracing::info!(server = %id, "server stopped: the config no longer has it as it was");
    }
}

/// One start of the server, to its end.
async fn run(gateway: &Arc<Gateway>, id: &ServerId, slot: &Arc<Slot>, sink: &Arc<dyn Sink>) -> Run {
    let settings = &gateway.settings;
    let launch = connect::Launch {
        guard: settings.guard.as_deref(),
        sandbox: slot.entry.sandbox.as_ref(),
        secrets: None,
    };
    let started = connect::start(
        id,
        &slot.entry.spec,
        launch,
        sink.clone(),
        crate::framing::DEFAULT_MAX_MESSAGE,
        settings.config.start_timeout,
    )
    .await;
    let mut process = match started {
        Ok(process) => process,
        Err(reason) => return Run::Failed(reason),
    };
    *lock(&slot.pgid) = process.pgid;
    if slot.speaks_modern() {
        process.conn.speak_modern();
    }
    let handshake = tokio::select! {
        r = connect::handshake(&process.conn, settings.config.start_timeout) => r,
        _ = &mut process.closed => Err(HandshakeError::Call(CallError::Gone)),
    };
    let run = match handshake {
        Ok(_) if !gateway.servers.is_current(slot) => {
            // Retired while it started: never served.
            process.conn.close();
            Run::Served
        }
        Ok(listing) => {
            connected(gateway, id, slot, &process.conn, listing);
            gateway.settle(slot);
            tokio::select! {
                _ = &mut process.closed => {}
                _ = gateway.servers.stopped() => {}
                _ = slot.retired() => {
                    // Calls in flight finish (within the call timeout) before it goes.
                    drain(&process.conn, settings.config.call_timeout).await;
                }
            }
            disconnected(gateway, id, slot, &process.conn);
            Run::Served
        }
        Err(HandshakeError::SpeaksModern) => {
            tracing::info!(server = %id, "the server speaks only 2026-07-28: started again, spoken to statelessly (`protocol: 2026-07-28` in its config saves the handshake attempt)");
            process.conn.close();
            Run::Modern
        }
        Err(HandshakeError::Call(CallError::Gone)) => {
            process.conn.close();
            Run::Failed(exited(&mut process).await)
        }
        Err(e @ HandshakeError::OverBudget { .. }) => {
            process.conn.close();
            gateway.naming.over_budget(id, &e.to_string());
            Run::Failed(e.to_string())
        }
        Err(e) => {
            process.conn.close();
            Run::Failed(e.to_string())
        }
    };
    let pgid = lock(&slot.pgid).take();
    if let Some(pgid) = pgid {
        crate::guard::end_group(pgid, Duration::from_secs(2)).await;
    }
    if let Some(child) = process.child.as_mut() {
        let _ = child.wait().await;
    }
    if let (Some(pgid), Some(_)) = (pgid, &slot.entry.sandbox) {
        crate::sandbox::release(pgid).await;
    }
    run
}

/// The server answered its handshake with `listing`: it serves, its listing joins the
/// surface, a 2026-07-28 one is listened to (what a stream missed while moniker listened again
/// is listed again), and its subscriptions are made again.
fn connected(
    gateway: &Arc<Gateway>,
    id: &ServerId,
    slot: &Arc<Slot>,
    conn: &Arc<connect::Connection>,
    listing: moniker_surface::Listing,
) {
    lock(&slot.status).last_error = None;
    *lock(&slot.info) = Some(conn.info());
    slot.conn.store(Some(conn.clone()));
    lock(&slot.status).up = true;
    gateway.services.metrics.server_up(id, true);
    tracing::info!(server = %id, tools = listing.tools.len(), prompts = listing.prompts.len(), "server connected");
    gateway.update(id, Some(listing), true);
    if conn.is_modern() {
        let (weak_gateway, weak_conn) = (Arc::downgrade(gateway), Arc::downgrade(conn));
        tokio::spawn(conn.clone().listen(move || {
            if let (Some(gateway), Some(conn)) = (weak_gateway.upgrade(), weak_conn.upgrade()) {
                tokio::spawn(async move { gateway.relist(&conn).await });
            }
        }));
    }
    let (gateway, conn) = (gateway.clone(), conn.clone());
    tokio::spawn(async move { gateway.resubscribe(&conn).await });
}

/// The server's connection ended: it is down, and (unless moniker is stopping, or the slot
/// was retired) its listing leaves the surface.
fn disconnected(gateway: &Gateway, id: &ServerId, slot: &Arc<Slot>, conn: &connect::Connection) {
    conn.close();
    slot.conn.store(None);
    lock(&slot.status).up = false;
    if gateway.servers.is_current(slot) {
        gateway.services.metrics.server_up(id, false);
    }
    if !gateway.servers.is_stopping() && gateway.servers.is_current(slot) {
        tracing::warn!(server = %id, "server disconnected");
        gateway.update(id, None, false);
    }
}

/// Waits until no call is waiting on `conn` (at most `limit`).
async fn drain(conn: &connect::Connection, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while conn.in_flight() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Why a server that closed its output during the handshake did: its exit status and the last
/// lines of its stderr, or the guard's word that its command could not run.
async fn exited(process: &mut Started) -> String {
    const WAIT: Duration = Duration::from_secs(2);
    let status = match process.child.as_mut() {
        Some(child) => tokio::time::timeout(WAIT, child.wait())
            .await
            .ok()
            .and_then(Result::ok),
        None => None,
    };
    let tail = match process.stderr.take() {
        Some(task) => tokio::time::timeout(WAIT, task)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default(),
        None => Vec::new(),
    };
    // The guard says so when the command could not run at all.
    if let Some(line) = tail.iter().rev().find(|l| l.starts_with("cannot run `")) {
        return line.clone();
    }
    let mut reason = match status.and_then(|s| s.code()) {
        Some(code) => format!("it exited with status {code} during the handshake"),
        None => "it exited during the handshake".to_owned(),
    };
    if !tail.is_empty() {
        reason.push_str("; its last lines of stderr:");
        for line in &tail {
            reason.push_str("\n  ");
            reason.push_str(line);
        }
    }
    reason
}
