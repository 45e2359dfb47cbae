use indexmap::IndexMap;

use crate::decode::tests::{errors, id};
use crate::server::Transport;
use crate::{Config, codes, parse};

fn ok(file_name: &str, text: &str) -> Config {
    match parse(file_name, text) {
        Ok(config) => config,
        Err(report) => panic!("expected a valid config:\n{report}"),
    }
}

fn map(pairs: &[(&str, &str)]) -> IndexMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// What `claude_desktop_config.json` looks like after a few weeks of use.
const CLAUDE_DESKTOP: &str = r#"{
  "globalShortcut": "Alt+Space",
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"]
    },
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": { "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_not_a_real_token" }
    }
  },
  "preferences": {
    "menuBarEnabled": false,
    "quickEntryShortcut": "off"
  }
}
"#;

#[test]
fn a_claude_desktop_file_is_read_as_it_is() {
    let config = ok("claude_desktop_config.json", CLAUDE_DESKTOP);
    assert_eq!(
        config.ignored_keys,
        strings(&["globalShortcut", "preferences"])
    );
    assert_eq!(config.source.servers_key(), "mcpServers");
    assert_eq!(config.servers.len(), 2);
    assert_eq!(
        config.servers[&id("filesystem")].transport,
        Transport::Stdio {
            command: "npx".to_owned(),
            args: strings(&[
                "-y",
                "@modelcontextprotocol/server-filesystem",
                "/Users/me/Desktop"
            ]),
            env: IndexMap::new(),
            pass_env: crate::PassEnv::default(),
            cwd: None,
        }
    );
    assert_eq!(
        config.servers[&id("github")].transport,
        Transport::Stdio {
            command: "npx".to_owned(),
            args: strings(&["-y", "@modelcontextprotocol/server-github"]),
            env: map(&[("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_not_a_real_token")]),
            pass_env: crate::PassEnv::default(),
            cwd: None,
        }
    );
}

#[test]
fn a_cursor_mcp_json_is_read_as_it_is() {
    let config = ok(
        "mcp.json",
        r#"{
  "mcpServers": {
    "context7": { "url": "https://mcp.context7.com/mcp", "headers": { "CONTEXT7_API_KEY": "${env:CONTEXT7_API_KEY}" } },
    "postgres": { "type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-postgres", "postgresql://localhost/db"] }
  }
}"#,
    );
    assert!(config.ignored_keys.is_empty(), "{:?}", config.ignored_keys);
    assert_eq!(
        config.servers[&id("context7")].transport,
        Transport::Http {
            url: "https://mcp.context7.com/mcp".to_owned(),
            headers: map(&[("CONTEXT7_API_KEY", "${env:CONTEXT7_API_KEY}")]),
            tls: Default::default(),
            auth: Default::default(),
            forward: IndexMap::new(),
        }
    );
    assert!(matches!(
        config.servers[&id("postgres")].transport,
        Transport::Stdio { .. }
    ));
}

/// VS Code's `.vscode/mcp.json`: `servers`, not `mcpServers`, every entry with a `type`, and
/// `inputs` for the secrets VS Code prompts for.
const VS_CODE: &str = r#"{
  "inputs": [
    { "type": "promptString", "id": "perplexity-key", "description": "Perplexity API Key", "password": true }
  ],
  "servers": {
    "github": { "type": "http", "url": "https://api.githubcopilot.com/mcp/" },
    "perplexity": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "server-perplexity-ask"],
      "env": { "PERPLEXITY_API_KEY": "${input:perplexity-key}" }
    }
  }
}"#;

#[test]
fn a_vs_code_mcp_json_is_read_as_it_is() {
    let config = ok(".vscode/mcp.json", VS_CODE);
    assert_eq!(config.ignored_keys, strings(&["inputs"]));
    assert_eq!(config.source.servers_key(), "servers");
    assert_eq!(
        config.servers[&id("github")].transport,
        Transport::Http {
            url: "https://api.githubcopilot.com/mcp/".to_owned(),
            headers: IndexMap::new(),
            tls: Default::default(),
            auth: Default::default(),
            forward: IndexMap::new(),
        }
    );
    let Transport::Stdio { command, env, .. } = &config.servers[&id("perplexity")].transport else {
        panic!("perplexity is a stdio server")
    };
    assert_eq!(command, "npx");
    assert_eq!(env["PERPLEXITY_API_KEY"], "${input:perplexity-key}");
}

#[test]
fn vs_code_servers_are_told_from_moniker_servers_by_their_shape() {
    // Every entry has a `type` and no moniker-only key: VS Code's, even without `inputs`.
    let config = ok(
        "mcp.json",
        r#"{ "servers": { "a": { "type": "stdio", "command": "x" } }, "sandbox": true }"#,
    );
    assert_eq!(config.ignored_keys, strings(&["sandbox"]));

    // An entry without `type`, or with `tags`: moniker's, and the other key is unknown.
    for text in [
        "servers: { a: { command: x } }\nsandbox: true\n",
        "servers: { a: { type: stdio, command: x, tags: [git] } }\nsandbox: true\n",
    ] {
        let errors = errors(text);
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert_eq!(errors[0].code, codes::UNKNOWN_KEY, "{text}");
        assert_eq!(errors[0].path, "sandbox", "{text}");
    }
}

#[test]
fn a_moniker_file_with_an_unknown_key_is_still_refused() {
    let e = &errors("servers:\n  a: { command: x }\nnamng: { split: \"__\" }\n")[..];
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].code, codes::UNKNOWN_KEY);
    assert_eq!(e[0].message, "unknown key `namng`");
    assert_eq!(e[0].help.as_deref(), Some("did you mean `naming`?"));

    // A moniker section makes it moniker's file, `mcpServers` or not.
    let e = &errors(
        r#"{ "mcpServers": { "a": { "command": "x" } }, "tools": {}, "globalShortcut": "" }"#,
    )[..];
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].path, "globalShortcut");
    assert_eq!(e[0].code, codes::UNKNOWN_KEY);

    // In a client's file, a misspelt moniker section is refused, not ignored.
    let e = &errors("mcpServers:\n  a: { command: x }\ntols: { t: { name: u } }\n")[..];
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].message, "unknown key `tols`");
    assert_eq!(e[0].help.as_deref(), Some("did you mean `tools`?"));
    assert_eq!(e[0].span.map(|s| (s.line, s.column)), Some((3, 1)));

    // And a server's own keys are moniker's in any file.
    let e = &errors(r#"{ "mcpServers": { "a": { "comand": "x" } }, "globalShortcut": "" }"#)[..];
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].path, "mcpServers.a.comand");
    assert_eq!(e[0].help.as_deref(), Some("did you mean `command`?"));
}
