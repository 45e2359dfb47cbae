//! `moniker login`: connects to a remote server the way the gateway does, and answers every
//! challenge only a person can answer with the browser flow, until the server lists its
//! tools (at most [`LOGIN_LIMIT`] authorizations: a server that keeps asking is refused).

use std::sync::Arc;
use std::time::Duration;

use moniker_surface::ServerId;
use reqwest::Url;

use super::{Connection, HandshakeError, ServerSpec, Sink, handshake, start};
use crate::auth::{Authorizer, Browser, Store};
use crate::message::Message;

/// Authorizations one login makes before it gives up.
pub const LOGIN_LIMIT: u32 = 3;

/// What a login came to.
#[derive(Debug)]
pub struct LoggedIn {
    /// Authorizations made: 0 when the server asked for none (or moniker answered by itself:
    /// client credentials).
    pub authorizations: u32,
    /// The scope granted, when the server said.
    pub scope: Option<String>,
    /// Where the tokens are.
    pub path: Option<std::path::PathBuf>,
    /// The tools the server lists now.
    pub tools: usize,
}

/// Logs in to `server` (a remote one), forgetting the tokens moniker had for it.
pub async fn login(
    server: &ServerId,
    spec: &ServerSpec,
    browser: &Browser,
    timeout: Duration,
) -> Result<LoggedIn, String> {
    let ServerSpec::Http {
        url,
        headers,
        tls,
        auth,
        ..
    } = spec
    else {
        return Err(format!(
            "`{server}` is a stdio server: moniker starts it itself, and it needs no login"
        ));
    };
    if headers
        .keys()
        .any(|h| h.eq_ignore_ascii_case("authorization"))
    {
        return Err(format!(
            "`{server}` sends its own `Authorization` header (`headers:` in the config): remove it to log in with OAuth"
        ));
    }
    let parsed = Url::parse(url).map_err(|e| {
        format!(
            "`{}` is not a valid URL: {e}",
            moniker_config::shown_url(url)
        )
    })?;
    let Some(dir) = Store::default_dir() else {
        return Err("this platform has no user data dir to keep tokens in".to_owned());
    };
    let http = crate::tls::http_client(tls, timeout)?;
    let authorizer = Authorizer::new(
        server.clone(),
        parsed,
        auth.clone(),
        http,
        Some(Store::new(dir)),
    );
    authorizer.forget_tokens().await?;
    let mut authorizations = 0;
    let mut scope = None;
    loop {
        match probe(server, spec, timeout).await {
            Ok(tools) => {
                return Ok(LoggedIn {
                    authorizations,
                    scope,
                    path: authorizer.path(),
                    tools,
                });
            }
            Err(why) => {
                if authorizer.needs_login().await.is_none() {
                    return Err(why);
                }
                if authorizations == LOGIN_LIMIT {
                    return Err(format!(
                        "{why} (still, after {LOGIN_LIMIT} authorizations: giving up)"
                    ));
                }
                authorizations += 1;
                scope = authorizer.log_in(browser).await?;
            }
        }
    }
}

/// Connects and lists the tools: how many. A server that refuses the 2025 handshake for
/// 2026-07-28 is connected to again in that.
async fn probe(server: &ServerId, spec: &ServerSpec, timeout: Duration) -> Result<usize, String> {
    let mut modern = false;
    loop {
        let started = start(
            server,
            spec,
            super::Launch::default(),
            Arc::new(Ignore),
            usize::MAX,
            timeout,
        )
        .await?;
        let conn = started.conn;
        if modern {
            conn.speak_modern();
        }
        let listed = handshake(&conn, timeout).await;
        conn.close();
        drop(conn);
        match listed {
            Err(HandshakeError::SpeaksModern) if !modern => modern = true,
            listed => return listed.map(|l| l.tools.len()).map_err(|e| e.to_string()),
        }
    }
}

/// What the server sends on its own during a login is not for anyone.
struct Ignore;

impl Sink for Ignore {
    fn server_message(&self, _conn: &Arc<Connection>, _message: Message, _related: Option<u64>) {}
}
