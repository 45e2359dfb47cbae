//! The OAuth 2.1 exchanges with an authorization server: discovery (Protected Resource
//! Metadata, then the authorization server's metadata, with the 2025-03-26 fallbacks), who
//! moniker is there (a configured client, a Client ID Metadata Document, or Dynamic Client
//! Registration), and the token endpoint (authorization code, refresh token, client
//! credentials), with the client authentication the server supports.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use moniker_config::Auth;
use reqwest::Url;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderValue};
use serde::Deserialize;
use serde_json::Value;

use super::challenge::{self, Challenge};
use super::store::{Client, Tokens, now};

/// How long one request to an authorization server may take.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of a metadata or token answer is read.
const ANSWER_MAX: usize = 256 * 1024;

/// An authorization server's metadata (RFC 8414), the fields moniker uses.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Metadata {
    pub issuer: String,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: Option<String>,
    pub registration_endpoint: Option<String>,
    pub jwks_uri: Option<String>,
    pub introspection_endpoint: Option<String>,
    pub code_challenge_methods_supported: Option<Vec<String>>,
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub scopes_supported: Option<Vec<String>>,
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
}

/// What discovery found for one server.
#[derive(Debug, Clone)]
pub(crate) struct Discovered {
    /// The resource indicator (RFC 8707) tokens are asked for.
    pub resource: String,
    /// The resource's `scopes_supported`.
    pub scopes_supported: Option<Vec<String>>,
    pub metadata: Metadata,
}

#[derive(Deserialize)]
struct ResourceMetadata {
    resource: Option<String>,
    #[serde(default)]
    authorization_servers: Vec<String>,
    scopes_supported: Option<Vec<String>>,
}

/// Finds the authorization server of `server` (MCP authorization 2025-11-25, "Authorization
/// Server Discovery"; 2025-03-26 when the server has no Protected Resource Metadata).
///
/// `pinned`: the issuer moniker trusts for the server (configured, or the one it got tokens
/// from): a server that names another is refused. A server's challenge may name its metadata
/// only at its own origin, and every authorization server endpoint must be https (or
/// loopback): what moniker sends there carries its client secret.
pub(crate) async fn discover(
    http: &reqwest::Client,
    server: &Url,
    challenge: Option<&Challenge>,
    pinned: Option<&str>,
) -> Result<Discovered, String> {
    let named = challenge
        .and_then(|c| c.resource_metadata.as_deref())
        .filter(|named| match server.join(named) {
            Ok(url) if url.origin() == server.origin() => true,
            _ => {
                tracing::warn!(
                    named = %moniker_config::shown_url(named),
                    "the server's challenge names resource metadata at another origin: not followed"
                );
                false
            }
        });
    let mut found = None;
    for url in challenge::resource_metadata_urls(server, named) {
        if let Some(document) = get_json::<ResourceMetadata>(http, &url).await? {
            found = Some((url, document));
            break;
        }
    }
    let Some((prm_url, prm)) = found else {
        // 2025-03-26: the authorization server is the server's origin.
        let mut issuer = server.clone();
        issuer.set_path("");
        issuer.set_query(None);
        issuer.set_fragment(None);
        let issuer_text = issuer.as_str().trim_end_matches('/').to_owned();
        let at = |path: &str| issuer.join(path).ok().map(|u| u.to_string());
        // With no metadata either, the 2025-03-26 default endpoints, and PKCE S256 assumed.
        // The origin is no issuer anyone named: its metadata's `issuer` is not checked
        // against it (2025-03-26 servers publish theirs under a path of their own).
        let metadata = match authorization_server(http, &issuer, None).await? {
            Some(metadata) => metadata,
            None => Metadata {
                issuer: issuer_text,
                authorization_endpoint: at("/authorize"),
                token_endpoint: at("/token"),
                registration_endpoint: at("/register"),
                code_challenge_methods_supported: Some(vec!["S256".to_owned()]),
                ..Metadata::default()
            },
        };
        secure_endpoints(&metadata)?;
        return Ok(Discovered {
            resource: challenge::resource_of(server),
            scopes_supported: None,
            metadata,
        });
    };
    let resource = match prm.resource {
        Some(resource) if challenge::resource_matches(server, &resource) => resource,
        Some(resource) => {
            return Err(format!(
                "the server's resource metadata ({prm_url}) is for `{resource}`, not for this server: refusing to authorize"
            ));
        }
        None => challenge::resource_of(server),
    };
    let Some(issuer_text) = prm.authorization_servers.first() else {
        return Err(format!(
            "the server's resource metadata ({prm_url}) names no authorization server"
        ));
    };
    if let Some(pinned) = pinned.filter(|p| !challenge::same_issuer(p, issuer_text)) {
        return Err(format!(
            "the server now names the authorization server `{issuer_text}`, not `{pinned}`, which moniker trusts for it: refusing to send it credentials (a person accepts the new one with `moniker login`; `auth.issuer` in the config pins one)"
        ));
    }
    let issuer = Url::parse(issuer_text).map_err(|e| {
        format!("the authorization server `{issuer_text}` (from {prm_url}) is not a URL: {e}")
    })?;
    secure(&issuer, "authorization server")?;
    let Some(metadata) = authorization_server(http, &issuer, Some(issuer_text)).await? else {
        return Err(format!(
            "the authorization server `{issuer_text}` publishes no metadata (RFC 8414 or OpenID Connect Discovery)"
        ));
    };
    secure_endpoints(&metadata)?;
    Ok(Discovered {
        resource,
        scopes_supported: prm.scopes_supported,
        metadata,
    })
}

/// An authorization server's URL must be https, or on this host: a token request carries the
/// client secret, an authorization request the user's login.
pub(crate) fn secure(url: &Url, what: &str) -> Result<(), String> {
    let host = url.host_str().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if url.scheme() == "https" || loopback {
        Ok(())
    } else {
        Err(format!(
            "the {what} `{}` is not https: refusing to send it credentials",
            moniker_config::shown_url(url.as_str())
        ))
    }
}

/// Every endpoint of an authorization server's metadata a client sends credentials to,
/// [`secure`].
pub(crate) fn secure_endpoints(metadata: &Metadata) -> Result<(), String> {
    for (what, endpoint) in [
        ("authorization endpoint", &metadata.authorization_endpoint),
        ("token endpoint", &metadata.token_endpoint),
        ("registration endpoint", &metadata.registration_endpoint),
    ] {
        if let Some(endpoint) = endpoint {
            let url = Url::parse(endpoint)
                .map_err(|e| format!("the {what} `{endpoint}` is not a URL: {e}"))?;
            secure(&url, what)?;
        }
    }
    Ok(())
}

/// The metadata of the authorization server at `issuer`, checked to be the named issuer's
/// own (RFC 8414 §3.3).
pub(crate) async fn authorization_server(
    http: &reqwest::Client,
    issuer: &Url,
    named: Option<&str>,
) -> Result<Option<Metadata>, String> {
    for url in challenge::authorization_server_metadata_urls(issuer) {
        if let Some(metadata) = get_json::<Metadata>(http, &url).await? {
            if let Some(issuer_text) =
                named.filter(|n| !challenge::same_issuer(&metadata.issuer, n))
            {
                return Err(format!(
                    "the metadata at {url} is for issuer `{}`, not `{issuer_text}`: refusing it",
                    metadata.issuer
                ));
            }
            return Ok(Some(metadata));
        }
    }
    Ok(None)
}

/// A JSON document, or `None` when there is none at `url` (an HTTP error, or not JSON).
pub(crate) async fn get_json<T: for<'de> Deserialize<'de>>(
    http: &reqwest::Client,
    url: &Url,
) -> Result<Option<T>, String> {
    let sent = http
        .get(url.clone())
        .header(ACCEPT, "application/json")
        .timeout(EXCHANGE_TIMEOUT)
        .send()
        .await;
    let response = match sent {
        Ok(response) => response,
        Err(e) => {
            return Err(format!("cannot reach {url}: {}", crate::tls::cause(&e)));
        }
    };
    if !response.status().is_success() {
        tracing::debug!(%url, status = %response.status(), "no metadata here");
        return Ok(None);
    }
    let body = read(response).await?;
    match serde_json::from_str(&body) {
        Ok(document) => Ok(Some(document)),
        Err(e) => {
            tracing::debug!(%url, error = %e, "not metadata");
            Ok(None)
        }
    }
}

async fn read(mut response: reqwest::Response) -> Result<String, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("the answer broke off: {}", crate::tls::cause(&e)))?
    {
        if body.len() + chunk.len() > ANSWER_MAX {
            return Err(format!("the answer is over {ANSWER_MAX} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    String::from_utf8(body).map_err(|_| "the answer is not UTF-8".to_owned())
}

/// Who moniker is at the authorization server, in the order of the MCP spec: the configured
/// client, else a Client ID Metadata Document when the server takes them, else Dynamic Client
/// Registration (`redirect_uri` for the authorization code grant).
pub(crate) async fn identify(
    http: &reqwest::Client,
    settings: &Auth,
    metadata: &Metadata,
    redirect_uri: Option<&str>,
) -> Result<Client, String> {
    if let Some(id) = &settings.client_id {
        let method = if settings.private_key.is_some() {
            "private_key_jwt"
        } else if settings.client_secret.is_some() {
            secret_method(metadata)
        } else {
            "none"
        };
        return Ok(Client {
            client_id: id.clone(),
            client_secret: settings.client_secret.clone(),
            auth_method: method.to_owned(),
            registered: false,
        });
    }
    if let Some(url) = &settings.client_metadata_url {
        if metadata.client_id_metadata_document_supported {
            return Ok(Client {
                client_id: url.clone(),
                client_secret: None,
                auth_method: "none".to_owned(),
                registered: false,
            });
        }
    }
    let Some(endpoint) = &metadata.registration_endpoint else {
        return Err(format!(
            "the authorization server `{}` does not register clients (no registration endpoint){}: register moniker there and set `auth.client_id` (and `auth.client_secret`)",
            metadata.issuer,
            if settings.client_metadata_url.is_none()
                && metadata.client_id_metadata_document_supported
            {
                ", and takes Client ID Metadata Documents: set `auth.client_metadata_url`"
            } else {
                ""
            }
        ));
    };
    register(http, endpoint, metadata, redirect_uri).await
}

/// How a client with a secret authenticates at the token endpoint: `client_secret_basic`
/// unless the server offers only `client_secret_post` (RFC 8414: basic when unsaid).
fn secret_method(metadata: &Metadata) -> &'static str {
    match &metadata.token_endpoint_auth_methods_supported {
        Some(methods)
            if !methods.iter().any(|m| m == "client_secret_basic")
                && methods.iter().any(|m| m == "client_secret_post") =>
        {
            "client_secret_post"
        }
        _ => "client_secret_basic",
    }
}

/// Dynamic Client Registration (RFC 7591).
async fn register(
    http: &reqwest::Client,
    endpoint: &str,
    metadata: &Metadata,
    redirect_uri: Option<&str>,
) -> Result<Client, String> {
    let offered = metadata.token_endpoint_auth_methods_supported.as_deref();
    let wanted = match offered {
        None => "none",
        Some(methods) if methods.iter().any(|m| m == "none") => "none",
        Some(methods) if methods.iter().any(|m| m == "client_secret_basic") => {
            "client_secret_basic"
        }
        Some(methods) if methods.iter().any(|m| m == "client_secret_post") => "client_secret_post",
        Some(_) => "none",
    };
    // A loopback redirect is a native app's (RFC 8252: any port); any other, a web
    // application's (the console's, at moniker's public address).
    let loopback = redirect_uri
        .and_then(|uri| Url::parse(uri).ok())
        .is_none_or(|url| matches!(url.host_str(), Some("127.0.0.1" | "[::1]" | "localhost")));
    let mut body = serde_json::json!({
        "client_name": "moniker",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": wanted,
        "application_type": if loopback { "native" } else { "web" },
    });
    if let Some(uri) = redirect_uri {
        body["redirect_uris"] = serde_json::json!([uri]);
    }
    let request = http
        .post(endpoint)
        .json_body(&body)
        .timeout(EXCHANGE_TIMEOUT);
    let text = exchange(request, endpoint, "register moniker").await?;
    let answer: Value = serde_json::from_str(&text)
        .map_err(|e| format!("the registration answer is not JSON: {e}"))?;
    let Some(client_id) = answer.get("client_id").and_then(Value::as_str) else {
        return Err("the registration answer has no client_id".to_owned());
    };
    let client_secret = answer
        .get("client_secret")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let method = answer
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| {
            if client_secret.is_some() && wanted == "none" {
                "client_secret_basic".to_owned()
            } else {
                wanted.to_owned()
            }
        });
    Ok(Client {
        client_id: client_id.to_owned(),
        client_secret,
        auth_method: method,
        registered: true,
    })
}

/// `Authorization: Basic` for a client of an authorization server: RFC 6749 §2.3.1 has both
/// parts form-urlencoded before base64.
pub(crate) fn basic(client_id: &str, secret: &str) -> Result<HeaderValue, String> {
    let pair = format!("{}:{}", form_encode(client_id), form_encode(secret));
    let mut value = HeaderValue::from_str(&format!("Basic {}", STANDARD.encode(pair)))
        .map_err(|_| "the client credentials cannot be sent in a header".to_owned())?;
    value.set_sensitive(true);
    Ok(value)
}

/// Sends a request to the authorization server's `endpoint`: the answer's body (at most
/// `ANSWER_MAX` bytes), or why there is none (the server refusing `to_do` names its OAuth
/// error).
pub(crate) async fn exchange(
    request: reqwest::RequestBuilder,
    endpoint: &str,
    to_do: &str,
) -> Result<String, String> {
    let response = request
        .send()
        .await
        .map_err(|e| format!("cannot reach {endpoint}: {}", crate::tls::cause(&e)))?;
    let status = response.status();
    let text = read(response).await?;
    if !status.is_success() {
        return Err(format!(
            "the authorization server refused to {to_do} (HTTP {status}): {}",
            oauth_error(&text)
        ));
    }
    Ok(text)
}

/// The `error` code of an OAuth error answer (RFC 6749 5.2: `invalid_client`, ...), which is
/// what moniker says of it; its `error_description` and any other body is the authorization
/// server's own text, and goes to the log only (it may reach a client in an error).
fn oauth_error(body: &str) -> String {
    let value = serde_json::from_str::<Value>(body).ok();
    let error = value
        .as_ref()
        .and_then(|v| v.get("error"))
        .and_then(Value::as_str)
        .filter(|e| {
            !e.is_empty() && e.len() <= 64 && e.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        });
    let said: String = match value
        .as_ref()
        .and_then(|v| v.get("error_description"))
        .and_then(Value::as_str)
    {
        Some(description) => description.chars().take(200).collect(),
        None => body.chars().take(200).collect(),
    };
    tracing::warn!(error = error.unwrap_or("?"), said = %said, "the authorization server refused");
    match error {
        Some(error) => error.to_owned(),
        None => "an error (its text is in moniker's log)".to_owned(),
    }
}

/// Small helper so that bodies are JSON without reqwest's `json` feature.
trait JsonBody {
    fn json_body(self, value: &Value) -> Self;
}

impl JsonBody for reqwest::RequestBuilder {
    fn json_body(self, value: &Value) -> Self {
        self.header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(value.to_string())
    }
}

/// A token request (RFC 6749 §3.2) with the client's authentication; the tokens it gave.
/// `keep_refresh` is the refresh token to keep when the answer brings no new one.
pub(crate) async fn token(
    http: &reqwest::Client,
    metadata: &Metadata,
    client: &Client,
    private_key: Option<&str>,
    mut form: Vec<(&'static str, String)>,
    keep_refresh: Option<String>,
) -> Result<Tokens, String> {
    let Some(endpoint) = &metadata.token_endpoint else {
        return Err(format!(
            "the authorization server `{}` has no token endpoint",
            metadata.issuer
        ));
    };
    let mut request = http
        .post(endpoint)
        .header(ACCEPT, "application/json")
        .timeout(EXCHANGE_TIMEOUT);
    match client.auth_method.as_str() {
        "client_secret_basic" => {
            let secret = client.client_secret.as_deref().unwrap_or_default();
            request = request.header(AUTHORIZATION, basic(&client.client_id, secret)?);
        }
        "client_secret_post" => {
            form.push(("client_id", client.client_id.clone()));
            form.push((
                "client_secret",
                client.client_secret.clone().unwrap_or_default(),
            ));
        }
        "private_key_jwt" => {
            let Some(key) = private_key else {
                return Err("`private_key_jwt` needs `auth.private_key`".to_owned());
            };
            form.extend(assertion_form(key, client, &metadata.issuer).await?);
        }
        _ => form.push(("client_id", client.client_id.clone())),
    }
    let text = exchange(request.form(&form), endpoint, "give a token").await?;
    #[derive(Deserialize)]
    struct Answer {
        access_token: String,
        refresh_token: Option<String>,
        expires_in: Option<u64>,
        scope: Option<String>,
    }
    let answer: Answer = serde_json::from_str(&text)
        .map_err(|e| format!("the token answer is not what OAuth says: {e}"))?;
    Ok(Tokens {
        access_token: answer.access_token,
        refresh_token: answer.refresh_token.or(keep_refresh),
        expires_at: answer.expires_in.map(|s| now() + s),
        lifetime: answer.expires_in,
        scope: answer.scope,
    })
}

fn form_encode(text: &str) -> String {
    reqwest::Url::parse_with_params("x:", [("v", text)])
        .ok()
        .and_then(|u| u.query().map(|q| q.trim_start_matches("v=").to_owned()))
        .unwrap_or_default()
}

/// The form fields of `private_key_jwt`: the client and its assertion, read and signed on a
/// blocking thread (an RSA signature takes milliseconds, not to be taken from the thread that
/// serves calls).
async fn assertion_form(
    key: &str,
    client: &Client,
    issuer: &str,
) -> Result<[(&'static str, String); 3], String> {
    let (key, id, issuer) = (key.to_owned(), client.client_id.clone(), issuer.to_owned());
    let signed = tokio::task::spawn_blocking(move || assertion(&key, &id, &issuer))
        .await
        .map_err(|e| e.to_string())??;
    Ok([
        ("client_id", client.client_id.clone()),
        (
            "client_assertion_type",
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_owned(),
        ),
        ("client_assertion", signed),
    ])
}

/// A client assertion (RFC 7523 §2.2): `iss` and `sub` the client, `aud` the issuer, signed
/// with the configured key (ES256 for an EC P-256 key, RS256 for an RSA one).
fn assertion(key_path: &str, client_id: &str, issuer: &str) -> Result<String, String> {
    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    let pem = std::fs::read(key_path)
        .map_err(|e| format!("cannot read `auth.private_key` {key_path}: {e}"))?;
    let (key, algorithm) = match EncodingKey::from_ec_pem(&pem) {
        Ok(key) => (key, Algorithm::ES256),
        Err(_) => match EncodingKey::from_rsa_pem(&pem) {
            Ok(key) => (key, Algorithm::RS256),
            Err(e) => {
                return Err(format!(
                    "`auth.private_key` {key_path} is neither an EC P-256 nor an RSA private key in PEM: {e}"
                ));
            }
        },
    };
    let issued = now();
    let claims = serde_json::json!({
        "iss": client_id,
        "sub": client_id,
        "aud": issuer,
        "iat": issued,
        "exp": issued + 300,
        "jti": crate::random::text(16),
    });
    jsonwebtoken::encode(&Header::new(algorithm), &claims, &key)
        .map_err(|e| format!("cannot sign the client assertion: {e}"))
}

/// The S256 challenge of a PKCE verifier (RFC 7636 §4.2).
pub(crate) fn s256(verifier: &str) -> String {
    use sha2::{Digest, Sha256};
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `private_key_jwt`'s fields: the client, and an assertion signed with its key (read from
    /// its file on a blocking thread) that the key's public half verifies, naming the client and
    /// the issuer.
    #[tokio::test]
    async fn a_private_key_signs_the_client_assertion() {
        let key = rcgen::KeyPair::generate().expect("an EC P-256 key");
        let dir = tempfile::tempdir().expect("a folder");
        let path = dir.path().join("key.pem");
        std::fs::write(&path, key.serialize_pem()).expect("the key written");
        let client = Client {
            client_id: "moniker-test".to_owned(),
            client_secret: None,
            auth_method: "private_key_jwt".to_owned(),
            registered: false,
        };
        let path = path.to_str().expect("a UTF-8 path");
        let [id, kind, (name, signed)] = assertion_form(path, &client, "https://issuer.example")
            .await
            .expect("an assertion");
        assert_eq!(id, ("client_id", "moniker-test".to_owned()));
        assert_eq!(
            kind.1,
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        );
        assert_eq!(name, "client_assertion");
        let public = jsonwebtoken::DecodingKey::from_ec_pem(key.public_key_pem().as_bytes())
            .expect("the public key");
        let mut rules = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
        rules.set_audience(&["https://issuer.example"]);
        let claims = jsonwebtoken::decode::<serde_json::Value>(&signed, &public, &rules)
            .expect("a signature the public key verifies")
            .claims;
        assert_eq!(claims["iss"], "moniker-test");
        assert_eq!(claims["sub"], "moniker-test");
        let missing = assertion_form("/no/such/key.pem", &client, "https://issuer.example").await;
        assert!(missing.is_err_and(|why| why.contains("cannot read")));
    }

    #[test]
    fn pkce_s256_matches_rfc_7636_appendix_b() {
        assert_eq!(
            s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn secrets_are_form_encoded_for_basic_authentication() {
        assert_eq!(form_encode("a b:c/d"), "a+b%3Ac%2Fd");
        assert_eq!(form_encode("plain"), "plain");
    }

    #[test]
    fn the_secret_method_follows_what_the_server_offers() {
        let mut metadata = Metadata::default();
        assert_eq!(secret_method(&metadata), "client_secret_basic");
        metadata.token_endpoint_auth_methods_supported = Some(vec!["client_secret_post".into()]);
        assert_eq!(secret_method(&metadata), "client_secret_post");
        metadata.token_endpoint_auth_methods_supported = Some(vec![
            "client_secret_post".into(),
            "client_secret_basic".into(),
        ]);
        assert_eq!(secret_method(&metadata), "client_secret_basic");
    }
}
