//! The naming part of the gateway: the rules, the toolsets, every server's last valid listing,
//! and the view built of them by rule (never by time), published whole and sealed against the
//! lock. What changed is returned as a [`Change`]: the gateway tells the sessions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;
use moniker_surface::discovery::Mode;
use moniker_surface::lock::{Drift, Integrity};
use moniker_surface::{Diagnostic, Kind, Listing, Rules, ServerId, Surface, ToolsetRule, build};

use super::Reloaded;
use super::seal::Seals;
use super::servers::Slot;
use crate::hub::Peer;
use crate::sync::lock;
use crate::view::{View, ViewSettings};

#[derive(Default)]
struct State {
    /// The last valid listing of every server that ever connected.
    listings: BTreeMap<ServerId, Listing>,
    up: BTreeSet<ServerId>,
    /// Servers whose first attempt to start is not over, listed meanwhile with the listing
    /// kept from their last run: a client's first listing does not depend on how fast they
    /// start, and their calls wait for them (within their start budget).
    joining: BTreeSet<ServerId>,
    /// What the last build said.
    diagnostics: Vec<Diagnostic>,
    /// Servers whose listing was refused after start, and why.
    refused: BTreeMap<ServerId, Vec<Diagnostic>>,
    /// The refused listings themselves: each joins once it fits (the server it collided with
    /// changed its list, or a reload renamed it).
    held: BTreeMap<ServerId, Listing>,
    /// Names two servers (or a server and the config, or moniker) claim: served by none of
    /// the servers until the config decides, with why, by server.
    contested: BTreeMap<ServerId, Vec<Diagnostic>>,
    /// The contested names already said in the log.
    said: BTreeSet<String>,
}

/// A view replaced by another: what sessions may need to hear of.
pub(crate) struct Change {
    pub old: Arc<View>,
    pub new: Arc<View>,
    /// The toolsets `old` was seen with, when a reload changed them.
    pub old_sets: Option<BTreeMap<String, ToolsetRule>>,
}

/// What a server's new listing did: the view it changed, and the listing to keep on disk (one
/// taken that differs from the one before).
pub(crate) struct Updated {
    pub change: Option<Change>,
    pub keep: Option<Listing>,
}

/// The rules, the listings and the view built of them.
pub struct Naming {
    /// The naming rules: replaced as a whole by a reload.
    rules: ArcSwap<Rules>,
    pub(crate) catalog: crate::toolsets::Catalog,
    state: Mutex<State>,
    view: ArcSwap<View>,
    /// The views' search indexes, built one at a time.
    pub(crate) indexer: Arc<crate::view::Indexer>,
    /// The surface lock every new surface is checked against.
    seals: Seals,
    /// `start` is over: from now on the surface's problems are only in the log. Before, they
    /// are the caller's to show (`start` returns them), so they are logged at debug level.
    started: AtomicBool,
    /// What views are made with.
    made_with: ViewSettings,
}

impl Naming {
    pub(crate) fn new(
        rules: Rules,
        store: Option<std::path::PathBuf>,
        made_with: ViewSettings,
    ) -> Self {
        let catalog = crate::toolsets::Catalog::new(rules.toolsets.sets.clone(), store);
        Self {
            rules: ArcSwap::from_pointee(rules),
            catalog,
            state: Mutex::new(State::default()),
            view: ArcSwap::from_pointee(View::new(
                Surface::default(),
                BTreeSet::new(),
                &ViewSettings::default(),
            )),
            indexer: Arc::default(),
            seals: Seals::default(),
            started: AtomicBool::new(false),
            made_with,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub fn view(&self) -> Arc<View> {
        self.view.load_full()
    }

    /// The rules the surface is built with.
    pub fn rules(&self) -> Arc<Rules> {
        self.rules.load_full()
    }

    /// The first build is over: the surface's problems go to the log from now on.
    pub(crate) fn set_started(&self) {
        self.started.store(true, Ordering::Release);
    }

    pub(crate) fn is_started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// The names of every toolset that can be equipped (static and saved).
    pub fn toolset_names(&self) -> BTreeSet<String> {
        self.catalog.sets().into_keys().collect()
    }

    /// What toolset `name` selects in `view` (empty when it cannot be resolved).
    pub fn toolset(&self, name: &str, view: &View) -> moniker_surface::toolsets::Selection {
        crate::toolsets::Equipped::new(name, &view.surface, &view.serving, &self.catalog.sets())
            .selection
    }

    /// The last valid listing of every server that connected.
    pub fn listings(&self) -> Vec<Listing> {
        self.state().listings.values().cloned().collect()
    }

    /// The diagnostics of the last build (warnings, or errors that were kept out).
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        self.state().diagnostics.clone()
    }

    /// The servers whose last listing was refused since start, with why.
    pub fn refused_listings(&self) -> BTreeMap<ServerId, Vec<Diagnostic>> {
        self.state().refused.clone()
    }

    /// The names two servers (or a server and the config) claim, served by none of them, with
    /// why and the fix, by server.
    pub fn contested_names(&self) -> BTreeMap<ServerId, Vec<Diagnostic>> {
        self.state().contested.clone()
    }

    /// Server `server`'s listing is past its budget: said with the refused listings until a
    /// listing of the server's is taken.
    pub(crate) fn over_budget(&self, server: &ServerId, why: &str) {
        let diagnostic = Diagnostic::error("budget::listing", why.to_owned())
            .help("the server keeps its last listing (or none): see the budgets in the guide (docs/src/security.md)");
        self.state()
            .refused
            .insert(server.clone(), vec![diagnostic]);
    }

    /// The servers listed with the listing kept from their last run while they start.
    pub(crate) fn kept(&self) -> BTreeSet<ServerId> {
        self.state().joining.clone()
    }

    /// The tools that drift from the lock now (`None`: there is no lock).
    pub fn drift(&self) -> Option<(Vec<Drift>, Integrity)> {
        self.seals.drift()
    }

    /// Says in the log what of `view` breaks the lock (once each): the number of breaking
    /// changes (`None`: no lock).
    pub(crate) fn check_lock(&self, view: &View) -> Option<usize> {
        self.seals.check(view)
    }

    /// Whether `rules` make a valid surface with the listings at hand of `servers`: else their
    /// diagnostics.
    pub(crate) fn check_rules(
        &self,
        rules: &Rules,
        servers: &[super::ServerEntry],
    ) -> Result<(), Vec<Diagnostic>> {
        let state = self.state();
        let kept: Vec<&Listing> = state
            .listings
            .iter()
            .filter(|(id, _)| servers.iter().any(|s| &s.id == *id))
            .map(|(_, l)| l)
            .collect();
        let built = build_by_rule(rules, &kept).0;
        match built.surface {
            Some(_) => Ok(()),
            None => Err(built.diagnostics),
        }
    }

    /// A reload's rules in place of the old, and the listings of the servers it removed or
    /// restarted let go of.
    pub(crate) fn replace(&self, rules: Rules, report: &Reloaded) -> Change {
        let old_sets = self.catalog.sets();
        self.catalog.set_static(rules.toolsets.sets.clone());
        self.rules.store(Arc::new(rules));
        self.rebuild(old_sets, |state| {
            for id in report.removed.iter().chain(&report.restarted) {
                state.joining.remove(id);
                state.up.remove(id);
            }
            for id in &report.removed {
                state.listings.remove(id);
                state.held.remove(id);
                state.refused.remove(id);
            }
        })
    }

    /// Checks every new surface against `locked` from now on; the surface now is rebuilt
    /// against it at once.
    pub(crate) fn set_lock(
        &self,
        locked: Option<moniker_surface::Lock>,
        integrity: Integrity,
    ) -> Change {
        self.seals.set(locked, integrity);
        self.rebuild(self.catalog.sets(), |_| {})
    }

    /// Builds the surface of every server's listing (the end of `start`): its problems, all of
    /// them, are the diagnostics.
    pub(crate) fn build_all(&self) -> Change {
        self.rebuild(self.catalog.sets(), |_| {})
    }

    /// The listings `known` kept on disk of the servers of `slots`, as what is known of them
    /// until they list: each in the order of their ids, when it fits with those before it.
    pub(crate) fn load_known(
        &self,
        known: &crate::known::Known,
        slots: &BTreeMap<ServerId, Arc<Slot>>,
    ) {
        let rules = self.rules();
        let mut state = self.state();
        for slot in slots.values() {
            let Some((listing, info)) = known.load(&slot.entry.id, &slot.entry.spec) else {
                continue;
            };
            let id = slot.entry.id.clone();
            state.listings.insert(id.clone(), listing);
            let listings: Vec<&Listing> = state.listings.values().collect();
            if build_by_rule(&rules, &listings).0.surface.is_none() {
                tracing::debug!(server = %id, "the server's kept listing does not fit the config: it decides no name");
                state.listings.remove(&id);
                continue;
            }
            *lock(&slot.info) = Some(info);
            state.joining.insert(id);
        }
    }

    /// Server `id`'s first attempt to start is over: it is no longer listed from its kept
    /// listing alone. Whether it was (and is not up: its kept tools leave the listing).
    pub(crate) fn left_joining(&self, id: &ServerId) -> bool {
        let mut state = self.state();
        state.joining.remove(id) && !state.up.contains(id)
    }

    /// Builds the view again from the state as it is.
    pub(crate) fn republish(&self) -> Change {
        let rules = self.rules();
        let mut state = self.state();
        self.publish(&mut state, &rules, Vec::new())
    }

    /// Rebuilds the view with `listing` as the server's new one. When that makes the surface
    /// invalid (a name another server has), the server's last valid listing stays (or it is
    /// left out), the refused one is held, and the problem is logged with its fix; a held
    /// listing joins as soon as it fits.
    pub(crate) fn update(&self, server: &ServerId, listing: Option<Listing>, up: bool) -> Updated {
        let rules = self.rules();
        let mut state = self.state();
        if up {
            state.up.insert(server.clone());
        } else {
            state.up.remove(server);
        }
        let Some(listing) = listing else {
            let change = self.publish(&mut state, &rules, Vec::new());
            return Updated {
                change: Some(change),
                keep: None,
            };
        };
        state.held.remove(server);
        let previous = state.listings.insert(server.clone(), listing);
        // Borrowed, not cloned: a rebuild costs no copy of any server's listing.
        let built = self.build_state(&mut state, &rules);
        if built.surface.is_some() {
            state.refused.remove(server);
            let taken = &state.listings[server];
            let keep = previous
                .is_none_or(|p| !same_listing(&p, taken))
                .then(|| taken.clone());
            let change = if state.held.is_empty() {
                self.publish_built(&mut state, built)
            } else {
                admit_held(&mut state, &rules);
                self.publish(&mut state, &rules, Vec::new())
            };
            return Updated {
                change: Some(change),
                keep,
            };
        }
        if !self.is_started() {
            // While a one-shot command's servers start, every listing is kept whatever it
            // makes of the surface: the command judges the surface of them all once they are
            // all in, so that every problem is reported.
            state.diagnostics = built.diagnostics;
            return Updated {
                change: None,
                keep: None,
            };
        }
        let change = self.refuse(&mut state, &rules, server, previous, built);
        Updated {
            change: Some(change),
            keep: None,
        }
    }

    /// A running gateway keeps serving: the server keeps its last valid listing (or none),
    /// and the problem is said, with its fix, until it fits.
    fn refuse(
        &self,
        state: &mut State,
        rules: &Rules,
        server: &ServerId,
        previous: Option<Listing>,
        built: moniker_surface::Built,
    ) -> Change {
        for d in built.errors() {
            tracing::warn!(server = %server, "{d}");
        }
        let refused = match previous {
            Some(previous) => {
                tracing::warn!(server = %server, "the server's new listing is refused: it keeps its last valid one");
                state.listings.insert(server.clone(), previous)
            }
            None => {
                tracing::warn!(server = %server, "the server's listing is refused: its tools and prompts are left out until the names fit");
                state.listings.remove(server)
            }
        };
        if let Some(refused) = refused {
            state.held.insert(server.clone(), refused);
        }
        state
            .refused
            .insert(server.clone(), built.errors().cloned().collect());
        self.publish(state, rules, built.diagnostics)
    }

    /// Rebuilds the view after `change` to the state (a reload: new rules, servers gone);
    /// `old_sets` are the toolsets before.
    fn rebuild(
        &self,
        old_sets: BTreeMap<String, ToolsetRule>,
        change: impl FnOnce(&mut State),
    ) -> Change {
        let rules = self.rules();
        let mut state = self.state();
        change(&mut state);
        admit_held(&mut state, &rules);
        let mut published = self.publish(&mut state, &rules, Vec::new());
        published.old_sets = Some(old_sets);
        published
    }

    /// Builds the surface of the state's listings by rule ([`build_by_rule`]), keeping which
    /// names are contested, and saying each new one once in the log (a running gateway's).
    fn build_state(&self, state: &mut State, rules: &Rules) -> moniker_surface::Built {
        let listings: Vec<&Listing> = state.listings.values().collect();
        let (built, contested) = build_by_rule(rules, &listings);
        let now: BTreeSet<String> = contested
            .values()
            .flatten()
            .map(ToString::to_string)
            .collect();
        if self.is_started() {
            for d in contested.values().flatten() {
                let text = d.to_string();
                if !state.said.contains(&text) {
                    tracing::warn!(
                        "{text}\nthe name is served by none of the servers that claim it until the config decides"
                    );
                    state.said.insert(text);
                }
            }
        }
        state.said.retain(|t| now.contains(t));
        state.contested = contested;
        built
    }

    /// Builds the surface from the state's listings and makes it the view; `errors` are
    /// earlier errors to keep visible (to `check` and `start`).
    fn publish(&self, state: &mut State, rules: &Rules, errors: Vec<Diagnostic>) -> Change {
        let mut built = self.build_state(state, rules);
        if !self.is_started() {
            // A one-shot command fails fast on a name claimed twice (the seeds' rule): the
            // contested names are errors of its surface, whatever would serve meanwhile.
            for d in state.contested.values().flatten() {
                if !built.diagnostics.contains(d) {
                    built.diagnostics.push(d.clone());
                }
            }
        }
        if built.surface.is_none() && self.is_started() {
            // Rules that make every listing together invalid (a reload's): the errors are
            // logged, and what is valid serves. (Before start, they are `start`'s to return.)
            for d in built.errors() {
                tracing::error!("{d}");
            }
        }
        built
            .diagnostics
            .extend(errors.into_iter().filter(Diagnostic::is_error));
        self.publish_built(state, built)
    }

    fn publish_built(&self, state: &mut State, built: moniker_surface::Built) -> Change {
        if self.is_started() {
            for d in built.diagnostics.iter().filter(|d| !d.is_error()) {
                tracing::warn!("{d}");
            }
        }
        state.diagnostics = built.diagnostics;
        let mut surface = built.surface.unwrap_or_default();
        let listings: Vec<&Listing> = state.listings.values().collect();
        self.seals.seal(&mut surface, &listings);
        tracing::debug!(
            tools = surface.listed(Kind::Tool).count(),
            "surface rebuilt"
        );
        let serving = state.up.union(&state.joining).cloned().collect();
        let new = Arc::new(View::new(surface, serving, &self.made_with));
        let old = self.view.swap(new.clone());
        old.supersede();
        if self.made_with.ahead && self.searches(&new) {
            self.indexer.want(&new);
        }
        Change {
            old,
            new,
            old_sets: None,
        }
    }

    /// Whether a session may search `view`: its discovery mode is search, or a toolset's.
    pub fn searches(&self, view: &View) -> bool {
        let search = |d: &moniker_surface::discovery::Discovery| d.mode == Mode::Search;
        search(view.surface.discovery())
            || self
                .catalog
                .sets()
                .values()
                .any(|t| t.discovery.as_ref().is_some_and(search))
    }

    /// Tells each of `peers` whose listing `change` changed: a session with a toolset sees
    /// only that toolset's part (compared once per toolset).
    pub(crate) fn announce(&self, peers: &[Arc<Peer>], change: &Change) {
        if peers.is_empty() {
            return;
        }
        let sets = self.catalog.sets();
        let old_sets = change.old_sets.as_ref().unwrap_or(&sets);
        let (old, new) = (&*change.old, &*change.new);
        let mut changed: BTreeMap<Option<String>, (bool, bool)> = BTreeMap::new();
        for peer in peers {
            let toolset = peer.toolset();
            let (tools, prompts) =
                *changed
                    .entry(toolset.clone())
                    .or_insert_with(|| match &toolset {
                        None => (
                            old.tools_result != new.tools_result,
                            old.prompts_result != new.prompts_result,
                        ),
                        Some(name) => {
                            let before = crate::toolsets::Equipped::new(
                                name,
                                &old.surface,
                                &old.serving,
                                old_sets,
                            );
                            let after = crate::toolsets::Equipped::new(
                                name,
                                &new.surface,
                                &new.serving,
                                &sets,
                            );
                            let differs = |kind| {
                                before.render(&old.surface, kind, &[])
                                    != after.render(&new.surface, kind, &[])
                            };
                            (differs(Kind::Tool), differs(Kind::Prompt))
                        }
                    });
            if tools {
                peer.list_changed(Kind::Tool);
            }
            if prompts {
                peer.list_changed(Kind::Prompt);
            }
        }
    }
}

/// The most rounds of taking contested names out: each takes out every name the build before
/// found claimed twice, so a second round is needed only where an action tool or an alias
/// named a tool taken out.
const CONTEST_ROUNDS: usize = 4;

/// The surface of `listings` by rule, never by time: an item whose own name another claims too
/// is not served: two servers' tools of one name, neither; a server's tool under a name the
/// config writes (an alias, an action tool, an override's name, even for an item not listed
/// now) or moniker's own tool's, the server's tool. On the first start as on later ones,
/// whichever server answered first; the rest of each server's listing serves. The diagnostics of the
/// names taken out are returned, by server: the fix the config needs is in them.
pub(super) fn build_by_rule(
    rules: &Rules,
    listings: &[&Listing],
) -> (moniker_surface::Built, BTreeMap<ServerId, Vec<Diagnostic>>) {
    let mut built = build(rules, listings);
    let mut contested: BTreeMap<ServerId, Vec<Diagnostic>> = BTreeMap::new();
    let mut out: BTreeSet<(&'static str, String, String)> = BTreeSet::new();
    let mut names: BTreeSet<String> = BTreeSet::new();
    for _ in 0..CONTEST_ROUNDS {
        if built.surface.is_some() {
            break;
        }
        let before = out.len();
        for d in built.errors() {
            for c in &d.contested {
                out.insert((c.section, c.server.clone(), c.origin.clone()));
                names.insert(c.name.clone());
                if let Ok(server) = c.server.parse::<ServerId>() {
                    let said = contested.entry(server).or_default();
                    if !said.contains(d) {
                        said.push(d.clone());
                    }
                }
            }
        }
        if out.len() == before {
            break;
        }
        let kept: Vec<Listing> = listings.iter().map(|l| without(l, &out)).collect();
        built = build(
            &without_members(rules, &names),
            &kept.iter().collect::<Vec<_>>(),
        );
    }
    (built, contested)
}

/// `rules` whose action tools no longer name the members in `names` (taken out by rule: their
/// action is then not offered, rather than the action tool refused whole).
fn without_members<'r>(rules: &'r Rules, names: &BTreeSet<String>) -> std::borrow::Cow<'r, Rules> {
    let named = |rule: &moniker_surface::ActionRule| {
        rule.tools.values().any(|m| names.contains(m.as_str()))
    };
    if !rules.actions.values().any(named) {
        return std::borrow::Cow::Borrowed(rules);
    }
    let mut rules = rules.clone();
    for rule in rules.actions.values_mut() {
        rule.tools
            .retain(|_, member| !names.contains(member.as_str()));
    }
    rules.actions.retain(|_, rule| !rule.tools.is_empty());
    std::borrow::Cow::Owned(rules)
}

/// `listing` without the items `out` names (section, server, origin name).
fn without(listing: &Listing, out: &BTreeSet<(&'static str, String, String)>) -> Listing {
    #[derive(serde::Deserialize)]
    struct Named {
        name: String,
    }
    let server = listing.server.as_str();
    let kept = |section: &'static str, items: &[Box<serde_json::value::RawValue>]| {
        items
            .iter()
            .filter(|item| {
                serde_json::from_str::<Named>(item.get()).map_or(true, |n| {
                    !out.contains(&(section, server.to_owned(), n.name))
                })
            })
            .cloned()
            .collect()
    };
    Listing {
        server: listing.server.clone(),
        tools: kept("tools", &listing.tools),
        prompts: kept("prompts", &listing.prompts),
        version: listing.version.clone(),
    }
}

/// Whether two listings of a server say the same, byte for byte.
fn same_listing(a: &Listing, b: &Listing) -> bool {
    let same = |x: &[Box<serde_json::value::RawValue>], y: &[Box<serde_json::value::RawValue>]| {
        x.len() == y.len() && x.iter().zip(y).all(|(x, y)| x.get() == y.get())
    };
    same(&a.tools, &b.tools) && same(&a.prompts, &b.prompts)
}

/// Lets each held listing in, in the order of the servers' ids, when it makes the surface
/// valid together with those in already.
fn admit_held(state: &mut State, rules: &Rules) {
    let held: Vec<ServerId> = state.held.keys().cloned().collect();
    for id in held {
        let Some(listing) = state.held.remove(&id) else {
            continue;
        };
        let previous = state.listings.insert(id.clone(), listing);
        let listings: Vec<&Listing> = state.listings.values().collect();
        if build_by_rule(rules, &listings).0.surface.is_some() {
            tracing::info!(server = %id, "the server's held listing fits now: it joins");
            state.refused.remove(&id);
            continue;
        }
        let listing = match previous {
            Some(previous) => state.listings.insert(id.clone(), previous),
            None => state.listings.remove(&id),
        };
        if let Some(listing) = listing {
            state.held.insert(id, listing);
        }
    }
}
