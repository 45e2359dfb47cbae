//! What the commands that run servers read of the config alike (`serve`, `call`, ..., and a
//! reload): the servers to run and the HTTP settings.

use moniker_config::{Config, TokenConfig};
use moniker_gateway::ServerEntry;
use moniker_gateway::telemetry::Export;

/// The servers of `config` to run (its disabled ones are not).
pub(crate) fn entries(config: &Config) -> Vec<ServerEntry> {
    let mut servers = Vec::new();
    for (id, server) in &config.servers {
        if server.disabled {
            tracing::info!(server = %id, "disabled in the config");
            continue;
        }
        servers.push(ServerEntry {
            id: id.clone(),
            spec: server.transport.clone(),
            modern: server.modern,
        });
    }
    servers
}

/// The config's `http:` section with the tokens of `$MONIKER_TOKENS` (comma-separated, not
/// bound to a toolset) added to `http.tokens`.
pub(crate) fn http_settings(config: &Config) -> moniker_config::HttpConfig {
    let mut http = config.http.clone();
    if let Ok(list) = std::env::var("MONIKER_TOKENS") {
        http.tokens.extend(
            list.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(|t| TokenConfig {
                    token: t.to_owned(),
                    toolset: None,
                    name: None,
                }),
        );
    }
    http
}

/// Where traces go: the config's `telemetry:`, else the standard variables
/// (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT`); `None` (off) when
/// neither says, or `OTEL_SDK_DISABLED=true`, or `OTEL_TRACES_EXPORTER=none`.
pub(crate) fn telemetry(config: &Config) -> Option<Export> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
    let from_env = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
        || var("OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
    if disabled || (config.telemetry.is_none() && !from_env) {
        return None;
    }
    let configured = config.telemetry.clone().unwrap_or_default();
    Some(Export {
        endpoint: configured.endpoint,
        service_name: configured
            .service_name
            .or_else(|| var("OTEL_SERVICE_NAME"))
            .unwrap_or_else(|| "moniker".to_owned()),
    })
}

/// The static embedding table `discovery.model` names, read and checked; `Ok(None)`: the
/// shipped one.
pub(crate) fn search_model(
    config: &Config,
) -> Result<Option<std::sync::Arc<moniker_surface::search::Model>>, String> {
    let Some(path) = &config.search_model else {
        return Ok(None);
    };
    let bytes = std::fs::read(path).map_err(|e| format!("discovery.model `{path}`: {e}"))?;
    moniker_surface::search::Model::parse(std::borrow::Cow::Owned(bytes))
        .map(|model| Some(std::sync::Arc::new(model)))
        .map_err(|e| format!("discovery.model `{path}`: {e}"))
}

/// The day deprecation schedules apply on: `$MONIKER_TODAY` (`YYYY-MM-DD`, to see what a
/// later day will break), else the system clock's (UTC).
pub(crate) fn today() -> Result<moniker_surface::Date, String> {
    if let Ok(text) = std::env::var("MONIKER_TODAY") {
        return text.parse().map_err(|e| format!("$MONIKER_TODAY: {e}"));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    Ok(moniker_surface::Date::from_unix(
        i64::try_from(now).unwrap_or_default(),
    ))
}
