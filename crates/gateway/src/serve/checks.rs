//! The header checks of the HTTP transport: `Host` and `Origin` (DNS rebinding), bearer
//! tokens, `Accept`, `Content-Type` and `MCP-Protocol-Version`. Pure functions of header text.

use std::net::IpAddr;

use subtle::ConstantTimeEq;

use moniker_config::TokenConfig as Token;

/// Splits `host[:port]` (`[v6]:port` for IPv6) into the host, without brackets, and the port.
/// `None` when it is not a valid authority.
fn split_authority(text: &str) -> Option<(&str, Option<u16>)> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':')?),
        };
        (host, port)
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') => (host, Some(port)),
            Some(_) => return None, // an IPv6 address must be in brackets
            None => (text, None),
        }
    };
    if host.is_empty()
        || host
            .chars()
            .any(|c| c.is_whitespace() || c == '/' || c == '@')
    {
        return None;
    }
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((host, port))
}

/// `localhost` or a loopback IP address.
fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether a `Host` header value is a loopback name or address (any port), or in `allowed`
/// (`host` for any port, `host:port` for that port only). `None`: not a valid `Host` at all.
pub(super) fn host_allowed<'a>(
    value: &str,
    allowed: impl IntoIterator<Item = &'a String>,
) -> Option<bool> {
    let (host, port) = split_authority(value)?;
    if is_loopback_host(host) {
        return Some(true);
    }
    Some(allowed.into_iter().any(|entry| admits(entry, host, port)))
}

/// Whether an entry of the hosts allowed (`host`, or `host:port`) admits `host` at `port`.
fn admits(entry: &str, host: &str, port: Option<u16>) -> bool {
    match split_authority(entry) {
        Some((h, p)) => h.eq_ignore_ascii_case(host) && (p.is_none() || p == port),
        None => false,
    }
}

/// Whether an `Origin` header value is a loopback origin (`http://localhost:*`,
/// `http://127.0.0.1:*`, `http://[::1]:*`, or the same over https) or exactly one of `allowed`
/// (compared without case and without a trailing slash).
pub(super) fn origin_allowed(value: &str, allowed: &[String]) -> bool {
    let value = value.trim().trim_end_matches('/');
    let listed = |a: &String| a.trim().trim_end_matches('/').eq_ignore_ascii_case(value);
    allowed.iter().any(listed) || is_loopback_origin(value)
}

/// Whether an origin is `http` or `https` on a loopback host (any port).
fn is_loopback_origin(origin: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    (scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https"))
        && split_authority(authority).is_some_and(|(host, _)| is_loopback_host(host))
}

/// A 2026-07-28 request's routing headers against its body: `MCP-Protocol-Version` equals
/// the envelope's version, `Mcp-Method` the method, and `Mcp-Name` the name or URI of a
/// request that names one. Why not, when they disagree.
pub(super) fn routing_headers(
    headers: &axum::http::HeaderMap,
    request: &crate::message::Message,
) -> Result<(), String> {
    use crate::modern;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let Some(version) = modern::version_of(request) else {
        // `server/discover` without an envelope: nothing to compare.
        return Ok(());
    };
    if header("mcp-protocol-version") != Some(version.as_str()) {
        return Err(format!(
            "the MCP-Protocol-Version header does not match the request's `{}`",
            crate::message::PROTOCOL_VERSION_KEY
        ));
    }
    let method = request.method().unwrap_or_default();
    if header("mcp-method") != Some(method) {
        return Err("the Mcp-Method header does not match the request's method".to_owned());
    }
    if let Some(field) = modern::name_field(method) {
        let key = field.key();
        if let Some(named) = request.str_of(field) {
            if header("mcp-name")
                .map(crate::headers::decode_value)
                .as_deref()
                != Some(named.as_ref())
            {
                return Err(format!(
                    "the Mcp-Name header does not match the request's `{key}`"
                ));
            }
        }
    }
    Ok(())
}

/// What the `Authorization` header proved.
#[derive(Debug, Clone)]
pub(super) enum Auth {
    /// No tokens are configured: every client is let in.
    Open,
    /// The token the client presented, and its position in the list (for logs).
    Token { index: usize, token: Token },
    /// An access token of the identity provider (`http.auth`): who it says the caller is.
    User(std::sync::Arc<crate::identity::Identity>),
}

impl Auth {
    /// The position of the token, for `Token(i)` checks in tests.
    #[cfg(test)]
    fn index(&self) -> Option<usize> {
        match self {
            Self::Open | Self::User(_) => None,
            Self::Token { index, .. } => Some(*index),
        }
    }
}

/// The same client: the same token (wherever a config reload moved it in the list), or the
/// same identity.
impl PartialEq for Auth {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Open, Self::Open) => true,
            (Self::Token { token: a, .. }, Self::Token { token: b, .. }) => {
                a.token.as_bytes().ct_eq(b.token.as_bytes()).into()
            }
            // The same person through the same client, whichever of its tokens (a refresh
            // gives a new one).
            (Self::User(a), Self::User(b)) => {
                a.issuer == b.issuer && a.subject == b.subject && a.client_id == b.client_id
            }
            _ => false,
        }
    }
}

/// Why a client was not let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// No bearer token in the request.
    Missing,
    /// A bearer token that is none of ours.
    Invalid,
}

/// Checks `Authorization: Bearer <secret>` against every token, in constant time for each
/// (and without stopping at the first match, so that timing does not tell which matched).
pub(super) fn authenticate(header: Option<&[u8]>, tokens: &[Token]) -> Result<Auth, Refused> {
    if tokens.is_empty() {
        return Ok(Auth::Open);
    }
    let given = header.and_then(bearer).ok_or(Refused::Missing)?;
    find_token(given, tokens)
        .map(|(index, token)| Auth::Token {
            index,
            token: token.clone(),
        })
        .ok_or(Refused::Invalid)
}

/// The token of `tokens` whose secret is `secret`, and its position: each compared in
/// constant time, and all of them (so that timing does not tell which matched).
pub(super) fn find_token<'a>(secret: &[u8], tokens: &'a [Token]) -> Option<(usize, &'a Token)> {
    let mut found = None;
    for (i, token) in tokens.iter().enumerate() {
        let equal: bool = token.token.as_bytes().ct_eq(secret).into();
        if equal && found.is_none() {
            found = Some((i, token));
        }
    }
    found
}

/// The credentials of `Bearer <credentials>`; the scheme is case-insensitive.
pub(super) fn bearer(header: &[u8]) -> Option<&[u8]> {
    let header = header.trim_ascii();
    let (scheme, rest) = header.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || rest.first().is_none_or(|b| *b != b' ') {
        return None;
    }
    let credentials = rest.trim_ascii();
    (!credentials.is_empty()).then_some(credentials)
}

/// What a client's `Accept` header lets moniker answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Accept {
    pub json: bool,
    pub sse: bool,
}

impl Accept {
    /// No header accepts anything (RFC 9110); media ranges with `q=0` are refusals.
    pub(super) fn parse(header: Option<&str>) -> Self {
        let Some(header) = header else {
            return Self {
                json: true,
                sse: true,
            };
        };
        let mut accept = Self {
            json: false,
            sse: false,
        };
        for range in header.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or_default().trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            if refused {
                continue;
            }
            // Media types are compared without case, in place (no lower-cased copy a range).
            let is = |names: &[&str]| names.iter().any(|n| media.eq_ignore_ascii_case(n));
            if is(&["*/*"]) {
                accept.json = true;
                accept.sse = true;
            } else if is(&["application/json", "application/*"]) {
                accept.json = true;
            } else if is(&["text/event-stream", "text/*"]) {
                accept.sse = true;
            }
        }
        accept
    }
}

/// `application/json`, with any parameters (`; charset=utf-8`).
pub(super) fn is_json_content_type(header: Option<&str>) -> bool {
    header.is_some_and(|h| {
        h.split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .eq_ignore_ascii_case("application/json")
    })
}

/// The protocol versions a client may name in `MCP-Protocol-Version`: those moniker
/// negotiates. An absent header means 2025-03-26 (the spec's rule for old clients).
pub(super) fn protocol_version_supported(header: &str) -> bool {
    crate::session::PROTOCOL_VERSIONS.contains(&header.trim())
}

/// The value of the cookie `name` a request brought (the first of that name).
pub(super) fn cookie<'h>(headers: &'h axum::http::HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(secret: &str) -> Token {
        Token {
            token: secret.into(),
            toolset: None,
            name: None,
        }
    }

    #[test]
    fn hosts() {
        let none: Vec<String> = vec![];
        for ok in [
            "localhost",
            "localhost:8080",
            "LOCALHOST:1",
            "127.0.0.1",
            "127.0.0.1:3000",
            "127.1.2.3:9",
            "[::1]",
            "[::1]:8080",
        ] {
            assert_eq!(host_allowed(ok, &none), Some(true), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "10.0.0.1:80",
            "localhost.evil",
        ] {
            assert_eq!(host_allowed(bad, &none), Some(false), "{bad}");
        }
        for invalid in ["", "::1", "[::1", "host:port", "a b", "x/y"] {
            assert_eq!(host_allowed(invalid, &none), None, "{invalid}");
        }
        let allowed = vec!["mcp.example".to_owned(), "box.lan:9000".to_owned()];
        assert_eq!(host_allowed("mcp.example:1234", &allowed), Some(true));
        assert_eq!(host_allowed("MCP.example", &allowed), Some(true));
        assert_eq!(host_allowed("box.lan:9000", &allowed), Some(true));
        assert_eq!(host_allowed("box.lan:9001", &allowed), Some(false));
    }

    #[test]
    fn origins() {
        let none: Vec<String> = vec![];
        for ok in [
            "http://localhost:6274",
            "http://localhost",
            "http://127.0.0.1:3000",
            "https://[::1]:8443",
            "http://localhost:6274/",
        ] {
            assert!(origin_allowed(ok, &none), "{ok}");
        }
        for bad in [
            "http://evil.example",
            "http://localhost.evil.example",
            "null",
            "file://localhost",
            "localhost",
        ] {
            assert!(!origin_allowed(bad, &none), "{bad}");
        }
        let allowed = vec!["https://app.example".to_owned()];
        assert!(origin_allowed("https://app.example", &allowed));
        assert!(!origin_allowed("https://app.example:444", &allowed));
        assert!(!origin_allowed("http://app.example", &allowed));
    }

    #[test]
    fn tokens() {
        assert_eq!(authenticate(None, &[]).map(|a| a.index()), Ok(None));
        let tokens = [token("alpha"), token("beta")];
        assert_eq!(authenticate(None, &tokens), Err(Refused::Missing));
        assert_eq!(
            authenticate(Some(b"Basic abc"), &tokens),
            Err(Refused::Missing)
        );
        assert_eq!(
            authenticate(Some(b"Bearer"), &tokens),
            Err(Refused::Missing)
        );
        assert_eq!(
            authenticate(Some(b"Bearer gamma"), &tokens),
            Err(Refused::Invalid)
        );
        assert_eq!(
            authenticate(Some(b"Bearer alph"), &tokens),
            Err(Refused::Invalid)
        );
        assert_eq!(
            authenticate(Some(b"Bearer beta"), &tokens).map(|a| a.index()),
            Ok(Some(1))
        );
        assert_eq!(
            authenticate(Some(b"bearer  alpha "), &tokens).map(|a| a.index()),
            Ok(Some(0))
        );
    }

    #[test]
    fn accept_header() {
        let both = Accept {
            json: true,
            sse: true,
        };
        assert_eq!(Accept::parse(None), both);
        assert_eq!(
            Accept::parse(Some("application/json, text/event-stream")),
            both
        );
        assert_eq!(Accept::parse(Some("*/*")), both);
        assert_eq!(
            Accept::parse(Some("text/event-stream")),
            Accept {
                json: false,
                sse: true
            }
        );
        assert_eq!(
            Accept::parse(Some("application/json;q=0.9, text/event-stream;q=0")),
            Accept {
                json: true,
                sse: false
            }
        );
        assert_eq!(
            Accept::parse(Some("text/html")),
            Accept {
                json: false,
                sse: false
            }
        );
    }

    #[test]
    fn content_types() {
        assert!(is_json_content_type(Some("application/json")));
        assert!(is_json_content_type(Some(
            "Application/JSON; charset=utf-8"
        )));
        assert!(!is_json_content_type(Some("text/plain")));
        assert!(!is_json_content_type(None));
    }

    #[test]
    fn versions() {
        for v in ["2025-03-26", "2025-06-18", "2025-11-25"] {
            assert!(protocol_version_supported(v));
        }
        assert!(!protocol_version_supported("1999-01-01"));
        assert!(!protocol_version_supported(""));
    }
}
