//! `params` of a tool override: a rule per parameter, by the server's name of it.

use std::collections::BTreeMap;

use moniker_surface::params::{Fixed, ParamRule};
use moniker_surface::vocab::Seg;

use super::{Cx, Slot};
use crate::report::codes;
use crate::shape::keys;
use crate::tree::{Node, ScalarKind, Value};

impl Cx<'_> {
    pub(crate) fn params<'n>(
        &mut self,
        p: &[Seg<'n>],
        slot: Slot<'n>,
    ) -> BTreeMap<String, ParamRule> {
        self.named(p, slot, "a map of parameter names to rules", Self::param)
    }

    fn param<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> ParamRule {
        let fields = self.fields(slot, p, Some(keys::PARAM), "a map of parameter settings");
        let rename = self.field(p, &fields, "rename", Self::string);
        let aliases = self.field(p, &fields, "aliases", |cx, at, s| cx.strings(at, s, false));
        let hidden = self.field(p, &fields, "hidden", Self::boolean);
        let description = self.field(p, &fields, "description", Self::string);
        let mut rule = ParamRule {
            rename: rename.flatten(),
            aliases: aliases.unwrap_or_default(),
            default: fields.get("default").map(|s| json(s.node)),
            hidden: hidden.flatten().unwrap_or(false),
            description: description.flatten(),
            fixed: None,
        };
        if let Some(s) = fields.get("fixed") {
            rule.fixed = Some(Fixed(json(s.node)));
            let meaningless: Vec<&str> = ["rename", "aliases", "default", "description"]
                .into_iter()
                .filter(|k| fields.has(k))
                .collect();
            if !meaningless.is_empty() {
                self.error(
                    codes::INVALID_VALUE,
                    format!(
                        "a fixed parameter is neither listed nor accepted from a client: `{}` means nothing beside `fixed`",
                        meaningless.join("`, `")
                    ),
                    p,
                    slot.point(),
                    Some("keep `fixed` alone, or drop it and use `default`".to_owned()),
                );
            }
        }
        rule
    }
}

/// A YAML value as JSON: what a `default` or a `fixed` value is sent as.
fn json(node: &Node) -> serde_json::Value {
    use serde_json::Value as J;
    match &node.value {
        Value::Scalar(s) => match s.kind {
            ScalarKind::Null => J::Null,
            ScalarKind::Bool(b) => J::Bool(b),
            ScalarKind::Int(i) => J::from(i),
            ScalarKind::Float(f) => serde_json::Number::from_f64(f).map_or(J::Null, J::Number),
            ScalarKind::Str => J::String(s.text.clone()),
        },
        Value::Seq(items) => J::Array(items.iter().map(json).collect()),
        Value::Map(entries) => J::Object(
            entries
                .iter()
                .filter_map(|e| Some((e.key.clone()?, json(&e.value))))
                .collect(),
        ),
    }
}
