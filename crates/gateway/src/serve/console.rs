//! The console at `/console` (DESIGN "A console"): the namespace in a browser. Off unless
//! `http.console` or `serve --console`; read-only but for the playground, whose calls go the
//! normal way, as the console's principal, audited.
//!
//! Who may see it: a token of `http.tokens` bound to no toolset, or an identity of the identity
//! provider that `http.auth.admins` names (or anyone, when there are neither tokens nor
//! `http.auth`: then `/mcp` is open too). A token is presented as `Authorization: Bearer`, or
//! once on the login page; an identity signs in at the identity provider ([`signin`]). Either
//! gives a session cookie (`HttpOnly`, `SameSite=Strict`, random, kept in memory, ended when
//! its token leaves the config or its identity leaves `admins`). The same Host and Origin
//! checks as `/mcp` run first. Every page is rendered here (askama templates, HTML escaped), without scripts, under a
//! strict Content-Security-Policy; every form that changes anything carries the session's CSRF
//! token. Nothing secret is rendered: no token, no `fixed` parameter value, no `env`.

mod pages;
mod playground;
mod signin;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use askama::Template;
use axum::Router;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use reqwest::Url;
use subtle::ConstantTimeEq as _;

use super::http::{Shared, layers};
use crate::identity::{self, Identity};
use crate::metrics::Latency;
use crate::serve::checks;
use crate::sync::lock;

/// Console sessions at most: the oldest goes when one more logs in.
const MAX_SESSIONS: usize = 64;
/// How long a console session lasts.
const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// The cookie of a console session (plain, and `__Secure-`), on the whole console, set by the
/// login form's answer: at the browser's default path, the login page's folder, which is the
/// console's wherever it was reached (`/console`, `/team/console` behind a proxy).
const SESSION: Cookie = Cookie {
    names: ["moniker_console", "__Secure-moniker_console"],
    under: None,
    same_site: "Strict",
};
/// How often the servers' calls are sampled for the charts, and how many samples are kept.
const SAMPLE_EVERY: Duration = Duration::from_secs(10);
const SAMPLES: usize = 61;

const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
const CSS: &str = include_str!("../../templates/console/console.css");
const ICON: &str = include_str!("../../templates/console/favicon.svg");

/// What every page shows at its top.
pub(super) struct Nav {
    pub page: &'static str,
    pub who: String,
    /// The form field that proves a POST is from this console (empty for a bearer token).
    pub csrf: String,
}

impl Nav {
    pub(super) fn of(page: &'static str, admin: &Admin) -> Self {
        Self {
            page,
            who: admin.name.clone(),
            csrf: admin.csrf.clone().unwrap_or_default(),
        }
    }
}

/// The toolset a form chose: `Ok(None)` for the whole surface (`*`), `Err` for none chosen or
/// one that does not exist.
pub(super) fn query_toolset<'a>(
    chosen: &'a str,
    known: &BTreeSet<String>,
) -> Result<Option<&'a str>, ()> {
    match chosen {
        "" => Err(()),
        "*" => Ok(None),
        name if known.contains(name) => Ok(Some(name)),
        _ => Err(()),
    }
}

/// What the console's pages are served with: the HTTP transport's state, which they read, and
/// the console's own.
pub(super) struct Desk {
    shared: Arc<Shared>,
    console: Console,
}

impl std::ops::Deref for Desk {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.shared
    }
}

/// The console's own state, beside the HTTP transport's.
#[derive(Default)]
struct Console {
    sessions: Mutex<HashMap<String, Seat>>,
    /// The servers' calls every [`SAMPLE_EVERY`], oldest first.
    samples: Mutex<VecDeque<std::collections::BTreeMap<String, Latency>>>,
}

/// A logged-in browser: who it proved to be (checked again on every request, so that a token
/// taken out of the config, or an identity out of `admins`, ends it), its CSRF token, when it
/// ends.
struct Seat {
    who: Who,
    csrf: String,
    ends: Instant,
}

#[derive(Clone)]
enum Who {
    /// A token of `http.tokens` (or anything, when the console is open).
    Token(String),
    /// An identity signed in at the identity provider.
    User(Arc<Identity>),
}

/// Why a request does not see a page: no session yet (the login page), or a refusal.
pub(super) enum Away {
    Login,
    Refused(StatusCode, String),
}

impl Away {
    /// The answer of a page `root` below the console's own place (`""`, or `"../"` for one a
    /// level deeper): its links are relative, so the console works wherever a proxy puts it
    /// (`/console`, or `/moniker/console` behind a path prefix).
    pub(super) fn at(self, root: &'static str) -> Response {
        match self {
            Self::Login => Redirect::to(&format!("{root}login")).into_response(),
            Self::Refused(status, why) => refused_at(status, &why, root),
        }
    }
}

impl IntoResponse for Away {
    fn into_response(self) -> Response {
        self.at("")
    }
}

/// Who is looking: the name the audit log gives them, and the CSRF token of their session
/// (`None`: a bearer token, which a browser does not send by itself).
pub(super) struct Admin {
    pub name: String,
    pub csrf: Option<String>,
}

/// The console's routes, behind the same `Host` and `Origin` checks as `/mcp`.
pub(super) fn router(shared: &Arc<Shared>) -> Router {
    if shared.gateway.control.console_on() {
        shared.gateway.services.recent_calls_kept();
    }
    let desk = Arc::new(Desk {
        shared: shared.clone(),
        console: Console::default(),
    });
    tokio::spawn(sample(Arc::downgrade(&desk)));
    Router::new()
        .route(
            "/console",
            // Relative, as every link of the console: from `/console`, `console/namespace`.
            get(|| async { Redirect::to("console/namespace") }),
        )
        .route("/console/console.css", get(css))
        .route(
            "/console/favicon.svg",
            get(|| async { ([(header::CONTENT_TYPE, "image/svg+xml")], ICON) }),
        )
        .route("/console/login", get(login_page).post(login))
        .route("/console/logout", post(logout))
        .route("/console/signin", get(signin::start))
        .route("/console/signin/callback", get(signin::callback))
        .route("/console/servers", get(pages::servers))
        .route("/console/people", post(pages::forget_person))
        .route("/console/namespace", get(pages::namespace))
        .route("/console/access", get(pages::access))
        .route("/console/activity", get(pages::activity))
        .route(
            "/console/playground",
            get(playground::page).post(playground::call),
        )
        .route_layer(from_fn_with_state(shared.clone(), on))
        .route_layer(from_fn_with_state(shared.clone(), layers::origin))
        .route_layer(from_fn_with_state(shared.clone(), layers::host))
        .route_layer(from_fn(layers::close_on_refusal))
        .with_state(desk)
}

/// Not found while the console is off: nothing says it is there.
async fn on(
    State(shared): State<Arc<Shared>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if !shared.gateway.control.console_on() {
        return StatusCode::NOT_FOUND.into_response();
    }
    // From now on the last calls are kept for the Activity page.
    shared.gateway.services.recent_calls_kept();
    secured(next.run(request).await)
}

/// The console's headers on every answer.
fn secured(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in SECURED {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// The headers [`secured`] puts on every answer of the console.
const SECURED: [(header::HeaderName, &str); 5] = [
    (header::CONTENT_SECURITY_POLICY, CSP),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::REFERRER_POLICY, "same-origin"),
    (header::CACHE_CONTROL, "no-store"),
    (header::X_FRAME_OPTIONS, "DENY"),
];

async fn css() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response()
}

/// A page, or the refusal to render it (a template error is a bug, said as a 500).
pub(super) fn html(page: &impl Template) -> Response {
    match page.render() {
        Ok(text) => ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], text).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "a console page failed to render");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

impl Desk {
    /// Who is looking, or the answer to give instead: the login page for a browser without a
    /// session, 403 for a token bound to a toolset or an identity `admins` does not name.
    pub(super) fn admit(&self, headers: &HeaderMap) -> Result<Admin, Away> {
        let settings = self.gateway.control.http();
        if settings.tokens.is_empty() && settings.auth.is_none() {
            let csrf = self.seat_of(headers).map(|(_, csrf)| csrf);
            return Ok(Admin {
                name: "console".to_owned(),
                csrf,
            });
        }
        let authorization = headers
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        // A script presents a token of `http.tokens`; an identity signs in with a browser (an
        // access token an MCP client holds, maybe bound to a toolset, opens no console).
        if let Some(secret) = authorization.and_then(checks::bearer) {
            let secret = std::str::from_utf8(secret).unwrap_or_default();
            return self.admit_token(secret, None);
        }
        match self.seat_of(headers) {
            Some((Who::Token(token), csrf)) => self.admit_token(&token, Some(csrf)),
            Some((Who::User(identity), csrf)) => self.admit_identity(&identity, Some(csrf)),
            None => Err(Away::Login),
        }
    }

    fn admit_token(&self, secret: &str, csrf: Option<String>) -> Result<Admin, Away> {
        let settings = self.gateway.control.http();
        let Some((index, token)) = checks::find_token(secret.as_bytes(), &settings.tokens) else {
            return Err(Away::Refused(
                StatusCode::UNAUTHORIZED,
                "this token is not one of `http.tokens`".to_owned(),
            ));
        };
        if let Some(toolset) = &token.toolset {
            return Err(Away::Refused(
                StatusCode::FORBIDDEN,
                format!(
                    "this token is bound to toolset `{toolset}`: the console is for a token bound to none"
                ),
            ));
        }
        Ok(Admin {
            name: format!("console {}", super::http::token_name(index, token)),
            csrf,
        })
    }

    /// An identity of the identity provider, if the config's `http.auth.admins` names it now.
    fn admit_identity(&self, identity: &Identity, csrf: Option<String>) -> Result<Admin, Away> {
        let settings = self.gateway.control.http();
        let Some(auth) = settings
            .auth
            .as_ref()
            .filter(|a| a.issuer == identity.issuer)
        else {
            return Err(Away::Refused(
                StatusCode::UNAUTHORIZED,
                "the identity provider changed: sign in again".to_owned(),
            ));
        };
        if !identity::is_admin(auth, &identity.claims) {
            return Err(Away::Refused(
                StatusCode::FORBIDDEN,
                format!(
                    "`{}` is signed in, but `http.auth.admins` does not name them: the console is for admins",
                    identity.subject
                ),
            ));
        }
        Ok(Admin {
            name: format!("console {}", identity.subject),
            csrf,
        })
    }

    /// Who the request's console session is, and its CSRF token, when it has a live one.
    fn seat_of(&self, headers: &HeaderMap) -> Option<(Who, String)> {
        let id = SESSION.of(headers, &self.gateway.control.http())?;
        let mut sessions = lock(&self.console.sessions);
        let seat = sessions.get(id)?;
        if seat.ends < Instant::now() {
            sessions.remove(id);
            return None;
        }
        Some((seat.who.clone(), seat.csrf.clone()))
    }

    /// A new console session for `who`, until `ends` at the latest: its cookie's value.
    fn seat(&self, who: Who, ends: Option<Instant>) -> String {
        let id = crate::files::hex(&crate::random::bytes::<32>());
        let mut sessions = lock(&self.console.sessions);
        if sessions.len() >= MAX_SESSIONS {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, s)| s.ends)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                sessions.remove(&oldest);
            }
        }
        let longest = Instant::now() + SESSION_TTL;
        sessions.insert(
            id.clone(),
            Seat {
                who,
                csrf: crate::files::hex(&crate::random::bytes::<32>()),
                ends: ends.map_or(longest, |e| e.min(longest)),
            },
        );
        id
    }
}

/// A page's viewer, proved before its handler runs; a request that is not goes away (to the
/// login page, or refused).
impl axum::extract::FromRequestParts<Arc<Desk>> for Admin {
    type Rejection = Away;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        shared: &Arc<Desk>,
    ) -> Result<Self, Away> {
        shared.admit(&parts.headers)
    }
}

impl Admin {
    /// Whether a form's `csrf` field is this session's (a bearer token needs none).
    pub(super) fn checks(&self, given: &str) -> bool {
        match &self.csrf {
            Some(csrf) => csrf.as_bytes().ct_eq(given.as_bytes()).into(),
            None => true,
        }
    }
}

/// A console refusal, as a small page of its own.
pub(super) fn refused(status: StatusCode, why: &str) -> Response {
    refused_at(status, why, "")
}

/// [`refused`], on a page `root` below the console's place ([`Away::at`]).
fn refused_at(status: StatusCode, why: &str, root: &'static str) -> Response {
    let page = pages::Refused {
        why: why.to_owned(),
        root,
    };
    (status, html(&page)).into_response()
}

#[derive(Template)]
#[template(path = "console/login.html")]
struct LoginPage {
    open: bool,
    /// The identity provider admins sign in at, when `http.auth.admins` names any.
    issuer: Option<String>,
    /// Whether a token of `http.tokens` may log in.
    tokens: bool,
    error: Option<String>,
}

impl LoginPage {
    fn of(settings: &super::http::HttpSettings, error: Option<String>) -> Self {
        Self {
            open: settings.tokens.is_empty() && settings.auth.is_none(),
            issuer: settings
                .auth
                .as_ref()
                .filter(|a| !a.admins.is_empty())
                .map(|a| a.issuer.clone()),
            tokens: !settings.tokens.is_empty(),
            error,
        }
    }
}

async fn login_page(State(shared): State<Arc<Desk>>) -> Response {
    html(&LoginPage::of(&shared.gateway.control.http(), None))
}

#[derive(serde::Deserialize)]
struct LoginForm {
    #[serde(default)]
    token: String,
}

/// Checks the token given, and gives a session cookie for it.
async fn login(
    State(shared): State<Arc<Desk>>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let settings = shared.gateway.control.http();
    let open = settings.tokens.is_empty() && settings.auth.is_none();
    if !open {
        if let Err(away) = shared.admit_token(&form.token, None) {
            if matches!(away, Away::Refused(StatusCode::UNAUTHORIZED, _)) {
                let error = "That is not a token of `http.tokens`.".to_owned();
                let page = LoginPage::of(&settings, Some(error));
                return (StatusCode::UNAUTHORIZED, html(&page)).into_response();
            }
            return away.into_response();
        }
    }
    let id = shared.seat(Who::Token(form.token), None);
    let mut response = Redirect::to("namespace").into_response();
    SESSION.set(&mut response, &settings, &id, None, over_https(&headers));
    response
}

/// A cookie of the console: `HttpOnly`, and `Secure` with the `__Secure-` prefix when
/// moniker's public address (`http.auth.resource`) is https.
pub(super) struct Cookie {
    /// Its name, plain and `__Secure-`.
    names: [&'static str; 2],
    /// Its path below the console's public one ([`public_path`]); `None`: the browser's
    /// default, the folder of the page whose answer sets it.
    under: Option<&'static str>,
    same_site: &'static str,
}

impl Cookie {
    fn secure(settings: &super::http::HttpSettings) -> bool {
        settings
            .auth
            .as_ref()
            .is_some_and(|a| a.resource.starts_with("https://"))
    }

    fn name(&self, settings: &super::http::HttpSettings) -> &'static str {
        self.names[usize::from(Self::secure(settings))]
    }

    /// Its value in the request.
    pub(super) fn of<'h>(
        &self,
        headers: &'h HeaderMap,
        settings: &super::http::HttpSettings,
    ) -> Option<&'h str> {
        checks::cookie(headers, self.name(settings))
    }

    /// Sets it to `value` on `response` (for `max_age` seconds; `Some(0)`: forgets it);
    /// `Secure` too when the browser is on https (`https`: its `Origin` says so, behind a proxy
    /// that ends TLS), as when the public address is.
    pub(super) fn set(
        &self,
        response: &mut Response,
        settings: &super::http::HttpSettings,
        value: &str,
        max_age: Option<u64>,
        https: bool,
    ) {
        let mut text = format!(
            "{}={value}; HttpOnly; SameSite={}",
            self.name(settings),
            self.same_site
        );
        let public = settings
            .auth
            .as_ref()
            .and_then(|a| public_path(&a.resource));
        if let (Some(under), Some(path)) = (self.under, public) {
            text.push_str(&format!("; Path={path}{under}"));
        }
        if https || Self::secure(settings) {
            text.push_str("; Secure");
        }
        if let Some(seconds) = max_age {
            text.push_str(&format!("; Max-Age={seconds}"));
        }
        if let Ok(value) = HeaderValue::from_str(&text) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
}

/// The console's public URL: beside moniker's `/mcp` as clients reach it
/// (`http.auth.resource`), in place of its last segment. Behind a proxy that puts moniker
/// under a path, `https://gw.example.com/team/mcp` gives `https://gw.example.com/team/console`.
pub(super) fn public_url(resource: &str) -> Result<Url, String> {
    let mut url =
        Url::parse(resource).map_err(|e| format!("`http.auth.resource` is not a URL: {e}"))?;
    if url.cannot_be_a_base() {
        return Err("`http.auth.resource` is not an http(s) URL".to_owned());
    }
    let path = url.path().trim_end_matches('/');
    let beside = path[..path.rfind('/').unwrap_or(0)].to_owned();
    url.set_path(&format!("{beside}/console"));
    url.set_query(None);
    url.set_fragment(None);
    // A `user:password@` of the resource goes to no browser and no identity provider.
    let _ = url.set_username("");
    let _ = url.set_password(None);
    Ok(url)
}

/// Whether the browser that sent `headers` is on https, by its `Origin` (a POST's): a proxy
/// may end TLS before moniker. Sent by the browser itself; a forged one only makes the
/// forger's own cookie `Secure`.
fn over_https(headers: &HeaderMap) -> bool {
    headers
        .get(header::ORIGIN)
        .is_some_and(|o| o.as_bytes().starts_with(b"https://"))
}

/// The path of [`public_url`], for a cookie's `Path`: none when it holds a `;`, which would end
/// the attribute and begin another (a URL's path may hold one unescaped).
fn public_path(resource: &str) -> Option<String> {
    public_url(resource)
        .ok()
        .map(|url| url.path().to_owned())
        .filter(|path| !path.contains(';'))
}

/// Ends the console session, when the form is its own: a POST from elsewhere (another port of
/// the same host passes the Origin check) carries no CSRF token and ends nothing.
async fn logout(
    State(shared): State<Arc<Desk>>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let settings = shared.gateway.control.http();
    if let Some(id) = SESSION.of(&headers, &settings) {
        let given = form
            .iter()
            .find(|(k, _)| k == "csrf")
            .map_or("", |(_, v)| v.as_str());
        let mut sessions = lock(&shared.console.sessions);
        let ours = sessions
            .get(id)
            .is_some_and(|seat| bool::from(seat.csrf.as_bytes().ct_eq(given.as_bytes())));
        if !ours {
            drop(sessions);
            return refused(
                StatusCode::FORBIDDEN,
                "this form is not from this console (CSRF)",
            );
        }
        sessions.remove(id);
    }
    let mut response = Redirect::to("login").into_response();
    SESSION.set(&mut response, &settings, "", Some(0), over_https(&headers));
    response
}

/// Samples the servers' calls every [`SAMPLE_EVERY`] while the console is on, for the charts;
/// ends with the transport.
async fn sample(shared: std::sync::Weak<Desk>) {
    let mut every = tokio::time::interval(SAMPLE_EVERY);
    loop {
        every.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if !shared.gateway.control.console_on() {
            continue;
        }
        let now = shared.gateway.services.metrics.latencies();
        let mut samples = lock(&shared.console.samples);
        if samples.len() == SAMPLES {
            samples.pop_front();
        }
        samples.push_back(now);
    }
}
