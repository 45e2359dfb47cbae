//! OAuth 2.1 towards remote servers, as the MCP authorization spec (2025-11-25) describes it
//! for clients, with the 2025-03-26 fallbacks.
//!
//! Every remote server without an `Authorization` header of the user's has an
//! [`Authorizer`]: it puts the server's access token on each request, refreshes it before it
//! expires, and answers the server's challenges (401, or 403 `insufficient_scope`) by
//! itself when it can: with the refresh token, or with the client credentials grant for
//! servers configured with `grant: client_credentials`. A challenge only a person can answer
//! (a browser login) is never waited for: the request fails saying to run
//! `moniker login SERVER`, and the challenge is kept with the server's tokens so that the
//! login asks for what the server wants (the scope of a step-up). `moniker login` runs
//! [`Authorizer::log_in`]: discovery (`oauth`), the browser flow (`browser`), the tokens
//! stored (`store`, readable by the user only). Tokens, secrets and codes are never logged.
//!
//! MCP 2026-07-28 keeps this flow (a bearer token per request, the RFC 9728 challenge and
//! Protected Resource Metadata, RFC 8414 discovery, the `resource` indicator, PKCE S256) and
//! deprecates Dynamic Client Registration in favour of Client ID Metadata Documents, which
//! stays a fallback for authorization servers without them: the order moniker already uses
//! (configured client, then a metadata document URL when the server takes them, then DCR).
//! A stateless server has no session to re-authorize: every request carries the token.

pub(crate) mod browser;
pub(crate) mod challenge;
pub(crate) mod exchange;
pub(crate) mod oauth;
pub mod personal;
pub(crate) mod store;

use moniker_config::{Auth, Grant};
use moniker_surface::ServerId;
use reqwest::Url;
use reqwest::header::HeaderValue;

pub use self::browser::{Browser, LOGIN_TIMEOUT};
use self::challenge::Challenge;
use self::oauth::{Discovered, Metadata};
use self::store::{Pending, Saved, Tokens};
pub use self::store::{Store, now};

/// Whom a call is made for, as a server that acts as each caller needs it (`auth.exchange`,
/// `auth.per_person`): what the caller's verified access token for moniker said.
#[derive(Default, Clone, Copy)]
pub(crate) struct OnBehalf<'a> {
    /// The access token itself, as it came.
    pub(crate) access_token: Option<&'a str>,
    /// Its issuer and `sub`.
    pub(crate) person: Option<(&'a str, &'a str)>,
    /// Its `exp`, in seconds since the Unix epoch.
    pub(crate) expires: Option<u64>,
}

/// Seconds before its expiry at which a token is refreshed.
const REFRESH_MARGIN: u64 = 30;
/// Scope step-ups moniker makes by itself (client credentials) before it gives up.
const STEP_UP_LIMIT: u32 = 3;

/// A random opaque value (base64url of 24 bytes): OAuth `state`, a parked call's
/// `requestState`.
pub(crate) fn random_state() -> String {
    crate::random::text(24)
}

/// 128 random bits as text: a token no peer can guess from another.
pub(crate) fn random_token() -> String {
    crate::random::text(16)
}

/// Whether an answer is a challenge moniker may answer: 401, or 403 with
/// `insufficient_scope` (a step-up).
pub fn is_challenge(status: u16, www_authenticate: Option<&str>) -> bool {
    status == 401
        || (status == 403
            && www_authenticate
                .and_then(Challenge::parse)
                .is_some_and(|c| c.insufficient_scope()))
}

/// The authorization of one remote server.
pub struct Authorizer {
    server: ServerId,
    url: Url,
    settings: Auth,
    http: reqwest::Client,
    store: Option<Store>,
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    saved: Saved,
    discovered: Option<Discovered>,
    step_ups: u32,
}

impl State {
    /// Whether moniker holds a refresh token.
    fn can_refresh(&self) -> bool {
        self.saved
            .tokens
            .as_ref()
            .is_some_and(|t| t.refresh_token.is_some())
    }
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl Authorizer {
    /// `http` is the server's client (its TLS settings); `store` where tokens live (`None`:
    /// in memory only).
    pub fn new(
        server: ServerId,
        url: Url,
        settings: Auth,
        http: reqwest::Client,
        store: Option<Store>,
    ) -> Self {
        let saved = store
            .as_ref()
            .and_then(|s| s.load(server.as_str(), url.as_str()))
            .unwrap_or_else(|| Saved {
                server_url: url.to_string(),
                resource: challenge::resource_of(&url),
                ..Saved::default()
            });
        Self {
            server,
            url,
            settings,
            http,
            store,
            state: tokio::sync::Mutex::new(State {
                saved,
                ..State::default()
            }),
        }
    }

    pub fn server(&self) -> &ServerId {
        &self.server
    }

    /// The `Authorization` value for the next request, if moniker has a token (refreshed
    /// first when it is about to expire).
    pub async fn bearer(&self) -> Option<HeaderValue> {
        let mut state = self.state.lock().await;
        let expiring = state
            .saved
            .tokens
            .as_ref()
            .is_some_and(|t| t.expires_within(REFRESH_MARGIN));
        if expiring {
            self.reload(&mut state);
            let still = state
                .saved
                .tokens
                .as_ref()
                .is_some_and(|t| t.expires_within(REFRESH_MARGIN));
            if still {
                if let Err(why) = self.renew(&mut state, None).await {
                    tracing::debug!(server = %self.server, reason = %why, "cannot renew the token before it expires");
                }
            }
        }
        let token = &state.saved.tokens.as_ref()?.access_token;
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
        value.set_sensitive(true);
        Some(value)
    }

    /// The server refused a request (`status` 401, or 403 with `insufficient_scope`) that
    /// carried `sent`. `Ok` when moniker has a new token to try; else why the request
    /// cannot be made, and what the user should do.
    pub async fn challenged(
        &self,
        sent: Option<&HeaderValue>,
        status: u16,
        www_authenticate: Option<&str>,
    ) -> Result<(), String> {
        let challenge = www_authenticate
            .and_then(Challenge::parse)
            .unwrap_or_default();
        let mut state = self.state.lock().await;
        // Another request may have renewed the token meanwhile, or the user logged in.
        self.reload(&mut state);
        let current = state.saved.tokens.as_ref().map(|t| t.access_token.as_str());
        let sent_token = sent
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if current.is_some() && current != sent_token {
            return Ok(());
        }
        if status == 403 {
            if self.settings.grant == Grant::ClientCredentials && state.step_ups < STEP_UP_LIMIT {
                state.step_ups += 1;
                return self.renew(&mut state, Some(&challenge)).await;
            }
            return Err(self.pending(&mut state, &challenge).await);
        }
        if state
            .saved
            .tokens
            .as_ref()
            .is_some_and(|t| t.refresh_token.is_some())
        {
            match self.refresh(&mut state).await {
                Ok(()) => return Ok(()),
                Err(why) => {
                    tracing::info!(server = %self.server, reason = %why, "cannot refresh the token");
                }
            }
        }
        if self.settings.grant == Grant::ClientCredentials {
            return self.client_credentials(&mut state, Some(&challenge)).await;
        }
        Err(self.pending(&mut state, &challenge).await)
    }

    /// Whether the server waits for a person to log in (a challenge moniker could not
    /// answer), and with which scope.
    pub async fn needs_login(&self) -> Option<Option<String>> {
        let mut state = self.state.lock().await;
        self.reload(&mut state);
        state.saved.challenge.as_ref().map(|c| c.scope.clone())
    }

    /// Whether moniker holds a token for the server.
    pub async fn has_token(&self) -> bool {
        self.state.lock().await.saved.tokens.is_some()
    }

    /// Forgets the tokens (and a client moniker registered for itself, which is registered
    /// again with the next login's redirect URI), keeping what the server asked for.
    pub async fn forget_tokens(&self) -> Result<(), String> {
        let mut state = self.state.lock().await;
        state.saved.tokens = None;
        if state.saved.client.as_ref().is_some_and(|c| c.registered) {
            state.saved.client = None;
        }
        self.save(&state.saved).await
    }

    /// The browser login: discovery from the last challenge, the authorization code grant
    /// with the scope the server asked for (and `offline_access` when the authorization
    /// server offers it, for a refresh token), the tokens stored. Returns the granted scope.
    pub async fn log_in(&self, browser: &Browser) -> Result<Option<String>, String> {
        let mut state = self.state.lock().await;
        self.reload(&mut state);
        let pending = state.saved.challenge.clone();
        let challenge = Challenge {
            error: None,
            scope: pending.as_ref().and_then(|p| p.scope.clone()),
            resource_metadata: pending.as_ref().and_then(|p| p.resource_metadata.clone()),
        };
        // A person logs in: they may accept a new authorization server; only the configured
        // one is held to.
        let pinned = self.settings.issuer.as_deref();
        let discovered = oauth::discover(&self.http, &self.url, Some(&challenge), pinned).await?;
        let mut scope = challenge::choose_scope(
            self.settings.scope.as_deref(),
            challenge.scope.as_deref(),
            discovered.scopes_supported.as_deref(),
            None,
        );
        let offline = discovered
            .metadata
            .scopes_supported
            .as_ref()
            .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
        if offline && self.settings.scope.is_none() {
            scope = Some(challenge::union(
                scope.as_deref().unwrap_or_default(),
                "offline_access",
            ));
        }
        let (client, tokens) = browser::authorize(
            &self.http,
            &self.settings,
            &discovered,
            scope.as_deref(),
            browser,
        )
        .await?;
        let granted = tokens.scope.clone().or(scope);
        self.keep(&mut state, &discovered, client, tokens).await?;
        state.discovered = Some(discovered);
        Ok(granted)
    }

    /// Where the tokens are kept.
    pub fn path(&self) -> Option<std::path::PathBuf> {
        self.store
            .as_ref()
            .map(|s| s.path(self.server.as_str(), self.url.as_str()))
    }

    /// Reads the stored file again (a `moniker login` elsewhere may have written it).
    fn reload(&self, state: &mut State) {
        if let Some(saved) = self
            .store
            .as_ref()
            .and_then(|s| s.load(self.server.as_str(), self.url.as_str()))
        {
            state.saved = saved;
        }
    }

    /// Writes `saved` to the store on a blocking thread (a file written whole and synced: never
    /// on the thread that serves the clients).
    async fn save(&self, saved: &Saved) -> Result<(), String> {
        let Some(store) = self.store.clone() else {
            return Ok(());
        };
        let (server, url) = (self.server.to_string(), self.url.to_string());
        let saved = saved.clone();
        tokio::task::spawn_blocking(move || store.save(&server, &url, &saved))
            .await
            .unwrap_or_else(|e| Err(e.to_string()))
    }

    /// Notes a challenge only a person can answer; the message for the refused request.
    async fn pending(&self, state: &mut State, challenge: &Challenge) -> String {
        let before = state.saved.challenge.as_ref().and_then(|p| p.scope.clone());
        let granted = state.saved.tokens.as_ref().and_then(|t| t.scope.clone());
        let scope = [before, granted, challenge.scope.clone()]
            .into_iter()
            .flatten()
            .reduce(|a, b| challenge::union(&a, &b));
        let pending = Some(Pending {
            scope: scope.clone(),
            resource_metadata: challenge.resource_metadata.clone().or_else(|| {
                state
                    .saved
                    .challenge
                    .as_ref()
                    .and_then(|p| p.resource_metadata.clone())
            }),
        });
        // A server that refuses every call with the same challenge: written once, not a
        // synced file a call.
        if state.saved.challenge == pending {
            return self.refused(challenge, scope);
        }
        state.saved.challenge = pending;
        if let Err(why) = self.save(&state.saved).await {
            tracing::warn!(server = %self.server, reason = %why, "cannot keep the server's challenge");
        }
        self.refused(challenge, scope)
    }

    /// The message for a request refused until a person logs in.
    fn refused(&self, challenge: &Challenge, scope: Option<String>) -> String {
        let server = &self.server;
        if challenge.insufficient_scope() {
            format!(
                "`{server}` asks for more authorization (scope `{}`): run `moniker login {server}`",
                scope.unwrap_or_default()
            )
        } else {
            format!("`{server}` needs a login: run `moniker login {server}`")
        }
    }

    /// A new token without a person: the refresh token, else client credentials.
    async fn renew(&self, state: &mut State, challenge: Option<&Challenge>) -> Result<(), String> {
        if state.can_refresh() && challenge.is_none() {
            return self.refresh(state).await;
        }
        if self.settings.grant == Grant::ClientCredentials {
            return self.client_credentials(state, challenge).await;
        }
        Err("no refresh token".to_owned())
    }

    async fn refresh(&self, state: &mut State) -> Result<(), String> {
        let (Some(tokens), Some(client)) = (&state.saved.tokens, &state.saved.client) else {
            return Err("no refresh token".to_owned());
        };
        let Some(refresh_token) = tokens.refresh_token.clone() else {
            return Err("no refresh token".to_owned());
        };
        let metadata = Metadata {
            issuer: state.saved.issuer.clone().unwrap_or_default(),
            token_endpoint: state.saved.token_endpoint.clone(),
            ..Metadata::default()
        };
        let form = vec![
            ("grant_type", "refresh_token".to_owned()),
            ("refresh_token", refresh_token.clone()),
            ("resource", state.saved.resource.clone()),
        ];
        let mut renewed = oauth::token(
            &self.http,
            &metadata,
            client,
            self.settings.private_key.as_deref(),
            form,
            Some(refresh_token),
        )
        .await?;
        if renewed.scope.is_none() {
            renewed.scope = tokens.scope.clone();
        }
        tracing::info!(server = %self.server, "access token refreshed");
        state.saved.tokens = Some(renewed);
        self.save(&state.saved).await
    }

    async fn client_credentials(
        &self,
        state: &mut State,
        challenge: Option<&Challenge>,
    ) -> Result<(), String> {
        let discovered = match (&state.discovered, challenge) {
            (Some(d), None) => d.clone(),
            // No person here: the issuer configured, else the one moniker got tokens from.
            _ => {
                let pinned = self
                    .settings
                    .issuer
                    .clone()
                    .or_else(|| state.saved.issuer.clone());
                oauth::discover(&self.http, &self.url, challenge, pinned.as_deref()).await?
            }
        };
        let granted = state.saved.tokens.as_ref().and_then(|t| t.scope.clone());
        let scope = challenge::choose_scope(
            self.settings.scope.as_deref(),
            challenge.and_then(|c| c.scope.as_deref()),
            discovered.scopes_supported.as_deref(),
            granted.as_deref(),
        );
        let client =
            oauth::identify(&self.http, &self.settings, &discovered.metadata, None).await?;
        let mut form = vec![
            ("grant_type", "client_credentials".to_owned()),
            ("resource", discovered.resource.clone()),
        ];
        if let Some(scope) = &scope {
            form.push(("scope", scope.clone()));
        }
        let tokens = oauth::token(
            &self.http,
            &discovered.metadata,
            &client,
            self.settings.private_key.as_deref(),
            form,
            None,
        )
        .await?;
        tracing::info!(server = %self.server, "access token obtained with the client credentials");
        self.keep(state, &discovered, client, tokens).await?;
        state.discovered = Some(discovered);
        Ok(())
    }

    /// Keeps new tokens (and who moniker is), and clears what the server asked for.
    async fn keep(
        &self,
        state: &mut State,
        discovered: &Discovered,
        client: store::Client,
        tokens: Tokens,
    ) -> Result<(), String> {
        state.saved.resource = discovered.resource.clone();
        state.saved.issuer = Some(discovered.metadata.issuer.clone());
        state.saved.token_endpoint = discovered.metadata.token_endpoint.clone();
        state.saved.client = Some(client);
        state.saved.tokens = Some(tokens);
        state.saved.challenge = None;
        self.save(&state.saved).await
    }
}
