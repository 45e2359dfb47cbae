//! A stdio server run once for each person (`per_person`): each person's calls go to an
//! instance of their own, started at their first call with their own secrets in its
//! environment (`per_person.secrets`, set by the person: [`crate::auth::personal::Secrets`]),
//! never another's. The server's shared instance (its slot's) lists its tools and serves
//! nobody's calls.
//!
//! A person's secrets are read at each of their calls: an instance started with others (set
//! anew, or forgotten by the person or an admin) is stopped, and the call refused or a new one
//! started. Bounded: at most `per_person.instances` at once (the one that waited longest for a
//! call, with none in flight, stops for a new one; else the call is refused), and an instance
//! no call reached for `per_person.idle` stops. An instance is stopped whole (its process
//! group, its sandbox's cgroup) whatever it was doing, starting included; one dropped unstopped
//! is killed. What it sends reaches its person alone: a change of its listing is not the
//! server's (its shared instance's is).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use moniker_config::{PerPerson, Sandbox, Transport};
use moniker_surface::ServerId;
use sha2::{Digest, Sha256};

use crate::auth::OnBehalf;
use crate::auth::personal::{Person, Secrets};
use crate::connect::{self, Connection, Sink, Started};
use crate::errors::Refusal;
use crate::message::Message;
use crate::sync::lock;

/// A call that reached an instance this recently is taken as still on its way to it: the
/// instance is not stopped for another person's (its request may not be in flight yet).
const JUST_USED: Duration = Duration::from_secs(1);

/// How an instance is started: the server's command (the person's secrets beside its
/// environment), through the guard, in the server's sandbox.
pub(crate) struct Recipe {
    pub(crate) id: ServerId,
    pub(crate) spec: Transport,
    pub(crate) sandbox: Option<Sandbox>,
}

/// What starting an instance takes from the gateway: the guard, where the instance's
/// messages go, how long a start may take, and whether the server speaks 2026-07-28.
pub(crate) struct Starter<'a> {
    pub(crate) guard: Option<&'a std::path::Path>,
    pub(crate) sink: Arc<dyn Sink>,
    pub(crate) timeout: Duration,
    pub(crate) modern: bool,
}

/// One person's instance.
struct Instance {
    /// Whose it is (their `sub`), for the console.
    person: String,
    /// The digest of the secrets it was started with.
    secrets: [u8; 32],
    started: tokio::sync::OnceCell<Arc<Connection>>,
    /// Its process, from the moment it runs.
    process: Mutex<Option<Started>>,
    /// It was stopped: a start under way ends, and nobody is handed it.
    stopping: AtomicBool,
    /// When a call last reached it.
    last: Mutex<Instant>,
}

impl Instance {
    fn busy(&self) -> bool {
        let in_flight = self.started.get().is_some_and(|c| c.in_flight() > 0);
        let starting = self.started.get().is_none();
        in_flight || starting || lock(&self.last).elapsed() < JUST_USED
    }
}

impl Drop for Instance {
    /// An instance dropped without being stopped (its last holder went): its process group
    /// is killed, never left running with a person's secrets.
    fn drop(&mut self) {
        let process = self.process.get_mut().ok().and_then(Option::take);
        if let Some(pgid) = process.as_ref().and_then(|p| p.pgid) {
            let group = nix::unistd::Pid::from_raw(pgid as i32);
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            crate::sandbox::release_soon(pgid);
        }
    }
}

/// The instances of one server run once for each person, and the secrets its people set.
pub(crate) struct Instances {
    recipe: Recipe,
    settings: PerPerson,
    running: Mutex<HashMap<[u8; 32], Arc<Instance>>>,
    pub(crate) secrets: Secrets,
    /// The task that stops idle instances runs.
    reaping: AtomicBool,
    /// The server was retired, or moniker stops: no instance starts any more.
    closed: AtomicBool,
}

impl Instances {
    /// `None` unless the server is a stdio server run once for each person.
    pub(crate) fn of(recipe: Recipe, settings: Option<&PerPerson>) -> Option<Arc<Self>> {
        let settings = settings?.clone();
        let Transport::Stdio { command, args, .. } = &recipe.spec else {
            return None;
        };
        let secrets = Secrets::of(
            &recipe.id,
            &crate::auth::personal::started_as(command, args),
        );
        Some(Arc::new(Self {
            recipe,
            settings,
            running: Mutex::new(HashMap::new()),
            secrets,
            reaping: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }))
    }

    /// The names of the secrets each person sets.
    pub(crate) fn secret_names(&self) -> &[String] {
        &self.settings.secrets
    }

    /// The connection to `caller`'s own instance, started now if it is not running (within
    /// `budget`); or why there is none.
    pub(crate) async fn for_caller(
        self: &Arc<Self>,
        starter: Starter<'_>,
        caller: OnBehalf<'_>,
        budget: Duration,
    ) -> Result<Arc<Connection>, Refusal> {
        let server = &self.recipe.id;
        let Some(person) = Person::of(caller) else {
            return Err(Refusal::Upstream(format!(
                "Server `{server}` runs once for each person, and this request comes from no person (a client of moniker's `http.auth` is one; stdio clients and static tokens are not)"
            )));
        };
        let secrets = self.secrets.of_person(&person);
        let missing: Vec<&str> = self
            .secret_names()
            .iter()
            .filter(|name| !secrets.contains_key(*name))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            // Forgotten (by them or an admin) while their instance ran: it stops now.
            self.stop_person(&person);
            return Err(Refusal::Upstream(format!(
                "Server `{server}` runs once for each person, with their own {}: set yours first (PUT a JSON object of them to moniker's /connect/{server}/secrets with your access token), then call again",
                missing.join(", ")
            )));
        }
        let instance = self.instance(&person, digest(&secrets))?;
        *lock(&instance.last) = Instant::now();
        let started = instance
            .started
            .get_or_try_init(|| start(&self.recipe, starter, &instance, &secrets, budget))
            .await;
        let refused = match started {
            Ok(conn) if !conn.is_closed() && !instance.stopping.load(Ordering::Acquire) => {
                self.reap_later();
                return Ok(conn.clone());
            }
            Ok(_) => Refusal::ServerGone(server.clone()),
            Err(why) => Refusal::Upstream(format!(
                "Server `{server}` could not be started for you: {why}"
            )),
        };
        // Gone, stopped, or it did not start: the next call starts another.
        self.stop_this(&person.key_bytes(), &instance);
        Err(refused)
    }

    /// `person`'s instance started with `secrets` (not started yet when new): one started
    /// with other secrets stops; a place is made for a new one when there is none, by stopping
    /// the one that waited longest and is not busy.
    fn instance(&self, person: &Person, secrets: [u8; 32]) -> Result<Arc<Instance>, Refusal> {
        let server = &self.recipe.id;
        if self.closed.load(Ordering::Acquire) {
            return Err(Refusal::ServerGone(server.clone()));
        }
        let key = person.key_bytes();
        let mut running = lock(&self.running);
        match running.get(&key) {
            Some(instance) if instance.secrets == secrets => return Ok(instance.clone()),
            Some(_) => {
                let old = running.remove(&key).expect("found");
                tokio::spawn(stopped(old));
            }
            None => {}
        }
        if running.len() >= self.settings.instances as usize {
            let idlest = running
                .iter()
                .filter(|(_, i)| !i.busy())
                .min_by_key(|(_, i)| *lock(&i.last))
                .map(|(key, _)| *key);
            let Some(idlest) = idlest else {
                return Err(Refusal::limit(format!(
                    "Server `{server}` runs once for each person, and {} people's instances are at work: try again in a moment",
                    self.settings.instances
                )));
            };
            if let Some(gone) = running.remove(&idlest) {
                tokio::spawn(stopped(gone));
            }
        }
        let instance = Arc::new(Instance {
            person: person.name.clone(),
            secrets,
            started: tokio::sync::OnceCell::new(),
            process: Mutex::new(None),
            stopping: AtomicBool::new(false),
            last: Mutex::new(Instant::now()),
        });
        running.insert(key, instance.clone());
        Ok(instance)
    }

    /// Stops `key`'s instance when it is `instance` (not a newer one another call started).
    fn stop_this(&self, key: &[u8; 32], instance: &Arc<Instance>) {
        let mut running = lock(&self.running);
        if running.get(key).is_some_and(|i| Arc::ptr_eq(i, instance)) {
            running.remove(key);
        }
        drop(running);
        tokio::spawn(stopped(instance.clone()));
    }

    /// Stops `person`'s instance, if it runs (their secrets changed or went).
    pub(crate) fn stop_person(&self, person: &Person) {
        if let Some(gone) = lock(&self.running).remove(&person.key_bytes()) {
            tokio::spawn(stopped(gone));
        }
    }

    /// Stops every instance, at once, and starts none any more (the server was retired, or
    /// moniker stops).
    pub(crate) async fn stop_all(&self) {
        self.closed.store(true, Ordering::Release);
        let all: Vec<Arc<Instance>> = lock(&self.running).drain().map(|(_, i)| i).collect();
        futures_util::future::join_all(all.into_iter().map(stopped)).await;
    }

    /// Whose instances run, and the seconds since a call last reached each.
    pub(crate) fn people(&self) -> Vec<(String, u64)> {
        lock(&self.running)
            .values()
            .map(|i| (i.person.clone(), lock(&i.last).elapsed().as_secs()))
            .collect()
    }

    /// Stops the instances of everyone whose `sub` is `name`, and forgets their secrets (an
    /// admin's word; `issuer` is the callers' identity provider): how many.
    pub(crate) fn forget_named(&self, issuer: &str, name: &str) -> usize {
        let person = Person::named(issuer, name);
        let had = usize::from(lock(&self.running).contains_key(&person.key_bytes()));
        self.stop_person(&person);
        had + usize::from(self.secrets.forget(&person))
    }

    /// Stops the instances idle past `idle`, now and every while, as long as any run.
    fn reap_later(self: &Arc<Self>) {
        if self.reaping.swap(true, Ordering::AcqRel) {
            return;
        }
        let every = (self.settings.idle / 4).max(Duration::from_millis(250));
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(instances) = weak.upgrade() else {
                    return;
                };
                if !instances.reap() {
                    return;
                }
            }
        });
    }

    /// Stops the instances no call reached for `idle`, with none in flight; whether any
    /// still run (when none does, the reaper ends, said under the same lock a start takes).
    fn reap(&self) -> bool {
        let idle = self.settings.idle;
        let mut running = lock(&self.running);
        let stale: Vec<[u8; 32]> = running
            .iter()
            .filter(|(_, i)| lock(&i.last).elapsed() >= idle)
            .filter(|(_, i)| i.started.get().is_some_and(|c| c.in_flight() == 0))
            .map(|(key, _)| *key)
            .collect();
        for key in stale {
            if let Some(gone) = running.remove(&key) {
                tracing::debug!(server = %self.recipe.id, "a person's instance stops: idle");
                tokio::spawn(stopped(gone));
            }
        }
        if running.is_empty() {
            self.reaping.store(false, Ordering::Release);
            return false;
        }
        true
    }
}

/// The digest of a person's secrets: an instance started with others is not theirs now.
fn digest(secrets: &BTreeMap<String, String>) -> [u8; 32] {
    let mut hash = Sha256::new();
    for (name, value) in secrets {
        hash_text(&mut hash, name);
        hash_text(&mut hash, value);
    }
    hash.finalize().into()
}

/// Adds `text` to `hash`, its length first: no two lists of texts hash alike.
fn hash_text(hash: &mut Sha256, text: &str) {
    hash.update((text.len() as u64).to_le_bytes());
    hash.update(text.as_bytes());
}

/// Starts `instance`: the server's command with the person's secrets beside its environment,
/// through the guard and in its sandbox, and its handshake. Its process is the instance's
/// from the moment it runs, so that a stop during the start ends it.
async fn start(
    recipe: &Recipe,
    starter: Starter<'_>,
    instance: &Instance,
    secrets: &BTreeMap<String, String>,
    budget: Duration,
) -> Result<Arc<Connection>, String> {
    let launch = connect::Launch {
        guard: starter.guard,
        sandbox: recipe.sandbox.as_ref(),
        secrets: Some(secrets),
    };
    let sink: Arc<dyn Sink> = Arc::new(Personal(starter.sink));
    let budget = budget.min(starter.timeout);
    let mut process = connect::start(
        &recipe.id,
        &recipe.spec,
        launch,
        sink,
        crate::framing::DEFAULT_MAX_MESSAGE,
        budget,
    )
    .await?;
    let conn = process.conn.clone();
    conn.forwarding
        .one_persons
        .store(true, std::sync::atomic::Ordering::Release);
    if starter.modern {
        conn.speak_modern();
    }
    let (_, unused) = tokio::sync::oneshot::channel();
    let mut closed = std::mem::replace(&mut process.closed, unused);
    *lock(&instance.process) = Some(process);
    if instance.stopping.load(Ordering::Acquire) {
        return Err("it was stopped as it started".to_owned());
    }
    let handshake = tokio::select! {
        r = connect::handshake(&conn, budget) => r.map_err(|e| e.to_string()),
        _ = &mut closed => Err("it exited during its handshake".to_owned()),
    };
    handshake.map(|_| {
        tracing::info!(server = %recipe.id, "a person's instance started");
        conn
    })
}

/// Ends an instance: its connection, its process group, its sandbox's cgroup.
async fn stopped(instance: Arc<Instance>) {
    instance.stopping.store(true, Ordering::Release);
    if let Some(conn) = instance.started.get() {
        conn.close();
    }
    let process = lock(&instance.process).take();
    let Some(mut process) = process else { return };
    process.conn.close();
    if let Some(pgid) = process.pgid {
        crate::guard::end_group(pgid, Duration::from_secs(2)).await;
        crate::sandbox::release(pgid).await;
    }
    if let Some(child) = process.child.as_mut() {
        let _ = child.wait().await;
    }
}

/// What a person's instance sends reaches that person's requests alone: a change of its
/// listing or resources is not the server's, and its tasks' notes are not kept.
struct Personal(Arc<dyn Sink>);

impl Sink for Personal {
    fn server_message(&self, conn: &Arc<Connection>, message: Message, related: Option<u64>) {
        let dropped = matches!(
            message.method(),
            Some(
                "notifications/tools/list_changed"
                    | "notifications/prompts/list_changed"
                    | "notifications/resources/list_changed"
                    | "notifications/resources/updated"
                    | "notifications/tasks/status"
            )
        );
        if !dropped {
            self.0.server_message(conn, message, related);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_person_key_is_theirs_alone() {
        let alice = Person::named("https://idp", "alice");
        let bob = Person::named("https://idp", "bob");
        let alice_elsewhere = Person::named("https://other", "alice");
        assert_ne!(alice.key_bytes(), bob.key_bytes());
        assert_ne!(alice.key_bytes(), alice_elsewhere.key_bytes());
        assert_eq!(
            alice.key_bytes(),
            Person::named("https://idp", "alice").key_bytes()
        );
    }

    #[test]
    fn other_secrets_are_another_instance() {
        let one = BTreeMap::from([("T".to_owned(), "a".to_owned())]);
        let other = BTreeMap::from([("T".to_owned(), "b".to_owned())]);
        let shifted = BTreeMap::from([("Ta".to_owned(), String::new())]);
        assert_eq!(digest(&one), digest(&one.clone()));
        assert_ne!(digest(&one), digest(&other));
        assert_ne!(
            digest(&one),
            digest(&shifted),
            "a name and value cannot shift"
        );
    }
}
