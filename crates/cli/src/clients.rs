//! The MCP clients a person already has, and where each keeps its servers on this platform:
//! what `moniker install`, `uninstall` and `doctor` read and write.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

/// The key a client's entry for moniker has.
pub(crate) const ENTRY: &str = "moniker";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Client {
    /// Claude Desktop: `claude_desktop_config.json` in the user config dir's `Claude`.
    ClaudeDesktop,
    /// Claude Code: `~/.claude.json` (or in `$CLAUDE_CONFIG_DIR`), its user-scope servers.
    ClaudeCode,
    /// Cursor: `~/.cursor/mcp.json`.
    Cursor,
    /// VS Code: the user profile's `mcp.json` in the user config dir's `Code/User`.
    #[value(name = "vscode", alias = "vs-code", alias = "code")]
    VsCode,
}

impl Client {
    pub(crate) const ALL: [Client; 4] = [
        Client::ClaudeDesktop,
        Client::ClaudeCode,
        Client::Cursor,
        Client::VsCode,
    ];

    /// How the command line names it.
    pub(crate) fn id(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "claude-desktop",
            Client::ClaudeCode => "claude-code",
            Client::Cursor => "cursor",
            Client::VsCode => "vscode",
        }
    }

    pub(crate) fn title(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "Claude Desktop",
            Client::ClaudeCode => "Claude Code",
            Client::Cursor => "Cursor",
            Client::VsCode => "VS Code",
        }
    }

    /// The client's own config file on this platform (`None`: the platform has no home or
    /// config dir).
    pub(crate) fn file(self) -> Option<PathBuf> {
        match self {
            Client::ClaudeDesktop => {
                dirs::config_dir().map(|d| d.join("Claude").join("claude_desktop_config.json"))
            }
            Client::ClaudeCode => match std::env::var_os("CLAUDE_CONFIG_DIR") {
                Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir).join(".claude.json")),
                _ => dirs::home_dir().map(|h| h.join(".claude.json")),
            },
            Client::Cursor => dirs::home_dir().map(|h| h.join(".cursor").join("mcp.json")),
            Client::VsCode => {
                dirs::config_dir().map(|d| d.join("Code").join("User").join("mcp.json"))
            }
        }
    }

    /// The top-level key of the client's servers.
    pub(crate) fn servers_key(self) -> &'static str {
        match self {
            Client::VsCode => "servers",
            _ => "mcpServers",
        }
    }

    /// The entry that makes the client run `launch serve -c config`. Claude Code and VS Code
    /// write a `type` in every entry; the others have none.
    pub(crate) fn entry(self, launch: &Launch, config: &Path) -> Value {
        let (command, mut args) = launch.command();
        args.extend([
            "serve".to_owned(),
            "-c".to_owned(),
            config.display().to_string(),
        ]);
        let mut entry = Map::new();
        if matches!(self, Client::ClaudeCode | Client::VsCode) {
            entry.insert("type".to_owned(), json!("stdio"));
        }
        entry.insert("command".to_owned(), json!(command));
        entry.insert("args".to_owned(), json!(args));
        Value::Object(entry)
    }

    /// The variable references the client fills in that moniker reads differently:
    /// Cursor's and VS Code's `${env:NAME}` is moniker's `${NAME}`, VS Code's `${userHome}`
    /// is `${HOME}`. Any other `${...}` of theirs (`${input:...}`, `${workspaceFolder}`) only
    /// the client can fill: `Err` with it.
    pub(crate) fn translate(self, text: &str) -> Result<String, String> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let Some(end) = rest[start..].find('}') else {
                return Err(rest[start..].to_owned());
            };
            let inside = &rest[start + 2..start + end];
            let plain = |name: &str| {
                !name.is_empty()
                    && !name.starts_with(|c: char| c.is_ascii_digit())
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            };
            let translated = match (self, inside.strip_prefix("env:")) {
                (Client::Cursor | Client::VsCode, Some(name)) if plain(name) => {
                    format!("${{{name}}}")
                }
                (Client::Cursor | Client::VsCode, None) if inside == "userHome" => {
                    "${HOME}".to_owned()
                }
                // Their other variables (`${workspaceFolder}`, `${input:…}`) only they fill.
                (Client::Cursor | Client::VsCode, None) => return Err(format!("${{{inside}}}")),
                // Claude Code expands `${VAR}` and `${VAR:-default}` as moniker does.
                (Client::ClaudeCode, None)
                    if plain(inside.split(":-").next().unwrap_or_default()) =>
                {
                    format!("${{{inside}}}")
                }
                // Claude Desktop expands nothing: its `${X}` is text, which moniker would
                // expand, and has no way to write.
                _ => return Err(format!("${{{inside}}}")),
            };
            out.push_str(&translated);
            rest = &rest[start + end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// How a client starts moniker: the binary that runs now, by its full path (clients do not
/// start servers with the user's shell PATH), or, when that binary lives in `npx`'s or `uv`'s
/// cache (run as `npx -y moniker-mcp`, `uvx moniker-mcp`), the same launcher again: the cache
/// may be emptied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Launch {
    Path(PathBuf),
    Npx,
    Uvx,
}

impl Launch {
    pub(crate) fn detect() -> Launch {
        let Some(exe) = std::env::current_exe()
            .ok()
            .map(|e| e.canonicalize().unwrap_or(e))
        else {
            return Launch::Path(PathBuf::from("moniker"));
        };
        let parts: Vec<String> = exe
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let has = |name: &str| parts.iter().any(|p| p == name);
        if has("_npx") {
            Launch::Npx
        } else if has("uv") && parts.iter().any(|p| p.starts_with("archive-v")) {
            Launch::Uvx
        } else {
            Launch::Path(exe)
        }
    }

    fn command(&self) -> (String, Vec<String>) {
        let version = env!("CARGO_PKG_VERSION");
        match self {
            Launch::Path(path) => (path.display().to_string(), Vec::new()),
            Launch::Npx => (
                "npx".to_owned(),
                vec!["-y".to_owned(), format!("moniker-mcp@{version}")],
            ),
            Launch::Uvx => (
                "uvx".to_owned(),
                vec![
                    "--from".to_owned(),
                    format!("moniker-mcp=={version}"),
                    "moniker".to_owned(),
                ],
            ),
        }
    }
}

/// The moniker config a client's entry runs (`serve -c FILE` or `--config FILE`), when the
/// entry runs moniker: its command is a `moniker` binary, or a launcher of `moniker-mcp`.
pub(crate) fn runs_moniker(entry: &Value) -> Option<PathBuf> {
    let command = entry.get("command")?.as_str()?;
    let args: Vec<&str> = entry
        .get("args")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let program = Path::new(command)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ours = program == "moniker"
        || args
            .iter()
            .any(|a| a.starts_with("moniker-mcp") && matches!(program.as_str(), "npx" | "uvx"));
    if !ours || !args.contains(&"serve") {
        return None;
    }
    let at = args.iter().position(|a| matches!(*a, "-c" | "--config"))?;
    args.get(at + 1).map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_become_moniker_s_or_are_refused() {
        let vs = Client::VsCode;
        assert_eq!(
            vs.translate("Bearer ${env:TOKEN}").unwrap(),
            "Bearer ${TOKEN}"
        );
        assert_eq!(vs.translate("${userHome}/x").unwrap(), "${HOME}/x");
        assert_eq!(vs.translate("${input:pat}").unwrap_err(), "${input:pat}");
        assert_eq!(
            vs.translate("${workspaceFolder}").unwrap_err(),
            "${workspaceFolder}"
        );
        let code = Client::ClaudeCode;
        assert_eq!(code.translate("${A:-b} $x $").unwrap(), "${A:-b} $x $");
        assert!(code.translate("${env:A}").is_err());
        assert!(code.translate("${open").is_err());
        assert_eq!(Client::Cursor.translate("${env:A}").unwrap(), "${A}");
        assert!(Client::Cursor.translate("${workspaceFolder}/x").is_err());
        assert!(Client::ClaudeDesktop.translate("${A}").is_err());
        assert_eq!(
            Client::ClaudeDesktop.translate("plain $1").unwrap(),
            "plain $1"
        );
    }

    #[test]
    fn an_entry_that_runs_moniker_says_its_config() {
        let launch = Launch::Path(PathBuf::from("/opt/bin/moniker"));
        for client in Client::ALL {
            let entry = client.entry(&launch, Path::new("/h/m.yaml"));
            assert_eq!(runs_moniker(&entry), Some(PathBuf::from("/h/m.yaml")));
        }
        let npx = Client::Cursor.entry(&Launch::Npx, Path::new("/h/m.yaml"));
        assert_eq!(npx["command"], "npx");
        assert_eq!(runs_moniker(&npx), Some(PathBuf::from("/h/m.yaml")));
        let other = json!({"command": "npx", "args": ["-y", "other", "serve", "-c", "x"]});
        assert_eq!(runs_moniker(&other), None);
    }
}
