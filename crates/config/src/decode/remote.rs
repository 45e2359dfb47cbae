//! A remote server's `tls` and `auth`: how moniker trusts it and identifies itself to it.

use moniker_surface::diagnostic::did_you_mean;
use moniker_surface::vocab::Seg;

use super::{Cx, Slot, join, list};
use crate::report::codes;
use crate::server::{Auth, Exchange, Grant, Tls};
use crate::shape::keys;
use crate::tree::shorten;

impl Cx<'_> {
    pub(super) fn tls<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Option<Tls> {
        let fields = self.fields(
            slot,
            p,
            Some(keys::TLS),
            "a map with `ca_file`, `client_cert`, `client_key`",
        );
        let mut path = |name: &'static str| {
            let read = self.field(p, &fields, name, |cx, at, s| cx.non_empty(at, s, name));
            read.flatten()
        };
        let tls = Tls {
            ca_file: path("ca_file"),
            client_cert: path("client_cert"),
            client_key: path("client_key"),
        };
        if tls.client_cert.is_some() != tls.client_key.is_some() {
            let (has, lacks) = if tls.client_cert.is_some() {
                ("client_cert", "client_key")
            } else {
                ("client_key", "client_cert")
            };
            self.error(
                codes::MISSING_KEY,
                format!("`tls` has `{has}` but no `{lacks}`"),
                p,
                slot.point(),
                Some(format!(
                    "mutual TLS needs both: add `{lacks}: <PEM file>`, or remove `{has}`"
                )),
            );
            return None;
        }
        Some(tls)
    }

    pub(super) fn auth<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Option<Auth> {
        let fields = self.fields(slot, p, Some(keys::AUTH), "a map of OAuth client settings");
        let text = |cx: &mut Self, name: &'static str| {
            let read = cx.field(p, &fields, name, |cx, at, s| cx.non_empty(at, s, name));
            read.flatten()
        };
        let client_id = text(self, "client_id");
        let client_secret = text(self, "client_secret");
        let client_metadata_url = text(self, "client_metadata_url");
        let private_key = text(self, "private_key");
        let scope = text(self, "scope");
        let issuer = text(self, "issuer");
        let grant = self.field(p, &fields, "grant", Self::grant);
        let grant = grant.unwrap_or(Some(Grant::default()))?;
        let exchange = match self.field(p, &fields, "exchange", Self::exchange) {
            Some(exchange) => Some(exchange?),
            None => None,
        };
        let per_person = self.field(p, &fields, "per_person", Self::boolean);
        let per_person = per_person.unwrap_or(Some(false))?;
        let auth = Auth {
            per_person,
            client_id,
            client_secret,
            client_metadata_url,
            grant,
            issuer,
            private_key,
            scope,
            exchange,
        };
        let metadata_slot = fields.get("client_metadata_url").unwrap_or(slot);
        self.auth_holds(p, slot, metadata_slot, &auth)
            .then_some(auth)
    }

    /// `exchange`: `{resource, audience, actor, cache}`, each optional (`exchange: {}` asks
    /// for a token for the server's URL, kept five minutes at most).
    fn exchange<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Option<Exchange> {
        let fields = self.fields(
            slot,
            p,
            Some(keys::EXCHANGE),
            "a map with `resource`, `audience`, `actor`, `cache`",
        );
        let resource = match self.field(p, &fields, "resource", Self::url) {
            Some(url) => Some(url?),
            None => None,
        };
        let audience = |cx: &mut Self, at: &[Seg<'n>], s| cx.non_empty(at, s, "audience");
        let audience = match self.field(p, &fields, "audience", audience) {
            Some(audience) => Some(audience?),
            None => None,
        };
        let actor = self.field(p, &fields, "actor", Self::boolean);
        let actor = actor.unwrap_or(Some(false))?;
        let cache = self.field(p, &fields, "cache", |cx, at, s| cx.duration(at, s, true));
        let cache = cache.unwrap_or(Some(Exchange::CACHE))?;
        Some(Exchange {
            resource,
            audience,
            actor,
            cache,
        })
    }

    /// `grant`: one of [`Grant::NAMES`].
    fn grant(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<Grant> {
        let name = self.string(p, slot)?;
        match Grant::NAMES.iter().position(|g| *g == name) {
            Some(0) => Some(Grant::AuthorizationCode),
            Some(_) => Some(Grant::ClientCredentials),
            None => {
                let help = match did_you_mean(&name, Grant::NAMES.iter().copied()) {
                    Some(close) => format!("did you mean `{close}`?"),
                    None => format!("use one of {}", list(Grant::NAMES)),
                };
                self.error(
                    codes::INVALID_VALUE,
                    format!("unknown grant `{}`", shorten(&name)),
                    p,
                    slot.point(),
                    Some(help),
                );
                None
            }
        }
    }

    /// Whether `auth`'s fields hold together (each way they do not is reported): an https
    /// Client ID Metadata Document, a `client_id` for a secret or key, and credentials for
    /// `client_credentials`.
    fn auth_holds(
        &mut self,
        p: &[Seg<'_>],
        slot: Slot<'_>,
        metadata_slot: Slot<'_>,
        auth: &Auth,
    ) -> bool {
        let mut ok = true;
        if let Some(url) = &auth.client_metadata_url {
            if !url.starts_with("https://") && !url.contains("${") {
                self.error(
                    codes::INVALID_VALUE,
                    format!("`{}` is not an https url", shorten(url)),
                    &join(p, Seg::Key("client_metadata_url")),
                    metadata_slot.point(),
                    Some("a Client ID Metadata Document is served over https: `client_metadata_url: https://example.com/moniker.json`".to_owned()),
                );
                ok = false;
            }
        }
        let needs_id = [
            ("client_secret", auth.client_secret.is_some()),
            ("private_key", auth.private_key.is_some()),
        ];
        for (name, set) in needs_id {
            if set && auth.client_id.is_none() {
                self.error(
                    codes::MISSING_KEY,
                    format!("`auth` has `{name}` but no `client_id`"),
                    p,
                    slot.point(),
                    Some(format!("add the `client_id` the `{name}` belongs to")),
                );
                ok = false;
            }
        }
        if auth.exchange.is_some()
            && (auth.client_id.is_none()
                || (auth.client_secret.is_none() && auth.private_key.is_none()))
        {
            self.error(
                codes::MISSING_KEY,
                "`exchange` needs `client_id` and `client_secret` (or `private_key`): moniker's own client at the identity provider",
                p,
                slot.point(),
                Some("add the credentials the identity provider gave moniker for token exchange".to_owned()),
            );
            ok = false;
        }
        if auth.per_person && auth.exchange.is_some() {
            self.error(
                codes::CONFLICT,
                "`per_person` and `exchange` are two ways of calling as each person: choose one",
                p,
                slot.point(),
                Some("`exchange` when the server trusts your identity provider; `per_person` when it has its own sign-in".to_owned()),
            );
            ok = false;
        }
        if auth.grant == Grant::ClientCredentials
            && (auth.client_id.is_none()
                || (auth.client_secret.is_none() && auth.private_key.is_none()))
        {
            self.error(
                codes::MISSING_KEY,
                "`grant: client_credentials` needs `client_id` and `client_secret` (or `private_key`)",
                p,
                slot.point(),
                Some("add the credentials the authorization server gave moniker".to_owned()),
            );
            ok = false;
        }
        ok
    }

    /// A string that is not blank.
    fn non_empty(&mut self, p: &[Seg<'_>], slot: Slot<'_>, name: &str) -> Option<String> {
        let text = self.string(p, slot)?;
        if text.trim().is_empty() {
            self.error(
                codes::INVALID_VALUE,
                format!("`{name}` is empty"),
                p,
                slot.point(),
                Some(format!("give `{name}` a value, or remove it")),
            );
            return None;
        }
        Some(text)
    }
}
