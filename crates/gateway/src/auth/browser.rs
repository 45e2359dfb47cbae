//! The authorization code grant with a browser (OAuth 2.1 §4.1, RFC 8252 for native apps):
//! a loopback listener on an ephemeral port takes the redirect; the browser is `$BROWSER`,
//! else the platform's opener, and the URL is printed either way; PKCE S256, `state`, the
//! `resource` indicator, and the issuer of the answer checked (RFC 9207).

use std::time::Duration;

use moniker_config::Auth;
use reqwest::Url;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::oauth::{self, Discovered};
use super::store::{Client, Tokens};

/// How long a person has to log in.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);
const REQUEST_HEAD_MAX: usize = 16 * 1024;

/// How the authorization URL reaches a person: printed (on stderr, by the caller's
/// `announce`), and opened with `$BROWSER` or the platform's opener.
pub struct Browser {
    /// `$BROWSER`: a command (`%s` is the URL, else the URL is its last argument), or a
    /// `:`-separated list of them, the first that starts being used.
    pub command: Option<String>,
    pub announce: Box<dyn Fn(&str) + Send + Sync>,
    pub timeout: Duration,
}

impl Browser {
    /// `$BROWSER` from the environment, and the URL written on stderr.
    pub fn from_env(announce: Box<dyn Fn(&str) + Send + Sync>) -> Self {
        Self {
            command: std::env::var("BROWSER")
                .ok()
                .filter(|b| !b.trim().is_empty()),
            announce,
            timeout: LOGIN_TIMEOUT,
        }
    }

    fn open(&self, url: &str) {
        let commands: Vec<String> = match &self.command {
            Some(list) => list.split(':').map(str::to_owned).collect(),
            None if cfg!(target_os = "macos") => vec!["open".to_owned()],
            None => vec!["xdg-open".to_owned()],
        };
        for command in commands.iter().filter(|c| !c.trim().is_empty()) {
            let line = if command.contains("%s") {
                command.replace("%s", "\"$1\"")
            } else {
                format!("{command} \"$1\"")
            };
            let started = std::process::Command::new("sh")
                .args(["-c", &line, "sh", url])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .spawn();
            match started {
                Ok(mut child) => {
                    // Reaped in the background: the flow waits for the redirect, not for it.
                    std::thread::spawn(move || child.wait());
                    return;
                }
                Err(e) => tracing::debug!(command, error = %e, "cannot start the browser"),
            }
        }
    }
}

/// Runs the authorization code grant: who moniker is (registering it if need be, for the
/// loopback redirect URI), the browser, the redirect, the code exchanged for tokens.
pub(crate) async fn authorize(
    http: &reqwest::Client,
    settings: &Auth,
    discovered: &Discovered,
    scope: Option<&str>,
    browser: &Browser,
) -> Result<(Client, Tokens), String> {
    let metadata = &discovered.metadata;
    let endpoint = authorization_endpoint(metadata)?;
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1 for the redirect: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("cannot listen on 127.0.0.1 for the redirect: {e}"))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let client = oauth::identify(http, settings, metadata, Some(&redirect_uri)).await?;

    let verifier = crate::random::text(32);
    let state = crate::random::text(24);
    let url = authorization_url(
        endpoint,
        &Request {
            client_id: &client.client_id,
            redirect_uri: &redirect_uri,
            verifier: &verifier,
            state: &state,
            resource: &discovered.resource,
            scope,
        },
    )?;
    (browser.announce)(url.as_str());
    browser.open(url.as_str());
    let answer = tokio::time::timeout(browser.timeout, redirect(&listener, &state))
        .await
        .map_err(|_| {
            format!(
                "no login within {} s (the browser never came back to {redirect_uri})",
                browser.timeout.as_secs()
            )
        })??;
    let code = code_of(answer, metadata)?;
    let form = vec![
        ("grant_type", "authorization_code".to_owned()),
        ("code", code),
        ("redirect_uri", redirect_uri),
        ("code_verifier", verifier),
        ("resource", discovered.resource.clone()),
    ];
    let tokens = oauth::token(
        http,
        metadata,
        &client,
        settings.private_key.as_deref(),
        form,
        None,
    )
    .await?;
    Ok((client, tokens))
}

/// What an authorization request asks for.
pub(crate) struct Request<'a> {
    pub client_id: &'a str,
    pub redirect_uri: &'a str,
    /// The PKCE code verifier: its S256 challenge is sent.
    pub verifier: &'a str,
    pub state: &'a str,
    /// The resource indicator (RFC 8707) the token is for.
    pub resource: &'a str,
    pub scope: Option<&'a str>,
}

/// The URL a browser is sent to at the authorization `endpoint`.
pub(crate) fn authorization_url(endpoint: &str, request: &Request<'_>) -> Result<Url, String> {
    let mut url = Url::parse(endpoint)
        .map_err(|e| format!("the authorization endpoint `{endpoint}` is not a URL: {e}"))?;
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", request.client_id)
            .append_pair("redirect_uri", request.redirect_uri)
            .append_pair("code_challenge", &oauth::s256(request.verifier))
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", request.state)
            .append_pair("resource", request.resource);
        if let Some(scope) = request.scope {
            query.append_pair("scope", scope);
        }
    }
    Ok(url)
}

/// The authorization endpoint of a server that offers PKCE with S256 (moniker logs in with
/// nothing less).
pub(crate) fn authorization_endpoint(metadata: &oauth::Metadata) -> Result<&str, String> {
    let offers_s256 = metadata
        .code_challenge_methods_supported
        .as_ref()
        .is_some_and(|m| m.iter().any(|m| m == "S256"));
    if !offers_s256 {
        return Err(format!(
            "the authorization server `{}` does not offer PKCE with S256 (`code_challenge_methods_supported`): moniker refuses to log in without it",
            metadata.issuer
        ));
    }
    metadata.authorization_endpoint.as_deref().ok_or_else(|| {
        format!(
            "the authorization server `{}` has no authorization endpoint",
            metadata.issuer
        )
    })
}

/// The authorization code the redirect brought, from the issuer it should come from.
pub(crate) fn code_of(answer: Answer, metadata: &oauth::Metadata) -> Result<String, String> {
    if let Some(error) = answer.error {
        return Err(format!("the authorization server refused: {error}"));
    }
    // RFC 9207: `iss` is compared as a string, exactly (no case folding, no trailing slash, no
    // default port): a variant is another issuer.
    match &answer.iss {
        Some(iss) if *iss != metadata.issuer => {
            return Err(format!(
                "the answer came from issuer `{iss}`, not `{}` (RFC 9207): refused",
                metadata.issuer
            ));
        }
        None if metadata.authorization_response_iss_parameter_supported => {
            return Err(format!(
                "the answer has no `iss` though `{}` promises one (RFC 9207): refused",
                metadata.issuer
            ));
        }
        _ => {}
    }
    answer
        .code
        .ok_or_else(|| "the redirect brought no authorization code".to_owned())
}

/// What a redirect to the client brought (`code`, `error` with its description, `iss`).
#[derive(Default)]
pub(crate) struct Answer {
    pub code: Option<String>,
    pub error: Option<String>,
    pub iss: Option<String>,
}

impl Answer {
    /// The answer in a redirect's query, and its `state`.
    pub(crate) fn of(url: &Url) -> (Self, Option<String>) {
        let mut answer = Self::default();
        let mut state = None;
        for (key, value) in url.query_pairs() {
            match &*key {
                "code" => answer.code = Some(value.into_owned()),
                "state" => state = Some(value.into_owned()),
                "iss" => answer.iss = Some(value.into_owned()),
                "error" => {
                    answer.error = Some(match &answer.error {
                        Some(d) => format!("{value}: {d}"),
                        None => value.into_owned(),
                    });
                }
                "error_description" => {
                    answer.error = Some(match &answer.error {
                        Some(e) => format!("{e}: {value}"),
                        None => value.into_owned(),
                    });
                }
                _ => {}
            }
        }
        (answer, state)
    }
}

/// Waits for the redirect with our `state`; any other request gets a 404.
async fn redirect(listener: &TcpListener, state: &str) -> Result<Answer, String> {
    loop {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|e| format!("the redirect listener failed: {e}"))?;
        let Some(target) = request_target(&mut stream).await else {
            continue;
        };
        let Ok(url) = Url::parse(&format!("http://127.0.0.1{target}")) else {
            continue;
        };
        let (answer, their_state) = Answer::of(&url);
        if url.path() != "/callback" || their_state.as_deref() != Some(state) {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let page = if answer.error.is_some() {
            "moniker: the authorization was refused. You can close this tab."
        } else {
            "moniker: logged in. You can close this tab and go back to the terminal."
        };
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
            page.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
        return Ok(answer);
    }
}

/// The target of an HTTP request line (`/callback?code=...`), read within a few seconds.
async fn request_target(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buffer = [0u8; 2048];
    let read = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < REQUEST_HEAD_MAX {
            let n = stream.read(&mut buffer).await.ok()?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buffer[..n]);
        }
        Some(())
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .ok()??;
    let text = String::from_utf8_lossy(&head);
    let line = text.lines().next()?;
    let mut parts = line.split(' ');
    let _method = parts.next()?;
    parts.next().map(str::to_owned)
}
