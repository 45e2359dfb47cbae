//! One gateway per person and config: stdio clients of one config, started one after another,
//! share one gateway and one process per server, each with its own session and toolset; the
//! gateway stops once the last has gone.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use moniker_fixture::{Peer, fixture_file, fixture_server, scratch};
use serde_json::{Value, json};

/// A test's directory, with a runtime directory of its own (`run`, `0700`): (the directory,
/// the runtime directory).
fn world() -> (PathBuf, PathBuf) {
    let dir = scratch();
    let runtime = dir.join("run");
    std::fs::create_dir_all(&runtime).expect("runtime dir");
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).expect("0700");
    (dir, runtime)
}

/// `moniker serve ARGS -c CONFIG` as a client starts it: attached to the shared gateway of
/// the config, in `runtime`.
fn serve(config: &Path, runtime: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_moniker"));
    command
        .arg("serve")
        .args(args)
        .arg("-c")
        .arg(config)
        .env_remove("MONIKER_STANDALONE")
        .env("XDG_RUNTIME_DIR", runtime)
        .env("XDG_CACHE_HOME", runtime);
    command
}

/// A client's `moniker serve`, attached to the shared gateway in `runtime`, initialized.
fn client(config: &Path, runtime: &Path, toolset: &str) -> Peer {
    let mut peer = Peer::spawn(&mut serve(config, runtime, &["--toolset", toolset]));
    peer.initialize();
    peer
}

fn names(listed: &Value) -> Vec<String> {
    let mut names: Vec<String> = listed["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools: {listed}"))
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect();
    names.sort();
    names
}

/// The sockets in the runtime directory's `moniker` folder.
fn sockets(runtime: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(runtime.join("moniker"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "sock"))
                .collect()
        })
        .unwrap_or_default()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[test]
fn ten_stdio_clients_share_one_gateway_each_with_its_own_toolset() {
    let (dir, runtime) = world();
    let pids = dir.join("server-pids");
    let config = dir.join("moniker.yaml");
    std::fs::write(
        &config,
        format!(
            "servers:\n{}toolsets:\n  one:\n    tools: [store_memory]\n  two:\n    tools: [search_graph, utl_status]\ngateway:\n  idle_stop: 1s\n",
            fixture_server(
                "cg",
                &[
                    &fixture_file("contextgraph.json").display().to_string(),
                    "--pid-file",
                    &pids.display().to_string()
                ]
            )
        ),
    )
    .expect("config");

    let mut clients = Vec::new();
    for n in 0..10 {
        let (toolset, want) = if n % 2 == 0 {
            ("one", vec!["store_memory"])
        } else {
            ("two", vec!["search_graph", "utl_status"])
        };
        let mut peer = client(&config, &runtime, toolset);
        let listed = peer.result("tools/list", json!({}));
        assert_eq!(names(&listed), want, "client {n}: {listed}");
        let outside = if toolset == "one" {
            "utl_status"
        } else {
            "store_memory"
        };
        let refused = peer.call_tool(outside, json!({}));
        assert!(refused.get("error").is_some(), "client {n}: {refused}");
        let called = peer.call_tool(want[0], json!({}));
        assert!(called["result"].is_object(), "client {n}: {called}");
        clients.push(peer);
    }
    // One gateway, one process of the server, for the ten.
    assert_eq!(sockets(&runtime).len(), 1, "{:?}", sockets(&runtime));
    let started: Vec<u32> = std::fs::read_to_string(&pids)
        .expect("pids")
        .lines()
        .map(|l| l.parse().expect("pid"))
        .collect();
    assert_eq!(started.len(), 1, "server processes started: {started:?}");

    // Each client leaves: its moniker exits at once; the gateway stays while one is left.
    let mut last = clients.pop().expect("a client");
    for mut peer in clients {
        peer.close_stdin();
        let status = peer.wait_exit(Duration::from_secs(20)).expect("exits");
        assert!(status.success(), "{status:?}");
    }
    assert_eq!(sockets(&runtime).len(), 1);
    assert!(alive(started[0]));
    let listed = last.result("tools/list", json!({}));
    assert_eq!(names(&listed), ["search_graph", "utl_status"]);

    // After the last, and the idle time, it stops, and its server with it.
    last.close_stdin();
    last.wait_exit(Duration::from_secs(20)).expect("exits");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !sockets(&runtime).is_empty() || alive(started[0]) {
        assert!(
            Instant::now() < deadline,
            "the shared gateway did not stop: {:?}",
            sockets(&runtime)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_unknown_toolset_is_this_clients_error_and_a_bad_config_starts_nothing() {
    let (dir, runtime) = world();
    let config = dir.join("moniker.yaml");
    std::fs::write(
        &config,
        format!(
            "servers:\n{}gateway:\n  idle_stop: 0s\n",
            fixture_server("fx", &[])
        ),
    )
    .expect("config");
    let output = serve(&config, &runtime, &["--toolset", "nope"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("moniker serve");
    assert_eq!(output.status.code(), Some(78), "{output:?}");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("toolset `nope` does not exist"), "{said}");

    // A directory of another user's is not used for the socket (only root can make one here):
    // the next place is, and the client is told (a planted directory stops no `serve`).
    if std::os::unix::fs::chown(runtime.join("moniker"), Some(4242), None).is_err() {
        return;
    }
    let output = serve(&config, &runtime, &[])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("moniker serve");
    assert!(output.status.success(), "{output:?}");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("belongs to another user") && said.contains("another is used"),
        "{said}"
    );
    let socket = std::fs::read_dir(runtime.join("moniker"))
        .expect("the planted dir")
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".sock"));
    assert!(!socket, "no socket in the other user's directory");
}

#[test]
fn a_config_change_reaches_the_shared_gateway_as_a_live_reload() {
    let (dir, runtime) = world();
    let config = dir.join("moniker.yaml");
    let one = format!(
        "servers:\n{}gateway:\n  idle_stop: 1s\n",
        fixture_server("first", &[])
    );
    std::fs::write(&config, &one).expect("config");
    let mut peer = Peer::spawn(&mut serve(&config, &runtime, &[]));
    peer.initialize();
    assert_eq!(names(&peer.result("tools/list", json!({}))), ["echo"]);

    // A second server in the file: the running gateway starts it, and the attached client
    // hears of its tools.
    let two = format!(
        "servers:\n{}{}gateway:\n  idle_stop: 1s\n",
        fixture_server("first", &[]),
        fixture_server("second", &["--tools-count", "1"])
    );
    std::fs::write(&config, two).expect("config");
    peer.wait_for("list_changed", |m| {
        m["method"] == "notifications/tools/list_changed"
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = names(&peer.result("tools/list", json!({})));
        if listed == ["echo", "tool_00000"] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the reload did not reach it: {listed:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A refused reload is said on the attached client's stderr, as a gateway of its own would
    // have said it (finding 5: it reached only the shared gateway's log file).
    std::fs::write(&config, "servers: [not, a, map\n").expect("config");
    let said = peer.stderr_with(|l| l.contains("config reload refused"));
    assert!(said.contains("the previous config still serves"), "{said}");
    peer.close_stdin();
    peer.wait_exit(Duration::from_secs(20)).expect("exits");
}

/// A client whose stdin is a file (not a pipe) cannot hand it over: its moniker copies the
/// bytes to the shared gateway and back, and every answer still comes before it exits.
#[test]
fn a_client_on_files_is_served_through_its_moniker() {
    let (dir, runtime) = world();
    let config = dir.join("moniker.yaml");
    std::fs::write(
        &config,
        format!(
            "servers:\n{}gateway:\n  idle_stop: 1s\n",
            fixture_server("fx", &[])
        ),
    )
    .expect("config");
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}),
    ];
    let input = dir.join("requests.jsonl");
    let lines: String = requests.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&input, lines).expect("requests");
    let output = serve(&config, &runtime, &[])
        .stdin(std::fs::File::open(&input).expect("stdin file"))
        .output()
        .expect("moniker serve");
    assert!(output.status.success(), "{output:?}");
    let answers: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .filter(|v: &Value| v.get("id").is_some())
        .collect();
    let ids: Vec<i64> = answers
        .iter()
        .map(|a| a["id"].as_i64().expect("id"))
        .collect();
    assert_eq!(ids.len(), 3, "{answers:?}");
    let call = answers
        .iter()
        .find(|a| a["id"] == 3)
        .expect("the call's answer");
    assert_eq!(
        call["result"]["content"][0]["text"], r#"{"text":"hi"}"#,
        "{call}"
    );
}

/// Finding 5: two clients of one config never share a gateway when what changes its servers
/// differs: a value the config expands (`${TOKEN}`: another person's token), or the working
/// directory (`args: ["."]`). Clients that agree on both share one.
#[test]
fn a_client_with_another_environment_or_directory_gets_a_gateway_of_its_own() {
    let (dir, runtime) = world();
    let config = dir.join("moniker.yaml");
    let server = fixture_server("fx", &[]);
    std::fs::write(
        &config,
        format!(
            "servers:\n{server}    env: {{ TOKEN: \"${{TOKEN}}\" }}\ngateway:\n  idle_stop: 1s\n"
        ),
    )
    .expect("config");
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&a).expect("a");
    std::fs::create_dir_all(&b).expect("b");
    let start = |cwd: &Path, token: &str| {
        let mut command = serve(&config, &runtime, &[]);
        command.current_dir(cwd).env("TOKEN", token);
        let mut peer = Peer::spawn(&mut command);
        peer.initialize();
        assert_eq!(names(&peer.result("tools/list", json!({}))), ["echo"]);
        peer
    };
    let first = start(&a, "admin");
    let same = start(&a, "admin");
    assert_eq!(
        sockets(&runtime).len(),
        1,
        "the same environment shares one gateway"
    );
    let other_token = start(&a, "read-only");
    assert_eq!(
        sockets(&runtime).len(),
        2,
        "another token is another gateway"
    );
    let other_dir = start(&b, "admin");
    assert_eq!(
        sockets(&runtime).len(),
        3,
        "another directory is another gateway"
    );
    // A proxy or a trust store every server is given by name is another gateway too.
    let mut command = serve(&config, &runtime, &[]);
    command
        .current_dir(&a)
        .env("TOKEN", "admin")
        .env("HTTPS_PROXY", "http://127.0.0.1:1");
    let mut proxied = Peer::spawn(&mut command);
    proxied.initialize();
    assert_eq!(
        sockets(&runtime).len(),
        4,
        "another proxy is another gateway"
    );
    // What moniker reads itself (traces sent elsewhere, its own settings) too.
    let mut command = serve(&config, &runtime, &[]);
    command
        .current_dir(&a)
        .env("TOKEN", "admin")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1");
    let mut traced = Peer::spawn(&mut command);
    traced.initialize();
    assert_eq!(
        sockets(&runtime).len(),
        5,
        "other traces are another gateway"
    );
    drop((first, same, other_token, other_dir, proxied, traced));
}
