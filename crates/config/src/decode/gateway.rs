//! `gateway`: timeouts, restarts and paging.

use moniker_surface::vocab::Seg;

use super::{Cx, Slot, join};
use crate::gateway::{DURATION_HELP, GatewaySettings, parse_duration, seconds};
use crate::report::codes;
use crate::tree::{ScalarKind, shorten};

const GATEWAY_KEYS: &[&str] = &["call_timeout", "start_timeout", "restart", "page_size"];
const RESTART_KEYS: &[&str] = &["initial_delay", "max_delay", "max_attempts"];

impl Cx<'_> {
    pub(super) fn gateway<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> GatewaySettings {
        let fields = self.fields(slot, p, Some(GATEWAY_KEYS), "a map of gateway settings");
        let field = |name: &'static str| join(p, Seg::Key(name));
        let mut out = GatewaySettings::default();
        if let Some(d) = fields
            .get("call_timeout")
            .and_then(|s| self.duration(&field("call_timeout"), s, false))
        {
            out.call_timeout = d;
        }
        if let Some(d) = fields
            .get("start_timeout")
            .and_then(|s| self.duration(&field("start_timeout"), s, false))
        {
            out.start_timeout = d;
        }
        if let Some(size) = fields.get("page_size") {
            out.page_size = self.count(&field("page_size"), size).filter(|n| *n > 0);
        }
        let Some(restart) = fields.get("restart") else {
            return out;
        };
        let rp = field("restart");
        let fields = self.fields(
            restart,
            &rp,
            Some(RESTART_KEYS),
            "a map of restart settings",
        );
        let field = |name: &'static str| join(&rp, Seg::Key(name));
        let initial = fields.get("initial_delay").and_then(|s| {
            let d = self.duration(&field("initial_delay"), s, true)?;
            Some((d, s))
        });
        if let Some(d) = fields
            .get("max_delay")
            .and_then(|s| self.duration(&field("max_delay"), s, false))
        {
            out.restart_max_delay = d;
        }
        if let Some((d, s)) = initial {
            if d > out.restart_max_delay {
                self.error(
                    codes::INVALID_VALUE,
                    format!(
                        "`initial_delay` ({d:?}) is longer than `max_delay` ({:?})",
                        out.restart_max_delay
                    ),
                    &field("initial_delay"),
                    s.point(),
                    Some("make `initial_delay` at most `max_delay`".to_owned()),
                );
            } else {
                out.restart_initial_delay = d;
            }
        }
        if let Some(s) = fields.get("max_attempts") {
            if !s.node.is_null() {
                out.restart_max_attempts = self.count(&field("max_attempts"), s);
            }
        }
        out
    }

    /// Seconds (a number), or a string with a unit. Nothing keeps the default.
    pub(super) fn duration(
        &mut self,
        p: &[Seg<'_>],
        slot: Slot<'_>,
        zero_ok: bool,
    ) -> Option<std::time::Duration> {
        let Some((text, kind)) = slot.scalar() else {
            self.type_error("a duration", p, slot);
            return None;
        };
        let duration = match kind {
            ScalarKind::Null => return None,
            ScalarKind::Int(i) => seconds(i as f64),
            ScalarKind::Float(f) => seconds(f),
            ScalarKind::Str => parse_duration(text),
            ScalarKind::Bool(_) => {
                self.type_error("a duration", p, slot);
                return None;
            }
        };
        match duration {
            None => {
                self.error(
                    codes::INVALID_VALUE,
                    format!("`{}` is not a duration", shorten(text)),
                    p,
                    slot.point(),
                    Some(DURATION_HELP.to_owned()),
                );
                None
            }
            Some(d) if d.is_zero() && !zero_ok => {
                self.error(
                    codes::INVALID_VALUE,
                    format!("`{}` is zero; this duration must be longer", shorten(text)),
                    p,
                    slot.point(),
                    Some(DURATION_HELP.to_owned()),
                );
                None
            }
            Some(d) => Some(d),
        }
    }
}
