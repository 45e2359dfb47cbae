//! OpenTelemetry traces of calls, exported over OTLP/HTTP (the `opentelemetry` crates): a
//! span for each call moniker handles (kind server, parented on the client's span when its
//! `_meta` or its HTTP request carries a W3C `traceparent`), and one for each request it sends
//! to a server (kind client), whose context goes to the server in the request's `_meta`
//! (`traceparent`, `tracestate`, as the MCP conventions put it) and, to an HTTP server, as
//! headers. The attributes are the OpenTelemetry MCP semantic conventions' (`mcp.method.name`,
//! `gen_ai.tool.name`, `gen_ai.prompt.name`, `mcp.resource.uri`, `mcp.protocol.version`,
//! `error.type`) and moniker's (`moniker.server`, `moniker.toolset`, `moniker.via`, ...).
//!
//! Off unless configured; off, a call carries `None` and nothing else is done for it.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, SystemTime};

use crate::message::{Edit, Field, Message, Params};
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{
    SpanKind, Status, TraceContextExt as _, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

/// The tracer and the provider that exports its spans.
pub struct Telemetry {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

/// Where and as what moniker exports its spans (see `moniker_config::TelemetrySettings`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Export {
    /// The OTLP/HTTP traces URL; `None`: as `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT` say.
    pub endpoint: Option<String>,
    pub service_name: String,
}

/// A W3C trace context as it came: `traceparent`, and `tracestate` when there was one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceContext {
    pub traceparent: String,
    pub tracestate: Option<String>,
}

impl Telemetry {
    /// Starts exporting: spans are batched and sent from a thread of the SDK's, each export
    /// over moniker's own HTTP client on the current tokio runtime.
    pub fn start(export: &Export) -> Result<Self, String> {
        let client = Client {
            http: crate::tls::http_client(&moniker_config::Tls::default(), Duration::from_secs(10))
                .map_err(|e| format!("the telemetry HTTP client: {e}"))?,
            runtime: tokio::runtime::Handle::try_current()
                .map_err(|_| "telemetry needs a tokio runtime".to_owned())?,
        };
        let mut builder = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client);
        if let Some(endpoint) = &export.endpoint {
            builder = builder.with_endpoint(traces_url(endpoint));
        }
        let exporter = builder
            .build()
            .map_err(|e| format!("the telemetry exporter: {e}"))?;
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(export.service_name.clone())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("moniker");
        Ok(Self { provider, tracer })
    }

    /// Sends what is left and stops (at the end of `serve`), off the async threads: the SDK
    /// blocks its caller until its last export is over.
    pub async fn shutdown(&self) {
        let provider = self.provider.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let _ = provider.force_flush();
            let _ = provider.shutdown();
        })
        .await;
    }

    /// The span of a call moniker handles, child of the client's span when it sent one.
    pub(crate) fn handled(
        &self,
        name: String,
        parent: Option<&TraceContext>,
        attributes: Vec<KeyValue>,
    ) -> Span {
        let parent = parent.map(extract).unwrap_or_default();
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        Span {
            cx: parent.with_span(span),
        }
    }

    /// The span of a request moniker sends to a server for the call of `parent`, started at
    /// `at`.
    pub(crate) fn sent(
        &self,
        parent: &Span,
        name: String,
        at: SystemTime,
        attributes: Vec<KeyValue>,
    ) -> Span {
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Client)
            .with_start_time(at)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent.cx);
        Span {
            cx: parent.cx.with_span(span),
        }
    }
}

/// A span in progress, with the context it makes.
pub(crate) struct Span {
    cx: Context,
}

impl Span {
    pub(crate) fn set(&self, attributes: Vec<KeyValue>) {
        self.cx.span().set_attributes(attributes);
    }

    pub(crate) fn rename(&self, name: String) {
        self.cx.span().update_name(name);
    }

    /// Ends it; `error`: the `error.type` of a call that failed.
    pub(crate) fn end(self, error: Option<String>) {
        let span = self.cx.span();
        if let Some(error) = error {
            span.set_attribute(KeyValue::new("error.type", error.clone()));
            span.set_status(Status::error(error));
        }
        span.end();
    }

    /// The W3C trace context that makes a span its child: for the server.
    pub(crate) fn context(&self) -> TraceContext {
        let mut fields: HashMap<String, String> = HashMap::new();
        TraceContextPropagator::new().inject_context(&self.cx, &mut fields);
        TraceContext {
            traceparent: fields.remove("traceparent").unwrap_or_default(),
            tracestate: fields.remove("tracestate").filter(|s| !s.is_empty()),
        }
    }
}

/// The trace context a client put in a request's `_meta` (`traceparent`, `tracestate`),
/// recorded where the request was read.
pub(crate) fn parent_of(request: &Message) -> Option<TraceContext> {
    Some(TraceContext {
        traceparent: request.str_of(Field::Traceparent)?.into_owned(),
        tracestate: request.str_of(Field::Tracestate).map(|s| s.into_owned()),
    })
}

/// `params` with `trace` in its `_meta`, for the server.
pub(crate) fn with_context(params: &Params, trace: &TraceContext) -> Params {
    let parent = crate::message::string(&trace.traceparent);
    let state = trace.tracestate.as_deref().map(crate::message::string);
    let mut set = vec![Edit::Set(Field::Traceparent, parent.as_str())];
    if let Some(state) = &state {
        set.push(Edit::Set(Field::Tracestate, state.as_str()));
    }
    params.edit(&set)
}

fn extract(trace: &TraceContext) -> Context {
    let mut fields: HashMap<String, String> = HashMap::new();
    fields.insert("traceparent".to_owned(), trace.traceparent.clone());
    if let Some(state) = &trace.tracestate {
        fields.insert("tracestate".to_owned(), state.clone());
    }
    TraceContextPropagator::new().extract(&fields)
}

/// A base URL gets the traces path; a URL that names it already is kept.
fn traces_url(endpoint: &str) -> String {
    let trimmed = endpoint.trim_end_matches('/');
    if trimmed.ends_with("/v1/traces") {
        trimmed.to_owned()
    } else {
        format!("{trimmed}/v1/traces")
    }
}

/// The exporter's HTTP client: moniker's reqwest, run on moniker's tokio runtime (the SDK
/// exports from a thread of its own, which has none).
struct Client {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("moniker's OTLP client")
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Client {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let (parts, body) = request.into_parts();
        let mut outgoing = self
            .http
            .request(parts.method, parts.uri.to_string())
            .body(body);
        for (name, value) in &parts.headers {
            outgoing = outgoing.header(name, value);
        }
        let sent = self.runtime.spawn(async move {
            let response = outgoing.send().await?;
            let status = response.status();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, body))
        });
        let (status, body) = sent.await??;
        let mut response = http::Response::new(body);
        *response.status_mut() = status;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_gets_the_traces_path() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://c:4318/v1/traces/"),
            "http://c:4318/v1/traces"
        );
    }

    #[test]
    fn a_clients_context_is_read_and_passed_on() {
        let parent = TraceContext {
            traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned(),
            tracestate: Some("vendor=x".to_owned()),
        };
        let cx = extract(&parent);
        let span = cx.span();
        let seen = span.span_context();
        assert!(seen.is_valid());
        assert_eq!(
            seen.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(seen.span_id().to_string(), "b7ad6b7169203331");
        let passed = Span { cx: cx.clone() }.context();
        assert_eq!(passed, parent);
        // Nonsense is no parent.
        let bad = extract(&TraceContext {
            traceparent: "00-zz\n-01".to_owned(),
            tracestate: None,
        });
        assert!(!bad.span().span_context().is_valid());
    }
}
