//! `discovery`, at the top or in a toolset: how clients discover tools. `discovery: search`,
//! or `discovery: { mode: search, pin: [read_file], pin_tags: core }`; at the top, also
//! `model: PATH` (search's semantic half: a sentence-embedding model's folder, or a static
//! embedding table, in place of the shipped one) and `learn: false` (search does not learn
//! from the calls that follow it).

use moniker_surface::discovery::{Discovery, Mode};
use moniker_surface::vocab::Seg;

use super::{Cx, Slot, join};
use crate::report::codes;
use crate::shape::keys;
use crate::tree::{ScalarKind, Value, shorten};

const MODE_HELP: &str = "write `list` (every tool), `search` (the pinned tools, `search_tools` and `call_tool`) or `hints` (every tool, with `_meta` hints for clients that defer loading)";

impl Cx<'_> {
    pub(super) fn discovery<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Discovery {
        let mut out = Discovery::default();
        if let Value::Scalar(_) = &slot.node.value {
            if let Some(mode) = self.mode(p, slot) {
                out.mode = mode;
            }
            return out;
        }
        let fields = self.fields(
            slot,
            p,
            Some(keys::DISCOVERY_SETTINGS),
            "a mode, or a map of discovery settings",
        );
        let field = |name: &'static str| join(p, Seg::Key(name));
        if let Some(mode) = self.field(p, &fields, "mode", Self::mode).flatten() {
            out.mode = mode;
        }
        let pin = self.field(p, &fields, "pin", |cx, at, s| cx.references(at, s, "tool"));
        out.pin = pin.unwrap_or_default();
        out.pin_tags = self.field(p, &fields, "pin_tags", Self::tag_expr).flatten();
        // One index serves every toolset: its model, and what calls taught it, are the
        // gateway's.
        if let Some(s) = self.gateways(p, &fields, "model", "have a search model of its own") {
            self.search_model = self.string(&field("model"), s);
        }
        if let Some(s) = self.gateways(p, &fields, "learn", "learn apart from the gateway") {
            if let Some(learn) = self.boolean(&field("learn"), s) {
                self.search_learns = learn;
            }
        }
        out
    }

    /// The field `key` of the top-level `discovery` (`p` is its path); in a toolset's, refused
    /// (a toolset cannot `what`).
    fn gateways<'n>(
        &mut self,
        p: &[Seg<'n>],
        fields: &super::Fields<'n>,
        key: &'static str,
        what: &str,
    ) -> Option<Slot<'n>> {
        let s = fields.get(key)?;
        if p.len() == 1 {
            return Some(s);
        }
        self.error(
            codes::INVALID_VALUE,
            format!("a toolset cannot {what}"),
            &join(p, Seg::Key(key)),
            s.point(),
            Some(format!("set `{key}` in the top-level `discovery`")),
        );
        None
    }

    fn mode(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<Mode> {
        match slot.scalar() {
            Some((text, ScalarKind::Str)) => {
                let mode = Mode::parse(text);
                if mode.is_none() {
                    self.error(
                        codes::INVALID_VALUE,
                        format!("unknown discovery mode `{}`", shorten(text)),
                        p,
                        slot.point(),
                        Some(MODE_HELP.to_owned()),
                    );
                }
                mode
            }
            _ => {
                self.type_error("`list`, `search` or `hints`", p, slot);
                None
            }
        }
    }
}
