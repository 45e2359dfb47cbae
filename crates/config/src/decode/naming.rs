//! `naming`, `server_tags`, and the overrides of `tools` and `prompts`.

use std::collections::BTreeMap;

use moniker_surface::diagnostic::did_you_mean;
use moniker_surface::vocab::Seg;
use moniker_surface::{AliasRule, Naming, Override, Profile, ProfileKind, Tag};

use super::{Cx, Slot, join, list};
use crate::gateway::Limits;
use crate::report::codes;
use crate::shape::keys;
use crate::tree::{ScalarKind, Value, shorten};

impl Cx<'_> {
    pub(super) fn naming<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Naming {
        let fields = self.fields(slot, p, Some(keys::NAMING), "a map of naming settings");
        let mut naming = Naming::default();
        let strip = self.field(p, &fields, "strip_prefixes", |cx, at, s| {
            cx.strings(at, s, false)
        });
        naming.strip_prefixes = strip.unwrap_or_default();
        if let Some(split) = self.field(p, &fields, "split", Self::string).flatten() {
            naming.split = split;
        }
        if let Some(sep) = self.field(p, &fields, "separator", Self::string).flatten() {
            naming.separator = sep;
        }
        if let Some(profile) = self.field(p, &fields, "profile", Self::profile).flatten() {
            naming.profile = profile;
        }
        naming
    }

    fn profile_kind(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<ProfileKind> {
        let text = self.string(p, slot)?;
        match text.parse::<ProfileKind>() {
            Ok(kind) => Some(kind),
            Err(e) => {
                let kinds = [ProfileKind::Portable.as_str(), ProfileKind::Spec.as_str()];
                let help = did_you_mean(&text, kinds).map(|k| format!("did you mean `{k}`?"));
                self.error(codes::INVALID_VALUE, e.to_string(), p, slot.point(), help);
                None
            }
        }
    }

    fn profile<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Option<Profile> {
        match &slot.node.value {
            Value::Scalar(s) if s.kind == ScalarKind::Null => None,
            Value::Scalar(_) => self.profile_kind(p, slot).map(|kind| Profile {
                kind,
                prefix_budget: 0,
            }),
            Value::Map(_) => {
                let fields = self.fields(slot, p, Some(keys::BUDGETED_PROFILE), "a map");
                let field = |name: &'static str| join(p, Seg::Key(name));
                let kind = self.field(p, &fields, "base", Self::profile_kind);
                let kind = kind.unwrap_or(Some(ProfileKind::default()))?;
                let budget = match fields.get("prefix_budget") {
                    None => 0,
                    Some(s) => {
                        let budget = self.count(&field("prefix_budget"), s)?;
                        let budget = usize::try_from(budget).unwrap_or(usize::MAX);
                        if budget >= kind.max_len() {
                            self.error(
                                codes::INVALID_VALUE,
                                format!(
                                    "prefix budget `{budget}` leaves no room for names: the `{}` profile allows at most {} characters",
                                    kind.as_str(),
                                    kind.max_len()
                                ),
                                &field("prefix_budget"),
                                s.point(),
                                Some(format!("use a number below {}", kind.max_len())),
                            );
                            return None;
                        }
                        budget
                    }
                };
                Some(Profile {
                    kind,
                    prefix_budget: budget,
                })
            }
            Value::Seq(_) => {
                self.type_error(
                    "`portable`, `spec` or a map with `base` and `prefix_budget`",
                    p,
                    slot,
                );
                None
            }
        }
    }

    pub(super) fn server_tags<'n>(
        &mut self,
        p: &[Seg<'n>],
        slot: Slot<'n>,
    ) -> BTreeMap<String, Vec<Tag>> {
        self.named(p, slot, "a map of server names to tags", Self::tags)
    }

    pub(super) fn overrides<'n>(
        &mut self,
        p: &[Seg<'n>],
        slot: Slot<'n>,
        server_ids: &[&str],
    ) -> (BTreeMap<String, Override>, BTreeMap<String, Limits>) {
        let fields = self.fields(slot, p, None, "a map of names to overrides");
        let mut out = BTreeMap::new();
        let mut limits = BTreeMap::new();
        for (key, s) in fields.entries {
            let op = join(p, Seg::Key(key));
            let key_ok = self.override_key(&op, s, key, server_ids);
            let (rule, limit) = self.override_(&op, s);
            if key_ok {
                out.insert(key.to_owned(), rule);
                if limit.is_set() {
                    limits.insert(key.to_owned(), limit);
                }
            }
        }
        (out, limits)
    }

    /// `<origin name>` or `<server id>/<origin name>`, split on the first `/`.
    fn override_key(&mut self, op: &[Seg<'_>], slot: Slot<'_>, key: &str, ids: &[&str]) -> bool {
        let at = slot.key.unwrap_or(slot.node.span);
        let Some((server, name)) = key.split_once('/') else {
            if key.is_empty() {
                self.error(
                    codes::INVALID_VALUE,
                    "override key is empty",
                    op,
                    at,
                    Some("use the origin name, or `<server id>/<origin name>`".to_owned()),
                );
                return false;
            }
            return true;
        };
        if !ids.contains(&server) {
            let help = match did_you_mean(server, ids.iter().copied()) {
                Some(close) => format!("did you mean `{close}/{}`?", shorten(name)),
                None if ids.is_empty() => "no servers are configured".to_owned(),
                None => format!("configured servers: {}", list(ids)),
            };
            self.error(
                codes::UNKNOWN_SERVER,
                format!(
                    "override `{}` names server `{}`, which is not configured",
                    shorten(key),
                    shorten(server)
                ),
                op,
                at,
                Some(help),
            );
            return false;
        }
        if name.is_empty() {
            self.error(
                codes::INVALID_VALUE,
                format!("override `{}` has no origin name after `/`", shorten(key)),
                op,
                at,
                Some(format!("write `{server}/<origin name>`")),
            );
            return false;
        }
        true
    }

    fn override_<'n>(&mut self, op: &[Seg<'n>], slot: Slot<'n>) -> (Override, Limits) {
        let fields = self.fields(slot, op, Some(keys::OVERRIDE), "a map of override settings");
        let field = |name: &'static str| join(op, Seg::Key(name));
        let name = self.field(op, &fields, "name", |cx, at, s| cx.name(at, s, "name"));
        let tags = self.field(op, &fields, "tags", Self::tags);
        let aliases = self.field(op, &fields, "aliases", Self::aliases);
        let description = self.field(op, &fields, "description", Self::string);
        let hidden = self.field(op, &fields, "hidden", Self::boolean);
        let mut rule = Override {
            name: name.flatten(),
            tags: tags.unwrap_or_default(),
            aliases: aliases.unwrap_or_default(),
            description: description.flatten(),
            hidden: hidden.flatten().unwrap_or(false),
            params: BTreeMap::new(),
        };
        if let Some(s) = fields.get("params") {
            if matches!(op.first(), Some(Seg::Key("prompts"))) {
                self.error(
                    codes::INVALID_VALUE,
                    "`params` is for tools: a prompt's arguments are not a schema",
                    &field("params"),
                    s.point(),
                    None,
                );
            } else {
                rule.params = self.params(&field("params"), s);
            }
        }
        let limits = self.limits(op, &fields);
        (rule, limits)
    }

    pub(super) fn aliases<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Vec<AliasRule> {
        let items = self.items(slot, p, "a list of aliases");
        let mut out = Vec::new();
        for (i, item) in items.into_iter().enumerate() {
            let ip = join(p, Seg::Index(i));
            match &item.node.value {
                Value::Scalar(s) if s.kind == ScalarKind::Str => {
                    if let Some(name) = self.name(&ip, item, "alias") {
                        out.push(AliasRule {
                            name,
                            hidden: false,
                            deprecated: None,
                        });
                    }
                }
                Value::Map(_) => {
                    let fields = self.fields(item, &ip, Some(keys::ALIAS_SETTINGS), "a map");
                    let hidden = self.field(&ip, &fields, "hidden", Self::boolean);
                    let hidden = hidden.flatten().unwrap_or(false);
                    let deprecated = self.field(&ip, &fields, "deprecated", Self::deprecation);
                    let deprecated = deprecated.flatten();
                    match self.field(&ip, &fields, "name", |cx, at, s| cx.name(at, s, "alias")) {
                        Some(Some(name)) => out.push(AliasRule {
                            name,
                            hidden,
                            deprecated,
                        }),
                        Some(None) => {}
                        None => self.error(
                            codes::MISSING_KEY,
                            "alias has no `name`",
                            &ip,
                            item.point(),
                            Some("write `{ name: <alias>, hidden: true }`".to_owned()),
                        ),
                    }
                }
                _ => self.type_error(
                    "an alias name or a map with `name`, `hidden` and `deprecated`",
                    &ip,
                    item,
                ),
            }
        }
        out
    }

    /// `deprecated: { since: 2026-11-01, remove_after: 2027-05-01, use: new_name }`.
    pub(super) fn deprecation<'n>(
        &mut self,
        p: &[Seg<'n>],
        slot: Slot<'n>,
    ) -> Option<moniker_surface::Deprecation> {
        let fields = self.fields(
            slot,
            p,
            Some(keys::DEPRECATED),
            "a map with `since`, `remove_after` and `use`",
        );
        let field = |name: &'static str| join(p, Seg::Key(name));
        let date = |cx: &mut Self, name: &'static str| -> Option<moniker_surface::Date> {
            let Some(date) = cx.field(p, &fields, name, Self::date) else {
                cx.error(
                    codes::MISSING_KEY,
                    format!("`deprecated` has no `{name}`"),
                    p,
                    slot.point(),
                    Some(
                        "write `deprecated: { since: 2026-11-01, remove_after: 2027-05-01 }`"
                            .to_owned(),
                    ),
                );
                return None;
            };
            date
        };
        let since = date(self, "since");
        let remove_after = date(self, "remove_after");
        let use_instead = match self.field(p, &fields, "use", |cx, at, s| cx.name(at, s, "name")) {
            Some(name) => Some(name?.as_str().to_owned()),
            None => None,
        };
        let (since, remove_after) = (since?, remove_after?);
        if remove_after < since {
            let s = fields.get("remove_after").unwrap_or(slot);
            self.error(
                codes::INVALID_VALUE,
                format!("`remove_after` ({remove_after}) is before `since` ({since})"),
                &field("remove_after"),
                s.point(),
                Some("a name is removed after it was deprecated".to_owned()),
            );
            return None;
        }
        Some(moniker_surface::Deprecation {
            since,
            remove_after,
            use_instead,
        })
    }

    /// A date, `2026-11-01`, read from the text of a scalar.
    fn date(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<moniker_surface::Date> {
        // YAML reads an unquoted date as text: either way, the text is the date.
        let Some((text, _)) = slot.scalar() else {
            self.type_error("a date (`2026-11-01`)", p, slot);
            return None;
        };
        match text.parse() {
            Ok(date) => Some(date),
            Err(why) => {
                self.error(codes::INVALID_VALUE, why, p, slot.point(), None);
                None
            }
        }
    }
}
