//! Toolsets: named subsets of the exposed tools and prompts, chosen by name and by tag
//! expression, with aliases of their own. See DESIGN "Toolsets".
//!
//! A toolset is resolved against a surface into a [`Selection`]: the canonical names it
//! exposes and the aliases it adds. [`select`] is lenient (a reference that names nothing now
//! is `stale`, since a server may be down); [`validate`] is strict (what `build-toolset` and
//! `check` refuse). [`resolve`] and [`listing`] are what a session with an equipped toolset
//! serves: a toolset is also a permission boundary.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::value::RawValue;

use crate::diagnostic::{Diagnostic, did_you_mean, short};
use crate::names::{ServerId, Tag};
pub use crate::rules::{ToolsetRule, Toolsets};
use crate::surface::{ActionMember, ActionRoute, Exposed, Resolved, Route, Surface, Via};
use crate::vocab::{Kind, Seg, path};

pub use crate::definition::with_extra_aliases;
/// moniker's own toolset management tools (DESIGN "Toolsets"). A toolset alias may not take
/// one of these names: the management tools are listed beside an equipped toolset.
pub use crate::management::NAMES as MANAGEMENT_TOOLS;
pub use crate::tag_expr::{TAG_EXPR_MAX_DEPTH, TAG_EXPR_MAX_TAGS, TagExpr, TagExprError};

/// What a toolset's name must look like (a key of the config's `toolsets`).
pub const NAME_RULE: &str = "must match `^[a-z0-9][a-z0-9_-]{0,63}$` (lowercase letters, digits, `_` and `-`, at most 64 characters)";

/// What a toolset alias must look like.
pub const ALIAS_RULE: &str = "must match `^[a-z0-9][a-z0-9_-]{1,63}$`";

/// Keys of the config's `toolsets` section that are settings, not toolsets.
pub const RESERVED: [&str; 2] = ["manage", "store"];

/// The stable codes of toolset diagnostics.
pub mod codes {
    /// A toolset (asked for, or named in an `include`) that does not exist.
    pub const UNKNOWN: &str = "toolsets::unknown";
    /// A toolset that includes itself, directly or through others.
    pub const INCLUDE_CYCLE: &str = "toolsets::include_cycle";
    /// A tool reference (in `tools` or an alias key) that names no exposed tool.
    pub const UNKNOWN_TOOL: &str = "toolsets::unknown_tool";
    /// A prompt reference that names no exposed prompt.
    pub const UNKNOWN_PROMPT: &str = "toolsets::unknown_prompt";
    /// An alias that breaks [`super::ALIAS_RULE`].
    pub const ALIAS: &str = "toolsets::alias";
    /// One alias given to two different tools in one toolset (its includes counted).
    pub const DUPLICATE_ALIAS: &str = "toolsets::duplicate_alias";
    /// An alias that is the name or an alias of another tool.
    pub const ALIAS_SHADOWS: &str = "toolsets::alias_shadows";
    /// A toolset name that breaks [`super::NAME_RULE`] or is reserved.
    pub const INVALID_NAME: &str = "toolsets::invalid_name";
}

/// The resource bound of toolset `name`: the `resources` of it and of every toolset it
/// includes, recursively (a toolset that cannot be resolved reaches none: failing closed).
pub fn resource_bound(name: &str, sets: &BTreeMap<String, ToolsetRule>) -> ToolsetRule {
    let Some(rule) = sets.get(name) else {
        return ToolsetRule::default();
    };
    let (members, errors) = closure(name, rule, sets);
    if !errors.is_empty() {
        return ToolsetRule::default();
    }
    ToolsetRule {
        resources: resources_of(&members),
        ..ToolsetRule::default()
    }
}

/// The `resources` of every toolset of `members`, each once, in their order.
fn resources_of(members: &[(&str, &ToolsetRule)]) -> Vec<String> {
    let mut resources: Vec<String> = Vec::new();
    for r in members.iter().flat_map(|(_, member)| &member.resources) {
        if !resources.contains(r) {
            resources.push(r.clone());
        }
    }
    resources
}

impl ToolsetRule {
    /// Whether the resource `uri` of server `server` is reachable through the toolset.
    pub fn reaches(&self, server: &str, uri: &str) -> bool {
        self.resources.iter().any(|r| {
            if r.contains(':') {
                crate::uri::within(r, uri)
            } else {
                r == server
            }
        })
    }
}

/// `^[a-z0-9][a-z0-9_-]{0,63}$`
pub fn valid_name(name: &str) -> bool {
    slug(name, 1)
}

/// `^[a-z0-9][a-z0-9_-]{1,63}$`
pub fn valid_alias(alias: &str) -> bool {
    slug(alias, 2)
}

fn slug(text: &str, min: usize) -> bool {
    let b = text.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'_' | b'-');
    (min..=64).contains(&b.len())
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(inner)
}

/// The alias a user probably meant: lowercase, other characters as `_`, cut to 64. `None`
/// when nothing valid comes out of it or it is what was written.
pub fn alias_fix(alias: &str) -> Option<String> {
    let fixed: String = alias.trim().chars().map(alias_char).collect();
    let fixed = fixed.trim_start_matches(['_', '-']);
    let fixed: String = fixed.chars().take(64).collect();
    (fixed != alias && valid_alias(&fixed)).then_some(fixed)
}

/// `c` as an alias may hold it: lowercase, and `_` for a character it may not hold.
fn alias_char(c: char) -> char {
    match c {
        'a'..='z' | '0'..='9' | '_' | '-' => c,
        'A'..='Z' => c.to_ascii_lowercase(),
        _ => '_',
    }
}

/// What a toolset exposes, resolved against a surface.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    /// Canonical exposed names of tools.
    pub tools: BTreeSet<String>,
    /// Canonical exposed names of prompts.
    pub prompts: BTreeSet<String>,
    /// Toolset alias to the canonical name of its tool. Every target is in `tools`.
    pub aliases: BTreeMap<String, String>,
    /// What is left out: references that name nothing now (a server is down, a tool went
    /// away), each as written; and aliases that cannot be used, each as the sentence that
    /// says why (`alias `x` for tool `y` in toolset `z` shadows ...`).
    pub stale: Vec<String>,
    /// Action tools of which the toolset selects some members only (by tag): each as the
    /// toolset offers it, made of those members alone. Its other actions are not there.
    pub narrowed: BTreeMap<String, Narrowed>,
    /// Tools the toolset's own parameter rules reshape, by canonical name.
    pub reshaped: BTreeMap<String, Reshaped>,
}

/// A tool as a toolset's parameter rules reshape it.
#[derive(Debug, Clone)]
pub struct Reshaped {
    /// Its listing entry, its input schema transformed by the toolset's rules.
    pub definition: Box<RawValue>,
    /// The toolset's rules: a call's arguments go through them, then through the tool's own.
    pub params: std::sync::Arc<crate::params::Params>,
}

impl PartialEq for Reshaped {
    fn eq(&self, other: &Self) -> bool {
        self.definition.get() == other.definition.get() && self.params == other.params
    }
}

/// An action tool as a toolset that selects some of its members offers it.
#[derive(Debug, Clone)]
pub struct Narrowed {
    /// Its listing entry: schema, `action` enum, description and hints of those members.
    pub definition: Box<RawValue>,
    /// Where its calls go: those members only (a [`Route::Action`]).
    pub route: Route,
}

impl PartialEq for Narrowed {
    fn eq(&self, other: &Self) -> bool {
        self.definition.get() == other.definition.get() && self.route == other.route
    }
}

impl Selection {
    /// Where a call to selected tool `item` may go: the selected members of a narrowed action
    /// tool, else all of `item`'s routes.
    pub fn route_of<'a>(&'a self, item: &'a Exposed) -> &'a Route {
        match self.narrowed.get(&item.name) {
            Some(n) if matches!(item.route, Route::Action(_)) => &n.route,
            _ => &item.route,
        }
    }

    /// The toolset's own aliases of tool `name`.
    fn aliases_of(&self, name: &str) -> Vec<String> {
        self.aliases
            .iter()
            .filter(|(_, canonical)| *canonical == name)
            .map(|(alias, _)| alias.clone())
            .collect()
    }

    /// The servers the selected routes go to: what a session with this toolset reaches
    /// through its tools and prompts.
    pub fn servers<'a>(&'a self, surface: &'a Surface) -> BTreeSet<&'a ServerId> {
        let tools = self
            .tools
            .iter()
            .filter_map(|name| surface.resolve(Kind::Tool, name))
            .flat_map(|r| route_servers(self.route_of(r.exposed)));
        let prompts = self
            .prompts
            .iter()
            .filter_map(|name| surface.resolve(Kind::Prompt, name))
            .flat_map(|r| route_servers(&r.exposed.route));
        tools.chain(prompts).collect()
    }
}

fn route_servers(route: &Route) -> Vec<&ServerId> {
    match route {
        Route::Origin(origin) => vec![&origin.server],
        Route::Action(route) => route.members.iter().map(|m| &m.origin.server).collect(),
    }
}

/// Resolves toolset `name` (with its includes) against the surface. Unknown toolsets, unknown
/// includes and include cycles are errors; references that name nothing now and unusable
/// aliases are left out and listed in `stale`.
pub fn select(
    surface: &Surface,
    name: &str,
    sets: &BTreeMap<String, ToolsetRule>,
) -> Result<Selection, Vec<Diagnostic>> {
    let Some(rule) = sets.get(name) else {
        return Err(vec![unknown_toolset(name, sets, None)]);
    };
    let (members, errors) = closure(name, rule, sets);
    if !errors.is_empty() {
        return Err(errors);
    }
    let gathered = gather(surface, &members);
    let mut selection = gathered.selection;
    let mut seen = BTreeSet::new();
    for entry in gathered.problems.into_iter().filter_map(stale_entry) {
        if seen.insert(entry.clone()) {
            selection.stale.push(entry);
        }
    }
    Ok(selection)
}

/// What [`select`] says is left out for `problem`: the reference as written, an alias's
/// sentence, a parameter rule's error; `None` for a parameter rule's warning.
fn stale_entry(problem: Problem<'_>) -> Option<String> {
    match problem.kind {
        ProblemKind::Unknown(reference) => Some(reference.to_owned()),
        ProblemKind::Alias => Some(problem.diagnostic.message),
        ProblemKind::Param if problem.diagnostic.is_error() => Some(problem.diagnostic.message),
        ProblemKind::Param => None,
    }
}

/// What `build-toolset` (and `check`) refuse in toolset `name` written as `rule`, whether or
/// not `sets` has it yet: a bad name, unknown or cyclic includes, references of `rule` that
/// name nothing, and aliases of `rule` that break [`ALIAS_RULE`], are given to two tools or
/// shadow another tool. Problems of included toolsets' own references are not reported
/// (a server may be down); their aliases that clash with `rule`'s are.
pub fn validate(
    surface: &Surface,
    name: &str,
    rule: &ToolsetRule,
    sets: &BTreeMap<String, ToolsetRule>,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if !valid_name(name) {
        out.push(invalid_name(name));
    } else if RESERVED.contains(&name) {
        out.push(reserved_name(name));
    }
    let (members, errors) = closure(name, rule, sets);
    out.extend(errors);
    let gathered = gather(surface, &members);
    out.extend(
        gathered
            .problems
            .into_iter()
            .filter(|p| p.owners.contains(&name))
            .map(|p| p.diagnostic),
    );
    out
}

/// A toolset name that breaks [`NAME_RULE`].
fn invalid_name(name: &str) -> Diagnostic {
    Diagnostic::error(
        codes::INVALID_NAME,
        format!("toolset name `{}` {NAME_RULE}", short(name)),
    )
    .at(path(&[Seg::Key("toolsets"), Seg::Key(name)]))
}

/// A toolset name that is one of the section's settings ([`RESERVED`]).
fn reserved_name(name: &str) -> Diagnostic {
    Diagnostic::error(
        codes::INVALID_NAME,
        format!("toolset name `{name}` is reserved: `toolsets.{name}` is a setting"),
    )
    .at(path(&[Seg::Key("toolsets"), Seg::Key(name)]))
    .help("choose another name")
}

/// An exposed name or alias, within the selection: the toolset's own aliases first (as
/// [`Via::Alias`]), then the surface's names, aliases and legacy names of selected items.
/// `None` for anything outside the toolset, whatever the surface knows it as.
pub fn resolve<'a>(
    surface: &'a Surface,
    selection: &Selection,
    kind: Kind,
    name: &str,
) -> Option<Resolved<'a>> {
    if kind == Kind::Tool {
        if let Some(canonical) = selection.aliases.get(name) {
            let resolved = surface.resolve(kind, canonical)?;
            return (resolved.exposed.name == *canonical).then_some(Resolved {
                exposed: resolved.exposed,
                via: Via::Alias,
            });
        }
    }
    let resolved = surface.resolve(kind, name)?;
    selected(selection, kind)
        .contains(&resolved.exposed.name)
        .then_some(resolved)
}

/// The `tools/list` (`{"tools":[...]}`) or `prompts/list` (`{"prompts":[...]}`) result of a
/// session with this toolset: its [`definitions`].
pub fn listing(surface: &Surface, selection: &Selection, kind: Kind) -> String {
    crate::listing::render(
        kind,
        definitions(surface, selection, kind),
        &[],
        surface.server(kind),
    )
}

/// The listing entries of a session with this toolset: its listed items in surface order,
/// each tool with the toolset's aliases added to its `aliases` and to the `Aliases:` line of
/// its description.
pub fn definitions<'a>(
    surface: &'a Surface,
    selection: &'a Selection,
    kind: Kind,
) -> impl Iterator<Item = Cow<'a, RawValue>> + 'a {
    entries(surface, selection, kind).map(|(_, entry)| entry)
}

/// The listed items of a session with this toolset, each with its listing entry (see
/// [`definitions`]).
pub fn entries<'a>(
    surface: &'a Surface,
    selection: &'a Selection,
    kind: Kind,
) -> impl Iterator<Item = (&'a Exposed, Cow<'a, RawValue>)> + 'a {
    let selected = selected(selection, kind);
    surface
        .listed(kind)
        .filter(|e| selected.contains(&e.name))
        .map(move |item| (item, entry(selection, kind, item)))
}

/// The listing entry of `item` in a session with this toolset: its definition, with the
/// toolset's aliases of it added.
pub fn entry<'a>(selection: &'a Selection, kind: Kind, item: &'a Exposed) -> Cow<'a, RawValue> {
    let aliases: Vec<String> = match kind {
        Kind::Tool => selection.aliases_of(&item.name),
        Kind::Prompt => Vec::new(),
    };
    let definition = match (
        kind,
        selection.narrowed.get(&item.name),
        selection.reshaped.get(&item.name),
    ) {
        (Kind::Tool, Some(narrowed), _) => &*narrowed.definition,
        (Kind::Tool, None, Some(reshaped)) => &*reshaped.definition,
        _ => &*item.definition,
    };
    if aliases.is_empty() {
        Cow::Borrowed(definition)
    } else {
        Cow::Owned(with_extra_aliases(definition, &aliases))
    }
}

fn toolset_path<'a>(name: &'a str, field: &'a str) -> Vec<Seg<'a>> {
    vec![Seg::Key("toolsets"), Seg::Key(name), Seg::Key(field)]
}

fn unknown_toolset(
    name: &str,
    sets: &BTreeMap<String, ToolsetRule>,
    extra: Option<&str>,
) -> Diagnostic {
    let mut d = Diagnostic::error(
        codes::UNKNOWN,
        format!("there is no toolset `{}`", short(name)),
    );
    let names = sets.keys().map(String::as_str).chain(extra);
    match did_you_mean(name, names) {
        Some(close) => d = d.help(format!("did you mean `{close}`?")),
        None if sets.is_empty() && extra.is_none() => d = d.help("no toolsets are defined"),
        None => d = d.help(format!("toolsets: {}", every_toolset(sets, extra))),
    }
    d
}

/// The names of every toolset of `sets` and `extra`, sorted, each quoted.
fn every_toolset(sets: &BTreeMap<String, ToolsetRule>, extra: Option<&str>) -> String {
    let all: BTreeSet<&str> = sets.keys().map(String::as_str).chain(extra).collect();
    let all: Vec<String> = all.into_iter().map(|n| format!("`{n}`")).collect();
    all.join(", ")
}

/// Toolset `name` (as `rule`) and every toolset it includes, each once, in depth-first order;
/// and the diagnostics of unknown includes and cycles. Iterative: a long chain of includes
/// cannot overflow the stack.
fn closure<'a>(
    name: &'a str,
    rule: &'a ToolsetRule,
    sets: &'a BTreeMap<String, ToolsetRule>,
) -> (Vec<(&'a str, &'a ToolsetRule)>, Vec<Diagnostic>) {
    let lookup = |n: &str| -> Option<(&'a str, &'a ToolsetRule)> {
        if n == name {
            Some((name, rule))
        } else {
            sets.get_key_value(n).map(|(k, r)| (k.as_str(), r))
        }
    };
    let mut members = vec![(name, rule)];
    let mut errors = Vec::new();
    // Present and false: on the stack; true: done.
    let mut state: BTreeMap<&str, bool> = BTreeMap::from([(name, false)]);
    let mut stack: Vec<(&'a str, &'a ToolsetRule, usize)> = vec![(name, rule, 0)];
    while let Some(&(current, current_rule, i)) = stack.last() {
        let Some(include) = current_rule.include.get(i) else {
            state.insert(current, true);
            stack.pop();
            continue;
        };
        if let Some(top) = stack.last_mut() {
            top.2 += 1;
        }
        let at = include_path(current, i);
        match state.get(include.as_str()) {
            Some(true) => {}
            Some(false) => {
                let on_stack: Vec<&str> = stack.iter().map(|(n, _, _)| *n).collect();
                errors.push(include_cycle(&on_stack, include).at(at));
            }
            None => match lookup(include) {
                Some((n, r)) => {
                    state.insert(n, false);
                    members.push((n, r));
                    stack.push((n, r, 0));
                }
                None => errors.push(unknown_include(current, include, sets, name).at(at)),
            },
        }
    }
    (members, errors)
}

/// The config path of include `i` of toolset `name`.
fn include_path(name: &str, i: usize) -> String {
    path(&[
        Seg::Key("toolsets"),
        Seg::Key(name),
        Seg::Key("include"),
        Seg::Index(i),
    ])
}

/// The last toolset of `stack` (the includes being followed, the first asked for first)
/// includes `include`, which is on it: a cycle.
fn include_cycle(stack: &[&str], include: &str) -> Diagnostic {
    let current = stack.last().copied().unwrap_or(include);
    let from = stack.iter().position(|n| *n == include).unwrap_or(0);
    let cycle = [&stack[from..], &[include]].concat();
    let message = if cycle.len() == 2 {
        format!("toolset `{current}` includes itself")
    } else {
        let cycle = cycle.join(" -> ");
        format!("toolset `{include}` includes itself through `{current}`: {cycle}")
    };
    Diagnostic::error(codes::INCLUDE_CYCLE, message).help("remove one `include` of the cycle")
}

/// Toolset `current` includes `include`, which is not a toolset (`asked`: the one asked for,
/// which may not be among `sets` yet).
fn unknown_include(
    current: &str,
    include: &str,
    sets: &BTreeMap<String, ToolsetRule>,
    asked: &str,
) -> Diagnostic {
    let mut d = unknown_toolset(include, sets, Some(asked));
    d.message = format!(
        "toolset `{current}` includes `{}`, which is not a toolset",
        short(include)
    );
    d
}

enum ProblemKind<'a> {
    /// A reference that names nothing: the reference.
    Unknown(&'a str),
    /// An alias that cannot be used.
    Alias,
    /// A parameter rule that cannot be used (its message is what is left out), or that does
    /// nothing (a warning: nothing is left out).
    Param,
}

struct Problem<'a> {
    kind: ProblemKind<'a>,
    /// The toolsets whose entries are involved.
    owners: Vec<&'a str>,
    diagnostic: Diagnostic,
}

impl<'a> Problem<'a> {
    /// A problem of one toolset's entry.
    fn of(kind: ProblemKind<'a>, owner: &'a str, diagnostic: Diagnostic) -> Self {
        Self {
            kind,
            owners: vec![owner],
            diagnostic,
        }
    }
}

struct Gathered<'a> {
    selection: Selection,
    problems: Vec<Problem<'a>>,
}

/// An alias entry whose tool resolved.
struct AliasEntry<'a> {
    owner: &'a str,
    key: &'a str,
    alias: &'a str,
    canonical: String,
}

/// The union of the members' tools, prompts and aliases, with every problem found.
fn gather<'a>(surface: &Surface, members: &[(&'a str, &'a ToolsetRule)]) -> Gathered<'a> {
    let mut selection = Selection::default();
    let mut problems = Vec::new();
    let mut entries: Vec<AliasEntry<'a>> = Vec::new();
    // Action tools some of whose members a tag selects: the actions selected.
    let mut partial: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for &(owner, rule) in members {
        select_references(surface, owner, rule, &mut selection, &mut problems);
        if let Some(tags) = &rule.tags {
            select_tagged(surface, tags, &mut selection, &mut partial);
        }
        for (key, alias) in &rule.aliases {
            let entry = alias_entry(surface, owner, (key, alias), &mut selection);
            match entry {
                Ok(Some(entry)) => entries.push(entry),
                Ok(None) => {}
                Err(problem) => problems.push(*problem),
            }
        }
    }
    settle_aliases(&entries, members, &mut selection, &mut problems);
    narrow(surface, &mut selection, partial);
    reshape(surface, members, &mut selection, &mut problems);
    Gathered {
        selection,
        problems,
    }
}

/// The tools and prompts a member names in its `tools` and `prompts` (a glob: every listed
/// item whose exposed name it matches); a name that selects nothing is a problem.
fn select_references<'a>(
    surface: &Surface,
    owner: &'a str,
    rule: &'a ToolsetRule,
    selection: &mut Selection,
    problems: &mut Vec<Problem<'a>>,
) {
    for (kind, references) in [(Kind::Tool, &rule.tools), (Kind::Prompt, &rule.prompts)] {
        for (i, reference) in references.iter().enumerate() {
            let matched = matching(surface, kind, reference);
            if !matched.is_empty() {
                selected_mut(selection, kind).extend(matched);
                continue;
            }
            let at = reference_path(owner, kind, i);
            let d = unknown_reference(surface, owner, kind, reference).at(at);
            problems.push(Problem::of(ProblemKind::Unknown(reference), owner, d));
        }
    }
}

/// The exposed names of `kind` that `reference` selects: a glob, every listed one it matches;
/// else the one it resolves to.
fn matching(surface: &Surface, kind: Kind, reference: &str) -> Vec<String> {
    if crate::rules::is_glob(reference) {
        surface
            .listed(kind)
            .filter(|e| crate::rules::glob_matches(reference, &e.name))
            .map(|e| e.name.clone())
            .collect()
    } else {
        surface
            .resolve(kind, reference)
            .map(|r| r.exposed.name.clone())
            .into_iter()
            .collect()
    }
}

/// The config path of reference `i` of `kind` in toolset `owner`.
fn reference_path(owner: &str, kind: Kind, i: usize) -> String {
    path(&[
        Seg::Key("toolsets"),
        Seg::Key(owner),
        Seg::Key(kind.section()),
        Seg::Index(i),
    ])
}

/// The tools and prompts a member's tag expression selects. An action tool carries the union
/// of its members' tags: it is the members a tag selects, each by its own (into `partial`).
fn select_tagged(
    surface: &Surface,
    tags: &TagExpr,
    selection: &mut Selection,
    partial: &mut BTreeMap<String, BTreeSet<String>>,
) {
    for kind in [Kind::Tool, Kind::Prompt] {
        for item in surface.listed(kind) {
            match &item.route {
                Route::Action(route) => {
                    let chosen = route
                        .members
                        .iter()
                        .filter(|m| member_matches(tags, route, m));
                    for member in chosen {
                        partial
                            .entry(item.name.clone())
                            .or_default()
                            .insert(member.action.clone());
                    }
                }
                Route::Origin(_) if tags.matches(&item.tags) => {
                    selected_mut(selection, kind).insert(item.name.clone());
                }
                Route::Origin(_) => {}
            }
        }
    }
}

/// Whether an action tool's `member` matches `tags`, with its own tags and the action tool's.
fn member_matches(tags: &TagExpr, route: &ActionRoute, member: &ActionMember) -> bool {
    let mut own: Vec<Tag> = member.tags.clone();
    own.extend(route.rule_tags.iter().cloned());
    tags.matches(&own)
}

/// A member's alias `alias` for the tool `key`, which it selects when it is known:
/// `Ok(None)` when the alias is already the tool's name or alias, a problem when the tool is
/// unknown or the alias is not one or shadows another name.
fn alias_entry<'a>(
    surface: &Surface,
    owner: &'a str,
    (key, alias): (&'a str, &'a str),
    selection: &mut Selection,
) -> Result<Option<AliasEntry<'a>>, Box<Problem<'a>>> {
    let mut segs = toolset_path(owner, "aliases");
    segs.push(Seg::Key(key));
    let at = path(&segs);
    let Some(resolved) = surface.resolve(Kind::Tool, key) else {
        let d = unknown_reference(surface, owner, Kind::Tool, key).at(at);
        return Err(Box::new(Problem::of(ProblemKind::Unknown(key), owner, d)));
    };
    let canonical = resolved.exposed.name.clone();
    selection.tools.insert(canonical.clone());
    let what = format!(
        "alias `{}` for tool `{canonical}` in toolset `{owner}`",
        short(alias)
    );
    if !valid_alias(alias) {
        let d = invalid_alias(&what, alias).at(at);
        return Err(Box::new(Problem::of(ProblemKind::Alias, owner, d)));
    }
    let named = surface.resolve(Kind::Tool, alias).map(|r| r.exposed);
    if named.is_some_and(|tool| tool.name == canonical) {
        return Ok(None);
    }
    match shadowed(named, alias) {
        Some(shadowed) => {
            let d = Diagnostic::error(codes::ALIAS_SHADOWS, format!("{what} shadows {shadowed}"))
                .at(at)
                .help("choose an alias that no tool is named or aliased");
            Err(Box::new(Problem::of(ProblemKind::Alias, owner, d)))
        }
        None => Ok(Some(AliasEntry {
            owner,
            key,
            alias,
            canonical,
        })),
    }
}

/// An alias (`what` says which) that breaks [`ALIAS_RULE`], with the alias meant when one is
/// clear.
fn invalid_alias(what: &str, alias: &str) -> Diagnostic {
    let d = Diagnostic::error(codes::ALIAS, format!("{what} {ALIAS_RULE}"))
        .note("lowercase letters, digits, `_` and `-`, 2 to 64 characters, starting with a letter or digit");
    match alias_fix(alias) {
        Some(fix) => d.help(format!("did you mean `{fix}`?")),
        None => d,
    }
}

/// What `alias` would shadow (`named`: the tool it names now, by its name or an alias of
/// it): that tool's name or alias, or moniker's own tool.
fn shadowed(named: Option<&Exposed>, alias: &str) -> Option<String> {
    match named {
        Some(tool) if tool.name == *alias => Some(format!("tool `{alias}`")),
        Some(tool) => Some(format!("`{alias}`, an alias of tool `{}`", tool.name)),
        None if MANAGEMENT_TOOLS.contains(&alias) => Some(format!("moniker's tool `{alias}`")),
        None => None,
    }
}

/// One alias, one tool: an alias given to two tools is left out altogether, a problem.
fn settle_aliases<'a>(
    entries: &[AliasEntry<'a>],
    members: &[(&'a str, &'a ToolsetRule)],
    selection: &mut Selection,
    problems: &mut Vec<Problem<'a>>,
) {
    let mut by_alias: BTreeMap<&str, Vec<&AliasEntry<'a>>> = BTreeMap::new();
    for entry in entries {
        by_alias.entry(entry.alias).or_default().push(entry);
    }
    for (alias, claims) in by_alias {
        let tools: BTreeSet<&str> = claims.iter().map(|e| e.canonical.as_str()).collect();
        if tools.len() == 1 {
            selection
                .aliases
                .insert(alias.to_owned(), claims[0].canonical.clone());
            continue;
        }
        let asked = members.first().map_or(claims[0].owner, |m| m.0);
        let d = alias_given_twice(alias, &tools, &claims, asked);
        let mut owners: Vec<&str> = claims.iter().map(|c| c.owner).collect();
        owners.dedup();
        problems.push(Problem {
            kind: ProblemKind::Alias,
            owners,
            diagnostic: d,
        });
    }
}

/// Alias `alias`, given to each of `tools` (by `claims`, the first where it is placed) in
/// toolset `asked` and its includes.
fn alias_given_twice(
    alias: &str,
    tools: &BTreeSet<&str>,
    claims: &[&AliasEntry<'_>],
    asked: &str,
) -> Diagnostic {
    let list: Vec<String> = tools.iter().map(|t| format!("`{t}`")).collect();
    let mut segs = toolset_path(claims[0].owner, "aliases");
    segs.push(Seg::Key(claims[0].key));
    let mut d = Diagnostic::error(
        codes::DUPLICATE_ALIAS,
        format!(
            "alias `{alias}` is given to {} tools in toolset `{asked}`: {}",
            tools.len(),
            list.join(", ")
        ),
    )
    .at(path(&segs))
    .help("an alias names one tool: rename or remove all but one");
    for claim in claims {
        d = d.note(format!(
            "`{}` for `{}` (written as `{}`) in toolset `{}`",
            alias, claim.canonical, claim.key, claim.owner
        ));
    }
    d
}

/// The toolsets' own parameter rules, over the tools they reshape: the first toolset (the one
/// asked for, then its includes) that gives a tool rules gives them all. A tool whose rules
/// cannot be used (two parameters by one name) is served as the surface has it.
fn reshape<'a>(
    surface: &Surface,
    members: &[(&'a str, &'a ToolsetRule)],
    selection: &mut Selection,
    problems: &mut Vec<Problem<'a>>,
) {
    for &(owner, rule) in members {
        for (reference, rules) in &rule.params {
            let at = |param: Option<&str>| params_path(owner, reference, param);
            let Some(resolved) = surface.resolve(Kind::Tool, reference) else {
                let d = unknown_reference(surface, owner, Kind::Tool, reference).at(at(None));
                problems.push(Problem::of(ProblemKind::Unknown(reference), owner, d));
                continue;
            };
            let tool = resolved.exposed;
            if selection.reshaped.contains_key(&tool.name) {
                continue;
            }
            let mut param_problem = |diagnostic: Diagnostic| {
                problems.push(Problem::of(ProblemKind::Param, owner, diagnostic));
            };
            if !matches!(tool.route, Route::Origin(_)) {
                param_problem(params_of_action(owner, &tool.name).at(at(None)));
                continue;
            }
            let fields: indexmap::IndexMap<String, Box<RawValue>> =
                serde_json::from_str(tool.definition.get()).unwrap_or_default();
            let shaped = crate::params::shape(rules, fields.get("inputSchema").map(|s| &**s));
            let mut usable = true;
            for problem in &shaped.problems {
                let diagnostic = problem.diagnostic(&tool.name, at);
                usable &= !diagnostic.is_error();
                param_problem(diagnostic);
            }
            if !usable {
                continue;
            }
            let change = crate::definition::Rewrite {
                input_schema: shaped.schema.as_deref(),
                ..Default::default()
            };
            selection.reshaped.insert(
                tool.name.clone(),
                Reshaped {
                    definition: crate::definition::rewrite(&fields, &change),
                    params: std::sync::Arc::new(shaped.params),
                },
            );
        }
    }
}

/// The config path of toolset `owner`'s parameter rules for tool `reference`, or of one of them.
fn params_path(owner: &str, reference: &str, param: Option<&str>) -> String {
    let mut segs = toolset_path(owner, "params");
    segs.push(Seg::Key(reference));
    segs.extend(param.map(Seg::Key));
    path(&segs)
}

/// Toolset `owner` gives parameter rules to action tool `tool`: they are its members' to have.
fn params_of_action(owner: &str, tool: &str) -> Diagnostic {
    Diagnostic::error(
        "toolsets::params",
        format!("toolset `{owner}` gives parameter rules to action tool `{tool}`"),
    )
    .help("give them to its members' overrides under `tools`")
}

/// Adds the action tools of `partial` to the selection: whole when every member is selected
/// or the toolset names the tool itself, else as [`Narrowed`].
fn narrow(
    surface: &Surface,
    selection: &mut Selection,
    partial: BTreeMap<String, BTreeSet<String>>,
) {
    let shared_server = surface.server(Kind::Tool).is_some();
    for (name, actions) in partial {
        if selection.tools.contains(&name) {
            continue;
        }
        let Some(resolved) = surface.resolve(Kind::Tool, &name) else {
            continue;
        };
        let item = resolved.exposed;
        let Route::Action(route) = &item.route else {
            continue;
        };
        selection.tools.insert(name.clone());
        if route.members.iter().all(|m| actions.contains(&m.action)) {
            continue;
        }
        if let Some(narrowed) = crate::naming::narrowed(item, &actions, shared_server) {
            selection.narrowed.insert(
                name,
                Narrowed {
                    definition: narrowed.definition,
                    route: narrowed.route,
                },
            );
        }
    }
}

/// The canonical names of `kind` the selection has.
fn selected(selection: &Selection, kind: Kind) -> &BTreeSet<String> {
    match kind {
        Kind::Tool => &selection.tools,
        Kind::Prompt => &selection.prompts,
    }
}

fn selected_mut(selection: &mut Selection, kind: Kind) -> &mut BTreeSet<String> {
    match kind {
        Kind::Tool => &mut selection.tools,
        Kind::Prompt => &mut selection.prompts,
    }
}

fn unknown_reference(surface: &Surface, owner: &str, kind: Kind, reference: &str) -> Diagnostic {
    let code = match kind {
        Kind::Tool => codes::UNKNOWN_TOOL,
        Kind::Prompt => codes::UNKNOWN_PROMPT,
    };
    let noun = kind.noun();
    let mut d = Diagnostic::error(
        code,
        format!(
            "toolset `{owner}` names {noun} `{}`, which no server exposes",
            short(reference)
        ),
    );
    let names = surface
        .listed(kind)
        .flat_map(|e| std::iter::once(&e.name).chain(&e.aliases))
        .map(String::as_str);
    if let Some(close) = did_you_mean(reference, names) {
        d = d.help(format!("did you mean `{close}`?"));
    }
    d
}

#[cfg(test)]
mod tests;
