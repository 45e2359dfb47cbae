//! The words every part of the naming core shares: what is named ([`Kind`]) and where in the
//! config a thing is ([`Seg`], [`path`]). A leaf: it uses nothing of the crate.

/// What the pipeline names: tools and prompts go through the same code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Tool,
    Prompt,
}

impl Kind {
    pub fn section(self) -> &'static str {
        match self {
            Self::Tool => "tools",
            Self::Prompt => "prompts",
        }
    }

    pub fn noun(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Prompt => "prompt",
        }
    }
}

/// One step of a [`path`] into the config.
#[derive(Debug, Clone, Copy)]
pub enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// The dotted path of a config entry, as diagnostics print it and as the config crate keys its
/// spans: `tools."bridge/get.info".aliases[0]`. Keys that are not plain words are quoted.
pub fn path(segs: &[Seg<'_>]) -> String {
    let mut out = String::new();
    for seg in segs {
        match seg {
            Seg::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                let plain = !key.is_empty()
                    && key
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                if plain {
                    out.push_str(key);
                } else {
                    out.push('"');
                    for c in key.chars() {
                        if c == '"' || c == '\\' {
                            out.push('\\');
                        }
                        out.push(c);
                    }
                    out.push('"');
                }
            }
            Seg::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_quote_keys_that_are_not_words() {
        use Seg::*;
        assert_eq!(
            path(&[Key("servers"), Key("github"), Key("args")]),
            "servers.github.args"
        );
        assert_eq!(
            path(&[
                Key("tools"),
                Key("bridge/get.info"),
                Key("aliases"),
                Index(0)
            ]),
            "tools.\"bridge/get.info\".aliases[0]"
        );
        assert_eq!(path(&[Key("a\"b")]), "\"a\\\"b\"");
    }
}
