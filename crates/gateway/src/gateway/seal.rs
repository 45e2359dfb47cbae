//! The surface lock the gateway's surfaces are checked against (`serve` with a `moniker.lock`):
//! the tools that drift from their seals, withheld or said, and the breaking changes, each said
//! once in the log.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use moniker_surface::lock::{Drift, Integrity};
use moniker_surface::{Kind, Listing, Surface};

use crate::sync::lock;
use crate::view::View;

/// A lock, and the breaking changes against it already in the log.
struct LockWatch {
    lock: moniker_surface::Lock,
    /// What a tool that drifted from the lock gets.
    integrity: Integrity,
    reported: BTreeSet<String>,
    /// The tools that drift from the lock now.
    drift: Vec<Drift>,
}

/// The lock, when there is one.
#[derive(Default)]
pub(crate) struct Seals(Mutex<Option<LockWatch>>);

impl Seals {
    /// Checks every new surface against `locked` from now on (`None`: no lock).
    pub(crate) fn set(&self, locked: Option<moniker_surface::Lock>, integrity: Integrity) {
        *lock(&self.0) = locked.map(|locked| LockWatch {
            lock: locked,
            integrity,
            reported: BTreeSet::new(),
            drift: Vec::new(),
        });
    }

    /// The tools that drift from the lock now, and whether they are withheld (`None`: there
    /// is no lock).
    pub(crate) fn drift(&self) -> Option<(Vec<Drift>, Integrity)> {
        lock(&self.0)
            .as_ref()
            .map(|w| (w.drift.clone(), w.integrity))
    }

    /// Seals `surface` (built of `listings`) against the lock, if there is one: the tools that
    /// drift from it are withheld under `integrity: block`.
    pub(crate) fn seal(&self, surface: &mut Surface, listings: &[&Listing]) {
        let mut guard = lock(&self.0);
        let Some(watch) = guard.as_mut() else {
            return;
        };
        watch.drift = moniker_surface::lock::drift(&watch.lock, surface, listings);
        if watch.integrity == Integrity::Block {
            let why: std::collections::HashMap<(Kind, moniker_surface::Origin), Arc<str>> = watch
                .drift
                .iter()
                .map(|d| ((d.kind, d.origin.clone()), Arc::from(d.refusal())))
                .collect();
            moniker_surface::lock::withhold(surface, &why);
        }
    }

    /// Says in the log each breaking change of `view` against the lock, and each drift, once;
    /// the number of breaking changes (`None`: there is no lock).
    pub(crate) fn check(&self, view: &View) -> Option<usize> {
        let mut guard = lock(&self.0);
        let watch = guard.as_mut()?;
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
                say_breaking(b, &text);
            }
            now.insert(text);
        }
        for d in &watch.drift {
            let text = d.to_string();
            if !watch.reported.contains(&text) {
                say_drift(d, watch.integrity, &text);
            }
            now.insert(text);
        }
        watch.reported = now;
        Some(breaking.len())
    }
}

fn say_breaking(b: &moniker_surface::Breaking, text: &str) {
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

fn say_drift(d: &Drift, integrity: Integrity, text: &str) {
    match integrity {
        Integrity::Warn => tracing::warn!(
            code = d.code(),
            "{text}; served (integrity: warn): `moniker lock --diff` shows what changed"
        ),
        Integrity::Block => tracing::warn!(code = d.code(), "{}", d.refusal()),
    }
}
