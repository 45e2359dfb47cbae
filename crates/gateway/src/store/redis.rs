//! The toolset store in Redis (`toolsets.store: redis://host:6379/0`): one hash,
//! `moniker:toolsets`, of toolset name to its JSON, so that every moniker replica behind a
//! load balancer sees the toolsets any of them saved.
//!
//! Requests never wait for Redis: they read the toolsets last read, which a thread of the
//! store's own reads again every [`REFRESH`] (each read bounded by [`TIMEOUT`]). A slow Redis,
//! or none, leaves the last good read serving; the failure is logged once per outage. A
//! toolset saved here is seen here at once; one saved through another replica within
//! [`REFRESH`], or at once when a request names a toolset not known yet ([`RedisStore::reread`],
//! at most once a second).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::StoredToolset;
use crate::sync::lock;

const KEY: &str = "moniker:toolsets";
/// How long one Redis operation may take.
const TIMEOUT: Duration = Duration::from_millis(500);
/// How often the toolsets are read again.
pub const REFRESH: Duration = Duration::from_millis(100);
/// The least time between two reads asked for by a request.
const REREAD_EVERY: Duration = Duration::from_secs(1);

pub struct RedisStore {
    shared: Arc<Shared>,
    /// For writes (a management tool's call): the reader thread has its own.
    connection: Mutex<Option<redis::Connection>>,
    /// When a request last asked for a read of its own.
    reread: Mutex<Option<Instant>>,
}

/// What the store and its reader thread share.
struct Shared {
    /// The URL as configured, for messages (its password, if any, is never shown).
    shown: String,
    client: redis::Client,
    /// What the last successful read gave.
    last: Mutex<BTreeMap<String, StoredToolset>>,
    /// Whether the last operation failed (the next failure is not logged again).
    down: Mutex<bool>,
    stop: AtomicBool,
}

impl Drop for RedisStore {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
    }
}

impl RedisStore {
    /// Opens the store, reads it once, and starts its reader thread.
    pub fn open(url: &str) -> Result<Self, String> {
        let shown = moniker_config::shown_url(url);
        let client =
            redis::Client::open(url).map_err(|e| format!("`{shown}` is not a Redis URL: {e}"))?;
        let shared = Arc::new(Shared {
            shown,
            client,
            last: Mutex::new(BTreeMap::new()),
            down: Mutex::new(false),
            stop: AtomicBool::new(false),
        });
        let mut reader = None;
        shared.read(&mut reader);
        let weak = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("moniker-redis".to_owned())
            .spawn(move || {
                loop {
                    std::thread::sleep(REFRESH);
                    let Some(shared) = weak.upgrade() else { return };
                    if shared.stop.load(Ordering::Acquire) {
                        return;
                    }
                    shared.read(&mut reader);
                }
            })
            .map_err(|e| format!("cannot start the reader of `{}`: {e}", shared.shown))?;
        Ok(Self {
            shared,
            connection: Mutex::new(None),
            reread: Mutex::new(None),
        })
    }

    pub fn shown(&self) -> &str {
        &self.shared.shown
    }

    /// Every toolset saved, as last read: never waits for Redis.
    pub fn toolsets(&self) -> BTreeMap<String, StoredToolset> {
        lock(&self.shared.last).clone()
    }

    /// Reads the toolsets now (a request named one not known yet: it may have just been saved
    /// through another replica), unless a request did less than a second ago.
    pub fn reread(&self) {
        if !self.reread_due() {
            return;
        }
        let mut connection = lock(&self.connection).take();
        self.shared.read(&mut connection);
        *lock(&self.connection) = connection;
    }

    /// Runs `op` on the writer's connection (made anew after a failure).
    fn with<T>(
        &self,
        op: impl Fn(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T, String> {
        let mut guard = lock(&self.connection);
        self.shared.with(&mut guard, op)
    }

    /// Whether a reread is due (none was started less than a second ago); one starts now
    /// when it is.
    fn reread_due(&self) -> bool {
        let mut at = lock(&self.reread);
        if at.is_some_and(|at| at.elapsed() < REREAD_EVERY) {
            return false;
        }
        *at = Some(Instant::now());
        true
    }

    pub fn put(&self, name: &str, toolset: &StoredToolset) -> Result<(), String> {
        let json = serde_json::to_string(toolset).map_err(|e| e.to_string())?;
        self.with(|c| {
            redis::cmd("HSET")
                .arg(KEY)
                .arg(name)
                .arg(&json)
                .query::<i64>(c)
        })?;
        lock(&self.shared.last).insert(name.to_owned(), toolset.clone());
        Ok(())
    }

    /// Whether there was such a toolset.
    pub fn remove(&self, name: &str) -> Result<bool, String> {
        let removed = self
            .with(|c| redis::cmd("HDEL").arg(KEY).arg(name).query::<i64>(c))
            .map(|n| n > 0)?;
        lock(&self.shared.last).remove(name);
        Ok(removed)
    }
}

impl Shared {
    /// Runs `op` on `connection` (made first when there is none; dropped after a failure).
    fn with<T>(
        &self,
        connection: &mut Option<redis::Connection>,
        op: impl Fn(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T, String> {
        if connection.is_none() {
            let made = self
                .client
                .get_connection_with_timeout(TIMEOUT)
                .map_err(|e| self.failed(&e))?;
            let _ = made.set_read_timeout(Some(TIMEOUT));
            let _ = made.set_write_timeout(Some(TIMEOUT));
            *connection = Some(made);
        }
        let Some(c) = connection.as_mut() else {
            return Err(format!("no connection to `{}`", self.shown));
        };
        match op(c) {
            Ok(value) => {
                *lock(&self.down) = false;
                Ok(value)
            }
            Err(e) => {
                *connection = None;
                Err(self.failed(&e))
            }
        }
    }

    fn failed(&self, e: &redis::RedisError) -> String {
        let why = format!("the toolset store `{}` cannot be reached: {e}", self.shown);
        let mut down = lock(&self.down);
        if !*down {
            tracing::error!("{why}");
            *down = true;
        }
        why
    }

    /// Reads every toolset on `connection`; what it read becomes the last read (a failure
    /// leaves the last read as it was).
    fn read(&self, connection: &mut Option<redis::Connection>) {
        let read = self.with(connection, |c| {
            redis::cmd("HGETALL")
                .arg(KEY)
                .query::<BTreeMap<String, String>>(c)
        });
        let Ok(raw) = read else {
            return;
        };
        let mut toolsets = BTreeMap::new();
        for (name, json) in raw {
            match serde_json::from_str(&json) {
                Ok(toolset) => {
                    toolsets.insert(name, toolset);
                }
                Err(e) => {
                    tracing::warn!(toolset = name, error = %e, "a stored toolset is unreadable; skipped")
                }
            }
        }
        *lock(&self.last) = toolsets;
    }
}
