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
            sandbox: server.sandbox.clone(),
            per_person: server.per_person.clone(),
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

/// What `discovery.model` names for search's semantic half: a model's folder
/// (`model.safetensors`, `config.json`, `tokenizer.json`: run whole) or a static embedding
/// table's file, read and checked. `None`: the shipped table, also when the one named cannot
/// be read (said as a warning: search still works, with less).
pub(crate) fn search_model(config: &Config) -> Option<moniker_surface::search::Meaning> {
    let (path, named_by) = model_named(config)?;
    let path = path.as_path();
    let started = std::time::Instant::now();
    match read_meaning(path) {
        Ok(meaning) => {
            tracing::debug!(path = %path.display(), elapsed = ?started.elapsed(), "search model loaded");
            Some(meaning)
        }
        Err(why) => {
            tracing::warn!(
                "{named_by} `{}`: {why}; search uses the table moniker ships",
                path.display()
            );
            None
        }
    }
}

/// The variable that names a model when the config does not: what the PyPI package's
/// launcher sets when its `model` extra is installed.
const MODEL_VAR: &str = "MONIKER_MODEL";

/// The model search runs for `config`, and what named it (see [`model_path`]).
pub(crate) fn model_named(config: &Config) -> Option<(std::path::PathBuf, &'static str)> {
    model_path(config, std::env::var_os(MODEL_VAR), &installed_models())
}

/// Where a model is installed without naming it, in order: the `model` folder beside the
/// moniker binary (a release archive's), and `<user data dir>/moniker/model` (where
/// `crates/surface/model/fetch.sh` puts it by default, for `cargo install` users).
fn installed_models() -> Vec<(std::path::PathBuf, &'static str)> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| std::fs::canonicalize(exe).ok())
        .and_then(|exe| exe.parent().map(|dir| dir.join("model")));
    let data = dirs::data_dir().map(|dir| dir.join("moniker").join("model"));
    [
        (beside, "the model beside moniker"),
        (data, "the model in the user data dir"),
    ]
    .into_iter()
    .filter_map(|(dir, by)| Some((dir?, by)))
    .collect()
}

/// The model search runs, and what named it: `discovery.model`, else when something of the
/// config searches (the gateway's discovery or a toolset's: a model costs some 65 MB of memory,
/// which a gateway that never searches should not pay) `$MONIKER_MODEL` (`var`), else the
/// first of `installed` that is a folder with a model's weights in it.
fn model_path(
    config: &Config,
    var: Option<std::ffi::OsString>,
    installed: &[(std::path::PathBuf, &'static str)],
) -> Option<(std::path::PathBuf, &'static str)> {
    if let Some(path) = config.search_model.as_deref() {
        return Some((expand_home(path), "discovery.model"));
    }
    use moniker_surface::rules::Mode;
    let rules = &config.rules;
    let searches = rules.discovery.mode == Mode::Search
        || rules.toolsets.sets.values().any(|set| {
            set.discovery
                .as_ref()
                .is_some_and(|d| d.mode == Mode::Search)
        });
    if !searches {
        return None;
    }
    if let Some(var) = var.filter(|v| !v.is_empty()) {
        let path = match var.to_str() {
            Some(text) => expand_home(text),
            None => std::path::PathBuf::from(var),
        };
        return Some((path, "$MONIKER_MODEL"));
    }
    installed
        .iter()
        .find(|(dir, _)| dir.join("model.safetensors").is_file())
        .cloned()
}

fn read_meaning(path: &std::path::Path) -> Result<moniker_surface::search::Meaning, String> {
    use moniker_model::Encoder;
    use moniker_surface::search::{Meaning, Model};
    use std::sync::Arc;
    let read = |name: &str| {
        let file = path.join(name);
        std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))
    };
    if path.is_dir() {
        let file = path.join("model.safetensors");
        let weights = std::fs::File::open(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let encoder = Encoder::new(weights, &read("config.json")?, &read("tokenizer.json")?)
            .map_err(|e| e.to_string())?;
        return Ok(Meaning::Encoder(Arc::new(encoder)));
    }
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let model = Model::parse(std::borrow::Cow::Owned(bytes)).map_err(|e| e.to_string())?;
    Ok(Meaning::Table(Arc::new(model)))
}

/// The day deprecation schedules apply on: `$MONIKER_TODAY` (`YYYY-MM-DD`, to see what a
/// later day will break), else the system clock's (UTC).
pub(crate) fn today() -> Result<moniker_surface::Date, String> {
    if let Ok(text) = std::env::var("MONIKER_TODAY") {
        return text.parse().map_err(|e| format!("$MONIKER_TODAY: {e}"));
    }
    Ok(clock_day())
}

/// The system clock's day (UTC).
fn clock_day() -> moniker_surface::Date {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    moniker_surface::Date::from_unix(i64::try_from(now).unwrap_or_default())
}

/// `~/x` is under the home directory.
pub(crate) fn expand_home(path: &str) -> std::path::PathBuf {
    match (path.strip_prefix("~/"), dirs_home()) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => std::path::PathBuf::from(path),
    }
}

fn dirs_home() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(std::path::PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::model_path;

    fn named(yaml: &str, var: Option<&str>) -> Option<(String, &'static str)> {
        let config = moniker_config::parse("moniker.yaml", yaml).expect("a config");
        model_path(&config, var.map(Into::into), &[]).map(|(p, by)| (p.display().to_string(), by))
    }

    #[test]
    fn the_model_is_the_configs_else_the_variables_when_something_searches() {
        let var = Some("/opt/model");
        let from_var = Some(("/opt/model".to_owned(), "$MONIKER_MODEL"));
        assert_eq!(named("discovery: search\n", var), from_var);
        let toolset = "toolsets:\n  t:\n    tools: [a]\n    discovery: search\n";
        assert_eq!(named(toolset, var), from_var);
        // Nothing searches: no model is loaded for nothing.
        assert_eq!(named("discovery: list\n", var), None);
        assert_eq!(named("", var), None);
        assert_eq!(named("discovery: search\n", Some("")), None);
        assert_eq!(named("discovery: search\n", None), None);
        // The config's wins, searching or not.
        let config = "discovery: { mode: list, model: /srv/m }\n";
        let from_config = Some(("/srv/m".to_owned(), "discovery.model"));
        assert_eq!(named(config, var), from_config);
    }

    /// Without a name, an installed model serves: the first place that has one.
    #[test]
    fn an_installed_model_serves_when_none_is_named() {
        let dir = tempfile::tempdir().expect("dir");
        let (empty, full) = (dir.path().join("empty"), dir.path().join("full"));
        std::fs::create_dir_all(&empty).expect("empty");
        std::fs::create_dir_all(&full).expect("full");
        std::fs::write(full.join("model.safetensors"), b"x").expect("weights");
        let places = [(empty, "first"), (full.clone(), "second")];
        let config = |yaml: &str| moniker_config::parse("moniker.yaml", yaml).expect("a config");
        let searching = config("discovery: search\n");
        assert_eq!(
            model_path(&searching, None, &places),
            Some((full, "second"))
        );
        assert_eq!(
            model_path(&config("discovery: list\n"), None, &places),
            None
        );
        let var = Some("/opt/model".into());
        assert_eq!(
            model_path(&searching, var, &places).map(|(_, by)| by),
            Some("$MONIKER_MODEL")
        );
    }
}
