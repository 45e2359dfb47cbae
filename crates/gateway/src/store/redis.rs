//! The toolset store in Redis (`toolsets.store: redis://host:6379/0`): one hash,
//! `moniker:toolsets`, of toolset name to its JSON, so that every moniker replica behind a
//! load balancer sees the toolsets any of them saved. Every read asks Redis (a toolset saved
//! through another replica is there at once); when Redis cannot be reached, the last toolsets
//! read serve, and the failure is logged once per outage.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use super::StoredToolset;
use crate::sync::lock;

const KEY: &str = "moniker:toolsets";
/// How long one Redis operation may take: the store is read on the request path.
const TIMEOUT: Duration = Duration::from_millis(500);

pub struct RedisStore {
    /// The URL as configured, for messages (its password, if any, is never shown).
    shown: String,
    client: redis::Client,
    connection: Mutex<Option<redis::Connection>>,
    /// What the last successful read gave.
    last: Mutex<BTreeMap<String, StoredToolset>>,
    /// Whether the last operation failed (the next failure is not logged again).
    down: Mutex<bool>,
}

impl RedisStore {
    pub fn open(url: &str) -> Result<Self, String> {
        let shown = moniker_config::shown_url(url);
        let client =
            redis::Client::open(url).map_err(|e| format!("`{shown}` is not a Redis URL: {e}"))?;
        Ok(Self {
            shown,
            client,
            connection: Mutex::new(None),
            last: Mutex::new(BTreeMap::new()),
            down: Mutex::new(false),
        })
    }

    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Runs `op` on a connection (made anew after a failure).
    fn with<T>(
        &self,
        op: impl Fn(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T, String> {
        let mut guard = lock(&self.connection);
        if guard.is_none() {
            let connection = self
                .client
                .get_connection_with_timeout(TIMEOUT)
                .map_err(|e| self.failed(&e))?;
            let _ = connection.set_read_timeout(Some(TIMEOUT));
            let _ = connection.set_write_timeout(Some(TIMEOUT));
            *guard = Some(connection);
        }
        let Some(connection) = guard.as_mut() else {
            return Err(format!("no connection to `{}`", self.shown));
        };
        match op(connection) {
            Ok(value) => {
                *lock(&self.down) = false;
                Ok(value)
            }
            Err(e) => {
                *guard = None;
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

    /// Every toolset saved (the last ones read, when Redis cannot be reached).
    pub fn toolsets(&self) -> BTreeMap<String, StoredToolset> {
        let read = self.with(|c| {
            redis::cmd("HGETALL")
                .arg(KEY)
                .query::<BTreeMap<String, String>>(c)
        });
        let Ok(raw) = read else {
            return lock(&self.last).clone();
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
        *lock(&self.last) = toolsets.clone();
        toolsets
    }

    pub fn put(&self, name: &str, toolset: &StoredToolset) -> Result<(), String> {
        let json = serde_json::to_string(toolset).map_err(|e| e.to_string())?;
        self.with(|c| {
            redis::cmd("HSET")
                .arg(KEY)
                .arg(name)
                .arg(&json)
                .query::<i64>(c)
        })
        .map(|_| ())
    }

    /// Whether there was such a toolset.
    pub fn remove(&self, name: &str) -> Result<bool, String> {
        self.with(|c| redis::cmd("HDEL").arg(KEY).arg(name).query::<i64>(c))
            .map(|n| n > 0)
    }
}
