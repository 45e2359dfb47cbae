//! `gateway`: timeouts, restarts and paging.

use moniker_surface::vocab::Seg;

use super::{Cx, Fields, Slot, join};
use crate::gateway::{
    AuditSettings, AuditTo, DURATION_HELP, GatewaySettings, Limits, TelemetrySettings,
    parse_duration, seconds,
};
use crate::report::codes;
use crate::shape::keys;
use crate::tree::{ScalarKind, shorten};

impl Cx<'_> {
    pub(super) fn gateway<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> GatewaySettings {
        let fields = self.fields(slot, p, Some(keys::GATEWAY), "a map of gateway settings");
        let field = |name: &'static str| join(p, Seg::Key(name));
        let mut out = GatewaySettings::default();
        let mut duration = |name: &'static str, zero: bool, to: &mut std::time::Duration| {
            if let Some(d) = fields
                .get(name)
                .and_then(|s| self.duration(&field(name), s, zero))
            {
                *to = d;
            }
        };
        duration("call_timeout", false, &mut out.call_timeout);
        duration("start_timeout", false, &mut out.start_timeout);
        duration("list_wait", true, &mut out.list_wait);
        duration("idle_stop", true, &mut out.idle_stop);
        if let Some(size) = fields.get("page_size") {
            out.page_size = self.count(&field("page_size"), size).filter(|n| *n > 0);
        }
        if let Some(names) = fields.get("pass_env") {
            out.pass_env = self.pass_env(&field("pass_env"), names);
        }
        if let Some(s) = fields.get("sandbox") {
            out.sandbox = self.sandbox(&field("sandbox"), s);
        }
        if let Some(restart) = fields.get("restart") {
            self.restart(&field("restart"), restart, &mut out);
        }
        out
    }

    /// `gateway.restart`: the backoff of a server's restarts.
    fn restart<'n>(&mut self, rp: &[Seg<'n>], restart: Slot<'n>, out: &mut GatewaySettings) {
        let fields = self.fields(
            restart,
            rp,
            Some(keys::RESTART),
            "a map of restart settings",
        );
        let field = |name: &'static str| join(rp, Seg::Key(name));
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
    }

    /// `call_timeout` and `max_in_flight` among the fields of a server or an override at `p`.
    pub(super) fn limits(&mut self, p: &[Seg<'_>], fields: &Fields<'_>) -> Limits {
        let field = |name: &'static str| join(p, Seg::Key(name));
        Limits {
            call_timeout: fields
                .get("call_timeout")
                .and_then(|s| self.duration(&field("call_timeout"), s, false)),
            max_in_flight: fields.get("max_in_flight").and_then(|s| {
                let at = field("max_in_flight");
                let n = self.count(&at, s)?;
                if n == 0 {
                    self.error(
                        codes::INVALID_VALUE,
                        "`0` calls at once would refuse every call".to_owned(),
                        &at,
                        s.point(),
                        Some("write 1 or more, or leave it out for no cap".to_owned()),
                    );
                    return None;
                }
                Some(n)
            }),
        }
    }

    /// `audit:`: `stderr`, a file path, or `{to, max_bytes, keep}`.
    pub(super) fn audit<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Option<AuditSettings> {
        let to = |text: String| match text.as_str() {
            "stderr" | "-" => AuditTo::Stderr,
            _ => AuditTo::File(text),
        };
        let mut out = AuditSettings {
            to: AuditTo::Stderr,
            max_bytes: AuditSettings::DEFAULT_MAX_BYTES,
            keep: AuditSettings::DEFAULT_KEEP,
        };
        if slot.scalar().is_some() {
            out.to = to(self.string(p, slot)?);
            return Some(out);
        }
        let fields = self.fields(
            slot,
            p,
            Some(keys::AUDIT_SETTINGS),
            "`stderr`, a file, or {to, max_bytes, keep}",
        );
        let field = |name: &'static str| join(p, Seg::Key(name));
        match fields.get("to") {
            Some(s) => out.to = to(self.string(&field("to"), s)?),
            None => {
                self.error(
                    codes::MISSING_KEY,
                    "the audit log needs `to`".to_owned(),
                    p,
                    slot.point(),
                    Some("write `to: stderr` or `to: /var/log/moniker/audit.jsonl`".to_owned()),
                );
                return None;
            }
        }
        if let Some(s) = fields.get("max_bytes") {
            out.max_bytes = u64::from(self.count(&field("max_bytes"), s)?.max(1));
        }
        if let Some(s) = fields.get("keep") {
            out.keep = self.count(&field("keep"), s)?;
        }
        Some(out)
    }

    /// `telemetry:`: the collector's URL, or `{endpoint, service_name}` (a map without
    /// `endpoint` leaves it to the `OTEL_*` variables).
    pub(super) fn telemetry<'n>(
        &mut self,
        p: &[Seg<'n>],
        slot: Slot<'n>,
    ) -> Option<TelemetrySettings> {
        let mut out = TelemetrySettings::default();
        if slot.scalar().is_some() {
            out.endpoint = Some(self.url(p, slot)?);
            return Some(out);
        }
        let fields = self.fields(
            slot,
            p,
            Some(keys::TELEMETRY_SETTINGS),
            "a URL, or {endpoint, service_name}",
        );
        let field = |name: &'static str| join(p, Seg::Key(name));
        if let Some(s) = fields.get("endpoint") {
            out.endpoint = Some(self.url(&field("endpoint"), s)?);
        }
        if let Some(s) = fields.get("service_name") {
            out.service_name = Some(self.string(&field("service_name"), s)?);
        }
        Some(out)
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
