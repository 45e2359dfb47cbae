//! `servers` (or `mcpServers`): how to reach each server, and its naming rules.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use moniker_surface::diagnostic::did_you_mean;
use moniker_surface::vocab::Seg;
use moniker_surface::{Name, ServerId, ServerRules};

use super::{Cx, Decoded, Fields, Slot, join, list};
use crate::report::codes;
use crate::server::{Auth, Forward, PassEnv, ServerConfig, Tls, Transport};
use crate::shape::keys;
use crate::tree::{ScalarKind, Value, shorten};

const TRANSPORT_TYPES: &[&str] = &["stdio", "http", "streamable-http", "sse"];
/// Server fields that only mean something for one transport.
const STDIO_ONLY: &[&str] = &["args", "env", "pass_env", "cwd", "sandbox", "per_person"];
const HTTP_ONLY: &[&str] = &["headers", "tls", "auth", "forward"];
/// Headers `forward` may not set: HTTP's own framing, and the transport's.
const NOT_FORWARDED: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "accept",
    "te",
    "upgrade",
    "cookie",
    "last-event-id",
];

impl Cx<'_> {
    /// `servers` and `mcpServers` (one of them, or a conflict); returns every syntactically
    /// valid server id, for the overrides to check theirs against.
    pub(super) fn server_sections<'n>(
        &mut self,
        fields: &Fields<'n>,
        out: &mut Decoded,
    ) -> Vec<&'n str> {
        let mut servers_section: Option<&str> = None;
        let mut server_rules = BTreeMap::new();
        for (key, slot) in &fields.entries {
            if !matches!(*key, "servers" | "mcpServers") {
                continue;
            }
            match servers_section {
                None => {
                    servers_section = Some(*key);
                    out.servers_key = (*key).to_owned();
                }
                Some(first) => self.error(
                    codes::CONFLICT,
                    format!("`{key}` and `{first}` are the same section"),
                    &[Seg::Key(key)],
                    slot.key.unwrap_or(slot.node.span),
                    Some(format!("move these servers into `{first}`")),
                ),
            }
            self.servers(key, *slot, &mut out.servers, &mut server_rules);
        }
        // Every syntactically valid server key, whether or not the server itself is valid: an
        // override naming a server with a mistake in its body is not an unknown server too.
        let ids: Vec<&'n str> = fields
            .entries
            .iter()
            .filter(|(k, _)| matches!(*k, "servers" | "mcpServers"))
            .filter_map(|(_, s)| match &s.node.value {
                Value::Map(entries) => Some(entries),
                _ => None,
            })
            .flatten()
            .filter_map(|e| e.key.as_deref())
            .filter(|k| k.parse::<ServerId>().is_ok())
            .collect();

        out.rules.servers = server_rules;
        ids
    }

    fn servers<'n>(
        &mut self,
        section: &'n str,
        slot: Slot<'n>,
        servers: &mut IndexMap<ServerId, ServerConfig>,
        rules: &mut BTreeMap<ServerId, ServerRules>,
    ) {
        let p = [Seg::Key(section)];
        let fields = self.fields(slot, &p, None, "a map of server ids to servers");
        for (key, server) in fields.entries {
            let sp = join(&p, Seg::Key(key));
            let id = match key.parse::<ServerId>() {
                Ok(id) => Some(id),
                Err(e) => {
                    let span = server.key.unwrap_or(server.node.span);
                    self.error(codes::INVALID_SERVER_ID, e.to_string(), &sp, span, None);
                    None
                }
            };
            let decoded = self.server(&sp, server, key);
            if let (Some(id), Some((config, server_rules))) = (id, decoded) {
                if !servers.contains_key(&id) {
                    rules.insert(id.clone(), server_rules);
                    servers.insert(id, config);
                }
            }
        }
    }

    fn server<'n>(
        &mut self,
        sp: &[Seg<'n>],
        slot: Slot<'n>,
        id: &str,
    ) -> Option<(ServerConfig, ServerRules)> {
        let fields = self.fields(slot, sp, Some(keys::SERVER), "a map of server settings");
        // Both transports' fields are read (each wrong one reported) before `type` or what is
        // there says which one the server has.
        let stdio = self.stdio(sp, &fields);
        let remote = self.remote(sp, &fields);
        let tags = self.field(sp, &fields, "tags", Self::tags);
        let prefix = self.field(sp, &fields, "prefix", |cx, at, s| cx.prefix(at, s, id));
        let kind = self.field(sp, &fields, "type", Self::transport_type);
        let disabled = self.field(sp, &fields, "disabled", Self::boolean);

        let modern = self.field(sp, &fields, "protocol", Self::protocol);
        let sandbox = self.field(sp, &fields, "sandbox", |cx, at, s| {
            // Its own, whatever `gateway.sandbox` says (`false`: none).
            cx.sandbox_named.push(id.to_owned());
            cx.sandbox(at, s)
        });
        let per_person = self.field(sp, &fields, "per_person", |cx, at, s| {
            cx.per_person(at, s, &fields)
        });
        let limits = self.limits(sp, &fields);
        if let (true, Ok(id)) = (limits.is_set(), id.parse::<ServerId>()) {
            self.limits.servers.insert(id, limits);
        }

        let kind = kind.flatten();
        let (is_stdio, ok) = self.transport(sp, slot, &fields, id, kind.as_deref())?;
        let transport = if is_stdio { stdio? } else { remote? };
        ok.then_some((
            ServerConfig {
                transport,
                disabled: disabled.flatten().unwrap_or(false),
                modern: modern.flatten().unwrap_or(false),
                sandbox: sandbox.flatten(),
                per_person: per_person.flatten(),
            },
            ServerRules {
                tags: tags.unwrap_or_default(),
                prefix: prefix.flatten(),
            },
        ))
    }

    /// `per_person`: `true`, or `{secrets, instances, idle}`; a secret is a variable name that
    /// `env` does not set too.
    fn per_person<'n>(
        &mut self,
        p: &[Seg<'n>],
        slot: Slot<'n>,
        server: &Fields<'n>,
    ) -> Option<crate::PerPerson> {
        if let Some((_, ScalarKind::Bool(on))) = slot.scalar() {
            return on.then(crate::PerPerson::default);
        }
        let fields = self.fields(
            slot,
            p,
            Some(keys::PER_PERSON_SETTINGS),
            "`true`, or a map of `secrets`, `instances`, `idle`",
        );
        let field = |name: &'static str| join(p, Seg::Key(name));
        let mut out = crate::PerPerson::default();
        let secrets = self.field(p, &fields, "secrets", |cx, at, s| cx.strings(at, s, false));
        out.secrets = secrets.unwrap_or_default();
        if let Some(instances) = self.field(p, &fields, "instances", Self::count) {
            out.instances = instances?;
        }
        if let Some(idle) = self.field(p, &fields, "idle", |cx, at, s| cx.duration(at, s, false)) {
            out.idle = idle?;
        }
        let env: Vec<String> = server
            .get("env")
            .and_then(|e| match &e.node.value {
                Value::Map(entries) => Some(entries.iter().filter_map(|e| e.key.clone()).collect()),
                _ => None,
            })
            .unwrap_or_default();
        for name in &out.secrets {
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            let (code, message, help) = if !valid {
                (
                    codes::INVALID_VALUE,
                    format!("`{}` is not a variable name", shorten(name)),
                    "a secret is the name of a variable of the server's environment: letters, digits and `_`",
                )
            } else if steers_the_process(name) {
                (
                    codes::INVALID_VALUE,
                    format!("`{name}` would let each person choose what the server runs"),
                    "a secret is a value the server reads (a token), never a variable that loads code or finds programs (`PATH`, `LD_*`, `NODE_OPTIONS`, `PYTHON*`, ...)",
                )
            } else if env.iter().any(|e| e == name) {
                (
                    codes::CONFLICT,
                    format!("`{name}` is in `env` too"),
                    "each person sets their own secret: take it out of `env`",
                )
            } else {
                continue;
            };
            let at = fields.get("secrets").unwrap_or(slot);
            self.error(
                code,
                message,
                &field("secrets"),
                at.point(),
                Some(help.to_owned()),
            );
            return None;
        }
        Some(out)
    }

    /// A stdio server's fields as its transport; `None` without a right `command`.
    fn stdio(&mut self, sp: &[Seg<'_>], fields: &Fields<'_>) -> Option<Transport> {
        let field = |name: &'static str| join(sp, Seg::Key(name));
        let command = self.field(sp, fields, "command", Self::command).flatten();
        let args = self.field(sp, fields, "args", |cx, at, s| cx.strings(at, s, true));
        let env = self.field(sp, fields, "env", Self::text_map);
        let pass_env = self.field(sp, fields, "pass_env", Self::pass_env);
        let cwd = fields
            .get("cwd")
            .filter(|s| !s.node.is_null())
            .and_then(|s| self.string(&field("cwd"), s));
        Some(Transport::Stdio {
            command: command?,
            args: args.unwrap_or_default(),
            env: env.unwrap_or_default(),
            pass_env: pass_env.unwrap_or_default(),
            cwd,
        })
    }

    /// A remote server's fields as its transport; `None` without a right `url`, `tls` or
    /// `auth`.
    fn remote(&mut self, sp: &[Seg<'_>], fields: &Fields<'_>) -> Option<Transport> {
        let field = |name: &'static str| join(sp, Seg::Key(name));
        let url = self.field(sp, fields, "url", Self::url).flatten();
        let headers = self.field(sp, fields, "headers", Self::text_map);
        let headers = headers.unwrap_or_default();
        let tls = self.field(sp, fields, "tls", Self::tls);
        let tls = tls.unwrap_or(Some(Tls::default()));
        let auth = self.field(sp, fields, "auth", Self::auth);
        let mut auth = auth.unwrap_or(Some(Auth::default()));
        let as_callers = auth.as_ref().and_then(|a| {
            if a.exchange.is_some() {
                Some("exchange")
            } else {
                a.per_person.then_some("per_person")
            }
        });
        if let Some((slot, how)) = fields.get("headers").zip(as_callers) {
            if headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("authorization"))
            {
                self.error(
                    codes::CONFLICT,
                    format!("`Authorization` is each caller's here: the server has `auth.{how}`"),
                    &field("headers"),
                    slot.point(),
                    Some(format!(
                        "remove `Authorization` from `headers`, or `{how}` from `auth`"
                    )),
                );
                auth = None;
            }
        }
        let forward = self.field(sp, fields, "forward", |cx, at, s| {
            let none = Auth::default();
            cx.forward(at, s, &headers, auth.as_ref().unwrap_or(&none))
        });
        Some(Transport::Http {
            url: url?,
            headers,
            tls: tls?,
            auth: auth?,
            forward: forward.unwrap_or_default(),
        })
    }

    /// `forward`: header name to `{claim: NAME}`, `{header: NAME}` or `{access_token: true}`.
    fn forward<'n>(
        &mut self,
        p: &[Seg<'n>],
        slot: Slot<'n>,
        fixed: &IndexMap<String, String>,
        auth: &Auth,
    ) -> IndexMap<String, Forward> {
        let fields = self.fields(slot, p, None, "a map of header names to their sources");
        let mut out = IndexMap::new();
        for (name, value) in fields.entries {
            let hp = join(p, Seg::Key(name));
            if !self.forwardable(name, &hp, value, fixed, auth) {
                continue;
            }
            if let Some(source) = self.forward_source(name, &hp, value) {
                out.insert(name.to_owned(), source);
            }
        }
        out
    }

    /// Whether header `name` may be forwarded to a server with these `fixed` headers and
    /// `auth` (a reason why not is reported).
    fn forwardable(
        &mut self,
        name: &str,
        hp: &[Seg<'_>],
        value: Slot<'_>,
        fixed: &IndexMap<String, String>,
        auth: &Auth,
    ) -> bool {
        let lower = name.to_ascii_lowercase();
        let (code, message, help) = if !crate::is_header_name(name)
            || NOT_FORWARDED.contains(&lower.as_str())
            || lower.starts_with("mcp-")
        {
            (
                codes::INVALID_VALUE,
                format!("`{}` cannot be forwarded", shorten(name)),
                "forward to a header of your own (`X-User-Id`), or `Authorization`",
            )
        } else if lower == "authorization" && *auth != Auth::default() {
            (
                codes::CONFLICT,
                "`Authorization` is moniker's own here: the server has `auth`".to_owned(),
                "forward the caller's token under another header, or remove `auth`",
            )
        } else if fixed.keys().any(|k| k.eq_ignore_ascii_case(name)) {
            (
                codes::CONFLICT,
                format!("`{}` is in `headers` too", shorten(name)),
                "keep it in one of `headers` and `forward`",
            )
        } else {
            return true;
        };
        self.error(code, message, hp, value.point(), Some(help.to_owned()));
        false
    }

    /// Where a forwarded header's value comes from: its one source (`None`, reported, when it
    /// has none, several or a wrong one).
    fn forward_source(&mut self, name: &str, hp: &[Seg<'_>], value: Slot<'_>) -> Option<Forward> {
        const HELP: &str = "write `X-User-Id: { claim: sub }`, `X-Tenant: { header: X-Tenant }` \
             or `Authorization: { access_token: true }`";
        let entry = self.fields(
            value,
            hp,
            Some(keys::FORWARD),
            "`{claim: NAME}`, `{header: NAME}` or `{access_token: true}`",
        );
        // A map of unknown keys only has had its errors.
        let unknown_only =
            entry.entries.is_empty() && matches!(&value.node.value, Value::Map(e) if !e.is_empty());
        if unknown_only {
            return None;
        }
        match (
            entry.get("claim"),
            entry.get("header"),
            entry.get("access_token"),
        ) {
            (Some(c), None, None) => self
                .string(&join(hp, Seg::Key("claim")), c)
                .map(Forward::Claim),
            (None, Some(h), None) => self
                .string(&join(hp, Seg::Key("header")), h)
                .map(Forward::Header),
            (None, None, Some(a)) => match self.boolean(&join(hp, Seg::Key("access_token")), a) {
                Some(true) => Some(Forward::AccessToken),
                _ => None,
            },
            _ => {
                self.error(
                    codes::INVALID_VALUE,
                    format!("`{}` needs one source", shorten(name)),
                    hp,
                    value.point(),
                    Some(HELP.to_owned()),
                );
                None
            }
        }
    }

    /// `protocol`: `2026-07-28` (stateless) or a 2025 version (the handshake, the default).
    fn protocol(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<bool> {
        let text = self.text(p, slot)?;
        match text.as_str() {
            "2026-07-28" => Some(true),
            "2024-11-05" | "2025-03-26" | "2025-06-18" | "2025-11-25" => Some(false),
            other => {
                self.error(
                    codes::INVALID_VALUE,
                    format!("unknown protocol version `{}`", shorten(other)),
                    p,
                    slot.point(),
                    Some("write `2026-07-28` for a stateless server, or leave `protocol` out for the 2025 handshake".to_owned()),
                );
                None
            }
        }
    }

    fn command(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<String> {
        let command = self.string(p, slot)?;
        if command.trim().is_empty() {
            self.error(
                codes::INVALID_VALUE,
                "`command` is empty",
                p,
                slot.point(),
                Some("name the program to run: `command: npx`".to_owned()),
            );
            return None;
        }
        Some(command)
    }

    pub(super) fn url(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<String> {
        let url = self.string(p, slot)?;
        let http = url.starts_with("http://") || url.starts_with("https://");
        if !http && !url.contains("${") {
            self.error(
                codes::INVALID_VALUE,
                format!("`{}` is not an http or https url", shorten(&url)),
                p,
                slot.point(),
                Some("write the full address: `url: http://127.0.0.1:9000/mcp`".to_owned()),
            );
            return None;
        }
        Some(url)
    }

    /// `true` is the server id, a text is the prefix itself.
    fn prefix(&mut self, p: &[Seg<'_>], slot: Slot<'_>, id: &str) -> Option<String> {
        match slot.scalar() {
            Some((_, ScalarKind::Bool(true))) => Some(id.to_owned()),
            Some((_, ScalarKind::Bool(false) | ScalarKind::Null)) => None,
            Some((text, ScalarKind::Str)) => match text.parse::<Name>() {
                Ok(_) => Some(text.to_owned()),
                Err(e) => {
                    self.error(
                        codes::INVALID_NAME,
                        format!("prefix `{}` {}", shorten(text), e.rule),
                        p,
                        slot.point(),
                        None,
                    );
                    None
                }
            },
            _ => {
                self.type_error("`true`, `false` or a prefix text", p, slot);
                None
            }
        }
    }

    /// `pass_env`: `all`, or a list of variable names.
    pub(super) fn pass_env<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> PassEnv {
        match slot.scalar() {
            Some(("all", ScalarKind::Str)) => return PassEnv::All,
            Some((_, ScalarKind::Str)) => {
                self.type_error("`all` or a list of variable names", p, slot);
                return PassEnv::default();
            }
            _ => {}
        }
        let names = self.strings_where(p, slot, |name| {
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            (!valid).then(|| {
                (
                    format!("`{}` is not an environment variable name", shorten(name)),
                    "write names such as `GITHUB_TOKEN`, or `pass_env: all`".to_owned(),
                )
            })
        });
        PassEnv::Names(names)
    }

    fn transport_type(&mut self, p: &[Seg<'_>], slot: Slot<'_>) -> Option<String> {
        let kind = self.string(p, slot)?;
        if TRANSPORT_TYPES.contains(&kind.as_str()) {
            return Some(kind);
        }
        let help = match did_you_mean(&kind, TRANSPORT_TYPES.iter().copied()) {
            Some(close) => format!("did you mean `{close}`?"),
            None => format!("use one of {}", list(TRANSPORT_TYPES)),
        };
        self.error(
            codes::INVALID_VALUE,
            format!("unknown server type `{}`", shorten(&kind)),
            p,
            slot.point(),
            Some(help),
        );
        None
    }

    /// Which transport: the presence of `command` or `url` decides; `type`, when given,
    /// must agree. Fields of the other transport are mistakes, not noise. `None` when there
    /// is no transport at all; else whether it is stdio, and whether the server is valid.
    fn transport(
        &mut self,
        sp: &[Seg<'_>],
        slot: Slot<'_>,
        fields: &Fields<'_>,
        id: &str,
        kind: Option<&str>,
    ) -> Option<(bool, bool)> {
        let field = |name: &'static str| join(sp, Seg::Key(name));
        let mut ok = true;
        let at = slot.key.unwrap_or(slot.node.span);
        let (has_command, has_url) = (fields.has("command"), fields.has("url"));
        let stdio = match (has_command, has_url) {
            (true, true) => {
                self.error(
                    codes::TRANSPORT,
                    format!("server `{id}` has both `command` and `url`"),
                    sp,
                    at,
                    Some(
                        "keep `command` to spawn a stdio server, or `url` to connect to an HTTP server"
                            .to_owned(),
                    ),
                );
                return None;
            }
            // `comand: npx` was reported as unknown with a did-you-mean: that is the error.
            (false, false) if fields.meant("command") || fields.meant("url") => return None,
            (false, false) => {
                let message = match kind {
                    Some("stdio") => format!("server `{id}` has `type: stdio` but no `command`"),
                    Some(k) => format!("server `{id}` has `type: {k}` but no `url`"),
                    None => format!("server `{id}` has neither `command` nor `url`"),
                };
                self.error(
                    codes::TRANSPORT,
                    message,
                    sp,
                    at,
                    Some(
                        "add `command: <program>` to spawn a stdio server, or `url: <address>` to connect to a Streamable HTTP server"
                            .to_owned(),
                    ),
                );
                return None;
            }
            (stdio, _) => stdio,
        };
        if let (Some(kind), Some(type_slot)) = (kind, fields.get("type")) {
            if (kind == "stdio") != stdio {
                let (has, needs) = if stdio {
                    ("`command`", "`url`")
                } else {
                    ("`url`", "`command`")
                };
                self.error(
                    codes::TRANSPORT,
                    format!("server `{id}` has `type: {kind}` and a {has}"),
                    &field("type"),
                    type_slot.point(),
                    Some(format!(
                        "`type: {kind}` needs {needs}; remove `type` or fix it"
                    )),
                );
                ok = false;
            }
        }
        ok &= self.foreign_fields(sp, fields, id, stdio);
        Some((stdio, ok))
    }

    /// Fields of the other transport (`headers` on a stdio server, `args` on an HTTP one),
    /// each reported; whether there were none.
    fn foreign_fields(
        &mut self,
        sp: &[Seg<'_>],
        fields: &Fields<'_>,
        id: &str,
        stdio: bool,
    ) -> bool {
        let mut ok = true;
        let (foreign, owner, other) = if stdio {
            (HTTP_ONLY, "HTTP servers (with `url`)", "`command`")
        } else {
            (STDIO_ONLY, "stdio servers (with `command`)", "`url`")
        };
        for name in foreign {
            if let Some(s) = fields.get(name) {
                self.error(
                    codes::TRANSPORT,
                    format!("`{name}` applies only to {owner}, and server `{id}` has {other}"),
                    &join(sp, Seg::Key(name)),
                    s.key.unwrap_or(s.node.span),
                    Some(format!("remove `{name}`")),
                );
                ok = false;
            }
        }
        ok
    }
}

/// Whether a variable steers what a process loads or runs (the dynamic linker's, a runtime's
/// options and paths, the shell's start files, where programs and the home are): a person's
/// secret may not be one.
fn steers_the_process(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "PATH",
        "HOME",
        "SHELL",
        "BASH_ENV",
        "ENV",
        "IFS",
        "CDPATH",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5OPT",
        "PERL5LIB",
        "RUBYOPT",
        "RUBYLIB",
        "JAVA_TOOL_OPTIONS",
        "CLASSPATH",
        "TMPDIR",
        "GIT_SSH_COMMAND",
        "GIT_EXEC_PATH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "NODE_EXTRA_CA_CERTS",
    ];
    const PREFIXES: &[&str] = &["LD_", "DYLD_", "PYTHON", "NPM_CONFIG_", "UV_", "PIP_"];
    let upper = name.to_ascii_uppercase();
    NAMES.contains(&upper.as_str()) || PREFIXES.iter().any(|p| upper.starts_with(p))
}
