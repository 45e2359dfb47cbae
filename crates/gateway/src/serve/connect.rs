//! Where people sign in to the servers that act as each of them (`auth.per_person`), beside
//! `/mcp`: `GET /connect/<server>?ticket=T` (the link a person's call was answered with),
//! `GET /connect/<server>/callback`, and `DELETE /connect/<server>` with the person's own
//! access token for moniker, which signs them out. For a stdio server run once for each person
//! (`per_person`), `PUT /connect/<server>/secrets` with the person's token sets their secrets.
//!
//! A link is one person's, but anyone who sees it could open it: so the browser first signs in
//! at moniker's identity provider (`http.auth.issuer`: the code grant with PKCE, the access
//! token checked as `/mcp` checks one), and only the person the link was made for goes on, to
//! the server's own authorization server ([`crate::auth::personal`] runs that part and keeps
//! what it gives). Both answers come back to the same callback; the browser that began a step
//! must finish it (a cookie holds its `state`). A link is used up only when its person has
//! proved to be who opened it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use moniker_config::ResourceAuth;
use moniker_surface::ServerId;
use reqwest::Url;
use subtle::ConstantTimeEq as _;

use super::checks;
use super::http::{Shared, layers};
use crate::auth::personal::{Person, SIGNIN_TTL, at_connect};
use crate::auth::store::Client;
use crate::auth::{browser, oauth};
use crate::sync::lock;

/// The cookie of a step under way.
const COOKIE: &str = "moniker_connect";
/// Identity steps under way at once, at most (each needs a valid ticket).
const IDENTIFYING_MAX: usize = 1024;

/// The state of the sign-ins' first step: who the browser is at moniker's identity provider.
struct Lobby {
    shared: Arc<Shared>,
    identifying: Mutex<HashMap<String, Identifying>>,
}

struct Identifying {
    server: ServerId,
    ticket: String,
    verifier: String,
    client: Client,
    until: Instant,
}

/// The sign-in routes, behind the same `Host` check as `/mcp`.
pub(super) fn router(shared: &Arc<Shared>) -> Router {
    let lobby = Arc::new(Lobby {
        shared: shared.clone(),
        identifying: Mutex::new(HashMap::new()),
    });
    Router::new()
        .route("/connect/{server}", get(begin).delete(sign_out))
        .route("/connect/{server}/secrets", axum::routing::put(set_secrets))
        .route("/connect/{server}/callback", get(callback))
        .route_layer(from_fn_with_state(shared.clone(), layers::host))
        .route_layer(from_fn(layers::close_on_refusal))
        .with_state(lobby)
}

#[derive(serde::Deserialize)]
struct Ticket {
    ticket: Option<String>,
}

/// `GET /connect/<server>?ticket=T`: first to moniker's identity provider, to prove who opens
/// the link.
async fn begin(
    State(lobby): State<Arc<Lobby>>,
    Path(server): Path<String>,
    Query(ticket): Query<Ticket>,
) -> Response {
    let Some((server, auth)) = place(&lobby.shared, &server) else {
        return not_here();
    };
    let Some(ticket) = ticket.ticket else {
        return page(
            StatusCode::BAD_REQUEST,
            "No sign-in here",
            "Open the link a call of yours was answered with.",
        );
    };
    let Some(callback) = at_connect(&auth.resource, &server, "/callback") else {
        return not_here();
    };
    let holder = lobby
        .shared
        .gateway
        .servers
        .connection(&server)
        .and_then(|conn| {
            conn.forwarding
                .personal
                .get()
                .and_then(|p| p.ticket_holder(&ticket))
        });
    if holder.is_none() {
        return page(
            StatusCode::BAD_REQUEST,
            "Cannot sign in",
            "This sign-in link was used already, or is over: call the tool again for a new one.",
        );
    }
    match identify(&lobby, &auth, &server, ticket, &callback).await {
        Ok((url, state)) => with_cookie(
            Redirect::to(url.as_str()).into_response(),
            &callback,
            &state,
        ),
        Err(why) => {
            tracing::warn!(server = %server, issuer = %auth.issuer, reason = %why, "a sign-in could not begin at the identity provider");
            page(StatusCode::BAD_GATEWAY, "Cannot sign in", &why)
        }
    }
}

/// The identity provider's authorization URL for the browser, and the step's `state`.
async fn identify(
    lobby: &Lobby,
    auth: &ResourceAuth,
    server: &ServerId,
    ticket: String,
    callback: &str,
) -> Result<(Url, String), String> {
    let verifier = lobby.shared.verifier(auth);
    let metadata = verifier.metadata_of_issuer().await?;
    let endpoint = browser::authorization_endpoint(&metadata)?;
    let client = verifier.client_for(&metadata, callback).await?;
    let (state, pkce) = (crate::random::text(24), crate::random::text(32));
    let scope = (!auth.scopes.is_empty()).then(|| auth.scopes.join(" "));
    let url = browser::authorization_url(
        endpoint,
        &browser::Request {
            client_id: &client.client_id,
            redirect_uri: callback,
            verifier: &pkce,
            state: &state,
            resource: &auth.resource,
            scope: scope.as_deref(),
        },
    )?;
    let now = Instant::now();
    let mut identifying = lock(&lobby.identifying);
    // One step under way a ticket (its latest): opening a link again cannot fill the table.
    identifying.retain(|_, i| i.until > now && i.ticket != ticket);
    if identifying.len() >= IDENTIFYING_MAX {
        return Err("too many sign-ins are under way: try again in ten minutes".to_owned());
    }
    identifying.insert(
        state.clone(),
        Identifying {
            server: server.clone(),
            ticket,
            verifier: pkce,
            client,
            until: now + SIGNIN_TTL,
        },
    );
    Ok((url, state))
}

/// `GET /connect/<server>/callback`: an answer, from the browser that began its step: the
/// identity provider's (then on to the server's authorization server, when the browser is
/// the link's person) or the server's authorization server's (the sign-in is kept).
async fn callback(
    State(lobby): State<Arc<Lobby>>,
    Path(server): Path<String>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Response {
    let Some((server, auth)) = place(&lobby.shared, &server) else {
        return not_here();
    };
    let Ok(url) = Url::parse(&format!("http://moniker{uri}")) else {
        return page(StatusCode::BAD_REQUEST, "Cannot sign in", "Not an answer.");
    };
    let (answer, state) = browser::Answer::of(&url);
    let began = checks::cookie(&headers, COOKIE);
    let Some(state) =
        state.filter(|s| began.is_some_and(|b| bool::from(s.as_bytes().ct_eq(b.as_bytes()))))
    else {
        return page(
            StatusCode::BAD_REQUEST,
            "Cannot sign in",
            "This sign-in was not begun in this browser, or is over: open the link again.",
        );
    };
    let Some(conn) = lobby.shared.gateway.servers.connection(&server) else {
        return page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Not connected",
            "Try again in a moment.",
        );
    };
    let Some(personal) = conn.forwarding.personal.get() else {
        return not_here();
    };
    let identifying = lock(&lobby.identifying)
        .remove(&state)
        .filter(|i| i.until > Instant::now() && i.server == server);
    if let Some(step) = identifying {
        return match identified(&lobby, &auth, step, answer).await {
            Ok((person, ticket)) => {
                let Some(callback) = at_connect(&auth.resource, &server, "/callback") else {
                    return not_here();
                };
                match personal.begin(&ticket, &person, &callback).await {
                    Ok((url, state)) => with_cookie(
                        Redirect::to(url.as_str()).into_response(),
                        &callback,
                        &state,
                    ),
                    Err(why) => page(StatusCode::BAD_REQUEST, "Cannot sign in", &why),
                }
            }
            Err(why) => {
                tracing::info!(server = %server, reason = %why, "a sign-in's person could not be told");
                page(StatusCode::BAD_REQUEST, "Cannot sign in", &why)
            }
        };
    }
    if !personal.signing_in(&state) {
        return page(
            StatusCode::BAD_REQUEST,
            "Cannot sign in",
            "This sign-in is over or was not begun here: open the link again.",
        );
    }
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

/// Who the identity provider's answer proves the browser is (the access token it gives, as
/// `/mcp` would check it), with the step's ticket.
async fn identified(
    lobby: &Lobby,
    auth: &ResourceAuth,
    step: Identifying,
    answer: browser::Answer,
) -> Result<(Person, String), String> {
    let verifier = lobby.shared.verifier(auth);
    let metadata = verifier.metadata_of_issuer().await?;
    let code = browser::code_of(answer, &metadata)?;
    let redirect_uri =
        at_connect(&auth.resource, &step.server, "/callback").ok_or("moniker has no public URL")?;
    let form = vec![
        ("grant_type", "authorization_code".to_owned()),
        ("code", code),
        ("redirect_uri", redirect_uri),
        ("code_verifier", step.verifier),
        ("resource", auth.resource.clone()),
    ];
    let tokens = oauth::token(verifier.http()?, &metadata, &step.client, None, form, None).await?;
    let identity = verifier
        .verify(&tokens.access_token, &auth.resource)
        .await
        .map_err(|_| "the identity provider's token is not one `/mcp` would take".to_owned())?;
    Ok((
        Person::named(&identity.issuer, &identity.subject),
        step.ticket,
    ))
}

/// `DELETE /connect/<server>` with the person's access token for moniker: their sign-in to
/// the server (or, for a server run once for each person, their secrets and their instance)
/// is forgotten (204), or there was none (404).
async fn sign_out(
    State(lobby): State<Arc<Lobby>>,
    Path(server): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some((server, auth)) = place(&lobby.shared, &server) else {
        return not_here();
    };
    let person = match person_of(&lobby, &auth, &headers).await {
        Ok(person) => person,
        Err(status) => return status.into_response(),
    };
    let gateway = &lobby.shared.gateway;
    let signed_in = gateway
        .servers
        .connection(&server)
        .and_then(|conn| conn.forwarding.personal.get().map(|p| p.forget(&person)));
    let secrets = gateway.servers.slot(&server).and_then(|slot| {
        slot.people.as_ref().map(|people| {
            people.stop_person(&person);
            people.secrets.forget(&person)
        })
    });
    if signed_in == Some(true) || secrets == Some(true) {
        tracing::info!(server = %server, person = %person.name, "a person signed out of the server");
        StatusCode::NO_CONTENT.into_response()
    } else {
        StatusCode::NOT_FOUND.into_response()
    }
}

/// The most a request setting secrets may hold.
const SECRETS_BODY_MAX: usize = 16 * 1024;

/// `PUT /connect/<server>/secrets` with the person's access token for moniker and a JSON
/// object of their secrets (names of `per_person.secrets`): kept for them (204), and their
/// instance started anew at their next call.
async fn set_secrets(
    State(lobby): State<Arc<Lobby>>,
    Path(server): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let Some((server, auth)) = place(&lobby.shared, &server) else {
        return not_here();
    };
    let person = match person_of(&lobby, &auth, &headers).await {
        Ok(person) => person,
        Err(status) => return status.into_response(),
    };
    let Some(slot) = lobby.shared.gateway.servers.slot(&server) else {
        return not_here();
    };
    let Some(people) = slot.people.clone() else {
        return not_here();
    };
    let values = match secrets_of(&body, people.secret_names()) {
        Ok(values) => values,
        Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
    };
    // Sealed and written to a synced file: on a blocking thread, not the one that serves calls.
    let (keeper, whose) = (people.clone(), person.clone());
    let set = tokio::task::spawn_blocking(move || keeper.secrets.set(&whose, values));
    match set.await.unwrap_or_else(|e| Err(e.to_string())) {
        Ok(()) => {
            people.stop_person(&person);
            tracing::info!(server = %server, person = %person.name, "a person set their secrets");
            StatusCode::NO_CONTENT.into_response()
        }
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}

/// The secrets a body sets: a JSON object of strings, each one a person may set
/// ([`crate::auth::personal::settable`]).
fn secrets_of(
    body: &[u8],
    names: &[String],
) -> Result<std::collections::BTreeMap<String, String>, String> {
    if body.len() > SECRETS_BODY_MAX {
        return Err(format!("at most {SECRETS_BODY_MAX} bytes"));
    }
    let values: std::collections::BTreeMap<String, String> = serde_json::from_slice(body)
        .map_err(|_| "a JSON object of strings: {\"NAME\": \"value\"}".to_owned())?;
    for (name, value) in &values {
        crate::auth::personal::settable(names, name, value)?;
    }
    Ok(values)
}

/// The person whose access token for moniker a request carries (401 without a valid one).
async fn person_of(
    lobby: &Lobby,
    auth: &ResourceAuth,
    headers: &HeaderMap,
) -> Result<Person, StatusCode> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| checks::bearer(v.as_bytes()))
        .and_then(|t| std::str::from_utf8(t).ok())
        .ok_or(StatusCode::UNAUTHORIZED)?;
    let verifier = lobby.shared.verifier(auth);
    let identity = verifier
        .verify(token, &auth.resource)
        .await
        .map_err(|_| StatusCode::UNAUTHORIZED)?;
    Ok(Person::named(&identity.issuer, &identity.subject))
}

/// The server a path names and moniker's `http.auth`, when people sign in here at all.
fn place(shared: &Shared, server: &str) -> Option<(ServerId, ResourceAuth)> {
    let server: ServerId = server.parse().ok()?;
    let auth = shared.gateway.control.http().auth.clone()?;
    Some((server, auth))
}

/// The page of a server people do not sign in to here (the same whether it exists or not).
fn not_here() -> Response {
    page(
        StatusCode::NOT_FOUND,
        "No sign-in here",
        "No such server signs people in here.",
    )
}

/// `response` with the cookie of a step whose `state` the callback must see.
fn with_cookie(mut response: Response, callback: &str, state: &str) -> Response {
    let path = Url::parse(callback)
        .map(|u| u.path().to_owned())
        .unwrap_or_default();
    let cookie = format!(
        "{COOKIE}={state}; Path={path}; Max-Age={}; HttpOnly; SameSite=Lax{}",
        SIGNIN_TTL.as_secs(),
        if callback.starts_with("https://") {
            "; Secure"
        } else {
            ""
        }
    );
    if let Ok(value) = header::HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
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
