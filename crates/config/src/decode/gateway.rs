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
        let mut out = GatewaySettings::default();
        let mut duration = |name: &'static str, zero: bool, to: &mut std::time::Duration| {
            let read = self.field(p, &fields, name, |cx, at, s| cx.duration(at, s, zero));
            if let Some(d) = read.flatten() {
                *to = d;
            }
        };
        duration("call_timeout", false, &mut out.call_timeout);
        duration("start_timeout", false, &mut out.start_timeout);
        duration("list_wait", true, &mut out.list_wait);
        duration("idle_stop", true, &mut out.idle_stop);
        let size = self.field(p, &fields, "page_size", Self::count).flatten();
        out.page_size = size.filter(|n| *n > 0);
        let pass_env = self.field(p, &fields, "pass_env", Self::pass_env);
        out.pass_env = pass_env.unwrap_or_default();
        out.sandbox = self.field(p, &fields, "sandbox", Self::sandbox).flatten();
        self.field(p, &fields, "restart", |cx, rp, s| {
            cx.restart(rp, s, &mut out)
        });
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
        let initial = self.field(rp, &fields, "initial_delay", |cx, at, s| {
            Some((cx.duration(at, s, true)?, s))
        });
        let max = self.field(rp, &fields, "max_delay", |cx, at, s| {
            cx.duration(at, s, false)
        });
        if let Some(d) = max.flatten() {
            out.restart_max_delay = d;
        }
        if let Some((d, s)) = initial.flatten() {
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
        let call_timeout = self.field(p, fields, "call_timeout", |cx, at, s| {
            cx.duration(at, s, false)
        });
        let max_in_flight = self.field(p, fields, "max_in_flight", |cx, at, s| {
            let n = cx.count(at, s)?;
            if n == 0 {
                cx.error(
                    codes::INVALID_VALUE,
                    "`0` calls at once would refuse every call".to_owned(),
                    at,
                    s.point(),
                    Some("write 1 or more, or leave it out for no cap".to_owned()),
                );
                return None;
            }
            Some(n)
        });
        Limits {
            call_timeout: call_timeout.flatten(),
            max_in_flight: max_in_flight.flatten(),
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
        match self.field(p, &fields, "to", Self::string) {
            Some(text) => out.to = to(text?),
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
        if let Some(n) = self.field(p, &fields, "max_bytes", Self::count) {
            out.max_bytes = u64::from(n?.max(1));
        }
        if let Some(keep) = self.field(p, &fields, "keep", Self::count) {
            out.keep = keep?;
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
        if let Some(url) = self.field(p, &fields, "endpoint", Self::url) {
            out.endpoint = Some(url?);
        }
        if let Some(name) = self.field(p, &fields, "service_name", Self::string) {
            out.service_name = Some(name?);
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
