//! Diagnostics: what the naming pipeline found wrong, with enough to act on it.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Error,
    Warning,
}

/// One problem found while building a surface. Errors make the surface invalid; warnings do
/// not. `config_path` points at the config entry involved (a [`crate::vocab::path`]) so that
/// the CLI can show the config's source there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Diagnostic {
    pub severity: Severity,
    /// A stable code: `naming::duplicate`, `naming::profile`, ...
    pub code: &'static str,
    pub message: String,
    pub config_path: Option<String>,
    /// Facts that explain the message, one per line (`` `search` from server `brave` ``).
    pub notes: Vec<String>,
    /// What to do, when known: a did-you-mean or a ready-to-paste YAML fix.
    pub help: Option<String>,
    /// The fix of `help` as data, when it is config entries: the CLI merges those of every
    /// diagnostic into one block (several blocks pasted one after the other would repeat a
    /// key).
    pub fix: Fix,
    /// For a duplicate: the listed items whose own names claim the name (not a name the
    /// config wrote for them). A running gateway serves none of them until the config decides.
    pub contested: Vec<Contested>,
}

/// A listed item whose own name another claims too.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Contested {
    /// `tools` or `prompts`.
    pub section: &'static str,
    pub server: String,
    /// The name the server lists it by.
    pub origin: String,
    /// The name it claims (an exposed name; an override's key, for an ambiguous one).
    pub name: String,
}

/// Config entries that resolve a diagnostic.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fix {
    /// Overrides that give items new names.
    pub renames: Vec<Rename>,
    /// The servers on each of which `prefix: true` alone resolves every error of the build
    /// (set on each error, and only when there are two servers involved and it does).
    pub prefix: Vec<String>,
}

/// An override that renames one item: `<section>: { <server>/<origin>: { name: <name> } }`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rename {
    /// `tools` or `prompts`.
    pub section: &'static str,
    pub server: String,
    /// The name the server lists it by.
    pub origin: String,
    pub name: String,
}

impl Rename {
    /// The override's key, quoted when YAML needs it: `github/search`.
    pub fn key(&self) -> String {
        yaml_scalar(&format!("{}/{}", self.server, self.origin))
    }

    /// Its line under the section: `github/search: { name: github_search }`.
    pub fn yaml(&self) -> String {
        format!("{}: {{ name: {} }}", self.key(), yaml_scalar(&self.name))
    }
}

impl Diagnostic {
    pub fn error(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            code,
            message: message.into(),
            config_path: None,
            notes: Vec::new(),
            help: None,
            fix: Fix::default(),
            contested: Vec::new(),
        }
    }

    pub fn warning(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(code, message)
        }
    }

    pub fn at(mut self, config_path: impl Into<String>) -> Self {
        self.config_path = Some(config_path.into());
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// `renames` as the fix, and as the help: a ready-to-paste block.
    pub fn with_fix(mut self, renames: Vec<Rename>) -> Self {
        self.help = Some(fix_help(&renames));
        self.fix.renames = renames;
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// The help of a fix: `renames` as a block to add to the config, by section.
fn fix_help(renames: &[Rename]) -> String {
    let mut help = "add to moniker.yaml:".to_owned();
    let mut section = "";
    for rename in renames {
        if rename.section != section {
            section = rename.section;
            help.push_str(&format!("\n  {section}:"));
        }
        help.push_str(&format!("\n    {}", rename.yaml()));
    }
    help
}

/// `text` as YAML reads it back as the same string: unquoted when it can be
/// ([`is_plain_yaml`]), else quoted (a JSON string is a YAML one).
pub(crate) fn yaml_scalar(text: &str) -> String {
    if is_plain_yaml(text) {
        text.to_owned()
    } else {
        serde_json::Value::String(text.to_owned()).to_string()
    }
}

/// Whether YAML reads `text` unquoted as the string it is: it holds letters, digits and `_-/.`
/// only, and is no word or number YAML gives another type (`true`, `no`, `null`, `~`, `12`,
/// `-1.5`, `.inf`: YAML 1.1's words too, which some readers still follow).
pub(crate) fn is_plain_yaml(text: &str) -> bool {
    const TYPED: &[&str] = &[
        "true", "false", "yes", "no", "y", "n", "on", "off", "null", ".inf", "-.inf", "+.inf",
        ".nan",
    ];
    let plain = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'/' | b'.');
    let number = |t: &str| {
        let t = t.trim_start_matches(['-', '+', '.']);
        t.starts_with(|c: char| c.is_ascii_digit())
    };
    // `-` alone begins a list.
    !text.is_empty()
        && text != "-"
        && text.bytes().all(plain)
        && !number(text)
        && !TYPED.contains(&text.to_ascii_lowercase().as_str())
}

/// Plain text, for logs and tests; the CLI renders richer reports.
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{level}[{}]: {}", self.code, self.message)?;
        if let Some(path) = &self.config_path {
            write!(f, "\n  at: {path}")?;
        }
        for note in &self.notes {
            write!(f, "\n  - {note}")?;
        }
        if let Some(help) = &self.help {
            write!(f, "\n  help: {}", help.replace('\n', "\n    "))?;
        }
        Ok(())
    }
}

/// The closest candidate to `input`, for a did-you-mean.
pub fn did_you_mean<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(input, c), c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// `text` cut to 40 characters (with `…`), for a message that quotes what a user wrote.
pub fn short(text: &str) -> String {
    const MAX: usize = 40;
    if text.chars().count() <= MAX {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(MAX).collect();
    out.push('…');
    out
}
