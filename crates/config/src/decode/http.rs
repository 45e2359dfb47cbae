//! `http`: who may use the Streamable HTTP endpoint.

use moniker_surface::vocab::Seg;

use super::{Cx, Slot, join};
use crate::http::{HttpConfig, TokenConfig};
use crate::report::codes;
use crate::tree::Value;

const HTTP_KEYS: &[&str] = &[
    "tokens",
    "allowed_origins",
    "allowed_hosts",
    "max_body",
    "session_idle",
    "max_sessions_per_token",
    "max_connections",
];
const TOKEN_KEYS: &[&str] = &["token", "toolset", "name"];

impl Cx<'_> {
    /// `http:`: tokens (a string, or `{token, toolset}`), allow-lists, the body limit, the idle
    /// time of sessions.
    pub(super) fn http<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> HttpConfig {
        let fields = self.fields(slot, p, Some(HTTP_KEYS), "a map of HTTP settings");
        let field = |name: &'static str| join(p, Seg::Key(name));
        let mut out = HttpConfig::default();
        if let Some(tokens) = fields.get("tokens") {
            let tp = field("tokens");
            for (i, item) in self
                .items(tokens, &tp, "a list of tokens")
                .into_iter()
                .enumerate()
            {
                let ip = join(&tp, Seg::Index(i));
                if matches!(item.node.value, Value::Map(_)) {
                    let entry = self.fields(
                        item,
                        &ip,
                        Some(TOKEN_KEYS),
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
                        out.tokens.push(TokenConfig {
                            token,
                            toolset,
                            name,
                        });
                    }
                } else if let Some(token) = self.string(&ip, item) {
                    out.tokens.push(TokenConfig {
                        token,
                        toolset: None,
                        name: None,
                    });
                }
            }
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
        out
    }
}
