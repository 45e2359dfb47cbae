//! `http`: who may use the Streamable HTTP endpoint.

use moniker_surface::vocab::Seg;

use super::{Cx, Slot, join};
use crate::http::{
    ConsoleClient, HttpConfig, IdentityMatch, IdentityToolset, Introspection, ResourceAuth,
    TokenConfig,
};
use crate::report::codes;
use crate::shape::keys;
use crate::tree::{Value, shorten};

impl Cx<'_> {
    /// `http:`: tokens (a string, or `{token, toolset}`), allow-lists, the body limit, the idle
    /// time of sessions.
    pub(super) fn http<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> HttpConfig {
        let fields = self.fields(slot, p, Some(keys::HTTP), "a map of HTTP settings");
        let field = |name: &'static str| join(p, Seg::Key(name));
        let mut out = HttpConfig::default();
        if let Some(tokens) = fields.get("tokens") {
            out.tokens = self.tokens(&field("tokens"), tokens);
        }
        if let Some(list) = fields.get("allowed_origins") {
            out.allowed_origins = self.strings(&field("allowed_origins"), list, false);
        }
        if let Some(list) = fields.get("allowed_hosts") {
            out.allowed_hosts = self.strings(&field("allowed_hosts"), list, false);
        }
        if let Some(max) = fields.get("max_body") {
            out.max_body = self.count(&field("max_body"), max);
        }
        if let Some(idle) = fields.get("session_idle") {
            out.session_idle = self.duration(&field("session_idle"), idle, false);
        }
        if let Some(max) = fields.get("max_sessions_per_token") {
            out.max_sessions_per_token = self.count(&field("max_sessions_per_token"), max);
        }
        if let Some(max) = fields.get("max_connections") {
            out.max_connections = self.count(&field("max_connections"), max);
        }
        if let Some(auth) = fields.get("auth") {
            out.auth = self.resource_auth(&field("auth"), auth);
        }
        if let Some(console) = fields.get("console") {
            out.console = self.boolean(&field("console"), console).unwrap_or(false);
        }
        out
    }

    /// `http.tokens`: each a string, or `{ token, toolset, name }`.
    fn tokens<'n>(&mut self, tp: &[Seg<'n>], tokens: Slot<'n>) -> Vec<TokenConfig> {
        let mut out = Vec::new();
        for (i, item) in self
            .items(tokens, tp, "a list of tokens")
            .into_iter()
            .enumerate()
        {
            let ip = join(tp, Seg::Index(i));
            if matches!(item.node.value, Value::Map(_)) {
                let entry = self.fields(
                    item,
                    &ip,
                    Some(keys::BOUND_TOKEN),
                    "a token: a string or {token, toolset}",
                );
                let token = match entry.get("token") {
                    Some(t) => self.string(&join(&ip, Seg::Key("token")), t),
                    None => {
                        self.error(
                            codes::MISSING_KEY,
                            "a token needs `token`".to_owned(),
                            &ip,
                            item.node.span,
                            Some(
                                "write `{ token: \"${MONIKER_TOKEN}\", toolset: review }`"
                                    .to_owned(),
                            ),
                        );
                        None
                    }
                };
                let toolset = entry
                    .get("toolset")
                    .and_then(|t| self.string(&join(&ip, Seg::Key("toolset")), t));
                let name = entry
                    .get("name")
                    .and_then(|t| self.string(&join(&ip, Seg::Key("name")), t));
                if let Some(token) = token {
                    out.push(TokenConfig {
                        token,
                        toolset,
                        name,
                    });
                }
            } else if let Some(token) = self.string(&ip, item) {
                out.push(TokenConfig {
                    token,
                    toolset: None,
                    name: None,
                });
            }
        }
        out
    }

    /// `http.auth`: `resource` and `issuer` are required; the rest has defaults.
    fn resource_auth<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Option<ResourceAuth> {
        let fields = self.fields(slot, p, Some(keys::RESOURCE_AUTH), "a map of auth settings");
        let field = |name: &'static str| join(p, Seg::Key(name));
        let required = |cx: &mut Self, name: &'static str, example: &str| match fields.get(name) {
            Some(value) => cx.url(&field(name), value),
            None => {
                cx.error(
                    codes::MISSING_KEY,
                    format!("`http.auth` needs `{name}`"),
                    p,
                    slot.point(),
                    Some(format!("write `{name}: {example}`")),
                );
                None
            }
        };
        let resource = required(self, "resource", "https://moniker.example.com/mcp");
        let issuer = required(self, "issuer", "https://idp.example.com");
        let scopes = fields
            .get("scopes")
            .map(|s| self.strings(&field("scopes"), s, false))
            .unwrap_or_default();
        let algorithms = fields
            .get("algorithms")
            .map(|list| self.algorithms(&field("algorithms"), list))
            .unwrap_or_default();
        let leeway = fields
            .get("leeway")
            .and_then(|l| self.duration(&field("leeway"), l, true))
            .unwrap_or(ResourceAuth::DEFAULT_LEEWAY);
        let keys_ttl = fields
            .get("keys_ttl")
            .and_then(|k| self.duration(&field("keys_ttl"), k, false))
            .unwrap_or(ResourceAuth::DEFAULT_KEYS_TTL);
        let introspection = fields
            .get("introspection")
            .and_then(|slot| self.introspection(&field("introspection"), slot));
        let toolsets = match fields.get("toolsets") {
            Some(list) => self.identity_toolsets(&field("toolsets"), list),
            None => Vec::new(),
        };
        let admins = match fields.get("admins") {
            Some(list) => self.admins(&field("admins"), list),
            None => Vec::new(),
        };
        let console_client = fields
            .get("console_client")
            .and_then(|slot| self.console_client(&field("console_client"), slot));
        let default_toolset = fields
            .get("default_toolset")
            .and_then(|d| self.string(&field("default_toolset"), d));
        Some(ResourceAuth {
            resource: resource?.trim_end_matches('/').to_owned(),
            issuer: issuer?,
            scopes,
            algorithms,
            leeway,
            keys_ttl,
            introspection,
            toolsets,
            default_toolset,
            admins,
            console_client,
        })
    }

    /// `http.auth.algorithms`: names of [`ResourceAuth::ALGORITHMS`] (another is reported).
    fn algorithms(&mut self, ap: &[Seg<'_>], list: Slot<'_>) -> Vec<String> {
        let names = self.strings(ap, list, false);
        for name in &names {
            if !ResourceAuth::ALGORITHMS.contains(&name.as_str()) {
                self.error(
                    codes::INVALID_VALUE,
                    format!("`{}` is not an algorithm moniker verifies", shorten(name)),
                    ap,
                    list.point(),
                    Some(format!(
                        "use some of: {}",
                        ResourceAuth::ALGORITHMS.join(", ")
                    )),
                );
            }
        }
        names
    }

    /// `http.auth.introspection`: `{client_id, client_secret}`, both required.
    fn introspection(&mut self, ip: &[Seg<'_>], slot: Slot<'_>) -> Option<Introspection> {
        let entry = self.fields(slot, ip, Some(keys::CLIENT), "{client_id, client_secret}");
        let get = |cx: &mut Self, name: &'static str| match entry.get(name) {
            Some(v) => cx.string(&join(ip, Seg::Key(name)), v),
            None => {
                cx.error(
                    codes::MISSING_KEY,
                    format!("`introspection` needs `{name}`"),
                    ip,
                    slot.point(),
                    Some("write `{ client_id: moniker, client_secret: \"${INTROSPECTION_SECRET}\" }`".to_owned()),
                );
                None
            }
        };
        let client_id = get(self, "client_id");
        let client_secret = get(self, "client_secret");
        Some(Introspection {
            client_id: client_id?,
            client_secret: client_secret?,
        })
    }

    /// `http.auth.toolsets`: each `{claim, value, toolset}` or `{scope, toolset}`.
    fn identity_toolsets<'n>(&mut self, tp: &[Seg<'n>], list: Slot<'n>) -> Vec<IdentityToolset> {
        let mut toolsets = Vec::new();
        let items = self.items(
            list,
            tp,
            "a list of `{claim, value, toolset}` or `{scope, toolset}`",
        );
        for (i, item) in items.into_iter().enumerate() {
            let ip = join(tp, Seg::Index(i));
            let (when, toolset) = self.identity_rule(&ip, item, true);
            match (when, toolset) {
                (Some(when), Some(toolset)) => toolsets.push(IdentityToolset { when, toolset }),
                _ => self.error(
                    codes::INVALID_VALUE,
                    "a rule is `{claim, value, toolset}` or `{scope, toolset}`".to_owned(),
                    &ip,
                    item.point(),
                    Some("write `{ claim: groups, value: admins, toolset: admin }`".to_owned()),
                ),
            }
        }
        toolsets
    }

    /// `http.auth.admins`: each `{claim, value}` or `{scope}`.
    fn admins<'n>(&mut self, ap: &[Seg<'n>], list: Slot<'n>) -> Vec<IdentityMatch> {
        let mut admins = Vec::new();
        let items = self.items(list, ap, "a list of `{claim, value}` or `{scope}`");
        for (i, item) in items.into_iter().enumerate() {
            let ip = join(ap, Seg::Index(i));
            match self.identity_rule(&ip, item, false) {
                (Some(when), _) => admins.push(when),
                (None, _) => self.error(
                    codes::INVALID_VALUE,
                    "an admin is `{claim, value}` or `{scope}`".to_owned(),
                    &ip,
                    item.point(),
                    Some("write `{ claim: groups, value: ops }`".to_owned()),
                ),
            }
        }
        admins
    }

    /// One identity rule: what it matches (`{claim, value}` or `{scope}`), and its `toolset`
    /// when `with_toolset`.
    fn identity_rule<'n>(
        &mut self,
        ip: &[Seg<'n>],
        item: Slot<'n>,
        with_toolset: bool,
    ) -> (Option<IdentityMatch>, Option<String>) {
        let (keys, shape): (&[&str], _) = if with_toolset {
            (
                keys::TOOLSET_RULE,
                "`{claim, value, toolset}` or `{scope, toolset}`",
            )
        } else {
            (keys::IDENTITY, "`{claim, value}` or `{scope}`")
        };
        let entry = self.fields(item, ip, Some(keys), shape);
        let text = |cx: &mut Self, name: &'static str| {
            entry
                .get(name)
                .and_then(|v| cx.string(&join(ip, Seg::Key(name)), v))
        };
        let toolset = text(self, "toolset");
        let when = match (
            text(self, "claim"),
            text(self, "value"),
            text(self, "scope"),
        ) {
            (Some(claim), Some(value), None) => Some(IdentityMatch::Claim { claim, value }),
            (None, None, Some(scope)) => Some(IdentityMatch::Scope(scope)),
            _ => None,
        };
        (when, toolset)
    }

    /// `http.auth.console_client`: `{client_id, client_secret}` (the secret optional).
    fn console_client<'n>(&mut self, cp: &[Seg<'n>], slot: Slot<'n>) -> Option<ConsoleClient> {
        let entry = self.fields(slot, cp, Some(keys::CLIENT), "{client_id, client_secret}");
        let client_secret = entry
            .get("client_secret")
            .and_then(|v| self.string(&join(cp, Seg::Key("client_secret")), v));
        match entry.get("client_id") {
            Some(v) => Some(ConsoleClient {
                client_id: self.string(&join(cp, Seg::Key("client_id")), v)?,
                client_secret,
            }),
            None => {
                self.error(
                    codes::MISSING_KEY,
                    "`console_client` needs `client_id`".to_owned(),
                    cp,
                    slot.point(),
                    Some("write `{ client_id: moniker-console, client_secret: \"${CONSOLE_SECRET}\" }`, or leave `console_client` out to register at the issuer".to_owned()),
                );
                None
            }
        }
    }
}
