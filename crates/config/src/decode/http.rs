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
        let strings = |cx: &mut Self, at: &[Seg<'n>], s| cx.strings(at, s, false);
        let tokens = self.field(p, &fields, "tokens", Self::tokens);
        let origins = self.field(p, &fields, "allowed_origins", strings);
        let hosts = self.field(p, &fields, "allowed_hosts", strings);
        let max_body = self.field(p, &fields, "max_body", Self::count);
        let idle = self.field(p, &fields, "session_idle", |cx, at, s| {
            cx.duration(at, s, false)
        });
        let per_token = self.field(p, &fields, "max_sessions_per_token", Self::count);
        let connections = self.field(p, &fields, "max_connections", Self::count);
        let auth = self.field(p, &fields, "auth", Self::resource_auth);
        let console = self.field(p, &fields, "console", Self::boolean);
        HttpConfig {
            tokens: tokens.unwrap_or_default(),
            allowed_origins: origins.unwrap_or_default(),
            allowed_hosts: hosts.unwrap_or_default(),
            max_body: max_body.flatten(),
            session_idle: idle.flatten(),
            max_sessions_per_token: per_token.flatten(),
            max_connections: connections.flatten(),
            auth: auth.flatten(),
            console: console.flatten().unwrap_or(false),
        }
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
                let token = match self.field(&ip, &entry, "token", Self::string) {
                    Some(token) => token,
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
                let toolset = self.field(&ip, &entry, "toolset", Self::string).flatten();
                let name = self.field(&ip, &entry, "name", Self::string).flatten();
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
        let required = |cx: &mut Self, name: &'static str, example: &str| {
            let Some(url) = cx.field(p, &fields, name, Self::url) else {
                cx.error(
                    codes::MISSING_KEY,
                    format!("`http.auth` needs `{name}`"),
                    p,
                    slot.point(),
                    Some(format!("write `{name}: {example}`")),
                );
                return None;
            };
            url
        };
        let resource = required(self, "resource", "https://moniker.example.com/mcp");
        let issuer = required(self, "issuer", "https://idp.example.com");
        let scopes = self.field(p, &fields, "scopes", |cx, at, s| cx.strings(at, s, false));
        let algorithms = self.field(p, &fields, "algorithms", Self::algorithms);
        let leeway = self.field(p, &fields, "leeway", |cx, at, s| cx.duration(at, s, true));
        let keys_ttl = self.field(p, &fields, "keys_ttl", |cx, at, s| {
            cx.duration(at, s, false)
        });
        let introspection = self.field(p, &fields, "introspection", Self::introspection);
        let toolsets = self.field(p, &fields, "toolsets", Self::identity_toolsets);
        let admins = self.field(p, &fields, "admins", Self::admins);
        let console_client = self.field(p, &fields, "console_client", Self::console_client);
        let default_toolset = self.field(p, &fields, "default_toolset", Self::string);
        Some(ResourceAuth {
            resource: resource?.trim_end_matches('/').to_owned(),
            issuer: issuer?,
            scopes: scopes.unwrap_or_default(),
            algorithms: algorithms.unwrap_or_default(),
            leeway: leeway.flatten().unwrap_or(ResourceAuth::DEFAULT_LEEWAY),
            keys_ttl: keys_ttl.flatten().unwrap_or(ResourceAuth::DEFAULT_KEYS_TTL),
            introspection: introspection.flatten(),
            toolsets: toolsets.unwrap_or_default(),
            default_toolset: default_toolset.flatten(),
            admins: admins.unwrap_or_default(),
            console_client: console_client.flatten(),
        })
    }

    /// `http.auth.algorithms`: names of [`ResourceAuth::ALGORITHMS`] (another is reported).
    fn algorithms(&mut self, ap: &[Seg<'_>], list: Slot<'_>) -> Vec<String> {
        self.strings_where(ap, list, |name| {
            (!ResourceAuth::ALGORITHMS.contains(&name)).then(|| {
                (
                    format!("`{}` is not an algorithm moniker verifies", shorten(name)),
                    format!("use some of: {}", ResourceAuth::ALGORITHMS.join(", ")),
                )
            })
        })
    }

    /// `http.auth.introspection`: `{client_id, client_secret}`, both required.
    fn introspection(&mut self, ip: &[Seg<'_>], slot: Slot<'_>) -> Option<Introspection> {
        let entry = self.fields(slot, ip, Some(keys::CLIENT), "{client_id, client_secret}");
        let get = |cx: &mut Self, name: &'static str| {
            let Some(text) = cx.field(ip, &entry, name, Self::string) else {
                cx.error(
                    codes::MISSING_KEY,
                    format!("`introspection` needs `{name}`"),
                    ip,
                    slot.point(),
                    Some("write `{ client_id: moniker, client_secret: \"${INTROSPECTION_SECRET}\" }`".to_owned()),
                );
                return None;
            };
            text
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
        let text =
            |cx: &mut Self, name: &'static str| cx.field(ip, &entry, name, Self::string).flatten();
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
        let client_secret = self
            .field(cp, &entry, "client_secret", Self::string)
            .flatten();
        match self.field(cp, &entry, "client_id", Self::string) {
            Some(client_id) => Some(ConsoleClient {
                client_id: client_id?,
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
