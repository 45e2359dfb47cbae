//! `toolsets`: the management settings and the static toolsets.

use std::collections::{BTreeMap, HashMap};

use moniker_surface::diagnostic::did_you_mean;
use moniker_surface::toolsets::{
    ALIAS_RULE, NAME_RULE, RESERVED, TagExpr, ToolsetRule, Toolsets, alias_fix, valid_alias,
    valid_name,
};
use moniker_surface::vocab::{Seg, path};

use super::{Cx, Slot, join};
use crate::ToolsetSettings;
use crate::report::{ConfigError, codes};
use crate::shape::keys;
use crate::source::Span;
use crate::tree::{ScalarKind, Value, shorten};

const TAGS_HELP: &str = "write a list of tags (any of them), or an expression of tags with `and`, `or`, `not` and parentheses: `git and (github or gitlab) and not deprecated`";

impl Cx<'_> {
    /// `toolsets`: `manage` and `store`, and toolsets by name. Includes are checked once every
    /// toolset is known: unknown ones and cycles are errors.
    pub(super) fn toolsets<'n>(
        &mut self,
        p: &[Seg<'n>],
        slot: Slot<'n>,
    ) -> (Toolsets, ToolsetSettings) {
        let fields = self.fields(slot, p, None, "a map of toolsets");
        let mut out = Toolsets::default();
        let mut settings = ToolsetSettings::default();
        // Every toolset written, valid name or not: an include of a toolset with a mistake
        // in its name is not an unknown toolset too.
        let names: Vec<&str> = fields
            .entries
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| !RESERVED.contains(k))
            .collect();
        let mut includes: Vec<(&str, Vec<Include<'n>>)> = Vec::new();
        for &(key, s) in &fields.entries {
            let kp = join(p, Seg::Key(key));
            match key {
                "manage" => {
                    if let Some(manage) = self.boolean(&kp, s) {
                        settings.manage = manage;
                    }
                }
                "store" => {
                    if !s.node.is_null() {
                        settings.store = self.store(&kp, s);
                    }
                }
                _ => {
                    let is_map = s.node.is_null() || matches!(s.node.value, Value::Map(_));
                    let setting = did_you_mean(key, RESERVED);
                    if let (false, Some(close)) = (is_map, setting) {
                        // `manag: true` is a misspelt setting, not a toolset.
                        self.error(
                            codes::UNKNOWN_KEY,
                            format!("unknown key `{}`", shorten(key)),
                            &kp,
                            s.key.unwrap_or(s.node.span),
                            Some(format!("did you mean `{close}`?")),
                        );
                        continue;
                    }
                    let name_ok = valid_name(key);
                    if !name_ok {
                        let help = toolset_name_fix(key).map(|n| format!("did you mean `{n}`?"));
                        self.error(
                            codes::INVALID_TOOLSET,
                            format!("toolset name `{}` {NAME_RULE}", shorten(key)),
                            &kp,
                            s.key.unwrap_or(s.node.span),
                            help,
                        );
                    }
                    let (rule, include) = self.toolset(&kp, s);
                    if name_ok {
                        out.sets.insert(key.to_owned(), rule);
                    }
                    includes.push((key, include));
                }
            }
        }
        self.includes(p, &names, &includes);
        (out, settings)
    }

    fn store(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<String> {
        let store = self.string(p, slot)?;
        if store.trim().is_empty() {
            self.error(
                codes::INVALID_VALUE,
                "`store` is empty",
                p,
                slot.point(),
                Some(
                    "name the file, `store: ~/moniker-toolsets.json`, or remove `store` for the default"
                        .to_owned(),
                ),
            );
            return None;
        }
        Some(store)
    }

    fn toolset<'n>(&mut self, tp: &[Seg<'n>], slot: Slot<'n>) -> (ToolsetRule, Vec<Include<'n>>) {
        let fields = self.fields(slot, tp, Some(keys::TOOLSET), "a map of toolset settings");
        let description = self.field(tp, &fields, "description", Self::string);
        let tools = self.field(tp, &fields, "tools", |cx, at, s| cx.globs(at, s, "tool"));
        let prompts = self.field(tp, &fields, "prompts", |cx, at, s| {
            cx.globs(at, s, "prompt")
        });
        let tags = self.field(tp, &fields, "tags", Self::tag_expr);
        let resources = self.field(tp, &fields, "resources", |cx, at, s| {
            cx.strings(at, s, false)
        });
        let discovery = self.field(tp, &fields, "discovery", Self::discovery);
        let includes = self.field(tp, &fields, "include", Self::include);
        let includes = includes.unwrap_or_default();
        let aliases = self.field(tp, &fields, "aliases", Self::toolset_aliases);
        let params = self.field(tp, &fields, "params", Self::tool_params);
        let rule = ToolsetRule {
            description: description.flatten(),
            tools: tools.unwrap_or_default(),
            prompts: prompts.unwrap_or_default(),
            tags: tags.flatten(),
            include: includes.iter().map(|i| i.name.clone()).collect(),
            aliases: aliases.unwrap_or_default(),
            resources: resources.unwrap_or_default(),
            discovery,
            params: params.unwrap_or_default(),
        };
        (rule, includes)
    }

    /// A toolset's `include`: each toolset name in it, with its index and place.
    fn include<'n>(&mut self, ip: &[Seg<'n>], slot: Slot<'n>) -> Vec<Include<'n>> {
        let items = self.items(slot, ip, "a list of toolset names");
        let mut includes = Vec::new();
        for (i, item) in items.into_iter().enumerate() {
            if let Some(name) = self.string(&join(ip, Seg::Index(i)), item) {
                includes.push(Include {
                    index: i,
                    name,
                    slot: item,
                });
            }
        }
        includes
    }

    /// A toolset's `params`: each tool's parameter rules, by the tool's name.
    fn tool_params<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> BTreeMap<String, ToolParams> {
        self.named(
            p,
            slot,
            "a map of tools to their parameter rules",
            Self::params,
        )
    }

    /// Exposed names or aliases of tools or prompts.
    pub(super) fn references<'n>(
        &mut self,
        p: &[Seg<'n>],
        slot: Slot<'n>,
        what: &str,
    ) -> Vec<String> {
        let expected = format!("a list of {what} names");
        let items = self.items(slot, p, &expected);
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            if let Some(name) = self.name(&join(p, Seg::Index(i)), item, what) {
                out.push(name.as_str().to_owned());
            }
        }
        out
    }

    /// A list of names or globs (`github_*`: `*` any run of characters, `?` one), each a name
    /// once its wildcards are letters.
    fn globs<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>, what: &str) -> Vec<String> {
        let expected = format!("a list of {what} names or globs");
        let items = self.items(slot, p, &expected);
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let ip = join(p, Seg::Index(i));
            let Some(text) = self.string(&ip, item) else {
                continue;
            };
            if !moniker_surface::rules::is_glob(&text) {
                if let Some(name) = self.name(&ip, item, what) {
                    out.push(name.as_str().to_owned());
                }
                continue;
            }
            match text
                .replace(['*', '?'], "a")
                .parse::<moniker_surface::Name>()
            {
                Ok(_) => out.push(text),
                Err(e) => self.error(
                    codes::INVALID_NAME,
                    format!("{what} glob `{}` {}", shorten(&text), e.rule),
                    &ip,
                    item.point(),
                    Some("`*` stands for any run of characters, `?` for one".to_owned()),
                ),
            }
        }
        out
    }

    /// A list of tags (any of them), or a tag expression.
    pub(super) fn tag_expr<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Option<TagExpr> {
        match &slot.node.value {
            Value::Seq(_) => TagExpr::any_of(self.tags(p, slot)),
            Value::Scalar(s) if s.kind == ScalarKind::Null => None,
            Value::Scalar(s) if s.kind == ScalarKind::Str => match s.text.parse::<TagExpr>() {
                Ok(expr) => Some(expr),
                Err(e) => {
                    let inner = self.inner_span(slot.node.span, &s.text, e.offset, e.len);
                    let place = match inner {
                        Some(_) => String::new(),
                        None => format!(" (at character {} of the expression)", e.column),
                    };
                    self.error(
                        codes::INVALID_TAGS,
                        format!(
                            "tag expression `{}` is invalid: {}{place}",
                            shorten(&s.text),
                            e.message
                        ),
                        p,
                        inner.unwrap_or_else(|| slot.point()),
                        Some(TAGS_HELP.to_owned()),
                    );
                    None
                }
            },
            _ => {
                self.type_error("a list of tags or a tag expression", p, slot);
                None
            }
        }
    }

    /// The place of `text[offset..offset + len]` in the file, when the string is written as
    /// is on one line (plain, or quoted without escapes), so that its bytes are in the file.
    fn inner_span(&self, span: Span, text: &str, offset: usize, len: usize) -> Option<Span> {
        if text.contains('\n') {
            return None;
        }
        let quote = match self.text.get(span.offset..)?.chars().next()? {
            q @ ('"' | '\'') => Some(q),
            _ => None,
        };
        let start = span.offset + usize::from(quote.is_some());
        let end = start + text.len();
        if self.text.get(start..end)? != text {
            return None;
        }
        if let Some(q) = quote {
            if !self.text.get(end..)?.starts_with(q) {
                return None;
            }
        }
        let before = text.get(..offset)?;
        text.get(offset..offset + len)?;
        Some(Span {
            offset: start + offset,
            len,
            line: span.line,
            column: span.column + usize::from(quote.is_some()) + before.chars().count(),
        })
    }

    /// `aliases: { <tool>: <alias>, ... }`
    fn toolset_aliases<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> BTreeMap<String, String> {
        let fields = self.fields(slot, p, None, "a map of tool names to aliases");
        let mut out = BTreeMap::new();
        for (key, s) in fields.entries {
            let ap = join(p, Seg::Key(key));
            let key_ok = self.name_key("tool", key, &ap, s);
            let Some(alias) = self.string(&ap, s) else {
                continue;
            };
            if !valid_alias(&alias) {
                let help = alias_fix(&alias).map(|a| format!("did you mean `{a}`?"));
                self.error(
                    codes::INVALID_NAME,
                    format!("alias `{}` {ALIAS_RULE}", shorten(&alias)),
                    &ap,
                    s.point(),
                    help,
                );
                continue;
            }
            if key_ok {
                out.insert(key.to_owned(), alias);
            }
        }
        out
    }

    /// Every include names a toolset of the config, and no toolset includes itself.
    fn includes(&mut self, p: &[Seg<'_>], names: &[&str], includes: &[(&str, Vec<Include<'_>>)]) {
        let edges = self.known_includes(p, names, includes);
        self.include_cycles(p, includes, &edges);
    }

    /// The includes that name a toolset, by toolset; the others are reported.
    fn known_includes<'i, 'n>(
        &mut self,
        p: &[Seg<'_>],
        names: &[&str],
        includes: &'i [(&'i str, Vec<Include<'n>>)],
    ) -> HashMap<&'i str, Vec<&'i Include<'n>>> {
        let mut edges: HashMap<&str, Vec<&Include<'_>>> = HashMap::new();
        for (toolset, list) in includes {
            for include in list {
                if names.contains(&include.name.as_str()) {
                    edges.entry(toolset).or_default().push(include);
                    continue;
                }
                let help = match did_you_mean(&include.name, names.iter().copied()) {
                    Some(close) => format!("did you mean `{close}`?"),
                    None if names.is_empty() => "no toolsets are defined".to_owned(),
                    None => format!("toolsets: {}", list_names(names)),
                };
                let mut error = ConfigError::new(
                    codes::UNKNOWN_TOOLSET,
                    format!(
                        "toolset `{}` includes `{}`, which is not a toolset",
                        shorten(toolset),
                        shorten(&include.name)
                    ),
                    include_path(p, toolset, include.index),
                )
                .with_span(include.slot.point());
                error.help = Some(help);
                self.errors.push(error);
            }
        }
        edges
    }

    /// Depth-first, in file order, with an explicit stack: each edge back to a toolset on
    /// the stack closes a cycle, reported at that include.
    fn include_cycles(
        &mut self,
        p: &[Seg<'_>],
        includes: &[(&str, Vec<Include<'_>>)],
        edges: &HashMap<&str, Vec<&Include<'_>>>,
    ) {
        let mut done: HashMap<&str, bool> = HashMap::new();
        for (root, _) in includes {
            if done.contains_key(root) {
                continue;
            }
            done.insert(root, false);
            let mut stack: Vec<(&str, usize)> = vec![(root, 0)];
            while let Some(&(current, i)) = stack.last() {
                let Some(include) = edges.get(current).and_then(|e| e.get(i)).copied() else {
                    done.insert(current, true);
                    stack.pop();
                    continue;
                };
                if let Some(top) = stack.last_mut() {
                    top.1 += 1;
                }
                let target = include.name.as_str();
                match done.get(target) {
                    Some(true) => {}
                    Some(false) => {
                        let from = stack.iter().position(|(n, _)| *n == target).unwrap_or(0);
                        let mut cycle: Vec<&str> = stack[from..].iter().map(|(n, _)| *n).collect();
                        cycle.push(target);
                        let message = if cycle.len() == 2 {
                            format!("toolset `{}` includes itself", shorten(current))
                        } else {
                            format!(
                                "toolset `{}` includes itself through `{}`: {}",
                                shorten(target),
                                shorten(current),
                                cycle.join(" -> ")
                            )
                        };
                        let mut error = ConfigError::new(
                            codes::INCLUDE_CYCLE,
                            message,
                            include_path(p, current, include.index),
                        )
                        .with_span(include.slot.point());
                        error.help = Some("remove one `include` of the cycle".to_owned());
                        self.errors.push(error);
                    }
                    None => {
                        done.insert(target, false);
                        stack.push((target, 0));
                    }
                }
            }
        }
    }
}

/// The dotted path of `<toolsets>.<toolset>.include[<index>]`.
fn include_path(p: &[Seg<'_>], toolset: &str, index: usize) -> String {
    let mut segs = p.to_vec();
    segs.extend([Seg::Key(toolset), Seg::Key("include"), Seg::Index(index)]);
    path(&segs)
}

/// One tool's parameter rules, by the server's name of each parameter.
type ToolParams = BTreeMap<String, moniker_surface::params::ParamRule>;

/// One entry of a toolset's `include`.
struct Include<'n> {
    index: usize,
    name: String,
    slot: Slot<'n>,
}

fn list_names(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{}`", shorten(n)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The toolset name a user probably meant: lowercase, spaces and dots as `_`.
fn toolset_name_fix(name: &str) -> Option<String> {
    let fixed: String = name.trim().chars().map(toolset_name_char).collect();
    (fixed != name && valid_name(&fixed)).then_some(fixed)
}

/// `c` as a toolset's name may hold it: lowercase, and a space or a dot as `_`.
fn toolset_name_char(c: char) -> char {
    match c {
        ' ' | '.' => '_',
        c => c.to_ascii_lowercase(),
    }
}
