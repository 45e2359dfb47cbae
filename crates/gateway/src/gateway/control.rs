//! The control part of the gateway: what the operator changes while it runs, besides the
//! rules and the servers (the HTTP transport's tokens and allow-lists, the console), and why
//! the last config reload was refused.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use tokio::sync::watch;

use crate::sync::lock;

/// The HTTP settings and the console's switch.
pub struct Control {
    /// The HTTP transport's tokens and allow-lists: replaced by a reload.
    http: ArcSwap<moniker_config::HttpConfig>,
    /// Ticks when `http` is replaced: the HTTP transport then ends the sessions the new
    /// tokens no longer allow.
    http_changed: watch::Sender<()>,
    /// Why the last config reload was refused (the previous config still serves).
    config_error: Mutex<Option<String>>,
    /// `serve --console`: the console is on whatever the config says.
    console_forced: AtomicBool,
}

impl Default for Control {
    fn default() -> Self {
        Self {
            http: ArcSwap::from_pointee(moniker_config::HttpConfig::default()),
            http_changed: watch::channel(()).0,
            config_error: Mutex::new(None),
            console_forced: AtomicBool::new(false),
        }
    }
}

impl Control {
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

    /// Ticks at each [`Control::set_http`].
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

    /// Turns the console on whatever the config says (`serve --console`).
    pub fn force_console(&self) {
        self.console_forced.store(true, Ordering::Release);
    }

    /// Whether the console is on: `http.console`, or `serve --console`.
    pub fn console_on(&self) -> bool {
        self.console_forced.load(Ordering::Acquire) || self.http().console
    }
}
