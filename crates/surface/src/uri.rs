//! Resource URIs against the prefixes a toolset reaches (`toolsets.<name>.resources`). A
//! prefix compared as text lets `file:///srv/docs/../etc/passwd`, `file:///srv/docs%2F..`
//! and `file:///srv/docs-private/x` (for the prefix `file:///srv/docs`) through. So both
//! sides are normalised first (RFC 3986 6.2.2: the scheme's case, percent-encodings of
//! unreserved characters decoded, the others' hex in upper case), a URI with a dot segment,
//! an encoded slash or a backslash in its path is reached by no prefix, and a prefix that does
//! not end with `/` or `:` matches whole path segments only.

/// Whether `uri` lies within `prefix`.
pub fn within(prefix: &str, uri: &str) -> bool {
    let (Some(prefix), Some(uri)) = (normalise(prefix), normalise(uri)) else {
        return false;
    };
    if suspicious(&uri) {
        return false;
    }
    if prefix.ends_with('/') || prefix.ends_with(':') {
        return uri.starts_with(&prefix);
    }
    match uri.strip_prefix(&prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with(['/', '?', '#']),
        None => false,
    }
}

/// The URI with its scheme in lower case and its percent-encodings normalised; `None` when it
/// has no scheme or a broken encoding.
fn normalise(uri: &str) -> Option<String> {
    let colon = uri.find(':')?;
    let scheme = &uri[..colon];
    let valid_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !valid_scheme {
        return None;
    }
    Some(format!(
        "{}{}",
        scheme.to_ascii_lowercase(),
        percent_normalised(&uri[colon..])?
    ))
}

/// `rest` with the percent-encodings of unreserved characters decoded and the others' hex in
/// upper case; every other character kept. `None` for a broken encoding.
fn percent_normalised(rest: &str) -> Option<String> {
    let mut out = String::with_capacity(rest.len());
    let mut chars = rest.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let hex = rest.get(at + 1..at + 3)?;
        let value = u8::from_str_radix(hex, 16).ok()?;
        chars.next();
        chars.next();
        if value.is_ascii_alphanumeric() || matches!(value, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(value));
        } else {
            out.push('%');
            out.push_str(&format!("{value:02X}"));
        }
    }
    Some(out)
}

/// A URI that a server could read as leaving where it seems to be: a `.` or `..` segment, an
/// encoded `/` or `\`, a raw `\`, anywhere in it. The query and fragment count too: a server
/// that takes a URI's text for a path reads `file:///srv/docs/?/../../etc/passwd` as
/// `/etc/passwd`, so where its path ends is not where the check may stop.
fn suspicious(uri: &str) -> bool {
    uri.contains('\\')
        || uri.contains("%2F")
        || uri.contains("%5C")
        || uri
            .split(['/', '?', '#', ';', '&', '='])
            .any(|segment| segment == "." || segment == "..")
}

#[cfg(test)]
mod tests {
    use super::within;

    #[test]
    fn a_uri_is_within_a_prefix_by_whole_segments_and_never_by_dots() {
        let docs = "file:///srv/docs";
        for inside in [
            "file:///srv/docs",
            "file:///srv/docs/a.md",
            "file:///srv/docs/sub/b.md",
            "FILE:///srv/docs/a.md",
            "file:///srv/%64ocs/a.md",
            "file:///srv/docs?x=1",
        ] {
            assert!(within(docs, inside), "{inside}");
        }
        for outside in [
            "file:///srv/docs-private/x",
            "file:///srv/docs/../etc/passwd",
            "file:///srv/docs/%2e%2e/etc/passwd",
            "file:///srv/docs/%2E%2E/etc/passwd",
            "file:///srv/docs/./a.md",
            "file:///srv/docs%2F..%2Fetc",
            "file:///srv/docs/..\\etc",
            "file:///srv/docs/a\\..\\..\\etc",
            "file:///srv/other",
            "http:///srv/docs/a",
            "no scheme",
            "file:///srv/docs/%zz",
            // Finding 11 of "Hold the boundary, round two": dots past `?` and `#`.
            "file:///srv/docs/?/../../../etc/passwd",
            "file:///srv/docs?x=/../../etc/passwd",
            "file:///srv/docs/#/../../etc/passwd",
            "file:///srv/docs/a?%2F..%2Fetc",
            "file:///srv/docs/a?q=..\\x",
        ] {
            assert!(!within(docs, outside), "{outside}");
        }
        assert!(within("memo:", "memo://anything/at/all"));
        assert!(within("memo://", "memo://x"));
        assert!(!within("memo://", "memo://x/../y"));
        assert!(within("file:///srv/dócs", "file:///srv/dócs/a"));
        assert!(!within("file:///srv/dócs", "file:///srv/dócs/%2e%2e/a"));
    }
}
