//! `moniker serve`: one client on stdio (attached to the shared gateway, or standalone), or
//! many over Streamable HTTP.

use std::sync::Arc;

use moniker_config::Config;
use moniker_gateway::Gateway;
use moniker_gateway::serve::http::check_bind;

use crate::args::ServeArgs;
use crate::exit::{Exit, Failure};
use crate::output;
use crate::settings::http_settings;
use crate::start::{Toolsets, start_with};

/// `moniker serve`: one client on stdin and stdout, until stdin closes or a signal comes.
pub async fn serve(mut config: Config, args: ServeArgs) -> Result<Exit, Failure> {
    if args.attaches() {
        return crate::shared::attach(&config, &args).await;
    }
    let toolsets = Toolsets {
        serving: true,
        ..Toolsets::new(
            &config,
            args.manage,
            args.store.clone(),
            args.toolset.clone(),
        )
    };
    let gateway = match start_with(&mut config, toolsets).await? {
        Ok(gateway) => gateway,
        Err(not) => return Ok(not.exit),
    };
    if args.console {
        gateway.control.force_console();
    }
    let watcher = crate::reload::watch(gateway.clone(), &config, args.http);
    let outcome = match args.http {
        Some(addr) => serve_http(&gateway, &config, addr).await,
        None if args.shared => crate::shared::serve(&gateway, &config, &args, stop_signal()).await,
        None => serve_stdio(&gateway, args.metrics).await,
    };
    if let Some(watcher) = watcher {
        watcher.abort();
    }
    gateway.shutdown().await;
    outcome
}

/// Completes on Ctrl-C or SIGTERM.
pub(crate) async fn stop_signal() {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

async fn serve_stdio(
    gateway: &Arc<Gateway>,
    metrics: Option<std::net::SocketAddr>,
) -> Result<Exit, Failure> {
    let (stop_metrics, stopped) = tokio::sync::oneshot::channel::<()>();
    if let Some(addr) = metrics {
        if !addr.ip().is_loopback() {
            // This listener has no tokens: beyond loopback, anyone could read which tools are
            // used, how often and by which names.
            output::report(&format!(
                "error: refusing to serve metrics on {addr}: `--metrics` has no token, so it listens on loopback only (127.0.0.1 or [::1]); for metrics beyond this host use `serve --http` with `http.tokens`"
            ));
            return Ok(Exit::InvalidConfig);
        }
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let gateway = gateway.clone();
        tokio::spawn(async move {
            let stopped = async move {
                let _ = stopped.await;
            };
            if let Err(e) =
                moniker_gateway::serve::metrics::serve_metrics(gateway, listener, stopped).await
            {
                tracing::error!(error = %e, "the metrics endpoint failed");
            }
        });
    }
    let outcome = tokio::select! {
        r = moniker_gateway::serve::stdio::serve(gateway.clone()) => r,
        () = stop_signal() => Ok(()),
    };
    let _ = stop_metrics.send(());
    outcome?;
    Ok(Exit::Ok)
}

async fn serve_http(
    gateway: &Arc<Gateway>,
    config: &Config,
    addr: std::net::SocketAddr,
) -> Result<Exit, Failure> {
    let settings = http_settings(config);
    if let Err(why) = check_bind(addr, &settings) {
        output::report(&format!("error: {why}"));
        return Ok(Exit::InvalidConfig);
    }
    let sets = gateway.naming.toolset_names();
    for token in &settings.tokens {
        if let Some(toolset) = token.toolset.as_deref().filter(|t| !sets.contains(*t)) {
            output::report(&format!(
                "error: a token of `http.tokens` is bound to toolset `{toolset}`, which does not exist"
            ));
            return Ok(Exit::InvalidConfig);
        }
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    output::report(&http_banner(local, &settings));
    moniker_gateway::serve::over_http(gateway.clone(), listener, settings, stop_signal()).await?;
    Ok(Exit::Ok)
}

/// What `serve --http` says when it starts listening (on stderr: it is for the person who
/// started it).
fn http_banner(local: std::net::SocketAddr, http: &moniker_config::HttpConfig) -> String {
    use moniker_gateway::serve::http::{HEALTH_PATH, MCP_PATH, METRICS_PATH};
    let mut auth = match (http.tokens.len(), &http.auth) {
        (0, None) => "no token required (loopback only)".to_owned(),
        (0, Some(_)) => "an access token of the identity provider is required".to_owned(),
        (1, _) => "a bearer token is required (1 token configured)".to_owned(),
        (n, _) => format!("a bearer token is required ({n} tokens configured)"),
    };
    if let Some(resource) = &http.auth {
        if !http.tokens.is_empty() {
            auth.push_str(", or an access token of the identity provider");
        }
        auth.push_str(&format!(
            "\n  protected resource metadata at {} (issuer {}, audience {}{})",
            moniker_gateway::identity::metadata_url(&resource.resource),
            resource.issuer,
            resource.resource,
            match resource.scopes.len() {
                0 => String::new(),
                _ => format!(", scopes {}", resource.scopes.join(" ")),
            }
        ));
    }
    let mut lines = vec![
        format!("moniker is listening on http://{local}"),
        format!("  MCP (Streamable HTTP): http://{local}{MCP_PATH}"),
        format!("  health:                http://{local}{HEALTH_PATH}"),
        format!("  metrics:               http://{local}{METRICS_PATH}"),
        format!("  authentication:        {auth}"),
    ];
    if local.ip().is_unspecified() && http.allowed_hosts.is_empty() {
        lines.push(
            "  note: clients must use a loopback host name; list the host names they will use \
             in `http.allowed_hosts` (a request with another Host gets 403)"
                .to_owned(),
        );
    }
    lines.join("\n")
}
