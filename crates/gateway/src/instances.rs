//! A stdio server run once for each person (`per_person`): each person's calls go to an
//! instance of their own, started at their first call with their own secrets in its
//! environment (`per_person.secrets`, set by the person: [`crate::auth::personal::Secrets`]),
//! never another's. The server's shared instance (its slot's) lists its tools and serves
//! nobody's calls.
//!
//! Bounded: at most `per_person.instances` at once (the one that waited longest for a call,
//! with none in flight, stops for a new one; else the call is refused), and an instance no call
//! reached for `per_person.idle` stops. An instance's messages reach its person alone: a
//! change of its listing is not the server's (its shared instance's is).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use moniker_config::{PerPerson, Sandbox, Transport};
use moniker_surface::ServerId;

use crate::auth::OnBehalf;
use crate::auth::personal::{Person, Secrets};
use crate::connect::{self, Connection, Sink, Started};
use crate::errors::Refusal;
use crate::message::Message;
use crate::sync::lock;

/// How an instance is started: the server's command (its `env` gets the person's secrets),
/// through the guard, in the server's sandbox.
pub(crate) struct Recipe {
    pub(crate) id: ServerId,
    pub(crate) spec: Transport,
    pub(crate) sandbox: Option<Sandbox>,
    pub(crate) modern: bool,
}

/// What starting an instance takes from the gateway: the guard, where the instance's
/// messages go, and how long a start may take.
pub(crate) struct Starter<'a> {
    pub(crate) guard: Option<&'a std::path::Path>,
    pub(crate) sink: Arc<dyn Sink>,
    pub(crate) timeout: Duration,
}

/// One person's instance.
struct Instance {
    /// Whose it is (their `sub`), for the console.
    person: String,
    started: tokio::sync::OnceCell<Arc<Connection>>,
    /// Its process, to stop it.
    process: Mutex<Option<Started>>,
    /// When a call last reached it.
    last: Mutex<Instant>,
}

/// The instances of one server run once for each person, and the secrets its people set.
pub(crate) struct Instances {
    recipe: Recipe,
    settings: PerPerson,
    running: Mutex<HashMap<[u8; 32], Arc<Instance>>>,
    pub(crate) secrets: Secrets,
    /// The task that stops idle instances runs.
    reaping: std::sync::atomic::AtomicBool,
}

impl Instances {
    /// `None` unless the server is a stdio server run once for each person.
    pub(crate) fn of(recipe: Recipe, settings: Option<&PerPerson>) -> Option<Arc<Self>> {
        let settings = settings?.clone();
        let Transport::Stdio { command, args, .. } = &recipe.spec else {
            return None;
        };
        let started_as = format!("stdio:{command} {}", args.join(" "));
        let secrets = Secrets::of(&recipe.id, &started_as);
        Some(Arc::new(Self {
            recipe,
            settings,
            running: Mutex::new(HashMap::new()),
            secrets,
            reaping: std::sync::atomic::AtomicBool::new(false),
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
            .settings
            .secrets
            .iter()
            .filter(|name| !secrets.contains_key(*name))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(Refusal::Upstream(format!(
                "Server `{server}` runs once for each person, with their own {}: set yours first (PUT a JSON object of them to moniker's /connect/{server}/secrets with your access token), then call again",
                missing.join(", ")
            )));
        }
        let instance = self.instance(server, &person)?;
        *lock(&instance.last) = Instant::now();
        let started = instance
            .started
            .get_or_try_init(|| start(&self.recipe, starter, &instance, secrets, budget))
            .await;
        match started {
            Ok(conn) if !conn.is_closed() => Ok(conn.clone()),
            Ok(_) | Err(_) => {
                // Gone, or it did not start: the next call starts another.
                self.stop(&person.key_bytes());
                Err(match started {
                    Err(why) => Refusal::Upstream(format!(
                        "Server `{server}` could not be started for you: {why}"
                    )),
                    Ok(_) => Refusal::ServerGone(server.clone()),
                })
            }
        }
        .inspect(|_| self.reap_later())
    }

    /// `person`'s instance (not started yet when new): a place made for it when there is
    /// none, by stopping the one that waited longest with no call in flight.
    fn instance(&self, server: &ServerId, person: &Person) -> Result<Arc<Instance>, Refusal> {
        let mut running = lock(&self.running);
        if let Some(instance) = running.get(&person.key_bytes()) {
            return Ok(instance.clone());
        }
        if running.len() >= self.settings.instances as usize {
            let idlest = running
                .iter()
                .filter(|(_, i)| i.started.get().is_none_or(|c| c.in_flight() == 0))
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
            started: tokio::sync::OnceCell::new(),
            process: Mutex::new(None),
            last: Mutex::new(Instant::now()),
        });
        running.insert(person.key_bytes(), instance.clone());
        Ok(instance)
    }

    /// Stops `key`'s instance, if it runs.
    pub(crate) fn stop(&self, key: &[u8; 32]) {
        if let Some(gone) = lock(&self.running).remove(key) {
            tokio::spawn(stopped(gone));
        }
    }

    /// Stops `person`'s instance (their secrets changed: the next call starts it anew).
    pub(crate) fn stop_person(&self, person: &Person) {
        self.stop(&person.key_bytes());
    }

    /// Stops every instance (the server was retired, or moniker stops).
    pub(crate) async fn stop_all(&self) {
        let all: Vec<Arc<Instance>> = lock(&self.running).drain().map(|(_, i)| i).collect();
        for instance in all {
            stopped(instance).await;
        }
    }

    /// How many instances run.
    pub(crate) fn running(&self) -> usize {
        lock(&self.running).len()
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
        use std::sync::atomic::Ordering;
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
                instances.reap();
                if instances.running() == 0 {
                    instances.reaping.store(false, Ordering::Release);
                    return;
                }
            }
        });
    }

    /// Stops the instances no call reached for `idle`, with none in flight.
    fn reap(&self) {
        let idle = self.settings.idle;
        let mut running = lock(&self.running);
        let stale: Vec<[u8; 32]> = running
            .iter()
            .filter(|(_, i)| lock(&i.last).elapsed() >= idle)
            .filter(|(_, i)| i.started.get().is_none_or(|c| c.in_flight() == 0))
            .map(|(key, _)| *key)
            .collect();
        for key in stale {
            if let Some(gone) = running.remove(&key) {
                tracing::debug!("a person's instance stops: idle");
                tokio::spawn(stopped(gone));
            }
        }
    }
}

/// Starts `instance`: the server's command with the person's secrets in its environment,
/// through the guard and in its sandbox, and its handshake.
async fn start(
    entry: &Recipe,
    starter: Starter<'_>,
    instance: &Instance,
    secrets: std::collections::BTreeMap<String, String>,
    budget: Duration,
) -> Result<Arc<Connection>, String> {
    let mut spec = entry.spec.clone();
    if let Transport::Stdio { env, .. } = &mut spec {
        env.extend(secrets);
    }
    let launch = connect::Launch {
        guard: starter.guard,
        sandbox: entry.sandbox.as_ref(),
    };
    let sink: Arc<dyn Sink> = Arc::new(Personal(starter.sink));
    let budget = budget.min(starter.timeout);
    let mut process = connect::start(
        &entry.id,
        &spec,
        launch,
        sink,
        crate::framing::DEFAULT_MAX_MESSAGE,
        budget,
    )
    .await?;
    let conn = process.conn.clone();
    if entry.modern {
        conn.speak_modern();
    }
    let handshake = tokio::select! {
        r = connect::handshake(&conn, budget) => r.map_err(|e| e.to_string()),
        _ = &mut process.closed => Err("it exited during its handshake".to_owned()),
    };
    *lock(&instance.process) = Some(process);
    handshake.map(|_| {
        tracing::info!(server = %entry.id, "a person's instance started");
        conn
    })
}

/// Ends an instance: its connection, its process group, its sandbox's cgroup.
async fn stopped(instance: Arc<Instance>) {
    if let Some(conn) = instance.started.get() {
        conn.close();
    }
    let process = lock(&instance.process).take();
    let Some(mut process) = process else { return };
    process.conn.close();
    if let Some(pgid) = process.pgid {
        crate::guard::end_group(pgid, Duration::from_secs(2)).await;
        crate::sandbox::release(pgid);
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
}
