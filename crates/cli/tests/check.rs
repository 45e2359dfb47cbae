//! The `moniker` binary as a user runs it: exit codes, what goes to stdout and stderr, and the
//! rendered reports of `check --offline` on the example configs. Run from the repository root,
//! as the examples say.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `moniker ARGS` from the repository root, with a quiet, colorless, config-free environment.
pub(crate) fn moniker(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_moniker"));
    command
        .args(args)
        .current_dir(repo_root())
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .env_remove("MONIKER_CONFIG");
    command
}

pub(crate) fn run(command: &mut Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = command.output().expect("moniker runs");
    (
        status.code().expect("an exit code"),
        String::from_utf8(stdout).expect("utf-8 stdout"),
        String::from_utf8(stderr).expect("utf-8 stderr"),
    )
}

#[test]
fn the_bridge_example_is_valid() {
    let (code, stdout, stderr) = run(&mut moniker(&[
        "check",
        "--offline",
        "-c",
        "examples/bridge.yaml",
    ]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        "config ok: 1 server, 3 tool overrides, 2 prompt overrides\n"
    );
    assert_eq!(stderr, "");
}

#[test]
fn the_contextgraph_example_is_valid() {
    let (code, stdout, stderr) = run(&mut moniker(&[
        "check",
        "--offline",
        "--config",
        "examples/contextgraph.yaml",
    ]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        "config ok: 1 server, 2 tool overrides, 0 prompt overrides\n"
    );
}

#[test]
fn an_invalid_config_shows_every_error_and_exits_78() {
    let (code, stdout, stderr) = run(&mut moniker(&[
        "check",
        "--offline",
        "-c",
        "examples/broken.yaml",
    ]));
    assert_eq!(code, 78, "{stderr}");
    assert_eq!(stdout, "2 errors in `examples/broken.yaml`\n");
    insta::assert_snapshot!(stderr);
}

#[test]
fn naming_errors_show_every_error_and_exit_78() {
    let (code, stdout, stderr) = run(&mut moniker(&[
        "check",
        "--offline",
        "-c",
        "examples/broken-names.yaml",
    ]));
    assert_eq!(code, 78, "{stderr}");
    assert_eq!(stdout, "3 errors in `examples/broken-names.yaml`\n");
    insta::assert_snapshot!(stderr);
}

#[test]
fn a_claude_desktop_file_is_checked_as_it_is() {
    let file = "examples/claude_desktop_config.json";
    let (code, stdout, stderr) = run(&mut moniker(&["check", "--offline", "-c", file]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        "config ok: 2 servers, 0 tool overrides, 0 prompt overrides\n"
    );
    assert_eq!(stderr, "");

    // The keys that are Claude Desktop's own are named at `--log info`.
    let (code, _, stderr) = run(&mut moniker(&[
        "--log",
        "info",
        "check",
        "--offline",
        "-c",
        file,
    ]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("its own keys ignored"), "{stderr}");
    assert!(
        stderr.contains("keys=globalShortcut, preferences"),
        "{stderr}"
    );
}

#[test]
fn a_missing_ca_file_is_an_error_offline() {
    let dir = std::env::temp_dir().join(format!("moniker-cli-https-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("moniker.yaml");
    std::fs::write(
        &file,
        "servers:\n  docs:\n    url: https://docs.example.com/mcp\n    tls: { ca_file: /nonexistent/ca.pem }\n  local:\n    url: http://127.0.0.1:9000/mcp\n",
    )
    .expect("write");
    let path = file.display().to_string();
    let (code, stdout, stderr) = run(&mut moniker(&["check", "--offline", "-c", &path]));
    std::fs::remove_dir_all(&dir).expect("cleanup");
    assert_eq!(code, 78, "{stderr}");
    assert!(stdout.starts_with("1 error"), "{stdout}");
    assert!(stderr.contains("error[server::file]"), "{stderr}");
    assert!(
        stderr.contains("cannot read `/nonexistent/ca.pem`"),
        "{stderr}"
    );
    assert!(stderr.contains("servers.docs.tls.ca_file"), "{stderr}");
}

#[test]
fn the_config_can_come_from_the_environment() {
    let (code, stdout, stderr) =
        run(moniker(&["check", "--offline"]).env("MONIKER_CONFIG", "examples/contextgraph.yaml"));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("config ok:"), "{stdout}");
}

#[test]
fn a_missing_file_exits_1() {
    let (code, stdout, stderr) = run(&mut moniker(&[
        "check",
        "--offline",
        "-c",
        "examples/nonexistent.yaml",
    ]));
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(stdout, "");
    assert!(
        stderr.starts_with("error: cannot read config file `examples/nonexistent.yaml`"),
        "{stderr}"
    );
    assert!(stderr.contains("caused by:"), "{stderr}");
}

#[test]
fn no_config_anywhere_exits_1() {
    let empty = std::env::temp_dir().join(format!("moniker-cli-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("temp dir");
    let (code, _, stderr) = run(moniker(&["check", "--offline"])
        .current_dir(&empty)
        .env("HOME", &empty)
        .env("XDG_CONFIG_HOME", &empty));
    std::fs::remove_dir_all(&empty).expect("cleanup");
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("no config file"), "{stderr}");
}

#[test]
fn help_lists_the_commands() {
    let (code, stdout, _) = run(&mut moniker(&["--help"]));
    assert_eq!(code, 0);
    for command in [
        "serve", "check", "list", "call", "stats", "--config", "--log",
    ] {
        assert!(stdout.contains(command), "{command} in {stdout}");
    }
    assert!(!stdout.contains("__guard"), "{stdout}");
    let (code, stdout, _) = run(&mut moniker(&["check", "--help"]));
    assert_eq!(code, 0);
    assert!(stdout.contains("--offline"), "{stdout}");
}

#[test]
fn usage_errors_exit_2() {
    let (code, _, stderr) = run(&mut moniker(&["check", "--frobnicate"]));
    assert_eq!(code, 2, "{stderr}");
    let (code, _, _) = run(&mut moniker(&["nonsense"]));
    assert_eq!(code, 2);
    let (code, _, _) = run(&mut moniker(&[]));
    assert_eq!(code, 2);
    let (code, _, stderr) = run(&mut moniker(&["call", "x", "[1]"]));
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn the_guard_exits_with_its_child() {
    let (code, _, stderr) = run(&mut moniker(&["__guard", "--", "sh", "-c", "exit 3"]));
    assert_eq!(code, 3, "{stderr}");
}

/// Two copies of one server: `check` shows each conflict once and one fix for all, and that
/// fix, appended to the config as printed, makes it pass; so does the one-line prefix it
/// offers first.
#[test]
fn two_copies_of_a_server_get_each_conflict_once_and_one_fix() {
    let dir = moniker_fixture::scratch();
    let inventory = dir.join("inventory.json");
    std::fs::write(
        &inventory,
        serde_json::json!({
            "tools": [
                {"name": "echo", "inputSchema": {"type": "object"}},
                {"name": "add", "inputSchema": {"type": "object"}},
                {"name": "get-env", "inputSchema": {"type": "object"}}
            ],
            "prompts": [{"name": "greet"}]
        })
        .to_string(),
    )
    .expect("inventory");
    let inventory = inventory.display().to_string();
    let servers = format!(
        "servers:\n{}{}",
        moniker_fixture::fixture_server("everything", &[&inventory]),
        moniker_fixture::fixture_server("everything2", &[&inventory]),
    );
    let config = dir.join("moniker.yaml");
    let check = |text: &str| {
        std::fs::write(&config, text).expect("config");
        // The gateway's own log lines are not what is checked here.
        run(moniker(&["check", "--log", "off", "-c"]).arg(&config))
    };

    let (code, stdout, stderr) = check(&servers);
    assert_eq!(code, 78, "{stdout}{stderr}");
    for name in [
        "tool name `echo`",
        "tool name `add`",
        "tool name `get-env`",
        "prompt name `greet`",
    ] {
        assert_eq!(stderr.matches(name).count(), 1, "{name}:\n{stderr}");
    }
    assert_eq!(stderr.matches("tools:").count(), 1, "{stderr}");
    assert_eq!(stderr.matches("prompts:").count(), 1, "{stderr}");
    assert!(
        stderr.contains(
            "the line `prefix: true` in server `everything2`'s entry (`servers.everything2`)"
        ),
        "{stderr}"
    );

    // "Works the first time", item 3: the fix is pasted byte for byte, as printed: at column 0,
    // appended to the file (`add to the end of <the config's path> (...):`).
    let (_, block) = stderr.rsplit_once("check --fix`):\n").expect("one fix");
    let fixed = format!("{servers}{block}");
    let (code, stdout, stderr) = check(&fixed);
    assert_eq!(code, 0, "{fixed}\n{stdout}{stderr}");
    assert!(
        stdout.contains("config ok: 2 servers, 6 tool overrides, 2 prompt overrides"),
        "{stdout}"
    );

    let prefixed = servers.replace("  everything2:\n", "  everything2:\n    prefix: true\n");
    let (code, stdout, stderr) = check(&prefixed);
    assert_eq!(code, 0, "{prefixed}\n{stdout}{stderr}");

    // `check --fix` writes the same renames into the file (the file before kept beside it),
    // and checks again.
    let config = dir.join("moniker.yaml");
    std::fs::write(&config, &servers).expect("config");
    let (code, stdout, stderr) =
        run(moniker(&["check", "--fix", "--log", "off", "-c"]).arg(&config));
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("--fix: 8 renames written"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(dir.join("moniker.yaml.bak")).expect("backup"),
        servers
    );
    assert_eq!(
        std::fs::read_to_string(&config).expect("fixed"),
        fixed,
        "--fix writes what check printed"
    );
}

/// Hold the boundary, finding 18: with many servers, some sharing names and answering in
/// another order each run, `check` names every collision once, whatever the order, with one
/// fix for all that makes it pass; nothing is dropped silently, and the surface is the same
/// in every run.
#[test]
fn every_collision_among_many_servers_is_named_whatever_order_they_answer_in() {
    let dir = moniker_fixture::scratch();
    // 22 servers: each has two tools of its own; `search` is shared by 4, `fetch` by 3,
    // `read_file` by 2.
    let shared = |i: usize| match i {
        0..=3 => Some("search"),
        4..=6 => Some("fetch"),
        7..=8 => Some("read_file"),
        _ => None,
    };
    let fixture = moniker_fixture::fixture_bin().display().to_string();
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(7) as u64;
    let mut servers = String::from("servers:\n");
    let mut entries = Vec::new();
    for i in 0..22 {
        let mut tools = vec![
            serde_json::json!({"name": format!("own_{i}_a"), "inputSchema": {"type": "object"}}),
            serde_json::json!({"name": format!("own_{i}_b"), "inputSchema": {"type": "object"}}),
        ];
        if let Some(name) = shared(i) {
            tools.push(serde_json::json!({"name": name, "description": format!("{name} of s{i}"), "inputSchema": {"type": "object"}}));
        }
        let inventory = dir.join(format!("s{i}.json"));
        std::fs::write(
            &inventory,
            serde_json::json!({ "tools": tools }).to_string(),
        )
        .expect("inventory");
        entries.push((i, inventory.display().to_string()));
    }
    let check = |text: &str| {
        let config = dir.join("moniker.yaml");
        std::fs::write(&config, text).expect("config");
        run(moniker(&["check", "--log", "off", "-c"]).arg(&config))
    };
    let mut outputs = Vec::new();
    for _ in 0..3 {
        servers.truncate("servers:\n".len());
        for (i, inventory) in &entries {
            // A random delay before each server starts: they answer in another order each run.
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let delay = (seed >> 33) % 300;
            servers.push_str(&format!(
                "  s{i}:\n    command: sh\n    args: [-c, 'sleep 0.{delay:03}; exec \"$0\" \"$1\"', {}, {}]\n",
                serde_json::json!(fixture),
                serde_json::json!(inventory)
            ));
        }
        let (code, stdout, stderr) = check(&servers);
        assert_eq!(code, 78, "{stdout}{stderr}");
        for name in ["`search`", "`fetch`", "`read_file`"] {
            assert_eq!(
                stderr.matches(&format!("tool name {name}")).count(),
                1,
                "{name}:\n{stderr}"
            );
        }
        assert_eq!(
            stderr.matches("tools:").count(),
            1,
            "one fix for all:\n{stderr}"
        );
        outputs.push(stderr);
    }
    assert!(
        outputs.windows(2).all(|w| w[0] == w[1]),
        "the report depends on the order servers answered in:\n{}\n----\n{}",
        outputs[0],
        outputs[1]
    );
    // The fix, pasted as printed, makes it pass, with every tool there: 22 × 2 own ones and
    // the 9 shared ones under their new names.
    let (_, block) = outputs[0].rsplit_once("check --fix`):\n").expect("one fix");
    let fixed = format!("{servers}{block}");
    let (code, stdout, stderr) = check(&fixed);
    assert_eq!(code, 0, "{fixed}\n{stdout}{stderr}");
    assert!(stdout.contains("53 tools"), "{stdout}");
}

/// In search mode, `check` names each tool a search of its own description does not find in the
/// first five, with the fix: seven tools that say the same (an action tool, or a description
/// that sets each apart) and one with no description (say what it does); a tool whose
/// description is its own is not named. Out of search mode it says nothing of it.
#[test]
fn check_names_the_tools_a_search_of_their_own_description_does_not_find() {
    let dir = moniker_fixture::scratch();
    let inventory = dir.join("inventory.json");
    let mut tools: Vec<serde_json::Value> = (0..7)
        .map(|i| {
            serde_json::json!({"name": format!("fetch_page_{i}"), "description": "Fetch a web page and return its text.", "inputSchema": {"type": "object"}})
        })
        .collect();
    tools.push(serde_json::json!({"name": "zq_xv", "inputSchema": {"type": "object"}}));
    tools.push(serde_json::json!({"name": "create_issue", "description": "Open a new issue in a repository's tracker.", "inputSchema": {"type": "object"}}));
    std::fs::write(&inventory, serde_json::json!({"tools": tools}).to_string()).expect("inventory");
    let servers = format!(
        "servers:\n{}",
        moniker_fixture::fixture_server("web", &[&inventory.display().to_string()])
    );
    let config = dir.join("moniker.yaml");
    let check = |text: &str| {
        std::fs::write(&config, text).expect("config");
        run(moniker(&["check", "--log", "off", "-c"]).arg(&config))
    };
    let (code, stdout, stderr) = check(&format!("{servers}discovery:\n  mode: search\n"));
    assert_eq!(code, 0, "warnings do not fail the check:\n{stdout}{stderr}");
    let named = stderr.matches("search::unfindable").count();
    assert!(
        named >= 3,
        "at least the two past the first five and zq_xv:\n{stderr}"
    );
    assert!(stderr.contains("`zq_xv` has no description"), "{stderr}");
    assert!(stderr.contains("fold both into an action tool"), "{stderr}");
    assert!(
        !stderr.contains("`create_issue`'s own description"),
        "{stderr}"
    );
    let (code, stdout, stderr) = check(&servers);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stderr.contains("search::unfindable"), "{stderr}");
}
