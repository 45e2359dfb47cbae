//! The `gateway:` section: timeouts and the restart backoff of crashed servers.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewaySettings {
    /// How long a call to a server may take (`gateway.call_timeout`).
    pub call_timeout: Duration,
    /// How long a server may take to start: spawn or connect, `initialize` and the first
    /// listing (`gateway.start_timeout`). Clients do not wait for it: see `list_wait`.
    pub start_timeout: Duration,
    /// How long a client's first listing waits for servers still starting
    /// (`gateway.list_wait`); those that join later are announced with `list_changed`.
    pub list_wait: Duration,
    /// How long the shared gateway of a config runs on once its last stdio client has gone
    /// (`gateway.idle_stop`): a client that opens a session per call finds it warm.
    pub idle_stop: Duration,
    /// The first restart delay, doubled after each failed attempt
    /// (`gateway.restart.initial_delay`).
    pub restart_initial_delay: Duration,
    /// The longest restart delay (`gateway.restart.max_delay`).
    pub restart_max_delay: Duration,
    /// Restarts before a server is given up; `None` = never give up
    /// (`gateway.restart.max_attempts`).
    pub restart_max_attempts: Option<u32>,
    /// Items per page of `tools/list` and `prompts/list`; `None`: one page
    /// (`gateway.page_size`).
    pub page_size: Option<u32>,
    /// What of moniker's environment every stdio server is given besides its own `pass_env`
    /// (`gateway.pass_env`): names, or `all`.
    pub pass_env: crate::PassEnv,
    /// The sandbox of every stdio server whose config does not say (`gateway.sandbox`; a
    /// server's `sandbox: false` runs it without).
    pub sandbox: Option<crate::Sandbox>,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(60),
            // A first `npx -y` or `uvx` run downloads its package: twenty of them started
            // together on two cores take about a minute.
            start_timeout: Duration::from_secs(120),
            // Below the 5 s a client library waits for an answer by default (openai-agents).
            list_wait: Duration::from_secs(3),
            idle_stop: Duration::from_secs(60),
            restart_initial_delay: Duration::from_millis(500),
            restart_max_delay: Duration::from_secs(30),
            restart_max_attempts: None,
            page_size: None,
            pass_env: crate::PassEnv::default(),
            sandbox: None,
        }
    }
}

/// Limits on the calls to one server, or to one tool or prompt (`servers.<id>` and `tools.<name>`
/// entries: `call_timeout`, `max_in_flight`). What is not set is the gateway's: its call timeout,
/// and no cap on calls at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// How long a call may take.
    pub call_timeout: Option<Duration>,
    /// Calls in progress at once; one more is refused at once, naming the limit.
    pub max_in_flight: Option<u32>,
}

impl Limits {
    pub fn is_set(&self) -> bool {
        self.call_timeout.is_some() || self.max_in_flight.is_some()
    }
}

/// Every limit the config sets on calls: by server id, and by the key of a `tools:` or
/// `prompts:` override (`<origin name>` or `<server id>/<origin name>`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallLimits {
    pub servers: std::collections::BTreeMap<moniker_surface::ServerId, Limits>,
    pub tools: std::collections::BTreeMap<String, Limits>,
    pub prompts: std::collections::BTreeMap<String, Limits>,
}

/// The audit log (`audit:`): one JSON line per `tools/call`, `prompts/get` and
/// `resources/read`. Off unless configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditSettings {
    /// `stderr`, or a file (`~` is the caller's to expand).
    pub to: AuditTo,
    /// A file is rotated when it would grow past this many bytes (`max_bytes`, 10 MB).
    pub max_bytes: u64,
    /// Rotated files kept: `audit.jsonl.1` (the newest) to `.N` (`keep`, 3).
    pub keep: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditTo {
    Stderr,
    File(String),
}

impl AuditSettings {
    pub const DEFAULT_MAX_BYTES: u64 = 10_000_000;
    pub const DEFAULT_KEEP: u32 = 3;
}

/// OpenTelemetry traces (`telemetry:`), exported over OTLP/HTTP. Off unless configured, here or
/// by the standard `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetrySettings {
    /// The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`; `/v1/traces` is added),
    /// or the whole traces URL. `None`: the `OTEL_*` variables say.
    pub endpoint: Option<String>,
    /// `service.name` of moniker's spans (else `$OTEL_SERVICE_NAME`, else `moniker`).
    pub service_name: Option<String>,
}

pub(crate) const DURATION_HELP: &str =
    "write a number of seconds (`30`, `0.5`) or a number with a unit: `500ms`, `30s`, `2m`, `1h`";

/// `500ms`, `30s`, `1.5s`, `2m`, `1h`; `None` when it is none of these.
pub(crate) fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim_start() {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    if number.is_empty() || number == "." {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    seconds(value * scale)
}

/// A non-negative, finite, representable number of seconds.
pub(crate) fn seconds(value: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("10 s"), Some(Duration::from_secs(10)));
        for bad in ["", "30", "s", "5x", "-1s", "1..2s", ".s", "1e400s", "9e99h"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
        assert_eq!(seconds(-1.0), None);
        assert_eq!(seconds(f64::NAN), None);
        assert_eq!(seconds(f64::INFINITY), None);
    }
}
