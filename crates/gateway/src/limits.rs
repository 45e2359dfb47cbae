//! Limits on the calls to a server, a tool or a prompt: `call_timeout` and `max_in_flight`
//! of `servers.<id>` and of `tools.<key>` / `prompts.<key>` overrides (keyed as written:
//! `<origin name>` or `<server id>/<origin name>`, the latter first, then the most specific
//! glob, as for the overrides themselves). What is not set is the
//! gateway's: its call timeout, no cap on calls at once. The most specific timeout wins; every
//! cap that applies must have room. A call over a cap is refused at once, naming the cap.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use moniker_config::{CallLimits, Limits as Limit};
use moniker_surface::{Kind, ServerId};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::errors::Refusal;

/// The limits in force: replaced as a whole by a reload (calls in progress keep the caps they
/// were admitted under).
pub(crate) struct Limits {
    table: ArcSwap<Table>,
}

#[derive(Default)]
struct Table {
    servers: HashMap<ServerId, Gate>,
    tools: HashMap<String, Gate>,
    prompts: HashMap<String, Gate>,
    /// The keys of `tools` and of `prompts` that are globs: looked through only when no exact
    /// key names the item, and only when there are some.
    globs: [Vec<String>; 2],
}

/// One entry's limits, with the semaphore of its cap and the config key it is written at.
struct Gate {
    timeout: Option<(Duration, String)>,
    cap: Option<(Arc<Semaphore>, u32, String)>,
}

impl Gate {
    fn new(limit: &Limit, at: String) -> Self {
        Self {
            timeout: limit
                .call_timeout
                .map(|t| (t, format!("{at}.call_timeout"))),
            cap: limit.max_in_flight.map(|n| {
                let permits = usize::try_from(n).unwrap_or(usize::MAX);
                (
                    Arc::new(Semaphore::new(permits)),
                    n,
                    format!("{at}.max_in_flight"),
                )
            }),
        }
    }
}

/// A call let through: how long it may take, and its places under the caps (freed when it is
/// dropped).
pub(crate) struct Admitted {
    pub timeout: Duration,
    /// The config key of the timeout when it is not the gateway's.
    pub timeout_at: Option<String>,
    _permits: Vec<OwnedSemaphorePermit>,
}

impl Limits {
    pub(crate) fn new(limits: &CallLimits) -> Self {
        Self {
            table: ArcSwap::from_pointee(Table::of(limits)),
        }
    }

    /// The limits of a new config.
    pub(crate) fn set(&self, limits: &CallLimits) {
        self.table.store(Arc::new(Table::of(limits)));
    }

    /// Lets a call to `server` through (of the tool or prompt known there as `item`, when it
    /// is one), or refuses it when a cap that applies is full.
    pub(crate) fn admit(
        &self,
        server: &ServerId,
        item: Option<(Kind, &str)>,
        default: Duration,
    ) -> Result<Admitted, Refusal> {
        let table = self.table.load();
        let mut gates: Vec<&Gate> = Vec::with_capacity(2);
        if let Some(gate) = table.servers.get(server) {
            gates.push(gate);
        }
        if let Some((kind, name)) = item {
            let items = match kind {
                Kind::Tool => &table.tools,
                Kind::Prompt => &table.prompts,
            };
            // Nothing is looked up (nor a key made) when no tool or prompt has limits.
            if !items.is_empty() {
                let globs = &table.globs[usize::from(kind == Kind::Prompt)];
                let gate = items
                    .get(&format!("{server}/{name}"))
                    .or_else(|| items.get(name))
                    .or_else(|| {
                        let keys = globs.iter().map(String::as_str);
                        let key = moniker_surface::rules::glob_key(keys, server.as_str(), name)?;
                        items.get(key)
                    });
                gates.extend(gate);
            }
        }
        let mut admitted = Admitted {
            timeout: default,
            timeout_at: None,
            _permits: Vec::new(),
        };
        // The server's first, then the item's: the item's timeout, the more specific, wins.
        for gate in gates {
            if let Some((timeout, at)) = &gate.timeout {
                admitted.timeout = *timeout;
                admitted.timeout_at = Some(at.clone());
            }
            if let Some((semaphore, n, at)) = &gate.cap {
                match semaphore.clone().try_acquire_owned() {
                    Ok(permit) => admitted._permits.push(permit),
                    Err(_) => {
                        return Err(Refusal::Busy {
                            server: server.clone(),
                            limit: *n,
                            at: at.clone(),
                        });
                    }
                }
            }
        }
        Ok(admitted)
    }
}

impl Table {
    fn of(limits: &CallLimits) -> Self {
        let gates = |section: &str, map: &std::collections::BTreeMap<String, Limit>| {
            map.iter()
                .map(|(key, limit)| (key.clone(), Gate::new(limit, format!("{section}.{key}"))))
                .collect()
        };
        Self {
            servers: limits
                .servers
                .iter()
                .map(|(id, limit)| (id.clone(), Gate::new(limit, format!("servers.{id}"))))
                .collect(),
            tools: gates("tools", &limits.tools),
            prompts: gates("prompts", &limits.prompts),
            globs: [&limits.tools, &limits.prompts].map(|map| {
                map.keys()
                    .filter(|k| moniker_surface::rules::is_glob(k))
                    .cloned()
                    .collect()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> CallLimits {
        let mut limits = CallLimits::default();
        limits.servers.insert(
            "slow".parse().expect("id"),
            Limit {
                call_timeout: Some(Duration::from_secs(5)),
                max_in_flight: Some(2),
            },
        );
        limits.tools.insert(
            "echo".to_owned(),
            Limit {
                call_timeout: Some(Duration::from_millis(300)),
                max_in_flight: None,
            },
        );
        limits.tools.insert(
            "slow/echo".to_owned(),
            Limit {
                call_timeout: None,
                max_in_flight: Some(1),
            },
        );
        limits
    }

    #[test]
    fn the_most_specific_timeout_wins_and_every_cap_must_have_room() {
        let limits = Limits::new(&limits());
        let slow: ServerId = "slow".parse().expect("id");
        let other: ServerId = "other".parse().expect("id");
        let default = Duration::from_secs(60);

        let plain = limits.admit(&other, None, default).expect("no limits");
        assert_eq!(plain.timeout, default);
        assert_eq!(plain.timeout_at, None);
        let echo = limits
            .admit(&other, Some((Kind::Tool, "echo")), default)
            .expect("admitted");
        assert_eq!(echo.timeout, Duration::from_millis(300));
        assert_eq!(echo.timeout_at.as_deref(), Some("tools.echo.call_timeout"));

        // `slow/echo` is the more specific key: its cap of 1, and the server's 5 s.
        let first = limits
            .admit(&slow, Some((Kind::Tool, "echo")), default)
            .expect("first");
        assert_eq!(first.timeout, Duration::from_secs(5));
        let Err(Refusal::Busy { limit, at, .. }) =
            limits.admit(&slow, Some((Kind::Tool, "echo")), default)
        else {
            panic!("the tool's cap is full");
        };
        assert_eq!((limit, at.as_str()), (1, "tools.slow/echo.max_in_flight"));
        // Another tool of the server takes the server's second place, then the server is full.
        let second = limits.admit(&slow, Some((Kind::Tool, "x")), default);
        assert!(second.is_ok());
        let Err(Refusal::Busy { limit, at, .. }) = limits.admit(&slow, None, default) else {
            panic!("the server's cap is full");
        };
        assert_eq!((limit, at.as_str()), (2, "servers.slow.max_in_flight"));
        drop(first);
        assert!(
            limits.admit(&slow, None, default).is_ok(),
            "a place was freed"
        );
    }

    #[test]
    fn a_glob_key_limits_every_tool_it_matches_after_the_exact_keys() {
        let mut table = limits();
        let glob = |ms| Limit {
            call_timeout: Some(Duration::from_millis(ms)),
            max_in_flight: None,
        };
        table.tools.insert("write_*".to_owned(), glob(100));
        table.tools.insert("slow/write_f*".to_owned(), glob(200));
        table.tools.insert("ech?".to_owned(), glob(400));
        let limits = Limits::new(&table);
        let (slow, other): (ServerId, ServerId) = ("slow".parse().unwrap(), "o".parse().unwrap());
        let default = Duration::from_secs(60);
        let at = |server: &ServerId, tool: &str| {
            let admitted = limits
                .admit(server, Some((Kind::Tool, tool)), default)
                .unwrap();
            (admitted.timeout.as_millis(), admitted.timeout_at)
        };
        assert_eq!(
            at(&other, "write_file"),
            (100, Some("tools.write_*.call_timeout".into()))
        );
        assert_eq!(
            at(&slow, "write_file"),
            (200, Some("tools.slow/write_f*.call_timeout".into()))
        );
        assert_eq!(at(&other, "echo").0, 300, "the exact key wins");
        assert_eq!(at(&other, "read_file"), (60_000, None));
    }
}
