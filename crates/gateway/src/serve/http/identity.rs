//! Who makes a request: the identity layer (a token of `http.tokens`, else an access token of
//! the identity provider), the names it goes by, the toolset it may reach, and the protected
//! resource's metadata that sends a client to its identity provider.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap};
use axum::response::Response;
use reqwest::Url;

use super::{HttpSettings, RESOURCE_METADATA_PATH, Shared};
use crate::identity::{Caller, Denied};
use crate::serve::checks::{self, Auth};
use crate::serve::respond::{challenged, failure, set, unauthorized, with_status};

/// The identity check, the last of `/mcp`'s ([`super::layers::mcp`]): the caller of a request
/// with `headers` (from `address`, to `url_toolset` as its URL names it, percent-encoded), proved
/// ([`identify`]), and that toolset read; the refusal of a caller not proved.
pub(super) async fn caller_of(
    shared: &Shared,
    headers: &HeaderMap,
    address: std::net::IpAddr,
    url_toolset: Option<&str>,
) -> Result<(Auth, Option<String>), Response> {
    // Read here, after the Host and Origin checks: a toolset that is not UTF-8 is refused
    // (400) with their headers, as every refusal after them.
    let url_toolset =
        match url_toolset.map(|t| percent_encoding::percent_decode_str(t).decode_utf8()) {
            None => None,
            Some(Ok(toolset)) => Some(toolset.into_owned()),
            Some(Err(_)) => {
                return Err(failure(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: the toolset in the URL is not UTF-8",
                ));
            }
        };
    let settings = shared.gateway.control.http();
    let authorization = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
    let toolset = url_toolset.as_deref();
    let auth = identify(shared, &settings, authorization, toolset, Some(address)).await?;
    Ok((auth, url_toolset))
}

/// Who a stateless client is: its token (a digest of its secret, which names it across
/// reloads and replicas and shows nothing of it), or anyone on a tokenless loopback endpoint.
pub(super) fn principal(auth: &Auth) -> String {
    use sha2::{Digest, Sha256};
    match auth {
        Auth::Open => "anyone".to_owned(),
        // Issuer and `sub`: one person whatever OAuth client they come through (dynamic
        // registration makes client ids free), and never two issuers' users as one.
        Auth::User(identity) => format!("user {} {}", identity.issuer, identity.subject),
        Auth::Token { token, .. } => {
            let digest = Sha256::digest(token.token.as_bytes());
            format!("token {}", crate::files::hex(&digest[..8]))
        }
    }
}

/// What the audit log and spans call a client: its token's `name`, else the token's place in
/// the list (`token #2`, as the logs say: nothing derived from the secret leaves moniker, where
/// a short token could be guessed from it), else `anyone` (a tokenless loopback endpoint).
pub(super) fn client_name(auth: &Auth) -> String {
    match auth {
        Auth::Token { index, token } => token_name(*index, token),
        Auth::User(identity) => identity.subject.clone(),
        Auth::Open => "anyone".to_owned(),
    }
}

/// A token's `name`, else its place in the list (`token #2`).
pub(in crate::serve) fn token_name(index: usize, token: &super::Token) -> String {
    token
        .name
        .clone()
        .unwrap_or_else(|| format!("token #{}", index + 1))
}

/// Who makes a request, for the headers servers' `forward` makes: the identity
/// and its access token (never a static token's secret), and the request's headers but its
/// credentials; `None` when no server forwards anything (nothing is copied then).
pub(super) fn caller(shared: &Shared, auth: &Auth, headers: &HeaderMap) -> Option<Caller> {
    if !shared.gateway.servers.forwards() {
        return None;
    }
    let (identity, access_token) = match auth {
        Auth::User(identity) => (
            Some(identity.clone()),
            headers
                .get(header::AUTHORIZATION)
                .and_then(|v| checks::bearer(v.as_bytes()))
                .and_then(|t| std::str::from_utf8(t).ok())
                .map(str::to_owned),
        ),
        Auth::Token { .. } | Auth::Open => (None, None),
    };
    let headers = headers
        .iter()
        .filter(|(name, _)| *name != header::AUTHORIZATION && *name != header::COOKIE)
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect();
    Some(Caller {
        identity,
        access_token,
        headers,
    })
}

/// Who the caller is: a token of `http.tokens`, else (with `http.auth`) an access token of
/// the identity provider for the resource this URL is; the refusal otherwise (401 with the
/// challenge that sends a client to the metadata, 403 `insufficient_scope`).
pub(super) async fn identify(
    shared: &Shared,
    settings: &HttpSettings,
    authorization: Option<&[u8]>,
    toolset: Option<&str>,
    address: Option<std::net::IpAddr>,
) -> Result<Auth, Response> {
    let Some(resource_auth) = &settings.auth else {
        return checks::authenticate(authorization, &settings.tokens).map_err(unauthorized);
    };
    if let Ok(auth @ Auth::Token { .. }) = checks::authenticate(authorization, &settings.tokens) {
        return Ok(auth);
    }
    let verifier = shared.verifier(resource_auth);
    let resource = verifier.resource(toolset);
    let challenge = |error: Option<&str>, scopes: &[String]| {
        let mut value = format!(
            "Bearer resource_metadata=\"{}\"",
            crate::identity::metadata_url(&resource)
        );
        if !scopes.is_empty() {
            value.push_str(&format!(", scope=\"{}\"", scopes.join(" ")));
        }
        if let Some(error) = error {
            value.push_str(&format!(", error=\"{error}\""));
        }
        value
    };
    let refuse = |status: StatusCode, message: &str, challenge: String| {
        challenged(status, message, &challenge)
    };
    let scopes = &verifier.settings.scopes;
    let Some(token) = authorization
        .and_then(checks::bearer)
        .and_then(|t| std::str::from_utf8(t).ok())
    else {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: an access token is required",
            challenge(None, scopes),
        ));
    };
    // Boxed: only with `http.auth`, and its future would size every request's to `/mcp`.
    match Box::pin(verifier.verify_from(token, &resource, address)).await {
        Ok(identity) => Ok(Auth::User(Arc::new(identity))),
        Err(Denied::Invalid(why)) => {
            tracing::warn!(resource = %resource, reason = %why, "HTTP request refused: the access token is not valid");
            Err(refuse(
                StatusCode::UNAUTHORIZED,
                "Unauthorized: the access token is not valid",
                challenge(Some("invalid_token"), scopes),
            ))
        }
        Err(Denied::Scope(missing)) => {
            tracing::warn!(resource = %resource, missing = %missing.join(" "), "HTTP request refused: the access token lacks a scope");
            Err(refuse(
                StatusCode::FORBIDDEN,
                "Forbidden: the access token lacks a scope this resource requires",
                challenge(Some("insufficient_scope"), scopes),
            ))
        }
        Err(Denied::Busy) => {
            let mut busy = failure(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service Unavailable: too many access tokens are waiting for the identity provider's word, or are asked about too often; try again",
            );
            busy.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            Err(busy)
        }
    }
}

/// The Protected Resource Metadata (RFC 9728) of `/mcp` (at the well-known path alone too,
/// where older clients look) and of each toolset URL, when `http.auth` is set; 404 else.
pub(super) async fn resource_metadata(
    State(shared): State<Arc<Shared>>,
    request: Request,
) -> Response {
    let settings = shared.gateway.control.http();
    let Some(resource_auth) = &settings.auth else {
        return failure(StatusCode::NOT_FOUND, "Not Found");
    };
    let verifier = shared.verifier(resource_auth);
    let asked = request
        .uri()
        .path()
        .strip_prefix(RESOURCE_METADATA_PATH)
        .unwrap_or_default()
        .trim_end_matches('/');
    let base = Url::parse(&verifier.settings.resource)
        .map(|u| u.path().trim_end_matches('/').to_owned())
        .unwrap_or_default();
    let toolset = if asked.is_empty() || asked == base {
        None
    } else {
        match asked.strip_prefix(&base).and_then(|r| r.strip_prefix('/')) {
            // Any name a toolset could have, known or not: the metadata is public, and an
            // answer that differed would tell anyone which toolsets exist.
            Some(name) if moniker_surface::toolsets::valid_name(name) => Some(name),
            _ => return failure(StatusCode::NOT_FOUND, "Not Found: no such resource"),
        }
    };
    let document = verifier.metadata(&verifier.resource(toolset));
    let mut response = with_status(StatusCode::OK, Body::from(document.to_string()));
    set(&mut response, header::CONTENT_TYPE, "application/json");
    // Public metadata, read by browser-based clients of any origin.
    set(&mut response, header::ACCESS_CONTROL_ALLOW_ORIGIN, "*");
    response
}

/// The toolset a request's sessions are bound to: the URL's, which a token bound to another
/// cannot reach (403), or the token's. An unknown toolset is 404.
pub(super) async fn toolset_of(
    shared: &Shared,
    auth: &Auth,
    url: Option<String>,
) -> Result<Option<String>, (StatusCode, &'static str)> {
    let bound = match auth {
        Auth::Token { token, .. } => token.toolset.clone(),
        Auth::User(identity) => identity.toolset.clone(),
        Auth::Open => None,
    };
    let Some(name) = url else {
        return Ok(bound);
    };
    if bound.as_ref().is_some_and(|b| *b != name) {
        return Err((
            StatusCode::FORBIDDEN,
            "Forbidden: this token is bound to another toolset",
        ));
    }
    if !shared.gateway.naming.catalog.knows(&name).await {
        return Err((StatusCode::NOT_FOUND, "Not Found: no such toolset"));
    }
    Ok(Some(name))
}
