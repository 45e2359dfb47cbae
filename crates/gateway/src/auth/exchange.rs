//! Token exchange (RFC 8693) towards one HTTP server (`auth.exchange`): each caller's access
//! token is exchanged at the identity provider for one meant for the server, so that every
//! call reaches it as the person who made it, not as one credential shared by everyone.
//!
//! moniker authenticates at the token endpoint as its own client (`auth.client_id` with its
//! secret or key), asks for the server's `resource` (its URL unless configured) and
//! `audience`, and, with `actor`, names itself as the actor with its own client-credentials
//! token (`actor_token`). An exchanged token is kept for the caller's token it came from (by
//! digest: the caller's token itself is never kept), at most `cache` long and never past its
//! own expiry or the caller's. It fails closed: a call with no token to exchange, or whose
//! exchange fails, is refused; nothing falls back to another credential. Tokens are never
//! logged.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use moniker_config::Auth;
use moniker_surface::ServerId;
use reqwest::Url;
use reqwest::header::HeaderValue;
use sha2::{Digest, Sha256};
use tokio::sync::{OnceCell, Semaphore};

use super::OnBehalf;
use super::oauth::{self, Metadata};
use super::store::Client;
use crate::sync::lock;

/// The grant type of RFC 8693.
const GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The type of the tokens given and asked for: OAuth access tokens.
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
/// Exchanged tokens kept at most, for one server: past it the nearest to expire go first.
const KEPT_MAX: usize = 10_000;
/// Exchanges under way at once for one server: more callers wait for a place, so that a
/// crowd of new tokens cannot make moniker flood the identity provider.
const AT_ONCE: usize = 8;
/// How long before its expiry an exchanged (or moniker's own actor) token stops being used.
const MARGIN: Duration = Duration::from_secs(10);

/// A caller's token for the server, and who it says the caller is upstream.
#[derive(Clone)]
pub(crate) struct Upstream {
    /// `Bearer <token>`, marked sensitive.
    pub(crate) authorization: HeaderValue,
    /// The exchanged token's `sub` when it is a JWT, else `exchanged`: for the audit log.
    pub(crate) subject: String,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
}

struct Held {
    upstream: Upstream,
    until: Instant,
}

/// The exchanges of one server: where, as whom, and the tokens they gave.
pub(crate) struct Exchanger {
    server: ServerId,
    /// The server's URL: the `resource` asked for unless configured.
    url: String,
    settings: Auth,
    http: reqwest::Client,
    metadata: OnceCell<Metadata>,
    /// moniker's own token, for `actor_token`.
    actor: tokio::sync::Mutex<Option<(String, Instant)>>,
    kept: std::sync::Mutex<HashMap<[u8; 32], Held>>,
    places: Semaphore,
}

impl Exchanger {
    /// `None` unless `settings` exchange.
    pub(crate) fn of(
        server: &ServerId,
        url: &Url,
        settings: &Auth,
        http: &reqwest::Client,
    ) -> Option<Self> {
        settings.exchange.as_ref()?;
        Some(Self {
            server: server.clone(),
            url: url.to_string(),
            settings: settings.clone(),
            http: http.clone(),
            metadata: OnceCell::new(),
            actor: tokio::sync::Mutex::new(None),
            kept: std::sync::Mutex::new(HashMap::new()),
            places: Semaphore::new(AT_ONCE),
        })
    }

    /// The server's token for `caller`: kept, else exchanged now. `Err` says why there is
    /// none, for the caller: the call is then not sent.
    pub(crate) async fn upstream_for(&self, caller: OnBehalf<'_>) -> Result<Upstream, String> {
        let Some(subject) = caller.access_token else {
            return Err(format!(
                "Server `{}` is called as each caller, with their own access token exchanged for one of its own, and this request came with none (a client of moniker's `http.auth` has one; stdio clients and static tokens do not)",
                self.server
            ));
        };
        let key: [u8; 32] = Sha256::digest(subject.as_bytes()).into();
        if let Some(upstream) = self.kept(&key) {
            return Ok(upstream);
        }
        let _place = self
            .places
            .acquire()
            .await
            .map_err(|_| "closed".to_owned())?;
        // Another call of the same token may have exchanged it while this one waited.
        if let Some(upstream) = self.kept(&key) {
            return Ok(upstream);
        }
        let caller_expires = caller.expires;
        let (upstream, lifetime) = self.exchange(subject).await.map_err(|why| {
            tracing::warn!(server = %self.server, reason = %why, "token exchange failed: the call is refused");
            format!(
                "Server `{}` was not called: the caller's token could not be exchanged for one of its own ({why})",
                self.server
            )
        })?;
        let mut bound = self.cache_bound().min(lifetime.saturating_sub(MARGIN));
        if let Some(exp) = caller_expires {
            bound = bound.min(Duration::from_secs(exp.saturating_sub(super::store::now())));
        }
        self.keep(key, &upstream, bound);
        Ok(upstream)
    }

    /// Who has an exchanged token kept now, and for how many more seconds.
    pub(crate) fn people(&self) -> Vec<(String, u64)> {
        let now = Instant::now();
        lock(&self.kept)
            .values()
            .filter(|held| held.until > now)
            .map(|held| (held.upstream.subject.clone(), (held.until - now).as_secs()))
            .collect()
    }

    /// Drops every exchanged token kept for `subject` (their next call exchanges again):
    /// how many.
    pub(crate) fn forget(&self, subject: &str) -> usize {
        let mut kept = lock(&self.kept);
        let before = kept.len();
        kept.retain(|_, held| held.upstream.subject != subject);
        before - kept.len()
    }

    fn cache_bound(&self) -> Duration {
        self.settings
            .exchange
            .as_ref()
            .map_or(moniker_config::Exchange::CACHE, |e| e.cache)
    }

    fn kept(&self, key: &[u8; 32]) -> Option<Upstream> {
        let kept = lock(&self.kept);
        kept.get(key)
            .filter(|held| held.until > Instant::now())
            .map(|held| held.upstream.clone())
    }

    /// Keeps `upstream` for `bound` (nothing when that is no time at all): the expired go
    /// first when the map is full, then the nearest to expire.
    fn keep(&self, key: [u8; 32], upstream: &Upstream, bound: Duration) {
        if bound.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut kept = lock(&self.kept);
        if kept.len() >= KEPT_MAX && !kept.contains_key(&key) {
            kept.retain(|_, held| held.until > now);
            if kept.len() >= KEPT_MAX {
                let nearest = kept
                    .iter()
                    .min_by_key(|(_, held)| held.until)
                    .map(|(k, _)| *k);
                if let Some(nearest) = nearest {
                    kept.remove(&nearest);
                }
            }
        }
        kept.insert(
            key,
            Held {
                upstream: upstream.clone(),
                until: now + bound,
            },
        );
    }

    /// One exchange at the token endpoint: the token and how long it lives.
    async fn exchange(&self, subject: &str) -> Result<(Upstream, Duration), String> {
        let metadata = self.metadata().await?;
        let client = oauth::identify(&self.http, &self.settings, metadata, None).await?;
        let exchange = self
            .settings
            .exchange
            .as_ref()
            .expect("an exchanger exchanges");
        let mut form = vec![
            ("grant_type", GRANT.to_owned()),
            ("subject_token", subject.to_owned()),
            ("subject_token_type", ACCESS_TOKEN.to_owned()),
            ("requested_token_type", ACCESS_TOKEN.to_owned()),
            (
                "resource",
                exchange
                    .resource
                    .clone()
                    .unwrap_or_else(|| self.url.clone()),
            ),
        ];
        if let Some(audience) = &exchange.audience {
            form.push(("audience", audience.clone()));
        }
        if let Some(scope) = &self.settings.scope {
            form.push(("scope", scope.clone()));
        }
        if exchange.actor {
            form.push(("actor_token", self.actor_token(metadata, &client).await?));
            form.push(("actor_token_type", ACCESS_TOKEN.to_owned()));
        }
        let tokens = oauth::token(
            &self.http,
            metadata,
            &client,
            self.settings.private_key.as_deref(),
            form,
            None,
        )
        .await?;
        let mut authorization =
            HeaderValue::from_str(&format!("Bearer {}", tokens.access_token))
                .map_err(|_| "the token it gave cannot be sent in a header".to_owned())?;
        authorization.set_sensitive(true);
        let upstream = Upstream {
            authorization,
            subject: subject_of(&tokens.access_token).unwrap_or_else(|| "exchanged".to_owned()),
        };
        tracing::debug!(server = %self.server, subject = %upstream.subject, "a caller's token exchanged");
        let lifetime = tokens.lifetime.map_or(Duration::MAX, Duration::from_secs);
        Ok((upstream, lifetime))
    }

    /// The identity provider's metadata, found once (a failure is tried again next time).
    async fn metadata(&self) -> Result<&Metadata, String> {
        self.metadata
            .get_or_try_init(|| async {
                let issuer = self
                    .settings
                    .issuer
                    .as_deref()
                    .ok_or("no identity provider to exchange at (`auth.issuer`)")?;
                let url = Url::parse(issuer)
                    .map_err(|e| format!("the issuer `{issuer}` is not a URL: {e}"))?;
                let metadata = oauth::authorization_server(&self.http, &url, Some(issuer))
                    .await?
                    .ok_or_else(|| {
                        format!("the identity provider `{issuer}` publishes no metadata")
                    })?;
                oauth::secure_endpoints(&metadata)?;
                Ok(metadata)
            })
            .await
    }

    /// moniker's own access token (client credentials), kept until it nearly expires.
    async fn actor_token(&self, metadata: &Metadata, client: &Client) -> Result<String, String> {
        let mut actor = self.actor.lock().await;
        if let Some((token, _)) = actor.as_ref().filter(|(_, until)| *until > Instant::now()) {
            return Ok(token.clone());
        }
        let form = vec![("grant_type", "client_credentials".to_owned())];
        let tokens = oauth::token(
            &self.http,
            metadata,
            client,
            self.settings.private_key.as_deref(),
            form,
            None,
        )
        .await?;
        let lifetime = tokens
            .lifetime
            .map_or(self.cache_bound(), Duration::from_secs);
        let until = Instant::now() + lifetime.saturating_sub(MARGIN);
        *actor = Some((tokens.access_token.clone(), until));
        Ok(tokens.access_token)
    }
}

/// The claims of a JWT's payload, read without checking it.
fn unchecked_claims(token: &str) -> Option<serde_json::Value> {
    use base64::Engine;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The `sub` of a JWT's payload, read without checking it: moniker's own token from the
/// identity provider it trusts, named in the audit log only (at most 256 characters).
pub(crate) fn subject_of(token: &str) -> Option<String> {
    let claims = unchecked_claims(token)?;
    let subject = claims.get("sub")?.as_str()?;
    Some(subject.chars().take(256).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchanger(cache: Duration) -> Exchanger {
        let settings = Auth {
            client_id: Some("moniker".to_owned()),
            client_secret: Some("s".to_owned()),
            issuer: Some("https://idp.example".to_owned()),
            exchange: Some(moniker_config::Exchange {
                resource: None,
                audience: None,
                actor: false,
                cache,
            }),
            ..Auth::default()
        };
        let url = Url::parse("https://mcp.example/mcp").unwrap();
        let http = crate::tls::http_client(&moniker_config::Tls::default(), Duration::from_secs(5))
            .expect("a client");
        Exchanger::of(&"s".parse::<ServerId>().unwrap(), &url, &settings, &http)
            .expect("it exchanges")
    }

    fn upstream(subject: &str) -> Upstream {
        Upstream {
            authorization: HeaderValue::from_str(&format!("Bearer {subject}")).unwrap(),
            subject: subject.to_owned(),
        }
    }

    #[tokio::test]
    async fn a_call_without_a_token_is_refused_and_never_exchanged() {
        let exchanger = exchanger(Exchange::CACHE);
        let refused = exchanger
            .upstream_for(OnBehalf::default())
            .await
            .unwrap_err();
        assert!(refused.contains("came with none"), "{refused}");
    }

    #[test]
    fn each_token_has_its_own_and_none_outlives_its_bound() {
        let exchanger = exchanger(Exchange::CACHE);
        let (alice, bob) = ([1; 32], [2; 32]);
        exchanger.keep(alice, &upstream("alice"), Duration::from_secs(60));
        exchanger.keep(bob, &upstream("bob"), Duration::ZERO);
        assert_eq!(exchanger.kept(&alice).unwrap().subject, "alice");
        assert!(
            exchanger.kept(&bob).is_none(),
            "a bound of no time keeps nothing"
        );
        lock(&exchanger.kept).get_mut(&alice).unwrap().until = Instant::now();
        assert!(
            exchanger.kept(&alice).is_none(),
            "an expired token is not used"
        );
    }

    #[test]
    fn the_kept_tokens_are_bounded() {
        let exchanger = exchanger(Exchange::CACHE);
        for n in 0..KEPT_MAX + 5 {
            let mut key = [0; 32];
            key[..8].copy_from_slice(&(n as u64).to_le_bytes());
            exchanger.keep(key, &upstream("x"), Duration::from_secs(60 + n as u64));
        }
        assert_eq!(lock(&exchanger.kept).len(), KEPT_MAX);
        let mut first = [0; 32];
        first[..8].copy_from_slice(&0u64.to_le_bytes());
        assert!(
            exchanger.kept(&first).is_none(),
            "the nearest to expire went first"
        );
    }

    #[test]
    fn the_subject_is_read_from_a_jwt_only() {
        use base64::Engine;
        let payload =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"sub":"alice"}"#);
        assert_eq!(
            subject_of(&format!("e30.{payload}.sig")).as_deref(),
            Some("alice")
        );
        assert_eq!(subject_of("opaque-token"), None);
    }

    use moniker_config::Exchange;
}
