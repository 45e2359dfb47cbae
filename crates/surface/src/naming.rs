//! The naming pipeline: overrides, prefix stripping, `server__name` parsing, server prefixes,
//! tags, aliases, validation and the index. See DESIGN "Naming pipeline".

use std::collections::{BTreeMap, BTreeSet};

use indexmap::IndexMap;
use serde_json::value::RawValue;

use crate::actions::{self, Member};
use crate::definition::{self, Rewrite, Server, with_aliases_line};
use crate::diagnostic::{Diagnostic, Rename, did_you_mean};
use crate::listing::Listing;
use crate::names::{ServerId, Tag};
use crate::rules::{ActionRule, Legacy, Override, Rules};
use crate::surface::{ActionMember, ActionRoute, Exposed, Origin, Route, Surface};
use crate::vocab::{Kind, Seg, path};

/// The outcome of [`build`]: a surface when no diagnostic is an error, and every diagnostic
/// (errors and warnings), sorted.
#[derive(Debug)]
pub struct Built {
    pub surface: Option<Surface>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Built {
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.is_error())
    }
}

/// Builds the surface from the rules and the servers' listings. Deterministic: the order of
/// `listings` and of the items in them does not matter. The listings are borrowed (owned ones,
/// or shared ones: a gateway keeps each server's once and builds from it without a copy).
pub fn build<L: std::borrow::Borrow<Listing>>(rules: &Rules, listings: &[L]) -> Built {
    let listings: Vec<&Listing> = listings.iter().map(std::borrow::Borrow::borrow).collect();
    // Names whose deprecation is over are out before anything is named.
    let (scheduled, notes) = crate::deprecation::apply(rules);
    let mut built = build_once(&scheduled, &listings);
    built.diagnostics.extend(notes);
    offer_prefix(&mut built, &scheduled, &listings);
    built
}

/// Puts `prefix: true` in the fix of every error, on the servers where it alone would resolve
/// them all ([`prefix_fix`]).
fn offer_prefix(built: &mut Built, rules: &Rules, listings: &[&Listing]) {
    let prefix = prefix_fix(rules, listings, &built.diagnostics);
    if !prefix.is_empty() {
        for d in built.diagnostics.iter_mut().filter(|d| d.is_error()) {
            d.fix.prefix = prefix.clone();
        }
    }
}

/// The servers on which `prefix: true` alone would resolve every error, when every error is a
/// rename between the same two servers (two copies of one server, say): each is tried, with a
/// build of its own.
fn prefix_fix(rules: &Rules, listings: &[&Listing], diagnostics: &[Diagnostic]) -> Vec<String> {
    let mut errors = diagnostics.iter().filter(|d| d.is_error()).peekable();
    let mut servers = BTreeSet::new();
    if errors.peek().is_none() {
        return Vec::new();
    }
    for d in errors {
        if d.fix.renames.is_empty() {
            return Vec::new();
        }
        servers.extend(d.fix.renames.iter().map(|r| r.server.as_str()));
    }
    if servers.len() != 2 {
        return Vec::new();
    }
    servers
        .into_iter()
        .filter(|&server| {
            let Some((id, server_rules)) =
                rules.servers.iter().find(|(id, _)| id.as_str() == server)
            else {
                return false;
            };
            if server_rules.prefix.is_some() {
                return false;
            }
            let mut prefixed = rules.clone();
            if let Some(r) = prefixed.servers.get_mut(id) {
                r.prefix = Some(id.as_str().to_owned());
            }
            !build_once(&prefixed, listings)
                .diagnostics
                .iter()
                .any(Diagnostic::is_error)
        })
        .map(str::to_owned)
        .collect()
}

fn build_once(rules: &Rules, listings: &[&Listing]) -> Built {
    let mut diagnostics = check_rules(rules);
    let mut listings: Vec<&Listing> = listings.to_vec();
    listings.sort_by(|a, b| a.server.cmp(&b.server));
    let (tools, tool_server) = build_kind(rules, &listings, Kind::Tool, &mut diagnostics);
    let (prompts, prompt_server) = build_kind(rules, &listings, Kind::Prompt, &mut diagnostics);
    diagnostics.sort();
    diagnostics.dedup();
    let surface = if diagnostics.iter().any(Diagnostic::is_error) {
        None
    } else {
        Some(Surface::from_parts(
            tools,
            prompts,
            [tool_server, prompt_server],
            rules.discovery.clone(),
        ))
    };
    Built {
        surface,
        diagnostics,
    }
}

/// The checks that need only the rules: every name and alias written in the config fits the
/// profile, and none is written twice. `moniker check --offline` runs these.
pub fn check_rules(rules: &Rules) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for kind in [Kind::Tool, Kind::Prompt] {
        let mut written = Written::new();
        write_overrides(rules, kind, &mut written, &mut out);
        if kind == Kind::Tool {
            write_actions(rules, &mut written, &mut out);
        }
        for (name, places) in written.into_iter().filter(|(_, p)| p.len() > 1) {
            out.push(written_twice(kind, name, &places));
        }
    }
    out
}

/// Every literal name in the config, with where it is written and as what (`name` or
/// `alias`).
type Written<'a> = BTreeMap<&'a str, Vec<(String, &'static str)>>;

/// The names and aliases the overrides of `kind` write; each must fit the profile, and an
/// alias may not repeat its own name.
fn write_overrides<'a>(
    rules: &'a Rules,
    kind: Kind,
    written: &mut Written<'a>,
    out: &mut Vec<Diagnostic>,
) {
    let profile = rules.naming.profile;
    let section = kind.section();
    for (key, rule) in rules.overrides(kind) {
        if crate::rules::is_glob(key) && (rule.name.is_some() || !rule.aliases.is_empty()) {
            out.push(glob_names(kind, key));
            continue;
        }
        for (name, at, what) in override_names(section, key, rule) {
            if let Err(why) = profile.check(name) {
                out.push(profile_error(kind, what, name, &why).at(at.clone()));
            }
            if what == "alias" && rule.name.as_ref().is_some_and(|own| own.as_str() == name) {
                out.push(alias_is_own_name(kind, name).at(at.clone()));
                continue;
            }
            written.entry(name).or_default().push((at, what));
        }
    }
}

/// An override keyed by a glob that gives a name or aliases: the items it matches cannot share
/// them.
fn glob_names(kind: Kind, key: &str) -> Diagnostic {
    Diagnostic::error(
        "naming::glob_names",
        format!(
            "override `{key}` is a glob: the {}s it matches cannot share a name or an alias",
            kind.noun()
        ),
    )
    .at(path(&[Seg::Key(kind.section()), Seg::Key(key)]))
    .help("give names and aliases under exact keys; a glob sets tags, descriptions, `hidden`, parameters and limits")
}

/// An alias that repeats its own item's name.
fn alias_is_own_name(kind: Kind, name: &str) -> Diagnostic {
    Diagnostic::error(
        "naming::duplicate",
        format!("alias `{name}` is the {}'s own name", kind.noun()),
    )
    .help("remove the alias: the name already resolves")
}

/// The names and aliases of the action tools; each must fit the profile.
fn write_actions<'a>(rules: &'a Rules, written: &mut Written<'a>, out: &mut Vec<Diagnostic>) {
    let profile = rules.naming.profile;
    for (name, at, what) in action_names(rules) {
        if let Err(why) = profile.check(name) {
            out.push(profile_error(Kind::Tool, what, name, &why).at(at.clone()));
        }
        written.entry(name).or_default().push((at, what));
    }
}

/// The names override `key` writes: its own name and its aliases, each with its config path
/// and what it is (`name`, `alias`).
fn override_names<'a>(
    section: &str,
    key: &str,
    rule: &'a crate::Override,
) -> Vec<(&'a str, String, &'static str)> {
    let own = rule
        .name
        .iter()
        .map(|name| (name.as_str(), name_path(section, key), "name"));
    let aliases = rule.aliases.iter().enumerate().map(|(i, alias)| {
        let at = alias_path(section, key, i);
        (alias.name.as_str(), at, "alias")
    });
    own.chain(aliases).collect()
}

/// The config path of alias `i` of the item at `<section>.<key>`.
fn alias_path(section: &str, key: &str, i: usize) -> String {
    path(&[
        Seg::Key(section),
        Seg::Key(key),
        Seg::Key("aliases"),
        Seg::Index(i),
    ])
}

/// The names the action tools' rules write: each one's name and aliases, with their config
/// paths and what they are.
fn action_names(rules: &Rules) -> Vec<(&str, String, &'static str)> {
    let mut out = Vec::new();
    for (name, rule) in &rules.actions {
        out.push((
            name.as_str(),
            path(&[Seg::Key("actions"), Seg::Key(name)]),
            "name",
        ));
        for (i, alias) in rule.aliases.iter().enumerate() {
            let at = alias_path("actions", name, i);
            out.push((alias.name.as_str(), at, "alias"));
        }
    }
    out
}

/// A name written at more than one place in the config, with every place.
fn written_twice(kind: Kind, name: &str, places: &[(String, &str)]) -> Diagnostic {
    let section = kind.section();
    let mut d = Diagnostic::error(
        "naming::duplicate",
        format!(
            "{} name `{name}` is written {} times in {}",
            kind.noun(),
            places.len(),
            written_where(section, places)
        ),
    )
    .at(places[0].0.clone());
    for (at, role) in places {
        d = d.note(format!("as {} at `{at}`", a_role(role)));
    }
    d.help("every name and alias must be unique: rename or remove all but one")
}

/// Where a name written at `places` is: in `section`, or across the config (action tools are
/// tools too: they may collide with `tools` entries).
fn written_where(section: &str, places: &[(String, &str)]) -> String {
    if places.iter().all(|(at, _)| at.starts_with(section)) {
        format!("`{section}`")
    } else {
        "the config".to_owned()
    }
}

/// A role a name is written in (`name`, `alias`), with its article.
fn a_role(role: &str) -> &'static str {
    if role == "name" { "a name" } else { "an alias" }
}

fn profile_error(kind: Kind, role: &str, name: &str, why: &str) -> Diagnostic {
    Diagnostic::error(
        "naming::profile",
        format!("{} {role} `{name}` {why}", kind.noun()),
    )
}

/// An origin item, before naming.
struct Candidate<'a> {
    server: &'a ServerId,
    name: String,
    fields: IndexMap<String, Box<RawValue>>,
}

/// Where an exposed name came from: written in the config, or derived from an origin name.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    Config(String),
    Derived,
    /// moniker's own tool of that name ([`own_tools`]).
    Moniker,
    /// A name the config writes (at this path) for an item that is not listed now (its server
    /// has not listed yet, or is down): it is the config's all the same, whoever lists first.
    Reserved(String),
}

/// The names of moniker's own tools: the toolset management's and search mode's. A tool of a
/// server exposed under one of them would be listed twice and never reached, in whichever
/// mode or toolset a session is: it is a duplicate, always.
fn own_tools() -> impl Iterator<Item = &'static str> {
    crate::management::NAMES
        .iter()
        .copied()
        .chain([crate::discovery::SEARCH_TOOLS, crate::discovery::CALL_TOOL])
}

/// A claim on an exposed name by one item, as its name or as one of its aliases.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Claim {
    item: usize,
    alias: bool,
    source: Source,
}

impl Claim {
    /// A claim that no listed item makes (moniker's own tool's, or the config's for an item not
    /// listed now).
    fn unlisted(source: Source) -> Self {
        Self {
            item: usize::MAX,
            alias: false,
            source,
        }
    }
}

struct Named<'a> {
    candidate: Candidate<'a>,
    key: Option<&'a str>,
    name: String,
    /// The name without server prefix, for fix suggestions.
    base: String,
    server_name: String,
    rule: Option<&'a Override>,
    /// The rule's parameter rules against the item's input schema.
    shaped: crate::params::Shaped,
}

impl Named<'_> {
    /// Whether its override gives it `alias`.
    fn has_alias(&self, alias: &crate::names::Name) -> bool {
        self.rule
            .is_some_and(|r| r.aliases.iter().any(|a| &a.name == alias))
    }
}

/// An action tool to build: its members, by index into the named items.
struct Plan<'a> {
    name: &'a str,
    rule: &'a ActionRule,
    members: Vec<(&'a str, usize)>,
}

/// One kind's items once their names are claimed (step 4): what the reports after it read.
#[derive(Clone, Copy)]
struct Claimed<'c> {
    kind: Kind,
    named: &'c [Named<'c>],
    plans: &'c [Plan<'c>],
    claims: &'c BTreeMap<&'c str, Vec<Claim>>,
}

/// Finds every action tool's members among the named items. A member that is missing is an
/// error when every server is listed, else a warning (its server may be down).
fn plan_actions<'a>(
    rules: &'a Rules,
    named: &[Named<'_>],
    all_listed: bool,
    out: &mut Vec<Diagnostic>,
) -> (Vec<Plan<'a>>, BTreeMap<usize, usize>) {
    let mut plans = Vec::new();
    let mut member_of: BTreeMap<usize, usize> = BTreeMap::new();
    for (name, rule) in &rules.actions {
        let mut members = Vec::new();
        for (action, member) in &rule.tools {
            let at = member_path(name, action);
            match find_member(named, member) {
                Some(item) => match member_of.get(&item) {
                    Some(&other) if other != plans.len() => out.push(member_twice(member, at)),
                    _ => {
                        member_of.insert(item, plans.len());
                        members.push((action.as_str(), item));
                    }
                },
                None => {
                    let message = format!(
                        "action `{action}` of `{name}` names `{member}`, which no server exposes"
                    );
                    out.push(unknown_member(message, member, named, all_listed).at(at));
                }
            }
        }
        plans.push(Plan {
            name,
            rule,
            members,
        });
    }
    (plans, member_of)
}

/// The config path of member `action` of action tool `name`.
fn member_path(name: &str, action: &str) -> String {
    path(&[
        Seg::Key("actions"),
        Seg::Key(name),
        Seg::Key("tools"),
        Seg::Key(action),
    ])
}

/// The named item an action tool's `member` is: by its exposed name, else by one of its
/// aliases.
fn find_member(named: &[Named<'_>], member: &crate::names::Name) -> Option<usize> {
    let by_name = named.iter().position(|n| n.name == member.as_str());
    by_name.or_else(|| named.iter().position(|n| n.has_alias(member)))
}

/// A tool that two action tools name as their member.
fn member_twice(member: &crate::names::Name, at: String) -> Diagnostic {
    Diagnostic::error(
        "naming::duplicate_member",
        format!("tool `{member}` is a member of two action tools"),
    )
    .at(at)
    .help("a tool belongs to at most one action tool")
}

/// A member no server exposes (`message` says which): an error when every server is listed,
/// else a warning (its server may be down); with a did-you-mean among the named items.
fn unknown_member(
    message: String,
    member: &crate::names::Name,
    named: &[Named<'_>],
    all_listed: bool,
) -> Diagnostic {
    let d = if all_listed {
        Diagnostic::error("naming::unknown_member", message)
    } else {
        let message = format!("{message} (now: a server is not connected)");
        Diagnostic::warning("naming::unknown_member", message)
    };
    match did_you_mean(member.as_str(), named.iter().map(|n| n.name.as_str())) {
        Some(close) => d.help(format!("did you mean `{close}`?")),
        None => d,
    }
}

fn build_kind(
    rules: &Rules,
    listings: &[&Listing],
    kind: Kind,
    out: &mut Vec<Diagnostic>,
) -> (Vec<Exposed>, Option<String>) {
    let candidates = gather(listings, kind, out);
    let (mut named, used) = name_candidates(rules, kind, candidates);
    report_ambiguous(kind, &used, out);
    named.retain(|n| !n.rule.is_some_and(|r| r.hidden));

    let listed = Listed::new(rules, listings);
    let (plans, member_of) = match kind {
        Kind::Tool => plan_actions(rules, &named, listed.all, out),
        Kind::Prompt => (Vec::new(), BTreeMap::new()),
    };
    let claims = claim_names(rules, kind, &named, &plans, &member_of, out);
    let claimed = Claimed {
        kind,
        named: &named,
        plans: &plans,
        claims: &claims,
    };
    report_duplicates(claimed, out);
    report_unused_overrides(rules, claimed, &used, &listed, out);
    if kind == Kind::Tool {
        report_params(&named, out);
    }
    let shared = shared_server(&named).map(str::to_owned);
    (assemble(rules, &named, &plans, shared.is_some()), shared)
}

/// What the parameter rules of each tool's override say that its schema does not bear out.
fn report_params(named: &[Named<'_>], out: &mut Vec<Diagnostic>) {
    for n in named {
        let Some(key) = n.key else {
            continue;
        };
        for problem in &n.shaped.problems {
            out.push(problem.diagnostic(&n.name, |param| params_path(key, param)));
        }
    }
}

/// The config path of a tool override's parameter rules (`key`), or of one of them.
fn params_path(key: &str, param: Option<&str>) -> String {
    let mut segs = vec![Seg::Key("tools"), Seg::Key(key), Seg::Key("params")];
    segs.extend(param.map(Seg::Key));
    path(&segs)
}

/// The server name every item of a kind has, when they have one: the listing says it once
/// ([`Surface::server`]) instead of each entry. An action tool has its members' server.
fn shared_server<'n>(named: &'n [Named<'_>]) -> Option<&'n str> {
    let mut names = named.iter().map(|n| n.server_name.as_str());
    let first = names.next()?;
    names.all(|n| n == first).then_some(first)
}

/// Every item of `kind` in the listings, sorted by server and name so that the listings'
/// order does not matter. An item that cannot be named is left out, with a warning.
fn gather<'a>(
    listings: &[&'a Listing],
    kind: Kind,
    out: &mut Vec<Diagnostic>,
) -> Vec<Candidate<'a>> {
    let noun = kind.noun();
    let mut candidates = Vec::new();
    for listing in listings {
        let items = match kind {
            Kind::Tool => &listing.tools,
            Kind::Prompt => &listing.prompts,
        };
        for (i, raw) in items.iter().enumerate() {
            match parse_item(raw) {
                Ok((name, fields)) => candidates.push(Candidate {
                    server: &listing.server,
                    name,
                    fields,
                }),
                Err(why) => out.push(invalid_item(&listing.server, noun, i, why)),
            }
        }
    }
    candidates.sort_by(|a, b| (a.server, &a.name).cmp(&(b.server, &b.name)));
    candidates
}

/// Item `i` of a server's listing that cannot be named (`why`): it is left out.
fn invalid_item(server: &ServerId, noun: &str, i: usize, why: &str) -> Diagnostic {
    Diagnostic::warning(
        "listing::invalid_item",
        format!("server `{server}` lists {noun} #{i} {why}; it is left out"),
    )
}

/// Which servers each override key matched: an unqualified key may match in several.
type Used<'a> = BTreeMap<&'a str, BTreeSet<&'a ServerId>>;

/// Names every candidate: its override (step 1), then the auto name unless the override names
/// it (step 2). Also which servers each override key matched.
fn name_candidates<'a>(
    rules: &'a Rules,
    kind: Kind,
    candidates: Vec<Candidate<'a>>,
) -> (Vec<Named<'a>>, Used<'a>) {
    let overrides = rules.overrides(kind);
    let globs: Vec<&str> = overrides
        .keys()
        .map(String::as_str)
        .filter(|k| crate::rules::is_glob(k))
        .collect();
    let mut used = Used::new();
    let mut named = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        let (key, rule) = match override_of(overrides, &globs, &candidate) {
            Some((k, r)) => (Some(k.as_str()), Some(r)),
            None => (None, None),
        };
        if let Some(key) = key {
            used.entry(key).or_default().insert(candidate.server);
        }
        let (server_name, base) = auto_name(rules, candidate.server, &candidate.name);
        let (name, base) = match rule.and_then(|r| r.name.as_ref()) {
            Some(name) => (name.as_str().to_owned(), name.as_str().to_owned()),
            None => (prefixed(rules, candidate.server, &base), base),
        };
        let shaped = shape(rule, &candidate);
        named.push(Named {
            candidate,
            key,
            name,
            base,
            server_name,
            rule,
            shaped,
        });
    }
    (named, used)
}

/// The override of `candidate`, with its key: a key qualified with the server wins over the
/// bare origin name, and both over a glob (`globs`: the keys that are globs).
fn override_of<'a>(
    overrides: &'a BTreeMap<String, Override>,
    globs: &[&str],
    candidate: &Candidate<'_>,
) -> Option<(&'a String, &'a Override)> {
    let (server, name) = (candidate.server.as_str(), candidate.name.as_str());
    let qualified = format!("{server}/{name}");
    let glob = || {
        crate::rules::glob_key(globs.iter().copied(), server, name)
            .and_then(|k| overrides.get_key_value(k))
    };
    overrides
        .get_key_value(&qualified)
        .or_else(|| overrides.get_key_value(name))
        .or_else(glob)
}

/// The parameter rules of `candidate`'s override against its schema: once, for the build's
/// diagnostics and the listed definition.
fn shape(rule: Option<&Override>, candidate: &Candidate<'_>) -> crate::params::Shaped {
    match rule {
        Some(rule) if !rule.params.is_empty() => {
            let schema = candidate.fields.get("inputSchema").map(|s| &**s);
            crate::params::shape(&rule.params, schema)
        }
        _ => crate::params::Shaped::default(),
    }
}

/// The base name with the server's prefix, when it has one.
fn prefixed(rules: &Rules, server: &ServerId, base: &str) -> String {
    match rules.servers.get(server).and_then(|s| s.prefix.as_deref()) {
        Some(prefix) => format!("{prefix}{}{base}", rules.naming.separator),
        None => base.to_owned(),
    }
}

/// An unqualified override key that matched items on more than one server is an error: it
/// would change them all.
fn report_ambiguous(kind: Kind, used: &Used<'_>, out: &mut Vec<Diagnostic>) {
    for (key, servers) in used {
        if servers.len() > 1 && !key.contains('/') && !crate::rules::is_glob(key) {
            out.push(ambiguous_override(kind, key, servers));
        }
    }
}

/// Unqualified override `key`, which matched items on each of `servers`.
fn ambiguous_override(kind: Kind, key: &str, servers: &BTreeSet<&ServerId>) -> Diagnostic {
    let list: Vec<String> = servers.iter().map(|s| format!("`{s}/{key}`")).collect();
    let mut d = Diagnostic::error(
        "naming::ambiguous_override",
        format!(
            "override `{key}` matches a {} in {} servers",
            kind.noun(),
            servers.len()
        ),
    )
    .at(path(&[Seg::Key(kind.section()), Seg::Key(key)]))
    .help(format!(
        "qualify the key with its server: {}",
        list.join(" or ")
    ));
    // Which server the rule (its name, its fixed values) is for, the config does not say: none
    // of them is served under it.
    d.contested = servers
        .iter()
        .map(|s| crate::Contested {
            section: kind.section(),
            server: s.to_string(),
            origin: key.to_owned(),
            name: key.to_owned(),
        })
        .collect();
    d
}

/// Which servers sent a listing. What is missing from the listings is only an error when
/// every server, or the one it names, is listed: else that server may be down.
struct Listed<'a> {
    servers: BTreeSet<&'a ServerId>,
    all: bool,
}

impl<'a> Listed<'a> {
    fn new(rules: &Rules, listings: &[&'a Listing]) -> Self {
        let servers: BTreeSet<&ServerId> = listings.iter().map(|l| &l.server).collect();
        let all = !listings.is_empty() && rules.servers.keys().all(|s| servers.contains(s));
        Self { servers, all }
    }

    /// Whether the server an override key names is listed; every server, when the key names
    /// none that is configured.
    fn covers(&self, rules: &Rules, key: &str) -> bool {
        match key.split_once('/') {
            Some((server, _)) if rules.servers.keys().any(|s| s.as_str() == server) => {
                self.servers.iter().any(|s| s.as_str() == server)
            }
            _ => self.all,
        }
    }
}

/// Claims on every exposed name and alias (steps 3-4); action tools come after the named items, as
/// items `named.len() + p`. Checks that every derived name fits the profile (names written in
/// the config are `check_rules`' to check).
fn claim_names<'a>(
    rules: &'a Rules,
    kind: Kind,
    named: &'a [Named<'_>],
    plans: &'a [Plan<'_>],
    member_of: &BTreeMap<usize, usize>,
    out: &mut Vec<Diagnostic>,
) -> BTreeMap<&'a str, Vec<Claim>> {
    let section = kind.section();
    let legacy_off = |item: &usize| {
        member_of
            .get(item)
            .is_some_and(|&p| plans[p].rule.legacy == Legacy::Off)
    };
    let mut claims = claim_actions(plans, named.len());
    for (item, n) in named.iter().enumerate() {
        if legacy_off(&item) {
            continue;
        }
        let source = name_source(section, n);
        if source == Source::Derived {
            out.extend(derived_profile_error(rules, kind, n));
        }
        claims.entry(&n.name).or_default().push(Claim {
            item,
            alias: false,
            source,
        });
        if let (Some(rule), Some(key)) = (n.rule, n.key) {
            claim_aliases(&mut claims, section, key, &rule.aliases, item);
        }
    }
    reserve_written(rules, kind, &mut claims);
    if kind == Kind::Tool {
        claim_own_tools(&mut claims);
    }
    claims
}

/// Where item `n`'s name comes from: its override's `name`, or derived.
fn name_source(section: &str, n: &Named<'_>) -> Source {
    match (n.rule.and_then(|r| r.name.as_ref()), n.key) {
        (Some(_), Some(key)) => Source::Config(name_path(section, key)),
        _ => Source::Derived,
    }
}

/// The config path of the name override `<section>.<key>` gives.
fn name_path(section: &str, key: &str) -> String {
    path(&[Seg::Key(section), Seg::Key(key), Seg::Key("name")])
}

/// moniker's own tools' claims on the names that items claim too.
fn claim_own_tools(claims: &mut BTreeMap<&str, Vec<Claim>>) {
    for own in own_tools() {
        if let Some(list) = claims.get_mut(own) {
            list.push(Claim::unlisted(Source::Moniker));
        }
    }
}

/// The names the config writes (overrides' names and aliases, action tools' names and
/// aliases) that a listed item's own name claims while no item of the config's has claimed it
/// (the config's item is not listed now): each is the config's, so the listed item is a
/// duplicate, on the first start as on later ones, whichever server lists first.
fn reserve_written<'a>(rules: &'a Rules, kind: Kind, claims: &mut BTreeMap<&'a str, Vec<Claim>>) {
    let section = kind.section();
    let mut written: Vec<(&'a str, String)> = rules
        .overrides(kind)
        .iter()
        .flat_map(|(key, rule)| override_names(section, key, rule))
        .map(|(name, at, _)| (name, at))
        .collect();
    if kind == Kind::Tool {
        written.extend(
            action_names(rules)
                .into_iter()
                .map(|(name, at, _)| (name, at)),
        );
    }
    for (name, at) in written {
        let Some(list) = claims.get_mut(name) else {
            continue;
        };
        let by_config = list.iter().any(|c| matches!(c.source, Source::Config(_)));
        if !by_config && list.iter().any(|c| c.source == Source::Derived) {
            list.push(Claim::unlisted(Source::Reserved(at)));
        }
    }
}

/// The claims of the aliases written at `<section>.<key>.aliases`, for item `item`.
fn claim_aliases<'a>(
    claims: &mut BTreeMap<&'a str, Vec<Claim>>,
    section: &str,
    key: &str,
    aliases: &'a [crate::AliasRule],
    item: usize,
) {
    for (i, alias) in aliases.iter().enumerate() {
        let at = alias_path(section, key, i);
        claims.entry(alias.name.as_str()).or_default().push(Claim {
            item,
            alias: true,
            source: Source::Config(at),
        });
    }
}

/// The claims of the action tools that have members, as items `first + p`.
fn claim_actions<'a>(plans: &'a [Plan<'_>], first: usize) -> BTreeMap<&'a str, Vec<Claim>> {
    let mut claims: BTreeMap<&str, Vec<Claim>> = BTreeMap::new();
    for (p, plan) in plans
        .iter()
        .enumerate()
        .filter(|(_, plan)| !plan.members.is_empty())
    {
        let item = first + p;
        let at = path(&[Seg::Key("actions"), Seg::Key(plan.name)]);
        claims.entry(plan.name).or_default().push(Claim {
            item,
            alias: false,
            source: Source::Config(at),
        });
        claim_aliases(&mut claims, "actions", plan.name, &plan.rule.aliases, item);
    }
    claims
}

/// A derived name that does not fit the profile, with an override that shortens it.
fn derived_profile_error(rules: &Rules, kind: Kind, n: &Named<'_>) -> Option<Diagnostic> {
    let why = rules.naming.profile.check(&n.name).err()?;
    let short = suggest_short(&n.name, rules.naming.profile.max_len());
    let d = profile_error(kind, "name", &n.name, &why).note(origin_note(kind, n));
    Some(d.with_fix(renames(kind, &[(n, short)])))
}

/// Duplicates (step 5). `check_rules` reports a name written at two places in the config; here,
/// the rest: a side that comes from a listing, or one override that matched two items.
fn report_duplicates(claimed: Claimed<'_>, out: &mut Vec<Diagnostic>) {
    let claims = claimed.claims;
    let taken: BTreeSet<&str> = claims.keys().copied().collect();
    // New names suggested so far: no two fixes may suggest the same one.
    let mut suggested: BTreeSet<String> = BTreeSet::new();
    for (name, list) in claims {
        if list.len() < 2 || written_apart(list) {
            continue;
        }
        out.push(duplicate(claimed, name, list, &taken, &mut suggested));
    }
}

/// Whether each of `claims` is written at its own place in the config: `check_rules` reports
/// those.
fn written_apart(claims: &[Claim]) -> bool {
    let written: BTreeSet<&Source> = claims.iter().map(|c| &c.source).collect();
    written.len() == claims.len()
        && !written.contains(&Source::Derived)
        && !written.contains(&Source::Moniker)
}

/// Overrides that matched nothing: an error when the key is an exposed name or an alias
/// rather than an origin name, else a warning when its server is listed.
fn report_unused_overrides(
    rules: &Rules,
    claimed: Claimed<'_>,
    used: &Used<'_>,
    listed: &Listed<'_>,
    out: &mut Vec<Diagnostic>,
) {
    let Claimed {
        kind,
        claims,
        named,
        ..
    } = claimed;
    let noun = kind.noun();
    for key in rules.overrides(kind).keys() {
        if used.contains_key(key.as_str()) {
            continue;
        }
        let at = path(&[Seg::Key(kind.section()), Seg::Key(key)]);
        let glob_matches = |n: &Named<'_>| {
            let one = [key.as_str()];
            crate::rules::glob_key(one, n.candidate.server.as_str(), &n.candidate.name).is_some()
        };
        if crate::rules::is_glob(key) && named.iter().any(glob_matches) {
            out.push(shadowed_override(key, noun).at(at));
            continue;
        }
        if let Some(c) = claims.get(key.as_str()).filter(|c| c[0].item < named.len()) {
            out.push(keyed_by_exposed_name(kind, key, &c[0], named).at(at));
            continue;
        }
        if listed.covers(rules, key) {
            out.push(unmatched_override(key, noun, named).at(at));
        }
    }
}

/// A glob override that applies to nothing: a more specific key takes each item it matches.
fn shadowed_override(key: &str, noun: &str) -> Diagnostic {
    Diagnostic::warning(
        "naming::shadowed_override",
        format!(
            "override `{key}` applies to no {noun}: a more specific key wins for every {noun} it matches"
        ),
    )
}

/// An override that matches no item of the servers listed, with a did-you-mean among their
/// origin names.
fn unmatched_override(key: &str, noun: &str, named: &[Named<'_>]) -> Diagnostic {
    let d = Diagnostic::warning(
        "naming::unmatched_override",
        format!("override `{key}` matches no {noun} of the connected servers"),
    );
    let origins = named.iter().map(|n| n.candidate.name.as_str());
    match did_you_mean(key.rsplit('/').next().unwrap_or(key), origins) {
        Some(close) => d.help(format!("did you mean `{close}`?")),
        None => d,
    }
}

/// An override keyed by the name an item is exposed under, or by one of its aliases, where
/// an origin name belongs.
fn keyed_by_exposed_name(kind: Kind, key: &str, claim: &Claim, named: &[Named<'_>]) -> Diagnostic {
    let target = &named[claim.item];
    let (code, what) = if claim.alias {
        (
            "naming::alias_chain",
            format!("an alias of `{}`", target.name),
        )
    } else {
        (
            "naming::not_origin_name",
            format!(
                "the exposed name of `{}/{}`",
                target.candidate.server, target.candidate.name
            ),
        )
    };
    Diagnostic::error(
        code,
        format!("override `{key}` names {what}, not an origin {}", kind.noun()),
    )
    .help(format!(
        "overrides are keyed by origin name, and aliases do not chain: move these settings to `{}/{}`",
        target.candidate.server, target.candidate.name
    ))
}

/// Where an entry says its server `name`: nowhere when the listing says it for all
/// (`shared_server`), else in its own `_meta`.
fn server_said(shared_server: bool, name: &str) -> Server<'_> {
    match shared_server {
        true => Server::ByTheListing,
        false => Server::Named(name),
    }
}

/// The exposed items, then the action tools over them, sorted by name (step 6).
fn assemble(
    rules: &Rules,
    named: &[Named<'_>],
    plans: &[Plan<'_>],
    shared_server: bool,
) -> Vec<Exposed> {
    let mut exposed: Vec<Option<Exposed>> = named
        .iter()
        .map(|n| Some(expose(rules, n, None, shared_server)))
        .collect();
    let mut built = Vec::new();
    for plan in plans.iter().filter(|p| !p.members.is_empty()) {
        built.push(expose_action(plan, &exposed, shared_server));
        for &(action, item) in &plan.members {
            let member_of = Some((plan.name.to_owned(), action.to_owned()));
            let schedule = plan.rule.legacy_deprecated.as_ref();
            match plan.rule.legacy {
                Legacy::Off => exposed[item] = None,
                Legacy::Hidden => {
                    if let Some(e) = exposed[item].as_mut() {
                        e.listed = false;
                        e.member_of = member_of;
                        legacy_schedule(e, schedule);
                    }
                }
                Legacy::Listed => {
                    let note = legacy_note(plan.name, action, schedule);
                    let mut e = expose(rules, &named[item], Some(&note), shared_server);
                    e.member_of = member_of;
                    legacy_schedule(&mut e, schedule);
                    exposed[item] = Some(e);
                }
            }
        }
    }
    let mut exposed: Vec<Exposed> = exposed.into_iter().flatten().chain(built).collect();
    exposed.sort_by(|a, b| {
        a.name
            .cmp(&b.name)
            .then_with(|| a.origin().cmp(&b.origin()))
    });
    exposed
}

/// The note that deprecates a listed member's own name, for action tool `name`'s `action`.
fn legacy_note(name: &str, action: &str, schedule: Option<&crate::Deprecation>) -> String {
    match schedule {
        Some(d) => format!(
            "[Deprecated — use \"{name}\" with action \"{action}\"; this name stops working after {}]",
            d.remove_after
        ),
        None => format!("[Deprecated — use \"{name}\" with action \"{action}\"]"),
    }
}

/// An action tool: the merged schema and description, the members' tags, and the members'
/// server name when they share one.
fn expose_action(plan: &Plan<'_>, exposed: &[Option<Exposed>], shared_server: bool) -> Exposed {
    let members: Vec<ActionMember> = plan
        .members
        .iter()
        .filter_map(|&(action, item)| {
            let e = exposed[item].as_ref()?;
            Some(ActionMember {
                action: action.to_owned(),
                name: e.name.clone(),
                origin: e.origin()?.clone(),
                tags: e.tags.clone(),
                server_name: e.server_name.clone(),
                definition: e.definition.clone(),
                params: e.params.clone(),
                withheld: None,
            })
        })
        .collect();
    let aliases = AliasNames::of(&plan.rule.aliases);
    let parts = ActionParts {
        name: plan.name.to_owned(),
        description: plan.rule.description.clone(),
        tags: plan.rule.tags.clone(),
        aliases: aliases.listed,
        hidden_aliases: aliases.hidden,
        deprecated: aliases.schedules,
    };
    action_exposed(parts, members, shared_server)
}

/// The names an item's aliases give it, listed and hidden, and the schedules of those on their
/// way out.
#[derive(Default)]
struct AliasNames {
    listed: Vec<String>,
    hidden: Vec<String>,
    schedules: BTreeMap<String, crate::Deprecation>,
}

impl AliasNames {
    /// The names `aliases` give an item.
    fn of(aliases: &[crate::AliasRule]) -> Self {
        let mut names = Self::default();
        for alias in aliases {
            let name = alias.name.as_str().to_owned();
            if let Some(d) = &alias.deprecated {
                names.schedules.insert(name.clone(), d.clone());
            }
            match alias.hidden {
                true => names.hidden.push(name),
                false => names.listed.push(name),
            }
        }
        names
    }
}

/// What an action tool has of its own rule: with its members, all it is made of.
struct ActionParts {
    name: String,
    description: Option<String>,
    tags: Vec<Tag>,
    aliases: Vec<String>,
    hidden_aliases: Vec<String>,
    deprecated: BTreeMap<String, crate::Deprecation>,
}

/// The action tool `parts` makes of `members`.
fn action_exposed(parts: ActionParts, members: Vec<ActionMember>, shared_server: bool) -> Exposed {
    let inputs: Vec<Member<'_>> = members
        .iter()
        .map(|m| Member {
            action: &m.action,
            name: &m.name,
            definition: &m.definition,
        })
        .collect();
    let merged = actions::merge(&parts.name, parts.description.as_deref(), &inputs);
    let mut tags: BTreeSet<Tag> = parts.tags.iter().cloned().collect();
    tags.extend(members.iter().flat_map(|m| m.tags.iter().cloned()));
    let server_name = members_server(&members);
    let description = action_description(&parts, &merged.description);
    let fields = action_fields(&parts.name, &description, &merged);
    let tags: Vec<Tag> = tags.into_iter().collect();
    let server = server_said(shared_server, &server_name);
    let definition = render(&fields, &parts.name, None, &parts.aliases, &tags, server);
    Exposed {
        name: parts.name.clone(),
        aliases: parts.aliases.clone(),
        hidden_aliases: parts.hidden_aliases.clone(),
        tags,
        server_name,
        route: Route::Action(ActionRoute {
            members,
            specs: merged.specs,
            description: parts.description,
            rule_tags: parts.tags,
        }),
        listed: true,
        member_of: None,
        deprecated: parts.deprecated,
        definition,
        params: None,
        withheld: None,
    }
}

/// The server name an action tool's members share, else `moniker`.
fn members_server(members: &[ActionMember]) -> String {
    let names: BTreeSet<&str> = members.iter().map(|m| m.server_name.as_str()).collect();
    match names.len() {
        1 => names.into_iter().next().unwrap_or("moniker").to_owned(),
        _ => "moniker".to_owned(),
    }
}

/// An action tool's description: the notices of its names on their way out, its members'
/// merged description, and the line of its aliases.
fn action_description(parts: &ActionParts, merged: &str) -> String {
    let description = match notices(&parts.deprecated, &parts.name) {
        Some(notice) => format!("{notice} {merged}"),
        None => merged.to_owned(),
    };
    with_aliases_line(description, &parts.aliases)
}

/// The fields of an action tool's definition: its name, its description, and its members'
/// merged schema and hints.
fn action_fields(
    name: &str,
    description: &str,
    merged: &actions::Merged,
) -> IndexMap<String, Box<RawValue>> {
    let mut fields: IndexMap<String, Box<RawValue>> = IndexMap::new();
    fields.insert("name".into(), raw_string(name));
    fields.insert("description".into(), raw_string(description));
    let schema = serde_json::to_string(&merged.input_schema).unwrap_or_else(|_| "{}".to_owned());
    fields.insert(
        "inputSchema".into(),
        RawValue::from_string(schema).unwrap_or_default(),
    );
    if let Some(annotations) = &merged.annotations {
        fields.insert(
            "annotations".into(),
            serde_json::value::to_raw_value(annotations).unwrap_or_default(),
        );
    }
    fields
}

/// Action tool `item` as a toolset that selects only the members of `actions` offers it: its
/// schema, its `action` enum, its description, tags and hints made of those members alone.
/// `None` when `item` is not an action tool or none of its members is in `actions`.
pub(crate) fn narrowed(
    item: &Exposed,
    actions: &BTreeSet<String>,
    shared_server: bool,
) -> Option<Exposed> {
    let Route::Action(route) = &item.route else {
        return None;
    };
    let members: Vec<ActionMember> = route
        .members
        .iter()
        .filter(|m| actions.contains(&m.action))
        .cloned()
        .collect();
    if members.is_empty() {
        return None;
    }
    let parts = ActionParts {
        name: item.name.clone(),
        description: route.description.clone(),
        tags: route.rule_tags.clone(),
        aliases: item.aliases.clone(),
        hidden_aliases: item.hidden_aliases.clone(),
        deprecated: item.deprecated.clone(),
    };
    Some(action_exposed(parts, members, shared_server))
}

fn raw_string(s: &str) -> Box<RawValue> {
    // A serialized string is valid JSON.
    RawValue::from_string(serde_json::to_string(s).unwrap_or_default()).unwrap_or_default()
}

/// The name field and the fields of an origin item, or why it cannot be named.
fn parse_item(raw: &RawValue) -> Result<(String, IndexMap<String, Box<RawValue>>), &'static str> {
    let fields: IndexMap<String, Box<RawValue>> =
        serde_json::from_str(raw.get()).map_err(|_| "that is not a JSON object")?;
    let name = fields
        .get("name")
        .and_then(|n| serde_json::from_str::<String>(n.get()).ok())
        .ok_or("without a string `name`")?;
    Ok((name, fields))
}

/// Strips the first matching prefix and parses `server__name`: (server name, base name).
fn auto_name(rules: &Rules, server: &ServerId, origin: &str) -> (String, String) {
    let naming = &rules.naming;
    let rest = strip_prefix(&naming.strip_prefixes, origin);
    match split_server(rest, &naming.split) {
        Some((left, right)) => (left.replace('_', "-"), right.to_owned()),
        None => (server.as_str().to_owned(), rest.to_owned()),
    }
}

/// `origin` without the first of `prefixes` it starts with.
fn strip_prefix<'o>(prefixes: &[String], origin: &'o str) -> &'o str {
    prefixes
        .iter()
        .find_map(|p| origin.strip_prefix(p.as_str()))
        .unwrap_or(origin)
}

/// `server__name` split at `split` (server name, base name), when both sides are there.
fn split_server<'a>(name: &'a str, split: &str) -> Option<(&'a str, &'a str)> {
    if split.is_empty() {
        return None;
    }
    name.split_once(split)
        .filter(|(left, right)| !left.is_empty() && !right.is_empty())
}

fn origin_note(kind: Kind, n: &Named<'_>) -> String {
    format!(
        "{} `{}` from server `{}` (origin `{}`)",
        kind.noun(),
        n.name,
        n.candidate.server,
        n.candidate.name
    )
}

/// A name more than one item claims (`claims`): a note on each claim, and what to change, the
/// aliases or the names (`taken`: every name claimed; `suggested`: the new names suggested so
/// far, this one's added).
fn duplicate(
    claimed: Claimed<'_>,
    name: &str,
    claims: &[Claim],
    taken: &BTreeSet<&str>,
    suggested: &mut BTreeSet<String>,
) -> Diagnostic {
    let Claimed {
        kind, named, plans, ..
    } = claimed;
    let mut d = Diagnostic::error("naming::duplicate", duplicate_message(kind, name, claims));
    let mut fixes = Vec::new();
    let mut removals = Vec::new();
    for claim in claims {
        if matches!(claim.source, Source::Moniker | Source::Reserved(_)) {
            d = taken_by_rule(d, name, &claim.source);
            continue;
        }
        if let Some(plan) = claim
            .item
            .checked_sub(named.len())
            .and_then(|p| plans.get(p))
        {
            if let Source::Config(at) = &claim.source {
                d = placed(d.note(action_claim_note(name, plan, claim.alias, at)), at);
                removals.push(format!("rename the action tool or its alias at `{at}`"));
            }
            continue;
        }
        let n = &named[claim.item];
        if claim.alias {
            if let Source::Config(at) = &claim.source {
                d = placed(d.note(alias_claim_note(kind, name, n, at)), at);
                removals.push(format!("remove or rename the alias at `{at}`"));
            }
        } else {
            d = d.note(format!(
                "`{name}` from server `{}` (origin `{}`)",
                n.candidate.server, n.candidate.name
            ));
            if claim.source == Source::Derived {
                d.contested.push(contested(kind, n, name));
            }
            if let Source::Config(at) = &claim.source {
                d = placed(d, at);
            }
            let fix = fix_name(name, n, taken, suggested);
            suggested.insert(fix.clone());
            fixes.push((n, fix));
        }
    }
    let has_alias = !removals.is_empty();
    match (fixes.len(), has_alias) {
        // Only aliases collide with one name: the aliases are what to change.
        (0 | 1, true) => d.help(removals.join("; ")),
        _ => d.with_fix(renames(kind, &fixes)),
    }
}

/// `d` placed at `at`, unless it has a place already.
fn placed(d: Diagnostic, at: &str) -> Diagnostic {
    match d.config_path {
        None => d.at(at),
        Some(_) => d,
    }
}

/// The note of action tool `plan`'s claim on `name` (its own name, or an `alias`), at `at`.
fn action_claim_note(name: &str, plan: &Plan<'_>, alias: bool, at: &str) -> String {
    let what = if alias {
        format!("an alias of the action tool `{}`", plan.name)
    } else {
        "the action tool".to_owned()
    };
    format!("`{name}` as {what}, at `{at}`")
}

/// The note of an alias of item `n` that claims `name`, at `at`.
fn alias_claim_note(kind: Kind, name: &str, n: &Named<'_>, at: &str) -> String {
    format!(
        "`{name}` as an alias of {} `{}` from server `{}`, at `{at}`",
        kind.noun(),
        n.name,
        n.candidate.server
    )
}

/// Item `n`'s derived name, contested as `name`: the fix renames it there.
fn contested(kind: Kind, n: &Named<'_>, name: &str) -> crate::Contested {
    crate::Contested {
        section: kind.section(),
        server: n.candidate.server.as_str().to_owned(),
        origin: n.candidate.name.clone(),
        name: name.to_owned(),
    }
}

/// What a duplicate's diagnostic says first.
fn duplicate_message(kind: Kind, name: &str, claims: &[Claim]) -> String {
    if claims.iter().any(|c| c.source == Source::Moniker) {
        format!(
            "{} name `{name}` is moniker's own tool's: a tool of a server cannot have it",
            kind.noun()
        )
    } else {
        format!(
            "{} name `{name}` is exposed {}",
            kind.noun(),
            times(claims.len())
        )
    }
}

/// `d` with the note of a claim that no listed item makes: a name the config writes for an
/// item not listed now, else moniker's own tool.
fn taken_by_rule(d: Diagnostic, name: &str, source: &Source) -> Diagnostic {
    match source {
        Source::Reserved(at) => {
            let d = d.note(format!(
                "`{name}` is the config's, at `{at}`, for an item not listed now: its name is taken"
            ));
            placed(d, at)
        }
        _ => d.note(format!(
            "`{name}` is moniker's own tool (toolset management's or search mode's): its name is taken"
        )),
    }
}

/// A new name for `n`, out of the duplicate `name`: its server name before its base name —
/// without the words that name no server in particular (`mcp`, `server`: `hacker-news-mcp-
/// server`'s `search` is `hacker_news_search`) when that is free, else whole, else its server
/// id —, numbered until it is free.
fn fix_name(
    name: &str,
    n: &Named<'_>,
    taken: &BTreeSet<&str>,
    suggested: &BTreeSet<String>,
) -> String {
    let free = |fix: &str| fix != name && !taken.contains(fix) && !suggested.contains(fix);
    let words = |server: &str| server.replace(['-', '.'], "_");
    let short = particular_words(&n.server_name);
    let candidates = [
        (!short.is_empty()).then(|| format!("{}_{}", short.join("_"), n.base)),
        Some(format!("{}_{}", words(&n.server_name), n.base)),
        Some(format!("{}_{}", words(n.candidate.server.as_str()), n.base)),
    ];
    let mut candidates = candidates.into_iter().flatten();
    let first = candidates.next().unwrap_or_else(|| name.to_owned());
    if free(&first) {
        return first;
    }
    let candidate = candidates.find(|c| free(c)).unwrap_or(first);
    numbered(candidate, free)
}

/// The words of a server's name that name it in particular: not `mcp`, not `server`.
fn particular_words(server_name: &str) -> Vec<&str> {
    server_name
        .split(['-', '.', '_'])
        .filter(|w| !w.is_empty() && !matches!(*w, "mcp" | "server"))
        .collect()
}

/// `candidate`, numbered (`_2`, `_3`, ...) until it is `free`.
fn numbered(candidate: String, free: impl Fn(&str) -> bool) -> String {
    let mut fix = candidate.clone();
    let mut i = 2;
    while !free(&fix) {
        fix = format!("{candidate}_{i}");
        i += 1;
    }
    fix
}

fn times(n: usize) -> String {
    match n {
        2 => "twice".to_owned(),
        n => format!("{n} times"),
    }
}

/// The overrides that give each item its new name.
fn renames(kind: Kind, list: &[(&Named<'_>, String)]) -> Vec<Rename> {
    list.iter()
        .map(|(n, name)| Rename {
            section: kind.section(),
            server: n.candidate.server.as_str().to_owned(),
            origin: n.candidate.name.clone(),
            name: name.clone(),
        })
        .collect()
}

/// A name that fits: characters outside the portable set become `_`, and it is cut to length.
fn suggest_short(name: &str, max: usize) -> String {
    let mut cut: String = name.chars().map(portable).take(max.max(1)).collect();
    if cut.is_empty() {
        cut.push('x');
    }
    cut
}

/// `c` when a name may hold it anywhere, else `_`.
fn portable(c: char) -> char {
    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
        c
    } else {
        '_'
    }
}

fn expose(rules: &Rules, n: &Named<'_>, deprecated: Option<&str>, shared_server: bool) -> Exposed {
    let tags = tags_of(rules, n);
    let AliasNames {
        listed: aliases,
        hidden: hidden_aliases,
        schedules,
    } = n
        .rule
        .map(|r| AliasNames::of(&r.aliases))
        .unwrap_or_default();
    let deprecated = deprecation_note(deprecated, notices(&schedules, &n.name));
    let description = describe(n, &aliases, deprecated.as_deref());
    let shaped = &n.shaped;
    let definition = definition::rewrite(
        &n.candidate.fields,
        &Rewrite {
            name: Some(&n.name),
            description: description.as_deref(),
            input_schema: shaped.schema.as_deref(),
            aliases: Some(&aliases),
            tags: Some(&tags),
            server: server_said(shared_server, &n.server_name),
        },
    );
    Exposed {
        name: n.name.clone(),
        aliases,
        hidden_aliases,
        tags,
        server_name: n.server_name.clone(),
        route: Route::Origin(Origin {
            server: n.candidate.server.clone(),
            name: n.candidate.name.clone(),
        }),
        listed: true,
        member_of: None,
        deprecated: schedules,
        definition,
        params: (!shaped.params.is_empty()).then(|| std::sync::Arc::new(shaped.params.clone())),
        withheld: None,
    }
}

/// The tags of item `n`: its server's, its server name's and its override's, once each.
fn tags_of(rules: &Rules, n: &Named<'_>) -> Vec<Tag> {
    let server = rules.servers.get(n.candidate.server).map(|s| &s.tags);
    let server_name = rules.server_tags.get(&n.server_name);
    let rule = n.rule.map(|r| &r.tags);
    let all = [server, server_name, rule].into_iter().flatten().flatten();
    let tags: BTreeSet<&Tag> = all.collect();
    tags.into_iter().cloned().collect()
}

/// An item's deprecation note: its action tool's (`deprecated`), then its aliases' `notices`.
fn deprecation_note(deprecated: Option<&str>, notices: Option<String>) -> Option<String> {
    match (deprecated, notices) {
        (Some(note), Some(more)) => Some(format!("{note} {more}")),
        (note, more) => note.map(str::to_owned).or(more),
    }
}

/// Every name of an action tool's member (its legacy names) gets the legacy schedule.
fn legacy_schedule(e: &mut Exposed, schedule: Option<&crate::Deprecation>) {
    let Some(d) = schedule else {
        return;
    };
    let names: Vec<String> = std::iter::once(e.name.clone())
        .chain(e.aliases.iter().cloned())
        .chain(e.hidden_aliases.iter().cloned())
        .collect();
    for name in names {
        e.deprecated.entry(name).or_insert_with(|| d.clone());
    }
}

/// The deprecation notices of the listed names that have a schedule, as one text.
fn notices(schedules: &BTreeMap<String, crate::Deprecation>, instead: &str) -> Option<String> {
    let all: Vec<String> = schedules
        .iter()
        .map(|(name, d)| d.notice(name, instead))
        .collect();
    (!all.is_empty()).then(|| all.join(" "))
}

/// The new description, or `None` to keep the origin's as it is.
fn describe(n: &Named<'_>, aliases: &[String], deprecated: Option<&str>) -> Option<String> {
    let replaced = n.rule.and_then(|r| r.description.clone());
    if aliases.is_empty() && deprecated.is_none() {
        return replaced;
    }
    let base = match replaced {
        Some(text) => text,
        None => origin_description(n)?,
    };
    let base = match deprecated {
        Some(note) if base.is_empty() => note.to_owned(),
        Some(note) => format!("{note} {base}"),
        None => base,
    };
    Some(with_aliases_line(base, aliases))
}

/// The origin's description (empty when it has none); `None` when it is not a string: that is
/// the server's business, and it is left as it is.
fn origin_description(n: &Named<'_>) -> Option<String> {
    match n.candidate.fields.get("description") {
        Some(raw) => serde_json::from_str::<String>(raw.get()).ok(),
        None => Some(String::new()),
    }
}

/// The origin definition, field order kept, with `name` and `description` rewritten and the
/// fields moniker owns put last.
fn render(
    fields: &IndexMap<String, Box<RawValue>>,
    name: &str,
    description: Option<&str>,
    aliases: &[String],
    tags: &[Tag],
    server: Server<'_>,
) -> Box<RawValue> {
    definition::rewrite(
        fields,
        &Rewrite {
            name: Some(name),
            description,
            input_schema: None,
            aliases: Some(aliases),
            tags: Some(tags),
            server,
        },
    )
}

#[cfg(test)]
mod tests;
