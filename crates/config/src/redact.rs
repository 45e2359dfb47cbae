//! URLs as moniker shows them (logs, errors, `check`): a URL in a config may carry a secret in
//! its userinfo (`https://user:pass@host`) or its query (`?api_key=${KEY}`), and what is shown
//! ends up in logs and in front of people. The password and every query value become `***`;
//! the scheme, host, port, path and query keys stay, enough to tell which server it is.

/// `url` with its password and query values hidden. Text that is not a URL comes back as it
/// is, but for anything after `?`.
pub fn shown_url(url: &str) -> String {
    let (before_fragment, fragment) = match url.find('#') {
        Some(at) => (&url[..at], Some(&url[at + 1..])),
        None => (url, None),
    };
    let (base, query) = match before_fragment.find('?') {
        Some(at) => (&before_fragment[..at], Some(&before_fragment[at + 1..])),
        None => (before_fragment, None),
    };
    let mut out = String::with_capacity(url.len());
    match base.find("://") {
        Some(scheme_end) => {
            let rest = &base[scheme_end + 3..];
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(authority_end);
            out.push_str(&base[..scheme_end + 3]);
            match authority.rfind('@') {
                Some(at) => {
                    match authority[..at].split_once(':') {
                        Some((user, _)) => {
                            out.push_str(user);
                            out.push_str(":***");
                        }
                        None => out.push_str("***"),
                    }
                    out.push_str(&authority[at..]);
                }
                None => out.push_str(authority),
            }
            out.push_str(path);
        }
        None => out.push_str(base),
    }
    if let Some(query) = query {
        out.push('?');
        for (i, pair) in query.split('&').enumerate() {
            if i > 0 {
                out.push('&');
            }
            match pair.split_once('=') {
                Some((key, value)) if !value.is_empty() => {
                    out.push_str(key);
                    out.push_str("=***");
                }
                _ => out.push_str(pair),
            }
        }
    }
    if fragment.is_some_and(|f| !f.is_empty()) {
        out.push_str("#***");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_in_urls_are_never_shown() {
        for (url, shown) in [
            ("https://x/mcp", "https://x/mcp"),
            (
                "https://x/mcp?api_key=sk-1&v=2",
                "https://x/mcp?api_key=***&v=***",
            ),
            ("https://u:pw@x:8443/mcp", "https://u:***@x:8443/mcp"),
            ("https://tok@x/mcp?debug", "https://***@x/mcp?debug"),
            ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
            ("http://h/p?a=1#frag", "http://h/p?a=***#***"),
            ("http://h/p/a@b", "http://h/p/a@b"),
            ("not a url?secret=1", "not a url?secret=***"),
        ] {
            assert_eq!(shown_url(url), shown, "{url}");
        }
    }
}
