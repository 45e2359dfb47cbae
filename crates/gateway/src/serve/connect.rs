//! Where people sign in to the servers that act as each of them (`auth.per_person`), beside
//! `/mcp`: `GET /connect/<server>?ticket=T` (the link a person's call was answered with) sends
//! the browser to the server's authorization server, `GET /connect/<server>/callback` takes its
//! answer, and `DELETE /connect/<server>` with the person's own access token for moniker signs
//! them out. The browser that began a sign-in must finish it: a cookie on the callback's path
//! holds its `state` (nobody can make another person's browser finish a sign-in they began).
//! The flow itself, and what is kept, is [`crate::auth::personal`]'s.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use moniker_surface::ServerId;
use reqwest::Url;
use subtle::ConstantTimeEq as _;

use super::checks;
use super::http::{Shared, layers};
use crate::auth::browser;
use crate::auth::personal::{Person, SIGNIN_TTL, at_connect};

/// The cookie of a sign-in under way.
const COOKIE: &str = "moniker_connect";

/// The sign-in routes, behind the same `Host` check as `/mcp`.
pub(super) fn router(shared: &Arc<Shared>) -> Router {
    Router::new()
        .route("/connect/{server}", get(begin).delete(sign_out))
        .route("/connect/{server}/callback", get(callback))
        .route_layer(from_fn_with_state(shared.clone(), layers::host))
        .route_layer(from_fn(layers::close_on_refusal))
        .with_state(shared.clone())
}

#[derive(serde::Deserialize)]
struct Ticket {
    ticket: Option<String>,
}

/// `GET /connect/<server>?ticket=T`: to the server's authorization server.
async fn begin(
    State(shared): State<Arc<Shared>>,
    Path(server): Path<String>,
    Query(ticket): Query<Ticket>,
) -> Response {
    let Some(ticket) = ticket.ticket else {
        return page(
            StatusCode::BAD_REQUEST,
            "No sign-in here",
            "Open the link a call of yours was answered with.",
        );
    };
    let Some((server, resource)) = place(&shared, &server) else {
        return not_here();
    };
    let Some(callback) = at_connect(&resource, &server, "/callback") else {
        return page(
            StatusCode::NOT_FOUND,
            "No sign-in here",
            "moniker has no public URL.",
        );
    };
    let Some(conn) = shared.gateway.servers.connection(&server) else {
        return page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Not connected",
            &format!("moniker is not connected to `{server}` now: try again in a moment."),
        );
    };
    let Some(personal) = conn.forwarding.personal.get() else {
        return page(
            StatusCode::NOT_FOUND,
            "No sign-in here",
            "This server does not act as each person.",
        );
    };
    match personal.begin(&ticket, &callback).await {
        Ok((url, state)) => {
            let mut response = Redirect::to(url.as_str()).into_response();
            let secure = callback.starts_with("https://");
            let path = Url::parse(&callback)
                .map(|u| u.path().to_owned())
                .unwrap_or_default();
            let cookie = format!(
                "{COOKIE}={state}; Path={path}; Max-Age={}; HttpOnly; SameSite=Lax{}",
                SIGNIN_TTL.as_secs(),
                if secure { "; Secure" } else { "" }
            );
            if let Ok(value) = header::HeaderValue::from_str(&cookie) {
                response.headers_mut().append(header::SET_COOKIE, value);
            }
            response
        }
        Err(why) => {
            tracing::info!(server = %server, reason = %why, "a sign-in could not begin");
            page(StatusCode::BAD_REQUEST, "Cannot sign in", &why)
        }
    }
}

/// `GET /connect/<server>/callback`: the authorization server's answer, from the browser that
/// began the sign-in.
async fn callback(
    State(shared): State<Arc<Shared>>,
    Path(server): Path<String>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Response {
    let Some((server, _)) = place(&shared, &server) else {
        return not_here();
    };
    let Ok(url) = Url::parse(&format!("http://moniker{uri}")) else {
        return page(StatusCode::BAD_REQUEST, "Cannot sign in", "Not an answer.");
    };
    let (answer, state) = browser::Answer::of(&url);
    let began = cookie(&headers, COOKIE);
    let same = matches!((&state, began), (Some(s), Some(b)) if bool::from(s.as_bytes().ct_eq(b.as_bytes())));
    if !same {
        return page(
            StatusCode::BAD_REQUEST,
            "Cannot sign in",
            "This sign-in was not begun in this browser, or is over: open the link again.",
        );
    }
    let Some(conn) = shared.gateway.servers.connection(&server) else {
        return page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Not connected",
            "Try again in a moment.",
        );
    };
    let (Some(personal), Some(state)) = (conn.forwarding.personal.get(), state) else {
        return page(
            StatusCode::NOT_FOUND,
            "No sign-in here",
            "This server does not act as each person.",
        );
    };
    match personal.finish(&state, answer).await {
        Ok(person) => page(
            StatusCode::OK,
            "Signed in",
            &format!(
                "`{server}` now answers {person}'s calls as {person}. Go back and call again; you may close this page."
            ),
        ),
        Err(why) => {
            tracing::info!(server = %server, reason = %why, "a sign-in failed");
            page(StatusCode::BAD_REQUEST, "Cannot sign in", &why)
        }
    }
}

/// `DELETE /connect/<server>` with the person's access token for moniker: their sign-in to
/// the server is forgotten (204), or there was none (404).
async fn sign_out(
    State(shared): State<Arc<Shared>>,
    Path(server): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some((server, _)) = place(&shared, &server) else {
        return not_here();
    };
    let settings = shared.gateway.control.http();
    let Some(auth) = settings.auth.as_ref() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| checks::bearer(v.as_bytes()))
        .and_then(|t| std::str::from_utf8(t).ok());
    let Some(token) = token else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let verifier = shared.verifier(auth);
    let Ok(identity) = verifier.verify(token, &auth.resource).await else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let person = Person::named(&identity.issuer, &identity.subject);
    let forgot = shared
        .gateway
        .servers
        .connection(&server)
        .and_then(|conn| conn.forwarding.personal.get().map(|p| p.forget(&person)));
    match forgot {
        Some(true) => {
            tracing::info!(server = %server, person = %person.name, "a person signed out of the server");
            StatusCode::NO_CONTENT.into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The server a path names and moniker's public URL, when people sign in here at all.
fn place(shared: &Shared, server: &str) -> Option<(ServerId, String)> {
    let server: ServerId = server.parse().ok()?;
    let resource = shared
        .gateway
        .control
        .http()
        .auth
        .as_ref()?
        .resource
        .clone();
    Some((server, resource))
}

/// The page of a server people do not sign in to here.
fn not_here() -> Response {
    page(
        StatusCode::NOT_FOUND,
        "No sign-in here",
        "No such server signs people in here.",
    )
}

fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// A small page: what happened, in words (escaped: a reason may hold a server's text).
fn page(status: StatusCode, title: &str, text: &str) -> Response {
    let escape = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>{0}</title><h1>{0}</h1><p>{1}</p>",
        escape(title),
        escape(text)
    );
    let mut response = (status, Html(body)).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
    response
}
