//! `actions`: action tools, each one tool with an `action` parameter over many members.

use std::collections::{BTreeMap, HashMap};

use indexmap::IndexMap;
use moniker_surface::diagnostic::did_you_mean;
use moniker_surface::vocab::{Seg, path};
use moniker_surface::{ActionRule, Legacy, Name};

use super::{Cx, Slot, join};
use crate::report::codes;
use crate::shape::keys;
use crate::tree::{Value, shorten};

const LEGACY_MODES: &[&str] = &["hidden", "listed", "off"];
/// What an action (a key of `actions.<tool>.tools`) must look like.
pub(crate) const ACTION_RULE: &str =
    "must match `^[a-z][a-z0-9_]*$` (lowercase letters, digits and `_`, starting with a letter)";
const ACTION_TOOLS_HELP: &str = "map each action to the exposed name of its tool: `tools: { create: create_project, list: list_projects }`";

impl Cx<'_> {
    /// `actions`: action tools by their exposed name. A tool may be the member of one action
    /// only, across all action tools.
    pub(super) fn actions<'n>(
        &mut self,
        p: &[Seg<'n>],
        slot: Slot<'n>,
    ) -> BTreeMap<String, ActionRule> {
        let fields = self.fields(slot, p, None, "a map of tool names to action tools");
        let mut out = BTreeMap::new();
        // Member -> where it is first listed: the dotted path and the line.
        let mut members: HashMap<String, (String, usize)> = HashMap::new();
        for (key, s) in fields.entries {
            let ap = join(p, Seg::Key(key));
            let key_ok = self.name_key("action tool", key, &ap, s);
            let rule = self.action(&ap, s, key, &mut members);
            if key_ok {
                out.insert(key.to_owned(), rule);
            }
        }
        out
    }

    fn action<'n>(
        &mut self,
        ap: &[Seg<'n>],
        slot: Slot<'n>,
        tool: &str,
        members: &mut HashMap<String, (String, usize)>,
    ) -> ActionRule {
        let fields = self.fields(
            slot,
            ap,
            Some(keys::ACTION),
            "a map of action tool settings",
        );
        let description = self.field(ap, &fields, "description", Self::string);
        let tools = self.field(ap, &fields, "tools", |cx, at, s| {
            cx.action_tools(at, s, members)
        });
        match tools {
            Some(_) => {}
            // `tool:` was reported as unknown with a did-you-mean, and a list or a string as
            // the wrong type: that is the error.
            None if fields.meant("tools") => {}
            None if !slot.node.is_null() && !matches!(slot.node.value, Value::Map(_)) => {}
            None => self.error(
                codes::MISSING_KEY,
                format!("action tool `{}` has no `tools`", shorten(tool)),
                ap,
                slot.key.unwrap_or(slot.node.span),
                Some(ACTION_TOOLS_HELP.to_owned()),
            ),
        }
        let legacy = self.field(ap, &fields, "legacy", Self::legacy);
        let (legacy, legacy_deprecated) = legacy.flatten().unwrap_or_default();
        let aliases = self.field(ap, &fields, "aliases", Self::aliases);
        let tags = self.field(ap, &fields, "tags", Self::tags);
        ActionRule {
            description: description.flatten(),
            tools: tools.unwrap_or_default(),
            legacy,
            legacy_deprecated,
            aliases: aliases.unwrap_or_default(),
            tags: tags.unwrap_or_default(),
        }
    }

    /// `tools: { <action>: <member's exposed name>, ... }`, not empty.
    fn action_tools<'n>(
        &mut self,
        tp: &[Seg<'n>],
        slot: Slot<'n>,
        members: &mut HashMap<String, (String, usize)>,
    ) -> IndexMap<String, Name> {
        let fields = self.fields(slot, tp, None, "a map of actions to tool names");
        let mut out = IndexMap::new();
        // A map whose every entry was refused has been reported already.
        let empty = match &slot.node.value {
            Value::Map(entries) => entries.is_empty(),
            _ => slot.node.is_null(),
        };
        if empty {
            self.error(
                codes::INVALID_VALUE,
                "`tools` is empty: an action tool needs at least one action",
                tp,
                slot.point(),
                Some(ACTION_TOOLS_HELP.to_owned()),
            );
        }
        for (action, s) in fields.entries {
            let mp = join(tp, Seg::Key(action));
            let action_ok = valid_action(action);
            if !action_ok {
                let at = s.key.unwrap_or(s.node.span);
                let help = action_fix(action).map(|a| format!("did you mean `{a}`?"));
                self.error(
                    codes::INVALID_ACTION,
                    format!("action `{}` {ACTION_RULE}", shorten(action)),
                    &mp,
                    at,
                    help,
                );
            }
            let Some(member) = self.name(&mp, s, "tool") else {
                continue;
            };
            let line = s.point().line;
            if let Some((first, first_line)) = members.get(member.as_str()) {
                self.error(
                    codes::DUPLICATE_MEMBER,
                    format!(
                        "tool `{}` is already the member of `{first}`",
                        shorten(member.as_str())
                    ),
                    &mp,
                    s.point(),
                    Some(format!(
                        "the first is on line {first_line}: a tool can be the member of one action only"
                    )),
                );
                continue;
            }
            members.insert(member.as_str().to_owned(), (path(&mp), line));
            if action_ok {
                out.insert(action.to_owned(), member);
            }
        }
        out
    }

    /// `legacy: hidden`, or `legacy: { keep: hidden, deprecated: { since, remove_after } }`.
    fn legacy<'n>(
        &mut self,
        p: &[Seg<'n>],
        slot: Slot<'n>,
    ) -> Option<(Legacy, Option<moniker_surface::Deprecation>)> {
        if !matches!(slot.node.value, Value::Map(_)) {
            return self.legacy_mode(p, slot).map(|mode| (mode, None));
        }
        let fields = self.fields(
            slot,
            p,
            Some(keys::LEGACY_SETTINGS),
            "a legacy mode, or a map with `keep` and `deprecated`",
        );
        let mode = self.field(p, &fields, "keep", Self::legacy_mode);
        let mode = mode.unwrap_or(Some(Legacy::default()))?;
        let deprecated = match self.field(p, &fields, "deprecated", Self::deprecation) {
            Some(deprecated) => Some(deprecated?),
            None => None,
        };
        Some((mode, deprecated))
    }

    fn legacy_mode(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<Legacy> {
        let text = self.string(p, slot)?;
        match text.as_str() {
            "hidden" => Some(Legacy::Hidden),
            "listed" => Some(Legacy::Listed),
            "off" => Some(Legacy::Off),
            _ => {
                let help = did_you_mean(&text, LEGACY_MODES.iter().copied())
                    .map(|m| format!("did you mean `{m}`?"));
                self.error(
                    codes::INVALID_VALUE,
                    format!(
                        "legacy `{}` is not a legacy mode: use `hidden`, `listed` or `off`",
                        shorten(&text)
                    ),
                    p,
                    slot.point(),
                    help,
                );
                None
            }
        }
    }
}

/// `^[a-z][a-z0-9_]*$`
pub(super) fn valid_action(action: &str) -> bool {
    let mut bytes = action.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The action a user probably meant: lowercase, spaces and hyphens as underscores.
fn action_fix(action: &str) -> Option<String> {
    let fixed: String = action.trim().chars().map(action_char).collect();
    (fixed != action && valid_action(&fixed)).then_some(fixed)
}

/// `c` as an action may hold it: lowercase, and a space or a hyphen as an underscore.
fn action_char(c: char) -> char {
    match c {
        ' ' | '-' => '_',
        c => c.to_ascii_lowercase(),
    }
}
