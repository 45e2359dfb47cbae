//! An admin signs in at the identity provider: the authorization code grant with PKCE (S256),
//! `state`, the `resource` indicator of `/mcp` and the answer's `iss` checked (RFC 9207), the
//! console being a web client of `http.auth.issuer` (`http.auth.console_client`, else
//! registered there once per process). The access token it gets is verified as `/mcp` verifies
//! one, and `http.auth.admins` must name its identity.
//!
//! A sign-in is kept between its start and its callback, at most [`MAX_PENDING`] for
//! [`PENDING_TTL`], bound to the browser that started it by a cookie of its own (so nobody can
//! make a browser finish a sign-in they began: login CSRF). The access token is not kept: the
//! session holds the identity it proved, until the token's `exp`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use askama::Template;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use reqwest::Url;
use serde_json::Value;
use subtle::ConstantTimeEq as _;

use super::{Away, Shared, Who, cookie, html, random, refused, session_cookie, set_cookie};
use crate::auth::store::Client;
use crate::auth::{browser, oauth};
use crate::sync::lock;
use moniker_config::ResourceAuth;

/// Sign-ins under way at most: the oldest goes when one more starts.
const MAX_PENDING: usize = 64;
/// How long a person has to sign in.
const PENDING_TTL: Duration = Duration::from_secs(600);
/// The cookie that binds a sign-in to the browser that started it.
const BINDING: &str = "moniker_console_signin";
/// Where the identity provider sends the browser back, at moniker's public origin.
pub(super) const CALLBACK: &str = "/console/signin/callback";

/// The sign-ins under way, by `state`, and the client the console registered as.
#[derive(Default)]
pub(in crate::serve::http) struct Signins {
    pending: Mutex<HashMap<String, Pending>>,
    /// The registered client, and the issuer and redirect URI it was registered for.
    registered: tokio::sync::Mutex<Option<(String, Client)>>,
}

struct Pending {
    code_verifier: String,
    binding: String,
    client: Client,
    redirect_uri: String,
    ends: Instant,
}

impl Signins {
    fn keep(&self, state: String, pending: Pending) {
        let mut held = lock(&self.pending);
        let now = Instant::now();
        held.retain(|_, p| p.ends > now);
        if held.len() >= MAX_PENDING {
            let oldest = held
                .iter()
                .min_by_key(|(_, p)| p.ends)
                .map(|(s, _)| s.clone());
            if let Some(oldest) = oldest {
                held.remove(&oldest);
            }
        }
        held.insert(state, pending);
    }

    /// The sign-in of `state`, once: a callback cannot be replayed.
    fn take(&self, state: &str) -> Option<Pending> {
        lock(&self.pending)
            .remove(state)
            .filter(|p| p.ends > Instant::now())
    }

    /// Who the console is at the issuer: the configured client, else the one it registered
    /// (Dynamic Client Registration, once for this issuer and redirect URI).
    async fn client(
        &self,
        http: &reqwest::Client,
        auth: &ResourceAuth,
        metadata: &oauth::Metadata,
        redirect_uri: &str,
    ) -> Result<Client, String> {
        let settings = moniker_config::Auth {
            client_id: auth.console_client.as_ref().map(|c| c.client_id.clone()),
            client_secret: auth
                .console_client
                .as_ref()
                .and_then(|c| c.client_secret.clone()),
            ..moniker_config::Auth::default()
        };
        if settings.client_id.is_some() {
            return oauth::identify(http, &settings, metadata, Some(redirect_uri)).await;
        }
        let key = format!("{} {redirect_uri}", metadata.issuer);
        let mut registered = self.registered.lock().await;
        if let Some((_, client)) = registered.as_ref().filter(|(k, _)| *k == key) {
            return Ok(client.clone());
        }
        let client = oauth::identify(http, &settings, metadata, Some(redirect_uri)).await?;
        tracing::info!(issuer = %metadata.issuer, client_id = %client.client_id, "the console registered at the identity provider");
        *registered = Some((key, client.clone()));
        Ok(client)
    }
}

/// The `http.auth` admins sign in with, if it names any.
fn admins_auth(shared: &Shared) -> Result<ResourceAuth, Away> {
    shared
        .gateway
        .http()
        .auth
        .clone()
        .filter(|a| !a.admins.is_empty())
        .ok_or_else(|| {
            Away::Refused(
                StatusCode::NOT_FOUND,
                "nobody signs in at an identity provider here: `http.auth.admins` names no one"
                    .to_owned(),
            )
        })
}

/// The redirect URI: the callback at the origin of `http.auth.resource`, moniker's public
/// address.
fn redirect_uri(resource: &str) -> Result<String, String> {
    let url =
        Url::parse(resource).map_err(|e| format!("`http.auth.resource` is not a URL: {e}"))?;
    Ok(format!("{}{CALLBACK}", url.origin().ascii_serialization()))
}

/// `GET /console/signin`: the browser goes to the identity provider.
pub(super) async fn start(State(shared): State<Arc<Shared>>) -> Response {
    let auth = match admins_auth(&shared) {
        Ok(auth) => auth,
        Err(away) => return away.into_response(),
    };
    match begin(&shared, &auth).await {
        Ok(response) => response,
        Err(why) => {
            tracing::warn!(issuer = %auth.issuer, error = %why, "the console cannot send a sign-in to the identity provider");
            refused(
                StatusCode::BAD_GATEWAY,
                &format!("cannot sign in at `{}`: {why}", auth.issuer),
            )
        }
    }
}

async fn begin(shared: &Shared, auth: &ResourceAuth) -> Result<Response, String> {
    let verifier = shared.verifier(auth);
    let metadata = verifier.metadata_of_issuer().await?;
    let endpoint = browser::authorization_endpoint(&metadata)?;
    let redirect_uri = redirect_uri(&auth.resource)?;
    let client = shared
        .console
        .signins
        .client(verifier.http()?, auth, &metadata, &redirect_uri)
        .await?;
    let code_verifier = oauth::random_text(32);
    let state = oauth::random_text(24);
    let scope = (!auth.scopes.is_empty()).then(|| auth.scopes.join(" "));
    let url = browser::authorization_url(
        endpoint,
        &browser::Request {
            client_id: &client.client_id,
            redirect_uri: &redirect_uri,
            verifier: &code_verifier,
            state: &state,
            resource: &verifier.resource(None),
            scope: scope.as_deref(),
        },
    )?;
    let binding = random();
    shared.console.signins.keep(
        state,
        Pending {
            code_verifier,
            binding: binding.clone(),
            client,
            redirect_uri,
            ends: Instant::now() + PENDING_TTL,
        },
    );
    let mut response = Redirect::to(url.as_str()).into_response();
    // `Lax`: sent on the identity provider's redirect back, a top-level GET from another site.
    set_cookie(
        &mut response,
        &format!(
            "{BINDING}={binding}; Path={CALLBACK}; HttpOnly; SameSite=Lax; Max-Age={}",
            PENDING_TTL.as_secs()
        ),
    );
    Ok(response)
}

#[derive(Template)]
#[template(path = "console/signedin.html")]
struct SignedIn {
    who: String,
}

/// `GET /console/signin/callback`: the identity provider's answer. A session for the identity
/// it proved, if `admins` names it; the page that follows is loaded from moniker's own page
/// (a `SameSite=Strict` cookie is not sent on a redirect that another site began).
pub(super) async fn callback(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let forget = format!("{BINDING}=; Path={CALLBACK}; HttpOnly; SameSite=Lax; Max-Age=0");
    let mut response = match finish(&shared, &headers, &uri).await {
        Ok((id, who)) => {
            let mut response = html(&SignedIn { who });
            set_cookie(&mut response, &session_cookie(&id));
            response
        }
        Err(away) => away.into_response(),
    };
    set_cookie(&mut response, &forget);
    response
}

/// The session of the identity the answer proves: its cookie's value, and who it is.
async fn finish(shared: &Shared, headers: &HeaderMap, uri: &Uri) -> Result<(String, String), Away> {
    let auth = admins_auth(shared)?;
    let bad = |why: &str| Away::Refused(StatusCode::BAD_REQUEST, format!("{why}: sign in again"));
    let url = Url::parse(&format!("http://console{uri}")).map_err(|_| bad("not a redirect"))?;
    let (answer, state) = browser::Answer::of(&url);
    let pending = state
        .as_deref()
        .and_then(|s| shared.console.signins.take(s))
        .ok_or_else(|| bad("this sign-in is unknown, used or expired"))?;
    let bound = cookie(headers, BINDING)
        .is_some_and(|b| bool::from(b.as_bytes().ct_eq(pending.binding.as_bytes())));
    if !bound {
        return Err(bad("this sign-in was started by another browser"));
    }
    let verifier = shared.verifier(&auth);
    let gateway_error = |why: String| {
        tracing::warn!(issuer = %auth.issuer, error = %why, "a console sign-in failed");
        Away::Refused(
            StatusCode::BAD_GATEWAY,
            format!("the sign-in at `{}` failed: {why}", auth.issuer),
        )
    };
    let metadata = verifier.metadata_of_issuer().await.map_err(gateway_error)?;
    let code = browser::code_of(answer, &metadata)
        .map_err(|why| Away::Refused(StatusCode::UNAUTHORIZED, format!("not signed in: {why}")))?;
    let resource = verifier.resource(None);
    let form = vec![
        ("grant_type", "authorization_code".to_owned()),
        ("code", code),
        ("redirect_uri", pending.redirect_uri),
        ("code_verifier", pending.code_verifier),
        ("resource", resource.clone()),
    ];
    let http = verifier.http().map_err(gateway_error)?;
    let tokens = oauth::token(http, &metadata, &pending.client, None, form, None)
        .await
        .map_err(gateway_error)?;
    let identity = verifier
        .verify(&tokens.access_token, &resource)
        .await
        .map_err(|denied| {
            tracing::warn!(?denied, "a console sign-in brought a token moniker refuses");
            Away::Refused(
                StatusCode::UNAUTHORIZED,
                "the identity provider's token is not one `/mcp` would take".to_owned(),
            )
        })?;
    shared.admit_identity(&identity, None)?;
    tracing::info!(subject = %identity.subject, "an admin signed in to the console");
    let ends = expiry(&identity.claims);
    let who = identity.subject.clone();
    Ok((shared.seat(Who::User(Arc::new(identity)), ends), who))
}

/// When the token's `exp` is, as an instant; `None` when it has none.
fn expiry(claims: &serde_json::Map<String, Value>) -> Option<Instant> {
    let exp = claims.get("exp").and_then(Value::as_u64)?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Instant::now() + Duration::from_secs(exp.saturating_sub(now)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redirect_uri_is_at_the_resource_s_origin() {
        assert_eq!(
            redirect_uri("https://gw.example.com:8443/team/mcp").as_deref(),
            Ok("https://gw.example.com:8443/console/signin/callback")
        );
        assert!(redirect_uri("not a url").is_err());
    }

    #[test]
    fn a_sign_in_is_taken_once_and_the_oldest_goes_first() {
        let signins = Signins::default();
        let pending = |n: u64| Pending {
            code_verifier: String::new(),
            binding: String::new(),
            client: Client {
                client_id: "c".to_owned(),
                client_secret: None,
                auth_method: "none".to_owned(),
                registered: false,
            },
            redirect_uri: String::new(),
            ends: Instant::now() + PENDING_TTL + Duration::from_secs(n),
        };
        for n in 0..=MAX_PENDING as u64 {
            signins.keep(format!("s{n}"), pending(n));
        }
        assert_eq!(lock(&signins.pending).len(), MAX_PENDING);
        assert!(signins.take("s0").is_none(), "the oldest went");
        assert!(signins.take("s1").is_some());
        assert!(signins.take("s1").is_none(), "once only");
    }
}
