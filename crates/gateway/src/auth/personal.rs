//! A sign-in per person for a remote server with its own OAuth (`auth.per_person`): each
//! person's calls go with the tokens that person got by signing in to the server's
//! authorization server in their own browser, never another's.
//!
//! A person is who their access token for moniker says (`http.auth`: its issuer and `sub`). A
//! call of a person without tokens for the server is answered with a sign-in link,
//! `<moniker>/connect/<server>?ticket=T`: the ticket is that person's, used once, for ten
//! minutes. Opening it runs the authorization code flow (the server's discovery, moniker's
//! client there — configured, a metadata document, or registered — PKCE S256, `state`, the
//! `resource` indicator, the answer's `iss` checked) with moniker's `/connect/<server>/callback`
//! as the redirect; the browser that began it must finish it (a cookie holds its `state`), so
//! nobody can make another's browser finish a sign-in they began. The tokens are kept for the
//! person, refreshed before they expire, and forgotten when the person or an admin says so.
//!
//! At rest, each person's tokens are a file of their own, sealed with ChaCha20-Poly1305 under
//! the key of `$MONIKER_SECRET_KEY` (32 bytes, hex or base64), bound to the server and the
//! person: without the key the file says nothing, and a file moved to another person or server
//! does not open. Without the variable, tokens are kept in memory only (said once in the log).
//! Tokens are never logged.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use moniker_config::Auth;
use moniker_surface::ServerId;
use reqwest::Url;
use reqwest::header::HeaderValue;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use super::OnBehalf;
use super::exchange::Upstream;
use super::oauth::{self, Discovered};
use super::store::{Client, Tokens};
use super::{browser, challenge};
use crate::sync::lock;

/// The variable that holds the key people's tokens are sealed with.
pub const KEY_VAR: &str = "MONIKER_SECRET_KEY";
/// How long a sign-in link, and a sign-in under way, may be used.
pub const SIGNIN_TTL: Duration = Duration::from_secs(600);
/// Links a person may hold at once for one server (the oldest go first).
const TICKETS_EACH: usize = 4;
/// Links and sign-ins under way for one server, at most, whoever they are for.
const UNDER_WAY_MAX: usize = 1024;
/// People whose tokens are kept in memory for one server, at most (the files keep the rest).
const PEOPLE_MAX: usize = 10_000;
/// Seconds before its expiry at which a person's token is refreshed.
const REFRESH_MARGIN: u64 = 30;
/// The most a sealed file may hold.
const FILE_MAX: u64 = 1024 * 1024;

/// Who a person is: a digest of their issuer and `sub` (files are named by it), and the `sub`.
#[derive(Clone)]
pub struct Person {
    key: [u8; 32],
    pub(crate) name: String,
}

impl Person {
    /// The person an access token for moniker proved, if any.
    pub(crate) fn of(caller: OnBehalf<'_>) -> Option<Self> {
        let (issuer, subject) = caller.person?;
        Some(Self::named(issuer, subject))
    }

    pub fn named(issuer: &str, subject: &str) -> Self {
        let key = Sha256::digest(format!("{issuer}\n{subject}").as_bytes()).into();
        Self {
            key,
            name: subject.chars().take(256).collect(),
        }
    }

    /// The digest that stands for them.
    pub(crate) fn key_bytes(&self) -> [u8; 32] {
        self.key
    }

    fn file_name(&self) -> String {
        format!("{}.sealed", crate::files::hex(&self.key))
    }
}

/// Why a call has no token of its person.
#[derive(Debug)]
pub(crate) enum Unsigned {
    /// The person has not signed in (or signed out): they sign in with this ticket.
    SignIn(String),
    /// No person made the call, or no sign-in can begin now: the text says why.
    Refused(String),
}

/// What is kept of a person's sign-in.
#[derive(Clone, Serialize, Deserialize)]
struct Kept {
    /// The person's `sub`, for `moniker people`.
    person: String,
    /// The authorization server that gave the tokens: the refresh token goes to it alone.
    issuer: String,
    client: Client,
    tokens: Tokens,
}

struct Ticket {
    person: Person,
    until: Instant,
}

struct Pending {
    person: Person,
    verifier: String,
    client: Client,
    redirect_uri: String,
    until: Instant,
}

/// The sign-ins of one server's people.
pub(crate) struct Personal {
    server: ServerId,
    url: Url,
    settings: Auth,
    http: reqwest::Client,
    discovered: OnceCell<Discovered>,
    /// The client moniker registered as for a redirect URI (Dynamic Client Registration once).
    registered: tokio::sync::Mutex<Option<(String, Client)>>,
    tickets: std::sync::Mutex<HashMap<String, Ticket>>,
    pending: std::sync::Mutex<HashMap<String, Pending>>,
    people: std::sync::Mutex<HashMap<[u8; 32], Kept>>,
    sealed: Option<Sealed>,
    /// One refresh at a time.
    refreshing: tokio::sync::Mutex<()>,
}

impl Personal {
    /// `None` unless `settings` say `per_person`; `Err` when `$MONIKER_SECRET_KEY` is set but
    /// is no key.
    pub(crate) fn of(
        server: &ServerId,
        url: &Url,
        settings: &Auth,
        http: &reqwest::Client,
    ) -> Result<Option<Self>, String> {
        if !settings.per_person {
            return Ok(None);
        }
        let sealed = Sealed::from_env(server, url.as_str())?;
        if sealed.is_none() {
            tracing::warn!(server = %server, "${KEY_VAR} is not set: each person's tokens for this server are kept in memory only, and lost when it reconnects");
        }
        Ok(Some(Self {
            server: server.clone(),
            url: url.clone(),
            settings: settings.clone(),
            http: http.clone(),
            discovered: OnceCell::new(),
            registered: tokio::sync::Mutex::new(None),
            tickets: std::sync::Mutex::new(HashMap::new()),
            pending: std::sync::Mutex::new(HashMap::new()),
            people: std::sync::Mutex::new(HashMap::new()),
            sealed,
            refreshing: tokio::sync::Mutex::new(()),
        }))
    }

    /// The caller's own token for the server, refreshed when it nearly expired; else why
    /// there is none (a ticket to sign in with, when the caller is a person).
    pub(crate) async fn upstream_for(&self, caller: OnBehalf<'_>) -> Result<Upstream, Unsigned> {
        let Some(person) = Person::of(caller) else {
            return Err(Unsigned::Refused(format!(
                "Server `{}` is called with each person's own sign-in, and this request comes from no person (a client of moniker's `http.auth` is one; stdio clients and static tokens are not)",
                self.server
            )));
        };
        let Some(mut kept) = self.kept(&person) else {
            return Err(self.ticket(&person));
        };
        if kept.tokens.expires_within(REFRESH_MARGIN) {
            match self.refreshed(&person, kept.clone()).await {
                Some(renewed) => kept = renewed,
                // Signed out (the refresh was refused, or someone signed them out meanwhile).
                None if self.kept(&person).is_none() => return Err(self.ticket(&person)),
                // The authorization server could not be asked now: the token goes while it
                // lasts, and the next call tries again.
                None => {}
            }
        }
        let mut authorization =
            HeaderValue::from_str(&format!("Bearer {}", kept.tokens.access_token)).map_err(
                |_| Unsigned::Refused("the person's token cannot be sent in a header".to_owned()),
            )?;
        authorization.set_sensitive(true);
        Ok(Upstream {
            authorization,
            subject: super::exchange::subject_of(&kept.tokens.access_token).unwrap_or(person.name),
        })
    }

    /// The person's tokens: their sealed file (read at each call: one removed by `moniker
    /// people --forget`, or by another process, ends the sign-in here too), else in memory.
    fn kept(&self, person: &Person) -> Option<Kept> {
        match &self.sealed {
            Some(sealed) => sealed.read(person),
            None => lock(&self.people).get(&person.key).cloned(),
        }
    }

    /// Keeps `kept` for `person`: in their sealed file (an error when it cannot be written:
    /// a sign-in that is not kept is not one), else in memory.
    fn keep(&self, person: &Person, kept: Kept) -> Result<(), String> {
        if let Some(sealed) = &self.sealed {
            return sealed.write(person, &kept).map_err(|e| {
                tracing::warn!(server = %self.server, error = %e, "cannot keep a person's tokens on disk");
                format!("moniker could not keep your sign-in ({e})")
            });
        }
        let mut people = lock(&self.people);
        if people.len() >= PEOPLE_MAX && !people.contains_key(&person.key) {
            if let Some(first) = people.keys().next().copied() {
                people.remove(&first);
            }
        }
        people.insert(person.key, kept);
        Ok(())
    }

    /// Forgets `person`'s sign-in: whether there was one.
    pub(crate) fn forget(&self, person: &Person) -> bool {
        let in_memory = lock(&self.people).remove(&person.key).is_some();
        let on_disk = self.sealed.as_ref().is_some_and(|s| s.remove(person));
        in_memory || on_disk
    }

    /// Who is signed in (as their sign-ins say: the files when sealed), and when their token
    /// expires.
    pub(crate) fn signed_in(&self) -> Vec<(String, Option<u64>)> {
        match &self.sealed {
            Some(sealed) => sealed
                .signed_in()
                .into_iter()
                .map(|(_, person, expires)| (person, expires))
                .collect(),
            None => lock(&self.people)
                .values()
                .map(|kept| (kept.person.clone(), kept.tokens.expires_at))
                .collect(),
        }
    }

    /// Signs out everyone whose `sub` is `name` (an admin's word): how many sign-ins.
    pub(crate) fn forget_named(&self, name: &str) -> usize {
        let mut forgotten = 0;
        lock(&self.people).retain(|_, kept| {
            let theirs = kept.person == name;
            forgotten += usize::from(theirs);
            !theirs
        });
        if let Some(sealed) = &self.sealed {
            for (path, person, _) in sealed.signed_in() {
                if person == name && std::fs::remove_file(&path).is_ok() {
                    forgotten += 1;
                }
            }
        }
        forgotten
    }

    /// A fresh ticket for `person` (their oldest go past [`TICKETS_EACH`]).
    fn ticket(&self, person: &Person) -> Unsigned {
        let now = Instant::now();
        lock(&self.pending).retain(|_, p| p.until > now);
        let mut tickets = lock(&self.tickets);
        tickets.retain(|_, t| t.until > now);
        let mut theirs: Vec<(String, Instant)> = tickets
            .iter()
            .filter(|(_, t)| t.person.key == person.key)
            .map(|(id, t)| (id.clone(), t.until))
            .collect();
        theirs.sort_by_key(|(_, until)| *until);
        while theirs.len() >= TICKETS_EACH {
            let (oldest, _) = theirs.remove(0);
            tickets.remove(&oldest);
        }
        if tickets.len() + lock(&self.pending).len() >= UNDER_WAY_MAX {
            return Unsigned::Refused(format!(
                "Server `{}` needs you to sign in, and too many sign-ins are under way: try again in a few minutes",
                self.server
            ));
        }
        let id = crate::random::text(24);
        tickets.insert(
            id.clone(),
            Ticket {
                person: person.clone(),
                until: now + SIGNIN_TTL,
            },
        );
        Unsigned::SignIn(id)
    }

    /// Whose a ticket is, while it may be used (it is not used up).
    pub(crate) fn ticket_holder(&self, ticket: &str) -> Option<[u8; 32]> {
        lock(&self.tickets)
            .get(ticket)
            .filter(|t| t.until > Instant::now())
            .map(|t| t.person.key)
    }

    /// Begins the sign-in of a ticket's person, once `person` proved to be them: the
    /// authorization URL to send the browser to, and the `state` its answer must bring. The
    /// ticket is used up then, and not before (a failed discovery leaves it to try again).
    pub(crate) async fn begin(
        &self,
        ticket: &str,
        person: &Person,
        redirect_uri: &str,
    ) -> Result<(Url, String), String> {
        let discovered = self.discovered().await?;
        let metadata = &discovered.metadata;
        let endpoint = browser::authorization_endpoint(metadata)?;
        let client = self.client(metadata, redirect_uri).await?;
        {
            let mut tickets = lock(&self.tickets);
            match tickets.get(ticket).filter(|t| t.until > Instant::now()) {
                None => {
                    return Err("this sign-in link was used already, or is over: call the tool again for a new one".to_owned());
                }
                Some(t) if t.person.key != person.key => {
                    return Err(format!(
                        "this link was made for someone else, and you signed in as `{}`: call the tool yourself for a link of your own",
                        person.name
                    ));
                }
                Some(_) => {
                    tickets.remove(ticket);
                }
            }
        }
        let state = crate::random::text(24);
        let verifier = crate::random::text(32);
        let scope = challenge::choose_scope(
            self.settings.scope.as_deref(),
            None,
            discovered.scopes_supported.as_deref(),
            None,
        );
        let url = browser::authorization_url(
            endpoint,
            &browser::Request {
                client_id: &client.client_id,
                redirect_uri,
                verifier: &verifier,
                state: &state,
                resource: &discovered.resource,
                scope: scope.as_deref(),
            },
        )?;
        let now = Instant::now();
        let mut pending = lock(&self.pending);
        pending.retain(|_, p| p.until > now);
        let theirs = pending
            .values()
            .filter(|p| p.person.key == person.key)
            .count();
        if pending.len() >= UNDER_WAY_MAX || theirs >= TICKETS_EACH {
            return Err(
                "too many sign-ins are under way: finish one, or try again in ten minutes"
                    .to_owned(),
            );
        }
        pending.insert(
            state.clone(),
            Pending {
                person: person.clone(),
                verifier,
                client,
                redirect_uri: redirect_uri.to_owned(),
                until: now + SIGNIN_TTL,
            },
        );
        Ok((url, state))
    }

    /// Whether `state` is a sign-in under way at the server's authorization server.
    pub(crate) fn signing_in(&self, state: &str) -> bool {
        lock(&self.pending).contains_key(state)
    }

    /// Ends the sign-in of `state` with the authorization server's answer: the person's
    /// tokens kept; who signed in.
    pub(crate) async fn finish(
        &self,
        state: &str,
        answer: browser::Answer,
    ) -> Result<String, String> {
        let pending = lock(&self.pending)
            .remove(state)
            .filter(|p| p.until > Instant::now())
            .ok_or("this sign-in is over or was not begun here: open the link again")?;
        let discovered = self.discovered().await?;
        let code = browser::code_of(answer, &discovered.metadata)?;
        let form = vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code),
            ("redirect_uri", pending.redirect_uri.clone()),
            ("code_verifier", pending.verifier.clone()),
            ("resource", discovered.resource.clone()),
        ];
        let tokens = oauth::token(
            &self.http,
            &discovered.metadata,
            &pending.client,
            self.settings.private_key.as_deref(),
            form,
            None,
        )
        .await?;
        tracing::info!(server = %self.server, person = %pending.person.name, "a person signed in to the server");
        let name = pending.person.name.clone();
        self.keep(
            &pending.person,
            Kept {
                person: name.clone(),
                issuer: discovered.metadata.issuer.clone(),
                client: pending.client,
                tokens,
            },
        )?;
        Ok(name)
    }

    /// The person's tokens refreshed (`None`: they cannot be now; the person signs in again
    /// when the authorization server refused the refresh token).
    async fn refreshed(&self, person: &Person, kept: Kept) -> Option<Kept> {
        let _one = self.refreshing.lock().await;
        // Refreshed by another call meanwhile, or signed out?
        let now = self.kept(person)?;
        if !now.tokens.expires_within(REFRESH_MARGIN) {
            return Some(now);
        }
        let refresh = kept.tokens.refresh_token.clone()?;
        let discovered = self.discovered().await.ok()?;
        if discovered.metadata.issuer != kept.issuer {
            tracing::warn!(server = %self.server, person = %person.name, "the server names another authorization server than the one its person signed in at: they sign in again");
            self.forget(person);
            return None;
        }
        let form = vec![
            ("grant_type", "refresh_token".to_owned()),
            ("refresh_token", refresh.clone()),
            ("resource", discovered.resource.clone()),
        ];
        let renewed = oauth::token(
            &self.http,
            &discovered.metadata,
            &kept.client,
            self.settings.private_key.as_deref(),
            form,
            Some(refresh),
        )
        .await;
        match renewed {
            Ok(tokens) => {
                let kept = Kept { tokens, ..kept };
                self.keep(person, kept.clone()).ok()?;
                Some(kept)
            }
            Err(why) => {
                // Only the authorization server's own refusal ends the sign-in: an outage does
                // not sign everyone out.
                let refused = why.contains("invalid_grant");
                tracing::info!(server = %self.server, person = %person.name, reason = %why, signed_out = refused, "a person's token could not be refreshed");
                if refused {
                    self.forget(person);
                }
                None
            }
        }
    }

    async fn discovered(&self) -> Result<&Discovered, String> {
        self.discovered
            .get_or_try_init(|| {
                oauth::discover(&self.http, &self.url, None, self.settings.issuer.as_deref())
            })
            .await
    }

    /// Who moniker is at the authorization server for `redirect_uri`: the configured client,
    /// else the one registered once.
    async fn client(
        &self,
        metadata: &oauth::Metadata,
        redirect_uri: &str,
    ) -> Result<Client, String> {
        if self.settings.client_id.is_some() {
            return oauth::identify(&self.http, &self.settings, metadata, Some(redirect_uri)).await;
        }
        let mut registered = self.registered.lock().await;
        if let Some((_, client)) = registered.as_ref().filter(|(uri, _)| uri == redirect_uri) {
            return Ok(client.clone());
        }
        let client =
            oauth::identify(&self.http, &self.settings, metadata, Some(redirect_uri)).await?;
        *registered = Some((redirect_uri.to_owned(), client.clone()));
        Ok(client)
    }
}

/// A person's secrets for a server run once for each person (`per_person.secrets`).
#[derive(Clone, Serialize, Deserialize)]
struct Held {
    person: String,
    values: std::collections::BTreeMap<String, String>,
}

/// The secrets each person set for one server run once for each of them: sealed files under
/// `$MONIKER_SECRET_KEY` as sign-ins are, else in memory. Values are never logged nor shown.
pub struct Secrets {
    server: ServerId,
    sealed: Option<Sealed>,
    memory: std::sync::Mutex<HashMap<[u8; 32], Held>>,
}

impl Secrets {
    /// The secrets of `server`, started as `command` (a change of command starts afresh).
    pub fn of(server: &ServerId, command: &str) -> Self {
        let sealed = Sealed::from_env(server, command).unwrap_or_else(|why| {
            tracing::error!(server = %server, error = %why, "people's secrets are kept in memory only");
            None
        });
        Self {
            server: server.clone(),
            sealed,
            memory: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// `person`'s secrets.
    pub(crate) fn of_person(&self, person: &Person) -> std::collections::BTreeMap<String, String> {
        let held: Option<Held> = match &self.sealed {
            Some(sealed) => sealed.read(person),
            None => lock(&self.memory).get(&person.key).cloned(),
        };
        held.map(|h| h.values).unwrap_or_default()
    }

    /// Sets `values` among `person`'s secrets.
    pub fn set(
        &self,
        person: &Person,
        values: std::collections::BTreeMap<String, String>,
    ) -> Result<(), String> {
        let mut all = self.of_person(person);
        all.extend(values);
        let held = Held {
            person: person.name.clone(),
            values: all,
        };
        match &self.sealed {
            Some(sealed) => sealed.write(person, &held).map_err(|e| {
                tracing::warn!(server = %self.server, error = %e, "cannot keep a person's secrets");
                format!("moniker could not keep your secrets ({e})")
            }),
            None => {
                let mut memory = lock(&self.memory);
                if memory.len() >= PEOPLE_MAX && !memory.contains_key(&person.key) {
                    return Err("too many people's secrets are kept in memory here".to_owned());
                }
                memory.insert(person.key, held);
                Ok(())
            }
        }
    }

    /// Forgets `person`'s secrets: whether there were any.
    pub(crate) fn forget(&self, person: &Person) -> bool {
        let in_memory = lock(&self.memory).remove(&person.key).is_some();
        let on_disk = self.sealed.as_ref().is_some_and(|s| s.remove(person));
        in_memory || on_disk
    }
}

/// `<moniker>/connect/<server>` beside `/mcp` of moniker's public URL (`resource`), with
/// `rest` after it (`?ticket=...`, `/callback`).
pub(crate) fn at_connect(resource: &str, server: &ServerId, rest: &str) -> Option<String> {
    let mut url = Url::parse(resource).ok()?;
    url.set_path(&format!("{}/connect/{server}", base_path(url.path())));
    url.set_query(None);
    url.set_fragment(None);
    let _ = url.set_username("");
    let _ = url.set_password(None);
    Some(format!("{url}{rest}"))
}

/// The sign-in link of `ticket` for `server`.
pub(crate) fn link(resource: &str, server: &ServerId, ticket: &str) -> Option<String> {
    at_connect(resource, server, &format!("?ticket={ticket}"))
}

/// The most one secret may hold.
pub const SECRET_MAX: usize = 4096;

/// Whether a person may set `name` to `value` among a server's secrets `names`: a name its
/// config declares (said cut to 64 characters), a value of at most [`SECRET_MAX`] bytes and
/// without a NUL (an environment cannot hold one). The one rule of the `PUT` and of
/// `moniker people --set`.
pub fn settable(names: &[String], name: &str, value: &str) -> Result<(), String> {
    if !names.iter().any(|n| n == name) {
        return Err(format!(
            "`{}` is not a secret of this server (its secrets: {})",
            name.chars().take(64).collect::<String>(),
            names.join(", ")
        ));
    }
    if value.len() > SECRET_MAX || value.contains('\0') {
        return Err(format!(
            "`{name}` is longer than {SECRET_MAX} bytes or holds a NUL"
        ));
    }
    Ok(())
}

/// What a stdio server run once for each person is known by in [`folder`]: its command line
/// (another command under the same name starts afresh).
pub fn started_as(command: &str, args: &[String]) -> String {
    format!("stdio:{command} {}", args.join(" "))
}

/// Where moniker's own paths begin on its public URL: its path without a trailing `/` and
/// without `/mcp`.
fn base_path(path: &str) -> String {
    let path = path.trim_end_matches('/');
    path.strip_suffix("/mcp").unwrap_or(path).to_owned()
}

/// The folder of a server's sealed sign-ins, beside moniker's own tokens: named by the server
/// and its URL (another URL under the same name starts afresh).
pub fn folder(server: &str, url: &str) -> Option<PathBuf> {
    // As the connection reads it (`https://h` is `https://h/`).
    let url = Url::parse(url).map_or_else(|_| url.to_owned(), String::from);
    let hash = Sha256::digest(url.as_bytes());
    let short = crate::files::hex(&hash[..4]);
    dirs::data_dir().map(|d| {
        d.join("moniker")
            .join("people")
            .join(format!("{server}-{short}"))
    })
}

/// The key of `$MONIKER_SECRET_KEY`: 32 bytes, as 64 hex digits or base64.
pub fn key_from(text: &str) -> Result<[u8; 32], String> {
    use base64::Engine;
    let text = text.trim();
    let bytes = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        (0..32)
            .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| "not hex".to_owned())?
    } else {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text))
            .map_err(|_| "neither 64 hex digits nor base64".to_owned())?
    };
    bytes.try_into().map_err(|_| {
        format!("${KEY_VAR} must hold 32 bytes (64 hex digits, or base64 of 32 bytes)")
    })
}

/// Sealed files, one a person: `nonce || ciphertext || tag`, the server and the person bound
/// in as associated data.
pub struct Sealed {
    dir: PathBuf,
    server: String,
    key: ring::aead::LessSafeKey,
}

impl Sealed {
    /// The sealed files of `server` at `place` ([`folder`]) under `$MONIKER_SECRET_KEY`;
    /// `None` without the variable, `Err` when it is no key.
    fn from_env(server: &ServerId, place: &str) -> Result<Option<Self>, String> {
        let Some(text) = std::env::var(KEY_VAR).ok().filter(|t| !t.trim().is_empty()) else {
            return Ok(None);
        };
        let key = key_from(&text)?;
        let dir = folder(server.as_str(), place)
            .ok_or("no user data folder to keep people's tokens in")?;
        Ok(Some(Self::new(dir, server.as_str(), &key)))
    }

    pub(crate) fn new(dir: PathBuf, server: &str, key: &[u8; 32]) -> Self {
        let unbound = ring::aead::UnboundKey::new(&ring::aead::CHACHA20_POLY1305, key)
            .expect("32 bytes are a ChaCha20-Poly1305 key");
        Self {
            dir,
            server: server.to_owned(),
            key: ring::aead::LessSafeKey::new(unbound),
        }
    }

    fn bound(&self, person: &Person) -> Vec<u8> {
        let mut aad = self.server.as_bytes().to_vec();
        aad.push(b'\n');
        aad.extend_from_slice(&person.key);
        aad
    }

    fn read<T: serde::de::DeserializeOwned>(&self, person: &Person) -> Option<T> {
        let path = self.dir.join(person.file_name());
        let data = crate::files::read_private(&path, FILE_MAX)?;
        let kept = self.opened(person, data);
        if kept.is_none() {
            tracing::warn!(server = %self.server, path = %path.display(), "a person's sealed file does not open with ${KEY_VAR} (another key, or not theirs): ignored");
        }
        kept
    }

    /// A sealed file's contents opened as `person`'s.
    fn opened<T: serde::de::DeserializeOwned>(
        &self,
        person: &Person,
        mut data: Vec<u8>,
    ) -> Option<T> {
        if data.len() < 12 {
            return None;
        }
        let nonce = ring::aead::Nonce::try_assume_unique_for_key(&data[..12]).ok()?;
        let plain = self
            .key
            .open_in_place(
                nonce,
                ring::aead::Aad::from(self.bound(person)),
                &mut data[12..],
            )
            .ok()?;
        serde_json::from_slice(plain).ok()
    }

    fn write<T: Serialize>(&self, person: &Person, kept: &T) -> std::io::Result<()> {
        let mut nonce = [0u8; 12];
        getrandom::fill(&mut nonce).map_err(std::io::Error::other)?;
        let mut data = serde_json::to_vec(kept).map_err(std::io::Error::other)?;
        self.key
            .seal_in_place_append_tag(
                ring::aead::Nonce::assume_unique_for_key(nonce),
                ring::aead::Aad::from(self.bound(person)),
                &mut data,
            )
            .map_err(|_| std::io::Error::other("cannot seal"))?;
        let mut file = nonce.to_vec();
        file.extend_from_slice(&data);
        crate::files::write_private(&self.dir, &self.dir.join(person.file_name()), &file)
    }

    fn remove(&self, person: &Person) -> bool {
        std::fs::remove_file(self.dir.join(person.file_name())).is_ok()
    }

    /// Every sealed sign-in in the folder that opens: (file, person, expiry), for
    /// `moniker people`.
    pub fn list(
        dir: &std::path::Path,
        server: &str,
        key: &[u8; 32],
    ) -> Vec<(PathBuf, String, Option<u64>)> {
        Self::new(dir.to_path_buf(), server, key).signed_in()
    }

    /// Every person's secrets in the folder that open: (file, person, the secrets' names),
    /// for `moniker people` (a server run once for each person).
    pub fn list_secrets(
        dir: &std::path::Path,
        server: &str,
        key: &[u8; 32],
    ) -> Vec<(PathBuf, String, Vec<String>)> {
        Self::new(dir.to_path_buf(), server, key)
            .all::<Held>()
            .into_iter()
            .map(|(path, held)| (path, held.person, held.values.into_keys().collect()))
            .collect()
    }

    /// The sign-ins of this folder: (file, person, expiry).
    fn signed_in(&self) -> Vec<(PathBuf, String, Option<u64>)> {
        self.all::<Kept>()
            .into_iter()
            .map(|(path, kept)| (path, kept.person, kept.tokens.expires_at))
            .collect()
    }

    /// Every file of the folder that opens as its person's `T`.
    fn all<T: serde::de::DeserializeOwned>(&self) -> Vec<(PathBuf, T)> {
        let sealed = self;
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(data) = crate::files::read_private(&path, FILE_MAX) else {
                continue;
            };
            // The person is bound in: the file's name is their digest.
            let person = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(digest_of)
                .map(|key| Person {
                    key,
                    name: String::new(),
                });
            if let Some(opened) = person.and_then(|p| sealed.opened(&p, data)) {
                out.push((path, opened));
            }
        }
        out
    }
}

/// The 32 bytes of 64 hex digits.
fn digest_of(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..32)
        .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    bytes?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(token: &str) -> Kept {
        Kept {
            person: "alice".to_owned(),
            issuer: "https://as".to_owned(),
            client: Client {
                client_id: "c".to_owned(),
                client_secret: None,
                auth_method: "none".to_owned(),
                registered: true,
            },
            tokens: Tokens {
                access_token: token.to_owned(),
                refresh_token: Some("refresh-secret".to_owned()),
                expires_at: None,
                lifetime: None,
                scope: None,
            },
        }
    }

    #[test]
    fn a_sealed_file_opens_with_its_key_for_its_person_and_server_only() {
        let dir = std::env::temp_dir().join(format!("moniker-sealed-{}", crate::random::text(8)));
        let key = [7u8; 32];
        let sealed = Sealed::new(dir.clone(), "gh", &key);
        let alice = Person::named("https://idp", "alice");
        let bob = Person::named("https://idp", "bob");
        sealed.write(&alice, &kept("alice-access-token")).unwrap();
        let bytes = std::fs::read(dir.join(alice.file_name())).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("alice-access-token") && !text.contains("refresh-secret"));
        assert_eq!(
            sealed.read::<Kept>(&alice).unwrap().tokens.access_token,
            "alice-access-token"
        );
        // Another key, another server, or the file under another person's name: nothing.
        assert!(
            Sealed::new(dir.clone(), "gh", &[8u8; 32])
                .read::<Kept>(&alice)
                .is_none()
        );
        assert!(
            Sealed::new(dir.clone(), "other", &key)
                .read::<Kept>(&alice)
                .is_none()
        );
        std::fs::copy(dir.join(alice.file_name()), dir.join(bob.file_name())).unwrap();
        assert!(
            sealed.read::<Kept>(&bob).is_none(),
            "alice's file opened as bob's"
        );
        assert!(sealed.remove(&alice) && sealed.read::<Kept>(&alice).is_none());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_key_is_32_bytes_in_hex_or_base64() {
        assert_eq!(key_from(&"ab".repeat(32)).unwrap(), [0xab; 32]);
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD.encode([3u8; 32]);
        assert_eq!(key_from(&b64).unwrap(), [3; 32]);
        assert!(key_from("short").is_err());
        assert!(key_from(&"ab".repeat(16)).is_err());
    }
}
