//! A call as one value: a client's `tools/call`, `prompts/get` or `resources/read`, from the
//! moment it is read to the one place it finishes. Who asked (the session or token, by its name,
//! never its secret), under which toolset, the name the client used, what it resolved to and
//! where it was routed, how it ended, when it started. Finishing it records its metrics and
//! writes its audit line: nothing else does.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use moniker_surface::{Date, Kind, ServerId, Via};
use serde_json::json;

use opentelemetry::KeyValue;

use crate::errors::Refusal;
use crate::gateway::Gateway;
use crate::message::Message;
use crate::metrics::Outcome;
use crate::telemetry::{Span, Telemetry, TraceContext};

/// Who asks a call: by its name, under which toolset, in which protocol version.
pub(crate) struct Asker {
    /// A token's name or place (`token #2`), `stdio`, `cli`, or `anyone`.
    pub who: Arc<str>,
    pub toolset: Option<String>,
    /// The protocol version the client speaks.
    pub era: Arc<str>,
}

pub(crate) struct Call {
    /// Who asked: a token's name or place (`token #2`), `stdio`, `cli`, or `anyone`.
    who: Arc<str>,
    toolset: Option<String>,
    /// A tool or a prompt; `None`: a resource.
    kind: Option<Kind>,
    /// The name (or URI) as the client used it.
    name: String,
    /// moniker's tool it came through (`call_tool` in search mode), when not called directly.
    through: Option<&'static str>,
    /// The protocol version the client speaks.
    era: Arc<str>,
    started: Instant,
    /// What the name resolved to: the exposed tool or prompt, and how the client named it.
    exposed: Option<String>,
    via: Option<Via>,
    /// The name it was called by is a deprecated one (an alias or legacy name).
    deprecated: bool,
    /// Where it was sent: the server and the name it knows the tool, prompt or resource by,
    /// and when.
    server: Option<ServerId>,
    origin: Option<String>,
    sent: Option<Instant>,
    outcome: Outcome,
    /// The JSON-RPC error code the client was answered with, if it was an error.
    code: Option<i64>,
    /// Its span, and the span of its request to the server, when traces are on.
    span: Option<Span>,
    sent_span: Option<Span>,
    /// Where it is counted and written when it ends (`None` in unit tests).
    gateway: Option<Arc<Gateway>>,
    /// It was finished: dropped before, it ends as given up (a parked call abandoned).
    done: bool,
    /// The searches before it, and whose they are: taught to search if it succeeds.
    lessons: Option<Box<(String, Vec<moniker_surface::search::Lesson>)>>,
    /// Who it went as upstream when that was the caller's own identity (`auth.exchange`).
    upstream: Option<Box<str>>,
}

impl Call {
    /// A call of `name` (a tool or prompt, or a resource's URI) from `asker`, counted and
    /// written to the `gateway`'s metrics and audit log when it ends.
    pub(crate) fn new(
        gateway: Option<Arc<Gateway>>,
        asker: Asker,
        kind: Option<Kind>,
        name: &str,
    ) -> Self {
        let Asker { who, toolset, era } = asker;
        Self {
            span: None,
            sent_span: None,
            gateway,
            done: false,
            who,
            toolset,
            kind,
            name: clipped(name),
            through: None,
            era,
            started: Instant::now(),
            exposed: None,
            via: None,
            deprecated: false,
            server: None,
            origin: None,
            sent: None,
            outcome: Outcome::Ok,
            code: None,
            lessons: None,
            upstream: None,
        }
    }

    /// It went to its server as `subject` (the caller's own token, exchanged).
    pub(crate) fn acted_as(&mut self, subject: &str) {
        self.upstream = Some(clipped(subject).into());
    }

    /// Traces it, as a child of the client's span when it sent one (`parent`).
    pub(crate) fn traced(
        mut self,
        telemetry: &Telemetry,
        parent: Option<&TraceContext>,
        request_id: &str,
    ) -> Self {
        let method = self.method();
        // Named by the method until the name resolves (`finish` names it then): a name the
        // client made up never names a span.
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", method),
            KeyValue::new("mcp.protocol.version", self.era.to_string()),
            KeyValue::new("jsonrpc.request.id", clipped(request_id)),
            KeyValue::new("moniker.principal", self.who.to_string()),
        ];
        attributes.push(match self.kind {
            Some(Kind::Tool) => KeyValue::new("gen_ai.tool.name", self.name.clone()),
            Some(Kind::Prompt) => KeyValue::new("gen_ai.prompt.name", self.name.clone()),
            None => KeyValue::new("mcp.resource.uri", self.name.clone()),
        });
        if self.kind == Some(Kind::Tool) {
            attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
        }
        if let Some(toolset) = &self.toolset {
            attributes.push(KeyValue::new("moniker.toolset", toolset.clone()));
        }
        self.span = Some(telemetry.handled(method.to_owned(), parent, attributes));
        self
    }

    /// It is sent to `server`, which knows it as `origin`, now: the trace context to send
    /// with it, when traces are on.
    pub(crate) fn sending(
        &mut self,
        telemetry: Option<&Telemetry>,
        server: &ServerId,
        origin: &str,
    ) -> Option<TraceContext> {
        self.routed(server, origin);
        self.sent = Some(Instant::now());
        self.send_span(telemetry, server, origin)
    }

    /// The span of its request to the server, and the context that names it: nothing (and
    /// nothing allocated) when traces are off.
    fn send_span(
        &mut self,
        telemetry: Option<&Telemetry>,
        server: &ServerId,
        origin: &str,
    ) -> Option<TraceContext> {
        let (telemetry, parent) = (telemetry?, self.span.as_ref()?);
        if let Some(old) = self.sent_span.take() {
            old.end(None);
        }
        let method = self.method();
        let name = match self.kind {
            Some(_) => format!("{method} {origin}"),
            None => method.to_owned(),
        };
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", method),
            KeyValue::new("moniker.server", server.as_str().to_owned()),
        ];
        attributes.push(match self.kind {
            Some(Kind::Tool) => KeyValue::new("gen_ai.tool.name", origin.to_owned()),
            Some(Kind::Prompt) => KeyValue::new("gen_ai.prompt.name", origin.to_owned()),
            None => KeyValue::new("mcp.resource.uri", origin.to_owned()),
        });
        let span = telemetry.sent(parent, name, SystemTime::now(), attributes);
        let context = span.context();
        self.sent_span = Some(span);
        Some(context)
    }

    /// It came through `through` (moniker's `call_tool`), for `name`.
    pub(crate) fn through(&mut self, through: &'static str, name: &str) {
        self.through = Some(through);
        self.name = clipped(name);
    }

    /// A tool or a prompt; `None`: a resource.
    pub(crate) fn kind(&self) -> Option<Kind> {
        self.kind
    }

    /// Its name resolved to moniker's or a server's `exposed` tool or prompt (none: moniker's
    /// own tool), named by the client `via` its name, an alias or a legacy name (a `deprecated`
    /// one or not).
    pub(crate) fn resolved(&mut self, exposed: Option<&str>, via: Via, deprecated: bool) {
        self.exposed = exposed.map(str::to_owned);
        self.via = Some(via);
        self.deprecated = deprecated;
    }

    /// It routes to `server`, which knows it as `origin` (said in its audit line and spans even
    /// when the limits then refuse it).
    pub(crate) fn routed(&mut self, server: &ServerId, origin: &str) {
        if self.server.as_ref() != Some(server) {
            self.server = Some(server.clone());
        }
        if self.origin.as_deref() != Some(origin) {
            self.origin = Some(origin.to_owned());
        }
    }

    /// No server had it, after all were asked (a resource's URI): it routed nowhere.
    pub(crate) fn routed_nowhere(&mut self) {
        self.server = None;
        self.origin = None;
    }

    /// It follows searches for `lessons` by `principal`: if it succeeds, they are kept for its
    /// tool ([`crate::learned`]).
    pub(crate) fn teaches(
        &mut self,
        principal: &str,
        lessons: Vec<moniker_surface::search::Lesson>,
    ) {
        self.lessons = Some(Box::new((principal.to_owned(), lessons)));
    }

    /// moniker answered it with a tool error (an action refused, bad arguments to its own tools).
    pub(crate) fn tool_error(&mut self) {
        self.outcome = Outcome::ToolError;
    }

    /// The log span of its exchange with its server (debug level), after a line that says
    /// where it goes: what the client called, what that resolved to, how, and where.
    pub(crate) fn log_span(&self) -> tracing::Span {
        let noun = self.kind.unwrap_or(Kind::Tool).noun();
        let tool = self.exposed.as_deref().unwrap_or_default();
        let via = self.via.map_or("", Via::as_str);
        let server = self.server.as_ref().map_or("", ServerId::as_str);
        let origin = self.origin.as_deref().unwrap_or_default();
        let requested = &self.name;
        tracing::debug!(%requested, name = %tool, via, %server, %origin, "{noun} call");
        tracing::debug_span!("call", %tool, %requested, via, %server, %origin)
    }

    pub(crate) fn method(&self) -> &'static str {
        match self.kind {
            Some(Kind::Tool) => "tools/call",
            Some(Kind::Prompt) => "prompts/get",
            None => "resources/read",
        }
    }

    /// moniker answered it with `refusal`.
    pub(crate) fn refused(&mut self, refusal: &Refusal) {
        self.outcome = refusal.outcome();
        self.code = Some(refusal.code());
    }

    /// How it ended, as the relay saw it, and the error code of `reply` when it is an error.
    /// `Some`: the error reads as a refusal of the server's sandbox (noted for `/healthz` and
    /// `doctor`), and this is the setting that would allow it.
    pub(crate) fn ended(
        &mut self,
        outcome: Outcome,
        reply: Option<&Message>,
    ) -> Option<&'static str> {
        self.outcome = outcome;
        self.code = reply.and_then(error_code);
        match (outcome, reply) {
            (Outcome::ToolError | Outcome::Error, Some(reply)) => self.said_by_server(reply),
            _ => None,
        }
    }

    /// A server's error: when the server is sandboxed and the error reads as a refusal of its
    /// sandbox, its slot notes it ([`crate::sandbox::likely`]), and the setting that would
    /// allow it is returned. Read again only when it is small and names a refusal's words.
    fn said_by_server(&self, reply: &Message) -> Option<&'static str> {
        /// The largest error read again for a refusal's words.
        const READ_AT_MOST: usize = 64 * 1024;
        let (Some(gateway), Some(server)) = (&self.gateway, &self.server) else {
            return None;
        };
        let slot = gateway.servers.slot(server)?;
        slot.entry.sandbox.as_ref()?;
        let text = reply.text();
        if text.len() > READ_AT_MOST || !crate::sandbox::mentions_a_refusal(text) {
            return None;
        }
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        let texts = value["result"]["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["text"].as_str())
            .chain(value["error"]["message"].as_str());
        // Each is noted; the last that reads as a refusal is the one said to the client.
        texts.fold(None, |setting, text| slot.said(text).or(setting))
    }

    /// The one end of a call: its metrics, its audit line when the audit log is on, its
    /// spans when traces are.
    pub(crate) fn finish(mut self) {
        self.end();
        self.done = true;
    }

    fn end(&mut self) {
        let Some(gateway) = self.gateway.clone() else {
            return;
        };
        self.end_spans();
        let took = self.sent.map(|sent| sent.elapsed());
        if self.kind.is_some() {
            let label = match (&self.exposed, self.outcome) {
                (Some(exposed), _) => exposed.as_str(),
                (None, Outcome::Unknown) => crate::metrics::UNKNOWN_TOOL,
                (None, _) => self.name.as_str(),
            };
            let server = self.server.as_ref().zip(took);
            gateway
                .services
                .metrics
                .call(label, self.via, self.outcome, server);
        }
        if let (Some(Via::Alias | Via::Legacy), Some(exposed)) = (self.via, &self.exposed) {
            gateway
                .services
                .metrics
                .alias_call(&self.name, exposed, self.deprecated);
        }
        if let (Outcome::Ok, Some(exposed), Some(lessons)) =
            (self.outcome, &self.exposed, self.lessons.take())
        {
            let (principal, lessons) = *lessons;
            gateway.services.learned.teach(&principal, exposed, lessons);
        }
        let recent = gateway.services.recent.get();
        if gateway.services.audit.is_some() || recent.is_some() {
            let line = self.audit_line(self.started.elapsed());
            if let Some(audit) = &gateway.services.audit {
                audit.write(&line);
            }
            if let Some(recent) = recent {
                recent.push(line);
            }
        }
    }

    /// Ends its spans, when traces are on (else nothing is done, and nothing allocated).
    fn end_spans(&mut self) {
        if let Some(span) = self.span.take() {
            let error = self.error_type();
            if let Some(sent) = self.sent_span.take() {
                sent.end(error.clone());
            }
            let mut attributes = Vec::with_capacity(4);
            if let Some(exposed) = &self.exposed {
                attributes.push(KeyValue::new("moniker.tool", exposed.clone()));
            }
            if let Some(via) = self.via {
                attributes.push(KeyValue::new("moniker.via", via.as_str()));
            }
            if let Some(server) = &self.server {
                attributes.push(KeyValue::new("moniker.server", server.as_str().to_owned()));
            }
            if let Some(origin) = &self.origin {
                attributes.push(KeyValue::new("moniker.origin", origin.clone()));
            }
            attributes.push(KeyValue::new("moniker.outcome", self.outcome.as_str()));
            span.set(attributes);
            if let (Some(_), Some(exposed)) = (self.kind, &self.exposed) {
                span.rename(format!("{} {exposed}", self.method()));
            }
            span.end(error);
        }
    }
}

impl Drop for Call {
    /// A call dropped unfinished was given up (a parked call abandoned or expired, its task
    /// aborted): it still gets its metrics, its audit line and its spans, as cancelled.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if self.code.is_none() && self.outcome == Outcome::Ok {
            self.outcome = Outcome::Cancelled;
        }
        self.end();
    }
}

impl Call {
    /// `error.type` of a call that did not end well: the JSON-RPC code, or the outcome.
    fn error_type(&self) -> Option<String> {
        match (self.code, self.outcome) {
            (Some(code), _) => Some(code.to_string()),
            (None, Outcome::Ok) => None,
            (None, outcome) => Some(outcome.as_str().to_owned()),
        }
    }

    /// The audit line: JSON on one line (serde escapes every control character).
    fn audit_line(&self, took: Duration) -> String {
        let mut line = json!({
            "time": timestamp(SystemTime::now()),
            "principal": &*self.who,
            "toolset": self.toolset,
            "method": self.method(),
            "name": self.name,
            "outcome": self.outcome.as_str(),
            "duration_ms": (took.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0,
            "protocol": &*self.era,
        });
        let fields = line.as_object_mut().expect("an object");
        if let Some(through) = self.through {
            fields.insert("through".to_owned(), json!(through));
        }
        if let Some(exposed) = &self.exposed {
            fields.insert("tool".to_owned(), json!(exposed));
        }
        if let Some(via) = self.via {
            fields.insert("via".to_owned(), json!(via.as_str()));
        }
        if let Some(server) = &self.server {
            fields.insert("server".to_owned(), json!(server.as_str()));
        }
        if let Some(origin) = &self.origin {
            fields.insert("origin".to_owned(), json!(origin));
        }
        if let Some(code) = self.code {
            fields.insert("code".to_owned(), json!(code));
        }
        if let Some(upstream) = &self.upstream {
            fields.insert("upstream".to_owned(), json!(upstream));
        }
        line.to_string()
    }
}

/// The most of a client's text a call keeps (its name or URI, its request id) for the audit
/// log and spans: a client cannot make either grow with what it sends.
const MAX_KEPT: usize = 256;

/// `text`, cut to [`MAX_KEPT`] bytes (at a character's boundary, an ellipsis after it).
fn clipped(text: &str) -> String {
    if text.len() <= MAX_KEPT {
        return text.to_owned();
    }
    format!("{}…", crate::message::at_most(text, MAX_KEPT))
}

/// The code of an error response (the one look into an error moniker relays).
fn error_code(reply: &Message) -> Option<i64> {
    reply.error_code()
}

/// RFC 3339 in UTC, to the millisecond: `2026-11-24T15:04:05.123Z`.
fn timestamp(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
    let day = Date::from_unix(seconds);
    let of_day = seconds.rem_euclid(86_400);
    format!(
        "{day}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asker(who: &str, toolset: Option<&str>, era: &str) -> Asker {
        Asker {
            who: who.into(),
            toolset: toolset.map(str::to_owned),
            era: era.into(),
        }
    }

    #[test]
    fn what_a_client_names_is_kept_short() {
        let long = "é".repeat(1000);
        let call = Call::new(None, asker("c", None, "x"), Some(Kind::Tool), &long);
        assert!(
            call.name.len() <= MAX_KEPT + "…".len(),
            "{}",
            call.name.len()
        );
        assert!(call.name.ends_with('…'));
        assert_eq!(clipped("short"), "short");
    }

    /// Traces off: what the call path does for them allocates nothing.
    #[test]
    fn traces_off_cost_no_allocation() {
        let server: ServerId = "s".parse().unwrap();
        let mut call = Call::new(None, asker("c", None, "2025-11-25"), Some(Kind::Tool), "t");
        let mut context = None;
        let info = allocation_counter::measure(|| {
            context = call.send_span(None, &server, "origin");
            call.end_spans();
        });
        assert!(context.is_none());
        assert_eq!(info.count_total, 0);
        // The count is real: an allocation shows.
        let info = allocation_counter::measure(|| drop(std::hint::black_box(vec![1u8; 64])));
        assert_eq!(info.count_total, 1);
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let at = UNIX_EPOCH + Duration::from_millis(1_795_392_000_000 + 3_723_045);
        assert_eq!(timestamp(at), "2026-11-23T01:02:03.045Z");
    }

    #[test]
    fn an_audit_line_is_one_line_whatever_the_name() {
        let mut call = Call::new(
            None,
            asker("ci", Some("review"), "2025-11-25"),
            Some(Kind::Tool),
            "a\nb\r\"c",
        );
        call.refused(&Refusal::UnknownName {
            kind: Kind::Tool,
            name: call.name.clone(),
        });
        let line = call.audit_line(Duration::from_micros(1500));
        assert!(!line.contains('\n') && !line.contains('\r'), "{line}");
        let v: serde_json::Value = serde_json::from_str(&line).expect("json");
        assert_eq!(v["name"], "a\nb\r\"c");
        assert_eq!(v["outcome"], "unknown");
        assert_eq!(v["code"], -32004);
        assert_eq!(v["duration_ms"], 1.5);
        assert_eq!(v["principal"], "ci");
    }
}
