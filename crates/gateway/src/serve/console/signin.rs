//! An admin signs in at the identity provider: the authorization code grant with PKCE (S256),
//! `state`, the `resource` indicator of `/mcp` and the answer's `iss` checked (RFC 9207), the
//! console being a web client of `http.auth.issuer` (`http.auth.console_client`, else
//! registered there once per process). The access token it gets is verified as `/mcp` verifies
//! one, and `http.auth.admins` must name its identity.
//!
//! moniker keeps nothing of a sign-in under way, so that nobody can crowd out a person's
//! sign-in by starting many: its `state`, PKCE verifier and client are in a cookie of the
//! browser that started it (`HttpOnly`, on the callback's path alone, ten minutes), and the
//! callback must bring the same `state` (so nobody can make a browser finish a sign-in they
//! began: login CSRF). The code is used once at the identity provider. The access token is not
//! kept: the session holds the identity it proved, until the token's `exp`.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use askama::Template;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use reqwest::Url;
use serde_json::Value;
use sha2::Digest as _;
use subtle::ConstantTimeEq as _;

use super::{Away, Cookie, Desk, SESSION, SESSION_TTL, Shared, Who, html, public_url, refused};
use crate::auth::store::Client;
use crate::auth::{browser, oauth};
use moniker_config::ResourceAuth;

/// How long a person has to sign in.
const SIGNIN_TTL: Duration = Duration::from_secs(600);
/// A session whose token does not say when it ends (an introspected one may not) lasts this
/// long, as long as `/mcp` trusts an introspection.
const UNDATED: Duration = Duration::from_secs(60);
/// Where the identity provider sends the browser back, below the console's public URL
/// ([`public_url`]).
const CALLBACK: &str = "/signin/callback";
/// The query of a sign-in the browser began at the public URL, sent there from another name.
const MOVED: &str = "moved";
/// The cookie of the session a sign-in begins: set by the callback, a level below the console,
/// so at the console's public path.
const SIGNED_IN: Cookie = Cookie {
    under: Some(""),
    ..SESSION
};
/// The cookie of a sign-in under way.
const BINDING: Cookie = Cookie {
    names: ["moniker_console_signin", "__Secure-moniker_console_signin"],
    under: Some(CALLBACK),
    // Sent on the identity provider's redirect back, a top-level GET from another site.
    same_site: "Lax",
};

/// What the browser that started a sign-in keeps of it: `state.verifier.client`, the client
/// as a digest of its id (an id may hold any character; a cookie may not).
struct Binding {
    state: String,
    verifier: String,
    client: String,
}

impl Binding {
    fn text(&self) -> String {
        format!("{}.{}.{}", self.state, self.verifier, self.client)
    }

    fn parse(text: &str) -> Option<Self> {
        let mut parts = text.splitn(3, '.');
        let (state, verifier, client) = (parts.next()?, parts.next()?, parts.next()?);
        Some(Self {
            state: state.to_owned(),
            verifier: verifier.to_owned(),
            client: client.to_owned(),
        })
    }

    fn digest(client: &Client) -> String {
        let digest = sha2::Sha256::digest(client.client_id.as_bytes());
        crate::files::hex(&digest[..12])
    }
}

/// The `http.auth` admins sign in with, if it names any.
fn admins_auth(shared: &Shared) -> Result<ResourceAuth, Away> {
    shared
        .gateway
        .control
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

/// The scopes asked for: those every token needs, and those an admin rule names.
fn scopes(auth: &ResourceAuth) -> Option<String> {
    let mut scopes: Vec<&str> = auth.scopes.iter().map(String::as_str).collect();
    for scope in auth.admins.iter().filter_map(scope_named) {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    (!scopes.is_empty()).then(|| scopes.join(" "))
}

/// The scope an admin rule names, when it names one.
fn scope_named(when: &moniker_config::IdentityMatch) -> Option<&str> {
    match when {
        moniker_config::IdentityMatch::Scope(scope) => Some(scope.as_str()),
        _ => None,
    }
}

/// `GET /console/signin`: the browser goes to the identity provider, from the console's public
/// URL (where the callback will find the sign-in's cookie).
pub(super) async fn start(
    State(shared): State<Arc<Desk>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let auth = match admins_auth(&shared) {
        Ok(auth) => auth,
        Err(away) => return away.into_response(),
    };
    let moved = uri.query() == Some(MOVED);
    match begin(&shared, &auth, &headers, moved).await {
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

/// `moved`: the browser was sent to the public URL already ([`MOVED`]).
async fn begin(
    shared: &Desk,
    auth: &ResourceAuth,
    headers: &HeaderMap,
    moved: bool,
) -> Result<Response, String> {
    let console = public_url(&auth.resource)?;
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if !moved && host.is_some_and(|host| authority(&console).as_deref() != Some(host)) {
        // Reached by another name (`localhost`, an inner address): the sign-in's cookie must
        // be where the identity provider sends the browser back. Once: a proxy may hand
        // moniker a `Host` of its own (its upstream's), whatever the browser asked for.
        return Ok(Redirect::to(&format!("{console}/signin?{MOVED}")).into_response());
    }
    let verifier = shared.verifier(auth);
    let metadata = verifier.metadata_of_issuer().await?;
    let endpoint = browser::authorization_endpoint(&metadata)?;
    let redirect_uri = format!("{console}{CALLBACK}");
    let client = verifier.client_for(&metadata, &redirect_uri).await?;
    let binding = Binding {
        state: crate::random::text(24),
        verifier: crate::random::text(32),
        client: Binding::digest(&client),
    };
    let scope = scopes(auth);
    let url = browser::authorization_url(
        endpoint,
        &browser::Request {
            client_id: &client.client_id,
            redirect_uri: &redirect_uri,
            verifier: &binding.verifier,
            state: &binding.state,
            resource: &verifier.resource(None),
            scope: scope.as_deref(),
        },
    )?;
    let mut response = Redirect::to(url.as_str()).into_response();
    let settings = shared.gateway.control.http();
    BINDING.set(
        &mut response,
        &settings,
        &binding.text(),
        Some(SIGNIN_TTL.as_secs()),
        false,
    );
    Ok(response)
}

/// `host[:port]` as a `Host` header says it (no port when it is the scheme's).
fn authority(url: &Url) -> Option<String> {
    let host = url.host_str()?;
    Some(match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
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
    State(shared): State<Arc<Desk>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let settings = shared.gateway.control.http();
    let mut response = match finish(&shared, &headers, &uri).await {
        Ok((id, who, ends)) => {
            let mut response = html(&SignedIn { who });
            SIGNED_IN.set(&mut response, &settings, &id, None, false);
            tracing::debug!(seconds = ends.as_secs(), "a console session began");
            response
        }
        // A level below the console's place.
        Err(away) => away.at("../"),
    };
    BINDING.set(&mut response, &settings, "", Some(0), false);
    response
}

/// The session of the identity the answer proves: its cookie's value, who it is, how long
/// it lasts.
async fn finish(
    shared: &Desk,
    headers: &HeaderMap,
    uri: &Uri,
) -> Result<(String, String, Duration), Away> {
    let auth = admins_auth(shared)?;
    let again = |why: &str| Away::Refused(StatusCode::BAD_REQUEST, format!("{why}: sign in again"));
    let url = Url::parse(&format!("http://console{uri}")).map_err(|_| again("not a redirect"))?;
    let (mut answer, state) = browser::Answer::of(&url);
    let settings = shared.gateway.control.http();
    let binding = BINDING
        .of(headers, &settings)
        .and_then(Binding::parse)
        .filter(|b| {
            state
                .as_ref()
                .is_some_and(|s| bool::from(s.as_bytes().ct_eq(b.state.as_bytes())))
        })
        .ok_or_else(|| again("this sign-in was not started by this browser, or is over"))?;
    // The identity provider's own words stay out of the page: its error code alone, when it
    // is one.
    answer.error = answer.error.map(|e| error_code(&e));
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
    let redirect_uri = format!(
        "{}{CALLBACK}",
        public_url(&auth.resource).map_err(gateway_error)?
    );
    let http = verifier.http().map_err(gateway_error)?;
    let client = verifier
        .client_for(&metadata, &redirect_uri)
        .await
        .map_err(gateway_error)?;
    if Binding::digest(&client) != binding.client {
        return Err(again(
            "the console's client at the identity provider changed",
        ));
    }
    let resource = verifier.resource(None);
    let form = vec![
        ("grant_type", "authorization_code".to_owned()),
        ("code", code),
        ("redirect_uri", redirect_uri),
        ("code_verifier", binding.verifier),
        ("resource", resource.clone()),
    ];
    let tokens = oauth::token(http, &metadata, &client, None, form, None)
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
    let lasts = lifetime(&identity.claims);
    let who = identity.subject.clone();
    let id = shared.seat(Who::User(Arc::new(identity)), Some(Instant::now() + lasts));
    Ok((id, who, lasts))
}

/// An OAuth error code (`access_denied`), or a word that says there was one.
fn error_code(error: &str) -> String {
    let code = error.split(':').next().unwrap_or_default().trim();
    let is_code =
        (1..=64).contains(&code.len()) && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    if is_code { code } else { "an error" }.to_owned()
}

/// How long a session of the token with these claims lasts: to its `exp`, at most
/// [`SESSION_TTL`]; [`UNDATED`] without one.
fn lifetime(claims: &serde_json::Map<String, Value>) -> Duration {
    let Some(exp) = claims.get("exp").and_then(Value::as_u64) else {
        return UNDATED;
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Duration::from_secs(exp.saturating_sub(now).min(SESSION_TTL.as_secs()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_console_is_beside_the_resource() {
        let console = |resource: &str| public_url(resource).map(String::from);
        assert_eq!(
            console("https://gw.example.com:8443/team/mcp").as_deref(),
            Ok("https://gw.example.com:8443/team/console")
        );
        for at_the_root in [
            "http://127.0.0.1:8080/mcp",
            "http://h/mcp/",
            "http://h",
            "http://h/mcp?x=1#y",
        ] {
            let url = console(at_the_root).expect("a URL");
            assert_eq!(
                Url::parse(&url).expect("a URL").path(),
                "/console",
                "{at_the_root}"
            );
        }
        assert!(console("not a url").is_err());
        assert!(console("mailto:ops@example.com").is_err());
        assert_eq!(
            console("https://ops:secret@gw.example.com/mcp").as_deref(),
            Ok("https://gw.example.com/console")
        );
        // A cookie's path is the console's, but never one that would add an attribute.
        let path = super::super::public_path;
        assert_eq!(
            path("https://gw.example.com/team/mcp").as_deref(),
            Some("/team/console")
        );
        assert_eq!(
            path("https://gw.example.com/a;Domain=evil.example/mcp"),
            None
        );
        let url = Url::parse("https://gw.example.com/mcp").expect("a URL");
        assert_eq!(authority(&url).as_deref(), Some("gw.example.com"));
    }

    #[test]
    fn a_binding_reads_back_whatever_the_client() {
        let client = Client {
            client_id: "https://app.example.com/client.json; a=b".to_owned(),
            client_secret: None,
            auth_method: "none".to_owned(),
            registered: false,
        };
        let binding = Binding {
            state: crate::random::text(24),
            verifier: crate::random::text(32),
            client: Binding::digest(&client),
        };
        let text = binding.text();
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
            "{text}"
        );
        let back = Binding::parse(&text).expect("parses");
        assert_eq!(
            (back.state, back.verifier, back.client),
            (binding.state, binding.verifier, binding.client)
        );
        assert!(Binding::parse("no-dots").is_none());
    }

    #[test]
    fn an_identity_provider_says_its_error_code_alone() {
        assert_eq!(error_code("access_denied: <b>nope</b>"), "access_denied");
        assert_eq!(error_code("<script>"), "an error");
        assert_eq!(error_code(&"x".repeat(65)), "an error");
    }

    #[test]
    fn a_session_lasts_to_the_token_s_exp_within_bounds() {
        let claims = |v: Value| v.as_object().cloned().expect("an object");
        assert_eq!(lifetime(&claims(json!({}))), UNDATED);
        assert_eq!(lifetime(&claims(json!({"exp": u64::MAX}))), SESSION_TTL);
        assert_eq!(lifetime(&claims(json!({"exp": 1}))), Duration::ZERO);
    }

    #[test]
    fn the_scopes_asked_for_hold_the_admins_scopes() {
        let mut auth = ResourceAuth {
            resource: "https://gw/mcp".to_owned(),
            issuer: "https://idp".to_owned(),
            scopes: vec!["mcp:tools".to_owned()],
            algorithms: Vec::new(),
            leeway: Duration::ZERO,
            keys_ttl: Duration::ZERO,
            introspection: None,
            toolsets: Vec::new(),
            default_toolset: None,
            admins: vec![moniker_config::IdentityMatch::Scope(
                "moniker:admin".to_owned(),
            )],
            console_client: None,
        };
        assert_eq!(scopes(&auth).as_deref(), Some("mcp:tools moniker:admin"));
        auth.scopes.clear();
        auth.admins.clear();
        assert_eq!(scopes(&auth), None);
    }
}
