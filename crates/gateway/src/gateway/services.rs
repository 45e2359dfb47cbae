//! The services part of the gateway: what every call goes through besides its server (the
//! clients, as peers; the limits; the metrics, the audit log and the traces) and what outlives
//! a call (the 2026-07-28 calls parked for their client's input, the tasks clients started,
//! what calls taught search).

use std::sync::Mutex;

use crate::hub::Hub;

/// The services every call and session uses.
pub struct Services {
    /// The clients, as peers, and the progress tokens in flight.
    pub hub: Hub,
    pub metrics: crate::metrics::Metrics,
    /// The limits on calls in force.
    pub(crate) limits: crate::limits::Limits,
    /// Where finished calls are written, when the audit log is on.
    pub(crate) audit: Option<crate::audit::Audit>,
    /// The last calls' audit lines, kept once the console is on (its Activity page).
    pub(crate) recent: std::sync::OnceLock<crate::audit::Recent>,
    /// Where calls' spans go, when traces are on.
    pub(crate) telemetry: Option<crate::telemetry::Telemetry>,
    /// 2026-07-28 calls waiting for their client's input, by their `requestState`.
    pub(crate) parked: crate::parked::Parking,
    /// Tasks clients started, by the id moniker gave them: the principal that started each,
    /// and its toolset. Only that principal, under the same toolset, reaches a task.
    pub(crate) tasks: Mutex<crate::tasks::Owners>,
    /// What each principal's calls taught search.
    pub(crate) learned: std::sync::Arc<crate::learned::Learned>,
}

impl Services {
    pub(crate) fn new(
        settings: &super::Settings,
        audit: Option<crate::audit::Audit>,
        telemetry: Option<crate::telemetry::Telemetry>,
    ) -> Self {
        Self {
            hub: Hub::default(),
            metrics: crate::metrics::Metrics::default(),
            limits: crate::limits::Limits::new(&settings.limits),
            audit,
            recent: std::sync::OnceLock::new(),
            telemetry,
            parked: crate::parked::Parking::new(settings.config.call_timeout),
            tasks: Mutex::new(crate::tasks::Owners::default()),
            learned: std::sync::Arc::new(crate::learned::Learned::new(settings.learned.clone())),
        }
    }

    /// The limits on calls of a new config: new calls are held to them (calls in progress
    /// keep the caps they were let through under).
    pub fn set_limits(&self, limits: &moniker_config::CallLimits) {
        self.limits.set(limits);
    }

    /// Keeps the last calls' audit lines from now on (the console's Activity page).
    pub fn recent_calls_kept(&self) {
        self.recent.get_or_init(Default::default);
    }

    /// The last calls' audit lines, newest last (none before [`Services::recent_calls_kept`]).
    pub fn recent_calls(&self) -> Vec<String> {
        self.recent
            .get()
            .map(crate::audit::Recent::lines)
            .unwrap_or_default()
    }

    /// Flushes the traces not exported yet.
    pub(crate) async fn shutdown(&self) {
        if let Some(telemetry) = &self.telemetry {
            telemetry.shutdown().await;
        }
    }
}
