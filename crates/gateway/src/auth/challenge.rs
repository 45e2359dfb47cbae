//! The pure parts of OAuth discovery: what a `WWW-Authenticate` challenge asks for, where
//! metadata may live (RFC 9728, RFC 8414, OpenID Connect Discovery), which scope to ask for,
//! and whether a Protected Resource Metadata document speaks for the server's URL.

use reqwest::Url;

/// A `Bearer` challenge (RFC 6750 §3, RFC 9728 §5.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Challenge {
    pub error: Option<String>,
    pub scope: Option<String>,
    pub resource_metadata: Option<String>,
}

impl Challenge {
    /// The `Bearer` challenge of a `WWW-Authenticate` value, if it has one. Parameters are
    /// `name=token` or `name="quoted \" string"`, separated by commas; other schemes' are
    /// skipped.
    pub(crate) fn parse(header: &str) -> Option<Self> {
        let mut rest = header;
        let mut in_bearer = false;
        let mut found = None::<Self>;
        loop {
            rest = rest.trim_start_matches([' ', '\t', ',']);
            if rest.is_empty() {
                break;
            }
            // A token: a scheme (followed by space or end) or a parameter name (followed by '=').
            let end = rest
                .find(|c: char| c == '=' || c == ',' || c.is_whitespace())
                .unwrap_or(rest.len());
            let token = &rest[..end];
            let after = rest[end..].trim_start_matches([' ', '\t']);
            if let Some(value) = after.strip_prefix('=') {
                let value = value.trim_start_matches([' ', '\t']);
                let (value, remainder) = if let Some(quoted) = value.strip_prefix('"') {
                    unquote(quoted)
                } else {
                    let end = value.find([',', ' ', '\t']).unwrap_or(value.len());
                    (value[..end].to_owned(), &value[end..])
                };
                rest = remainder;
                if in_bearer {
                    let challenge = found.get_or_insert_with(Self::default);
                    match token.to_ascii_lowercase().as_str() {
                        "error" => challenge.error = Some(value),
                        "scope" => challenge.scope = Some(value),
                        "resource_metadata" => challenge.resource_metadata = Some(value),
                        _ => {}
                    }
                }
            } else {
                // A new scheme.
                if found.is_some() && in_bearer {
                    break;
                }
                in_bearer = token.eq_ignore_ascii_case("bearer");
                if in_bearer {
                    found.get_or_insert_with(Self::default);
                }
                rest = &rest[end..];
            }
        }
        found
    }

    pub(crate) fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// A quoted string's text (after the opening quote) and what follows its closing quote.
fn unquote(text: &str) -> (String, &str) {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                if let Some((_, next)) = chars.next() {
                    out.push(next);
                }
            }
            '"' => return (out, &text[i + 1..]),
            c => out.push(c),
        }
    }
    (out, "")
}

/// Where the server's Protected Resource Metadata may be, in the order to try: the URL the
/// challenge named, then the well-known URI with the server's path inserted, then the
/// well-known URI at the root (RFC 9728 §3.1; MCP authorization, "Protected Resource
/// Metadata Discovery").
pub(crate) fn resource_metadata_urls(server: &Url, named: Option<&str>) -> Vec<Url> {
    let mut urls = Vec::new();
    if let Some(url) = named.and_then(|n| server.join(n).ok()) {
        urls.push(url);
    }
    let path = server.path().trim_end_matches('/');
    if !path.is_empty() {
        urls.extend(at(
            server,
            &format!("/.well-known/oauth-protected-resource{path}"),
        ));
    }
    urls.extend(at(server, "/.well-known/oauth-protected-resource"));
    urls.dedup();
    urls
}

/// Where an authorization server's metadata may be, in the order to try (MCP authorization,
/// "Authorization Server Metadata Discovery"): for an issuer with a path, OAuth metadata
/// with the path inserted, OpenID configuration with the path inserted, then appended; for
/// one without, OAuth metadata then OpenID configuration.
pub(crate) fn authorization_server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let candidates = if path.is_empty() {
        vec![
            "/.well-known/oauth-authorization-server".to_owned(),
            "/.well-known/openid-configuration".to_owned(),
        ]
    } else {
        vec![
            format!("/.well-known/oauth-authorization-server{path}"),
            format!("/.well-known/openid-configuration{path}"),
            format!("{path}/.well-known/openid-configuration"),
        ]
    };
    candidates.iter().filter_map(|p| at(issuer, p)).collect()
}

/// `path` on `base`'s origin.
fn at(base: &Url, path: &str) -> Option<Url> {
    let mut url = base.clone();
    url.set_query(None);
    url.set_fragment(None);
    url.set_path(path);
    Some(url)
}

/// The server's URL as a resource indicator (RFC 8707): no fragment.
pub(crate) fn resource_of(server: &Url) -> String {
    let mut url = server.clone();
    url.set_fragment(None);
    url.to_string()
}

/// Whether a Protected Resource Metadata document's `resource` speaks for `server`: the same
/// origin, and a path that is the server's or a parent of it (whole segments).
pub(crate) fn resource_matches(server: &Url, resource: &str) -> bool {
    let Ok(resource) = Url::parse(resource) else {
        return false;
    };
    resource.origin() == server.origin() && path_within(server.path(), resource.path())
}

/// Whether `path` is `parent` or below it, by whole segments (trailing `/`s aside).
fn path_within(path: &str, parent: &str) -> bool {
    let (path, parent) = (path.trim_end_matches('/'), parent.trim_end_matches('/'));
    path == parent || path.starts_with(&format!("{parent}/"))
}

/// Two issuer identifiers are the same one (a trailing slash aside).
pub(crate) fn same_issuer(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// The scope to ask for (MCP authorization, "Scope Selection Strategy"): what the user set,
/// else the challenge's, else the resource's `scopes_supported`, else none; with what was
/// granted before (a step-up keeps what the token had).
pub(crate) fn choose_scope(
    configured: Option<&str>,
    challenged: Option<&str>,
    supported: Option<&[String]>,
    granted: Option<&str>,
) -> Option<String> {
    let wanted = configured
        .map(str::to_owned)
        .or_else(|| challenged.map(str::to_owned))
        .or_else(|| supported.filter(|s| !s.is_empty()).map(|s| s.join(" ")));
    let joined = union(
        granted.unwrap_or_default(),
        wanted.as_deref().unwrap_or_default(),
    );
    (!joined.is_empty()).then_some(joined)
}

/// The scopes of `a` then those of `b` not in `a`, space-separated.
pub(crate) fn union(a: &str, b: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for scope in a.split_whitespace().chain(b.split_whitespace()) {
        if !out.contains(&scope) {
            out.push(scope);
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).expect("a url")
    }

    #[test]
    fn challenges_are_read_with_quoted_and_bare_values() {
        let c = Challenge::parse(
            r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp", error_description="say \"no\"""#,
        )
        .expect("a bearer challenge");
        assert!(c.insufficient_scope());
        assert_eq!(c.scope.as_deref(), Some("mcp:basic mcp:write"));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://h/.well-known/oauth-protected-resource/mcp")
        );
        let c = Challenge::parse("Bearer realm=example,error=invalid_token").expect("bearer");
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(Challenge::parse("Bearer"), Some(Challenge::default()));
        assert_eq!(Challenge::parse(r#"Basic realm="x""#), None);
        let c = Challenge::parse(r#"Basic realm="x", Bearer scope="a""#).expect("bearer");
        assert_eq!(c.scope.as_deref(), Some("a"));
        assert_eq!(Challenge::parse(""), None);
    }

    #[test]
    fn resource_metadata_is_looked_for_in_the_spec_order() {
        let server = url("https://h.example/tenant/mcp?x=1");
        let urls: Vec<String> = resource_metadata_urls(&server, Some("/custom/prm.json"))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            urls,
            [
                "https://h.example/custom/prm.json",
                "https://h.example/.well-known/oauth-protected-resource/tenant/mcp",
                "https://h.example/.well-known/oauth-protected-resource",
            ]
        );
        let root: Vec<String> = resource_metadata_urls(&url("http://h:8/"), None)
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(root, ["http://h:8/.well-known/oauth-protected-resource"]);
    }

    #[test]
    fn authorization_server_metadata_is_looked_for_in_the_spec_order() {
        let with_path: Vec<String> =
            authorization_server_metadata_urls(&url("https://as.example/tenant1"))
                .iter()
                .map(Url::to_string)
                .collect();
        assert_eq!(
            with_path,
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/openid-configuration/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration",
            ]
        );
        let root: Vec<String> = authorization_server_metadata_urls(&url("https://as.example"))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            root,
            [
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn a_resource_speaks_for_its_own_urls_only() {
        let server = url("http://127.0.0.1:9/mcp");
        assert!(resource_matches(&server, "http://127.0.0.1:9/mcp"));
        assert!(resource_matches(&server, "http://127.0.0.1:9/"));
        assert!(resource_matches(&server, "http://127.0.0.1:9"));
        assert!(!resource_matches(&server, "https://evil.example.com/mcp"));
        assert!(!resource_matches(&server, "http://127.0.0.1:9/mc"));
        assert!(!resource_matches(&server, "http://127.0.0.1:10/mcp"));
        assert!(!resource_matches(&server, "not a url"));
    }

    #[test]
    fn scope_comes_from_the_config_the_challenge_or_the_resource() {
        let supported = ["a".to_owned(), "b".to_owned()];
        assert_eq!(
            choose_scope(Some("x"), Some("c"), Some(&supported), None).as_deref(),
            Some("x")
        );
        assert_eq!(
            choose_scope(None, Some("c"), Some(&supported), None).as_deref(),
            Some("c")
        );
        assert_eq!(
            choose_scope(None, None, Some(&supported), None).as_deref(),
            Some("a b")
        );
        assert_eq!(choose_scope(None, None, None, None), None);
        assert_eq!(choose_scope(None, None, Some(&[]), None), None);
        assert_eq!(
            choose_scope(None, Some("mcp:basic mcp:write"), None, Some("mcp:basic")).as_deref(),
            Some("mcp:basic mcp:write")
        );
        assert_eq!(union("a b", "b c"), "a b c");
    }
}
