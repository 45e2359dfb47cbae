//! `moniker install`, `uninstall` and `doctor` against real-shaped config files of each
//! client, in a temporary home: the round trip back to the original bytes, a second run that
//! changes nothing, refusals, and an imported config that a client's entry really serves.

#![allow(
    clippy::too_many_lines,
    reason = "a test is one scenario, read from top to bottom"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use moniker_fixture::{Peer, fixture_bin, fixture_server, scratch};
use serde_json::{Value, json};

use crate::check::{moniker, run};

/// `moniker ARGS` with `home` as the user's home and config dir.
fn in_home(home: &Path, args: &[&str]) -> Command {
    let mut command = moniker(args);
    command
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env_remove("CLAUDE_CONFIG_DIR");
    command
}

/// A real-shaped config file of each client: other servers and the client's own keys.
fn client_files(home: &Path) -> Vec<(&'static str, PathBuf, String)> {
    vec![
        (
            "claude-desktop",
            home.join(".config/Claude/claude_desktop_config.json"),
            "{\n  \"mcpServers\": {\n    \"filesystem\": {\n      \"command\": \"npx\",\n      \"args\": [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/home/u/Desktop\"]\n    }\n  },\n  \"globalShortcut\": \"Ctrl+Space\",\n  \"preferences\": {\"menuBarEnabled\": false}\n}\n".to_owned(),
        ),
        (
            "claude-code",
            home.join(".claude.json"),
            "{\n  \"numStartups\": 42,\n  \"installMethod\": \"npm-global\",\n  \"autoUpdates\": true,\n  \"projects\": {\n    \"/home/u/src/app\": {\n      \"allowedTools\": [],\n      \"mcpServers\": {},\n      \"hasTrustDialogAccepted\": true\n    }\n  },\n  \"mcpServers\": {\n    \"sentry\": {\n      \"type\": \"http\",\n      \"url\": \"https://mcp.sentry.dev/mcp\"\n    }\n  },\n  \"userID\": \"3f1c\"\n}".to_owned(),
        ),
        (
            "cursor",
            home.join(".cursor/mcp.json"),
            "{\n    \"mcpServers\": {\n        \"github\": {\n            \"command\": \"docker\",\n            \"args\": [\"run\", \"-i\", \"--rm\", \"-e\", \"GITHUB_PERSONAL_ACCESS_TOKEN\", \"ghcr.io/github/github-mcp-server\"],\n            \"env\": {\"GITHUB_PERSONAL_ACCESS_TOKEN\": \"ghp_notreal\"}\n        }\n    }\n}\n".to_owned(),
        ),
        (
            "vscode",
            home.join(".config/Code/User/mcp.json"),
            "{\n\t\"servers\": {\n\t\t\"github\": {\n\t\t\t\"type\": \"http\",\n\t\t\t\"url\": \"https://api.githubcopilot.com/mcp/\"\n\t\t}\n\t},\n\t\"inputs\": [\n\t\t{\"type\": \"promptString\", \"id\": \"token\", \"description\": \"Token\", \"password\": true}\n\t]\n}\n".to_owned(),
        ),
    ]
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a dir")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("JSON")
}

fn backup_of(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.moniker-backup", path.display()))
}

#[test]
fn install_then_uninstall_gives_back_each_client_s_file_byte_for_byte() {
    let home = scratch();
    let config = home.join("moniker.yaml");
    std::fs::write(&config, "servers: {}\n").expect("config");
    let config_arg = config.display().to_string();
    for (client, file, original) in client_files(&home) {
        write(&file, &original);
        let install = || {
            let args = [
                "install",
                client,
                "-c",
                &config_arg,
                "--command",
                "/opt/moniker",
            ];
            run(&mut in_home(&home, &args))
        };
        let (code, stdout, stderr) = install();
        assert_eq!(code, 0, "{client}: {stdout}{stderr}");
        assert!(stdout.contains("undo: moniker uninstall"), "{stdout}");
        let after = read_json(&file);
        let before: Value = serde_json::from_str(&original).expect("JSON");
        let key = if client == "vscode" {
            "servers"
        } else {
            "mcpServers"
        };
        let entry = &after[key]["moniker"];
        assert_eq!(entry["command"], "/opt/moniker", "{client}: {after}");
        assert_eq!(
            entry["args"],
            json!(["serve", "-c", config_arg]),
            "{client}"
        );
        let typed = matches!(client, "claude-code" | "vscode");
        assert_eq!(entry.get("type").is_some(), typed, "{client}: {entry}");
        // Everything else is as it was: the client's keys and its other servers.
        let mut without = after.clone();
        without[key]
            .as_object_mut()
            .expect("servers")
            .remove("moniker");
        assert_eq!(without, before, "{client}");
        assert_eq!(
            std::fs::read_to_string(backup_of(&file)).expect("backup"),
            original,
            "{client}"
        );

        // A second run changes nothing.
        let written = std::fs::read(&file).expect("read");
        let (code, stdout, _) = install();
        assert_eq!(code, 0, "{stdout}");
        assert!(stdout.contains("nothing to change"), "{stdout}");
        assert_eq!(std::fs::read(&file).expect("read"), written, "{client}");

        let (code, stdout, stderr) = run(&mut in_home(&home, &["uninstall", client]));
        assert_eq!(code, 0, "{client}: {stdout}{stderr}");
        assert_eq!(
            std::fs::read_to_string(&file).expect("read"),
            original,
            "{client}: not the original bytes\n{stdout}"
        );
        assert!(!backup_of(&file).exists(), "{client}: the backup is left");
        let (code, stdout, _) = run(&mut in_home(&home, &["uninstall", client]));
        assert_eq!(code, 0);
        assert!(stdout.contains("nothing to undo"), "{stdout}");
    }
}

#[test]
fn a_client_without_a_file_gets_one_and_uninstall_removes_it() {
    let home = scratch();
    let config = home.join("moniker.yaml");
    std::fs::write(&config, "servers: {}\n").expect("config");
    let (code, stdout, stderr) = run(&mut in_home(
        &home,
        &["install", "cursor", "-c", &config.display().to_string()],
    ));
    assert_eq!(code, 0, "{stdout}{stderr}");
    let file = home.join(".cursor/mcp.json");
    let entry = &read_json(&file)["mcpServers"]["moniker"];
    // The binary that ran, by its full path: a client does not start servers with a shell.
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_moniker")).expect("exe");
    assert_eq!(entry["command"], exe.display().to_string());
    let (code, stdout, _) = run(&mut in_home(&home, &["uninstall", "cursor"]));
    assert_eq!(code, 0, "{stdout}");
    assert!(!file.exists(), "{stdout}");
}

#[test]
fn what_moniker_cannot_read_or_did_not_write_is_left_alone() {
    let home = scratch();
    let config = home.join("moniker.yaml");
    std::fs::write(&config, "servers: {}\n").expect("config");
    let config_arg = config.display().to_string();
    let file = home.join(".config/Code/User/mcp.json");
    for (text, says) in [
        // VS Code allows comments: a rewrite would lose them.
        (
            "{\n  // mine\n  \"servers\": {}\n}\n",
            "not JSON moniker can rewrite",
        ),
        ("[1, 2]\n", "not a JSON object"),
        ("{\"servers\": [\"a\"]}\n", "not an object of servers"),
        (
            "{\"servers\": {\"moniker\": {\"type\": \"stdio\", \"command\": \"other\"}}}\n",
            "runs something else",
        ),
    ] {
        write(&file, text);
        let (code, stdout, stderr) = run(&mut in_home(
            &home,
            &["install", "vscode", "-c", &config_arg],
        ));
        assert_eq!(code, 1, "{text}: {stdout}{stderr}");
        assert!(stderr.contains(says), "{text}: {stderr}");
        assert_eq!(std::fs::read_to_string(&file).expect("read"), text);
        assert!(!backup_of(&file).exists(), "{text}");
    }
    // No config to point the client at, and no `--import`.
    std::fs::remove_file(&file).expect("rm");
    let (code, _, stderr) =
        run(in_home(&home, &["install", "vscode"]).current_dir(home.join(".config")));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("--import"), "{stderr}");
    assert!(!file.exists());
}

#[test]
fn import_moves_the_servers_and_the_client_s_entry_serves_them() {
    let home = scratch();
    let fixture = fixture_bin().display().to_string();
    let inventory = |name: &str| {
        let path = home.join(format!("{name}.json"));
        let tools = json!({
            "serverInfo": {"name": format!("{name}-server"), "version": "1"},
            "tools": [{"name": format!("{name}_lookup"), "inputSchema": {"type": "object"}}]
        });
        std::fs::write(&path, tools.to_string()).expect("inventory");
        path.display().to_string()
    };
    let (alpha, beta) = (inventory("alpha"), inventory("beta"));
    let file = home.join(".cursor/mcp.json");
    let original = serde_json::to_string_pretty(&json!({
        "mcpServers": {
            "alpha": {"command": fixture, "args": [alpha], "env": {"ALPHA_TOKEN": "s3cr3t-alpha"}},
            "beta": {"command": fixture, "args": [beta], "env": {"BETA_TOKEN": "${env:BETA_FROM_CURSOR}"}},
            "Has Space": {"command": fixture}
        },
        "theme": "dark"
    }))
    .expect("JSON");
    write(&file, &original);

    let (code, stdout, stderr) = run(&mut in_home(&home, &["install", "cursor", "--import"]));
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        !stdout.contains("s3cr3t") && !stderr.contains("s3cr3t"),
        "{stdout}{stderr}"
    );
    assert!(stdout.contains("1 env value, not shown"), "{stdout}");
    assert!(stdout.contains("left `Has Space`"), "{stdout}");
    let written = home.join(".cursor/moniker.yaml");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&written)
            .expect("config")
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o077,
            0,
            "the imported secrets are readable by others: {mode:o}"
        );
    }
    let text = std::fs::read_to_string(&written).expect("config");
    assert!(text.contains("${BETA_FROM_CURSOR}"), "{text}");
    let after = read_json(&file);
    let servers = after["mcpServers"].as_object().expect("servers");
    assert_eq!(
        servers.keys().collect::<Vec<_>>(),
        ["Has Space", "moniker"],
        "{after}"
    );
    assert_eq!(after["theme"], "dark");

    // Run the entry as Cursor would, and list: both servers' tools are there.
    let entry = &servers["moniker"];
    let args: Vec<&str> = entry["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let mut peer = Peer::spawn(
        Command::new(entry["command"].as_str().expect("command"))
            .args(&args)
            .current_dir(&home)
            .env("BETA_FROM_CURSOR", "beta-value"),
    );
    peer.initialize();
    let listed = peer.result("tools/list", json!({}));
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["alpha_lookup", "beta_lookup"], "{listed}");
    drop(peer);

    // Again: nothing left to import, nothing changes.
    let now = std::fs::read(&file).expect("read");
    let (code, stdout, _) = run(&mut in_home(&home, &["install", "cursor", "--import"]));
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("nothing to change"), "{stdout}");
    assert_eq!(std::fs::read(&file).expect("read"), now);

    let (code, stdout, _) = run(&mut in_home(&home, &["uninstall", "cursor"]));
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("put back servers: alpha, beta"), "{stdout}");
    assert_eq!(std::fs::read_to_string(&file).expect("read"), original);
}

#[test]
fn a_linked_file_is_changed_where_it_is() {
    let home = scratch();
    let config = home.join("moniker.yaml");
    std::fs::write(&config, "servers: {}\n").expect("config");
    let real = home.join("dotfiles/mcp.json");
    write(&real, "{\"mcpServers\": {}}\n");
    std::fs::create_dir_all(home.join(".cursor")).expect("mkdir");
    let link = home.join(".cursor/mcp.json");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    #[cfg(not(unix))]
    return;
    let (code, stdout, stderr) = run(&mut in_home(
        &home,
        &["install", "cursor", "-c", &config.display().to_string()],
    ));
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink()
    );
    assert!(read_json(&real)["mcpServers"]["moniker"].is_object());
    let (code, stdout, _) = run(&mut in_home(&home, &["uninstall", "cursor"]));
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(
        std::fs::read_to_string(&real).expect("read"),
        "{\"mcpServers\": {}}\n"
    );
}

#[test]
fn uninstall_keeps_what_changed_since_install() {
    let home = scratch();
    let fixture = fixture_bin().display().to_string();
    let file = home.join(".cursor/mcp.json");
    write(
        &file,
        &json!({"mcpServers": {"a": {"command": fixture}}}).to_string(),
    );
    let (code, stdout, stderr) = run(&mut in_home(&home, &["install", "cursor", "--import"]));
    assert_eq!(code, 0, "{stdout}{stderr}");
    // The person adds a server by hand after the install.
    let mut doc = read_json(&file);
    doc["mcpServers"]["added"] = json!({"command": "x"});
    std::fs::write(&file, doc.to_string()).expect("write");
    let (code, stdout, _) = run(&mut in_home(&home, &["uninstall", "cursor"]));
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("changes are kept"), "{stdout}");
    let servers = read_json(&file)["mcpServers"].clone();
    assert_eq!(
        servers
            .as_object()
            .expect("servers")
            .keys()
            .collect::<Vec<_>>(),
        ["a", "added"],
        "{servers}"
    );
}

fn doctor(home: &Path, config: &Path) -> (i32, String, String) {
    run(in_home(home, &["doctor", "-c", &config.display().to_string()]).env("NO_COLOR", "1"))
}

#[test]
fn doctor_names_each_problem_with_what_to_do() {
    let home = scratch();
    let inventory = home.join("tools.json");
    std::fs::write(
        &inventory,
        json!({"tools": [{"name": "lookup", "inputSchema": {"type": "object"}}]}).to_string(),
    )
    .expect("inventory");
    let inventory = inventory.display().to_string();
    let config = home.join("moniker.yaml");
    std::fs::write(
        &config,
        format!(
            "servers:\n{}  gone:\n    command: no-such-command-moniker\n  exits:\n    command: sh\n    args: [-c, 'echo bad token >&2; exit 3']\n",
            fixture_server("good", &[&inventory]),
        ),
    )
    .expect("config");
    // A client that runs moniker with this config.
    let cursor = home.join(".cursor/mcp.json");
    write(
        &cursor,
        &json!({"mcpServers": {"moniker": {"command": "moniker", "args": ["serve", "-c", config]}}})
            .to_string(),
    );
    let (code, stdout, stderr) = doctor(&home, &config);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains("(named by `-c`)"), "{stdout}");
    assert!(
        stdout.contains("gone: its command `no-such-command-moniker` is not found on PATH"),
        "{stdout}"
    );
    assert!(stdout.contains("FAIL    exits"), "{stdout}");
    assert!(
        stdout.contains("          bad token"),
        "its stderr, indented: {stdout}"
    );
    // A crash is explained by the server's own words, quoted ("Works the first time", item 4).
    assert!(
        stdout.contains("bad token")
            && stdout.contains("its own words above (the last lines of its stderr)"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("exit 3"),
        "arguments are not shown: {stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("ok") && l.contains("good") && l.contains("answers, 1 tool,")),
        "{stdout}"
    );
    assert!(
        stdout.contains("Cursor: its server `moniker` runs moniker with this config"),
        "{stdout}"
    );
    assert!(stdout.contains("2 problems found"), "{stdout}");

    // Two copies of one server: every name collides; the fix is shown.
    std::fs::write(
        &config,
        format!(
            "servers:\n{}{}",
            fixture_server("good", &[&inventory]),
            fixture_server("twin", &[&inventory]),
        ),
    )
    .expect("config");
    let (code, stdout, stderr) = doctor(&home, &config);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains("INVALID"), "{stdout}");
    assert!(stdout.contains("one block to paste"), "{stdout}");
    assert!(stdout.contains("twin"), "{stdout}");

    // All well.
    std::fs::write(
        &config,
        format!("servers:\n{}", fixture_server("good", &[&inventory])),
    )
    .expect("config");
    let (code, stdout, stderr) = doctor(&home, &config);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("every name once"), "{stdout}");
    assert!(stdout.contains("no problem found"), "{stdout}");
}

#[test]
fn doctor_without_a_config_says_how_to_make_one() {
    let home = scratch();
    let (code, stdout, _) = run(in_home(&home, &["doctor"]).current_dir(&home));
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("no config file"), "{stdout}");
    assert!(
        stdout.contains("moniker install CLIENT --import"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Claude Desktop: no config file"),
        "{stdout}"
    );
}

/// "Works the first time", item 1: two imported servers that share tool names made a config
/// that could not start (`serve` exited 78, and the person lost every server). The import now
/// starts them, renames the shared names after their servers in the config it writes, says
/// so, and that config serves with no hand edit.
#[test]
fn an_import_of_servers_that_share_names_writes_a_config_that_serves() {
    let home = scratch();
    let fixture = fixture_bin().display().to_string();
    let inventory = |name: &str, tools: &[&str]| {
        let path = home.join(format!("{name}.json"));
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| json!({"name": t, "inputSchema": {"type": "object"}}))
            .collect();
        std::fs::write(&path, json!({ "tools": tools }).to_string()).expect("inventory");
        path.display().to_string()
    };
    let files = inventory("files", &["read_file", "write_file", "search"]);
    let commander = inventory("commander", &["read_file", "write_file", "start_process"]);
    let file = home.join(".config/Claude/claude_desktop_config.json");
    write(
        &file,
        &serde_json::to_string_pretty(&json!({
            "mcpServers": {
                "filesystem": {"command": fixture, "args": [files]},
                "desktop-commander": {"command": fixture, "args": [commander]}
            }
        }))
        .expect("JSON"),
    );
    let (code, stdout, stderr) = run(&mut in_home(
        &home,
        &["install", "claude-desktop", "--import"],
    ));
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("4 names two servers shared, renamed after their servers"),
        "{stdout}"
    );
    let config = home.join(".config/Claude/moniker.yaml");
    let text = std::fs::read_to_string(&config).expect("config");
    for line in [
        "filesystem/read_file: { name: filesystem_read_file }",
        "desktop-commander/write_file: { name: desktop_commander_write_file }",
    ] {
        assert!(text.contains(line), "{line}:\n{text}");
    }
    let (code, stdout, stderr) = run(in_home(&home, &["check", "--log", "off", "-c"]).arg(&config));
    assert_eq!(code, 0, "{text}\n{stdout}{stderr}");
    assert!(stdout.contains("6 tools"), "{stdout}");
}

/// "Works the first time", item 4: `doctor` named causes it had not seen (`tls.ca_file` for a
/// stdio server's TLS failure, "run it yourself" for a slow one), said "no config" right after
/// an import, printed log lines before its report, and said "every name once" with servers
/// down. Each cause is now the one it saw, the imported config is found through the client's
/// entry, the report comes alone, and the names of servers that are down are said unchecked.
#[test]
fn doctor_tells_what_it_saw() {
    let home = scratch();
    let fixture = fixture_bin().display().to_string();
    let inventory = home.join("good.json");
    std::fs::write(
        &inventory,
        json!({"tools": [{"name": "lookup", "inputSchema": {"type": "object"}}]}).to_string(),
    )
    .expect("inventory");
    // A server that lists more than moniker takes from one (20,000 items).
    let huge = home.join("huge.json");
    let tools: Vec<Value> = (0..20_001)
        .map(|i| json!({"name": format!("t{i}"), "inputSchema": {"type": "object"}}))
        .collect();
    std::fs::write(&huge, json!({ "tools": tools }).to_string()).expect("inventory");
    let file = home.join(".config/Claude/claude_desktop_config.json");
    write(
        &file,
        &serde_json::to_string_pretty(&json!({
            "mcpServers": {
                "huge": {"command": fixture, "args": [huge.display().to_string()]},
                "good": {"command": fixture, "args": [inventory.display().to_string()]},
                "tls": {"command": "sh", "args": ["-c", "echo 'error: invalid peer certificate: UnknownIssuer' >&2; exit 2"]},
                "slow": {"command": "sleep", "args": ["30"]}
            }
        }))
        .expect("JSON"),
    );
    let (code, stdout, stderr) = run(&mut in_home(
        &home,
        &["install", "claude-desktop", "--import"],
    ));
    assert_eq!(code, 0, "{stdout}{stderr}");
    let config = home.join(".config/Claude/moniker.yaml");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, format!("{text}gateway: {{ start_timeout: 1s }}\n")).expect("config");

    // Plain `doctor`, from elsewhere: the config the client's entry runs.
    let (code, stdout, stderr) = run(in_home(&home, &["doctor"]).current_dir(&home));
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("the one Claude Desktop's server `moniker` runs"),
        "{stdout}"
    );
    assert!(
        stderr.trim().is_empty(),
        "log lines before the report: {stderr}"
    );
    let tls = stdout
        .lines()
        .skip_while(|l| !l.contains("tls ("))
        .take(4)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(tls.contains("SSL_CERT_FILE"), "{tls}");
    assert!(!tls.contains("tls.ca_file"), "{tls}");
    assert!(
        stdout.contains("within `gateway.start_timeout` (1 s)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "every name once of the 1 server up: the names of the 3 down are not checked"
        ),
        "{stdout}"
    );
    // A listing past the budget ("Hold the boundary, round two", finding 2) is said as such.
    assert!(
        stdout.contains("lists more than moniker takes from one server"),
        "{stdout}"
    );
}
