//! What the commands that run servers read of the config alike (`serve`, `call`, ..., and a
//! reload): the servers to run and the HTTP settings.

use moniker_config::{Config, TokenConfig};
use moniker_gateway::ServerEntry;

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
