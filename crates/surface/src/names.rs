//! Validated names: server ids, tags, tool names, and the name profiles that exposed names
//! must fit.

use std::fmt;
use std::str::FromStr;

/// Why a name was refused. The message states the rule, so a user can act on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} `{value}` {rule}")]
pub struct InvalidName {
    pub what: &'static str,
    pub value: String,
    pub rule: String,
}

impl InvalidName {
    fn new(what: &'static str, value: &str, rule: impl Into<String>) -> Self {
        Self {
            what,
            value: value.to_owned(),
            rule: rule.into(),
        }
    }
}

macro_rules! string_newtype {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<&str> for $name {
            type Error = InvalidName;
            fn try_from(value: &str) -> Result<Self, InvalidName> {
                value.parse()
            }
        }

        impl TryFrom<String> for $name {
            type Error = InvalidName;
            fn try_from(value: String) -> Result<Self, InvalidName> {
                value.parse()
            }
        }
    };
}

string_newtype!(
    /// The key of a server in the config (`servers.<id>`). It qualifies override keys
    /// (`<id>/<origin name>`), so it may not contain `/`.
    ServerId
);

string_newtype!(
    /// A tag: `^[a-z0-9][a-z0-9-]*[a-z0-9]$`.
    Tag
);

string_newtype!(
    /// A name written in the config (an override's `name`, an alias): the widest profile
    /// (`spec`). Whether it fits the configured profile is checked when the surface is built.
    Name
);

pub const SERVER_ID_RULE: &str =
    "must be 1 to 64 characters of letters, digits, `_`, `-` and `.` (no `/`, no spaces)";
pub const TAG_RULE: &str = "must match `^[a-z0-9][a-z0-9-]*[a-z0-9]$` (lowercase letters, digits and inner hyphens, at least 2 characters)";

/// Whether `s` is a server id: [`SERVER_ID_RULE`].
fn is_server_id(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

impl FromStr for ServerId {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<Self, InvalidName> {
        if is_server_id(s) {
            Ok(Self(s.to_owned()))
        } else {
            Err(InvalidName::new("server id", s, SERVER_ID_RULE))
        }
    }
}

/// Whether `s` is a tag: [`TAG_RULE`].
fn is_tag(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    b.len() >= 2 && edge(b[0]) && edge(b[b.len() - 1]) && b.iter().all(|&c| edge(c) || c == b'-')
}

impl FromStr for Tag {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<Self, InvalidName> {
        if is_tag(s) {
            Ok(Self(s.to_owned()))
        } else {
            Err(InvalidName::new("tag", s, TAG_RULE))
        }
    }
}

impl FromStr for Name {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<Self, InvalidName> {
        match ProfileKind::Spec.check(s, 0) {
            Ok(()) => Ok(Self(s.to_owned())),
            Err(rule) => Err(InvalidName::new("name", s, rule)),
        }
    }
}

/// The character set and length that exposed names must fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProfileKind {
    /// `^[A-Za-z0-9_.-]{1,128}$`: what MCP 2025-11-25 allows.
    Spec,
    /// `^[A-Za-z0-9_-]{1,64}$`: what the Anthropic and OpenAI APIs and Claude Desktop accept.
    #[default]
    Portable,
}

impl ProfileKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Spec => "spec",
            Self::Portable => "portable",
        }
    }

    pub fn max_len(self) -> usize {
        match self {
            Self::Spec => 128,
            Self::Portable => 64,
        }
    }

    fn allows(self, b: u8) -> bool {
        b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (self == Self::Spec && b == b'.')
    }

    /// `Ok` when `name` fits, else the rule it breaks.
    fn check(self, name: &str, prefix_budget: usize) -> Result<(), String> {
        let max = self.max_len().saturating_sub(prefix_budget);
        let chars = match self {
            Self::Spec => "letters, digits, `_`, `-` and `.`",
            Self::Portable => "letters, digits, `_` and `-`",
        };
        if name.is_empty() {
            return Err("is empty".to_owned());
        }
        if let Some(bad) = name.bytes().find(|&b| !self.allows(b)) {
            let shown = if bad.is_ascii_graphic() {
                format!("`{}`", bad as char)
            } else {
                "a space or non-ASCII character".to_owned()
            };
            return Err(format!(
                "contains {shown}: the `{}` profile allows only {chars}",
                self.as_str()
            ));
        }
        if name.len() > max {
            let budget = if prefix_budget > 0 {
                format!(
                    " ({} less a client prefix budget of {prefix_budget})",
                    self.max_len()
                )
            } else {
                String::new()
            };
            return Err(format!(
                "is {} characters long: the `{}` profile allows at most {max}{budget}",
                name.len(),
                self.as_str()
            ));
        }
        Ok(())
    }
}

impl FromStr for ProfileKind {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<Self, InvalidName> {
        match s {
            "spec" => Ok(Self::Spec),
            "portable" => Ok(Self::Portable),
            _ => Err(InvalidName::new(
                "profile",
                s,
                "is not a name profile: use `portable` or `spec`",
            )),
        }
    }
}

/// A name profile, with room left for the prefix a client puts before every tool name
/// (Claude Code adds `mcp__<server>__`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Profile {
    pub kind: ProfileKind,
    pub prefix_budget: usize,
}

impl Profile {
    /// `Ok` when `name` fits the profile, else the rule it breaks, as a sentence fragment
    /// (`contains `.`: the `portable` profile allows only ...`).
    pub fn check(&self, name: &str) -> Result<(), String> {
        self.kind.check(name, self.prefix_budget)
    }

    pub fn max_len(&self) -> usize {
        self.kind.max_len().saturating_sub(self.prefix_budget)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_follow_the_rule() {
        for good in ["git", "pull-request", "code-review", "v2", "a1"] {
            assert!(good.parse::<Tag>().is_ok(), "{good}");
        }
        for bad in ["Git", "pull request", "-git", "git_pull", "git-", "g", ""] {
            let err = bad.parse::<Tag>().expect_err(bad);
            assert!(
                err.to_string().contains("^[a-z0-9][a-z0-9-]*[a-z0-9]$"),
                "{err}"
            );
        }
    }

    #[test]
    fn server_ids_have_no_slash() {
        assert!("github-custom".parse::<ServerId>().is_ok());
        assert!("my.server_2".parse::<ServerId>().is_ok());
        for bad in ["a/b", "", "a b", "x".repeat(65).as_str()] {
            assert!(bad.parse::<ServerId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn profiles() {
        let portable = Profile::default();
        assert!(portable.check("get_pr_info").is_ok());
        assert!(portable.check(&"a".repeat(64)).is_ok());
        let err = portable.check(&"a".repeat(65)).unwrap_err();
        assert!(err.contains("at most 64"), "{err}");
        let err = portable.check("a.b").unwrap_err();
        assert!(err.contains("`.`") && err.contains("portable"), "{err}");
        let spec = Profile {
            kind: ProfileKind::Spec,
            prefix_budget: 0,
        };
        assert!(spec.check("a.b").is_ok());
        assert!(spec.check(&"a".repeat(128)).is_ok());
        assert!(spec.check(&"a".repeat(129)).is_err());
        let budget = Profile {
            kind: ProfileKind::Portable,
            prefix_budget: 20,
        };
        let err = budget.check(&"a".repeat(45)).unwrap_err();
        assert!(
            err.contains("at most 44") && err.contains("budget of 20"),
            "{err}"
        );
        assert!(portable.check("").is_err());
        assert!(portable.check("é").unwrap_err().contains("non-ASCII"));
    }

    #[test]
    fn names_are_case_sensitive_values() {
        let a: Name = "discover_goals".parse().unwrap();
        let b: Name = "Discover_Goals".parse().unwrap();
        assert_ne!(a, b);
        assert!("has space".parse::<Name>().is_err());
    }
}
