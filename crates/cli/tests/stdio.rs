//! `moniker serve` on stdio run the way a user runs it, through `sh -c`: stdin and stdout are
//! pipes, files or `/dev/null`, closed early or read late, and every request read gets its
//! reply. (A pipe made non-blocking once gave `EAGAIN` on a blocking write, and the end of
//! stdin once cut off the replies still in flight.)

use std::collections::BTreeSet;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use moniker_fixture::{fixture_file, fixture_server, scratch};
use serde_json::{Value, json};

/// Long enough for a slow CI; a hung pipeline fails instead of hanging the suite.
const DEADLINE: Duration = Duration::from_secs(60);

/// A scratch directory with `moniker.yaml` (one fixture server on the contextgraph inventory,
/// with `extra` arguments) and `requests.jsonl` (one JSON-RPC message a line).
fn setup(extra: &[&str], requests: &[Value]) -> PathBuf {
    let dir = scratch();
    let cg = fixture_file("contextgraph.json").display().to_string();
    let mut args = vec![cg.as_str()];
    args.extend_from_slice(extra);
    std::fs::write(
        dir.join("moniker.yaml"),
        format!("servers:\n{}", fixture_server("cg", &args)),
    )
    .expect("config");
    let lines: String = requests.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(dir.join("requests.jsonl"), lines).expect("requests");
    dir
}

/// Runs `script` with `sh -c` in `dir`, `$MONIKER` naming the binary; its exit status and
/// stdout. Its stderr goes to `dir/stderr.log`, shown when the script outlives [`DEADLINE`].
fn sh(dir: &Path, script: &str) -> (ExitStatus, String) {
    use std::os::unix::process::CommandExt as _;
    let stderr = std::fs::File::create(dir.join("stderr.log")).expect("stderr.log");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("MONIKER", env!("CARGO_BIN_EXE_moniker"))
        .env("MONIKER_STANDALONE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        // Its own group, so that a hung pipeline is ended whole.
        .process_group(0)
        .spawn()
        .expect("sh");
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            let log = std::fs::read_to_string(dir.join("stderr.log")).unwrap_or_default();
            panic!("`{script}` still ran after {DEADLINE:?}; stderr:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, reader.join().expect("stdout reader"))
}

fn request(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn initialize() -> Value {
    request(
        json!(1),
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "sh", "version": "0"}}),
    )
}

fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

fn call(id: Value, tool: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

/// Eight lines, seven of them requests (one id a string): initialize, initialized, tools/list,
/// four calls (one of a tool that exists nowhere), ping.
fn session() -> Vec<Value> {
    vec![
        initialize(),
        initialized(),
        request(json!(2), "tools/list", json!({})),
        call(json!(3), "discover_sub_goals", json!({"max_goals": 3})),
        call(json!(4), "search_graph", json!({"query": "q"})),
        call(json!(5), "no_such_tool", json!({})),
        call(json!(6), "store_memory", json!({"content": "c"})),
        request(json!("ping-7"), "ping", json!({})),
    ]
}

/// The replies of `out`, one JSON message a line, by id; panics on a line that is not one, or
/// on an id answered twice.
fn replies(out: &str) -> Vec<(Value, Value)> {
    let mut seen = BTreeSet::new();
    out.lines()
        .map(|line| {
            let reply: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            let id = reply["id"].clone();
            assert!(seen.insert(id.to_string()), "{id} answered twice:\n{out}");
            (id, reply)
        })
        .collect()
}

/// One reply per request of [`session`], each what it should be.
fn assert_session_answered(out: &str) {
    let replies = replies(out);
    let ids: BTreeSet<String> = replies.iter().map(|(id, _)| id.to_string()).collect();
    let want: BTreeSet<String> = ["1", "2", "3", "4", "5", "6", "\"ping-7\""]
        .map(str::to_owned)
        .into();
    assert_eq!(ids, want, "{out}");
    let reply = |id: Value| &replies.iter().find(|(i, _)| *i == id).expect("found").1;
    assert_eq!(reply(json!(1))["result"]["serverInfo"]["name"], "moniker");
    assert_eq!(
        reply(json!(2))["result"]["tools"].as_array().map(Vec::len),
        Some(35)
    );
    for id in [3, 4, 6] {
        assert!(reply(json!(id))["result"]["content"].is_array(), "{out}");
    }
    assert_eq!(reply(json!(5))["error"]["code"], -32004, "{out}");
    assert_eq!(reply(json!("ping-7"))["result"], json!({}));
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn stdin_a_pipe_kept_open_stdout_a_file() {
    let dir = setup(&[], &session());
    let (status, _) = sh(
        &dir,
        r#"(cat requests.jsonl; sleep 2) | "$MONIKER" serve -c moniker.yaml > out.json"#,
    );
    assert!(status.success(), "{status}: {}", read(&dir, "stderr.log"));
    assert_session_answered(&read(&dir, "out.json"));
}

#[test]
fn stdout_a_pipe_read_late() {
    let dir = setup(&[], &session());
    // The reader starts after moniker has read everything: the replies wait in the pipe (or
    // in moniker, when they do not fit), none lost. moniker's own status is kept aside: a
    // pipeline's status is its last command's.
    let (status, stdout) = sh(
        &dir,
        r#"{ "$MONIKER" serve -c moniker.yaml < requests.jsonl; echo $? > rc; } | (sleep 3; wc -l)"#,
    );
    assert!(status.success(), "{status}: {}", read(&dir, "stderr.log"));
    assert_eq!(stdout.trim(), "7", "stderr:\n{}", read(&dir, "stderr.log"));
    assert_eq!(read(&dir, "rc").trim(), "0");
}

#[test]
fn stdout_a_pipe_read_late_with_more_than_it_holds() {
    // The listing of 2,000 tools is far more than a pipe holds (64 KiB on Linux): moniker's
    // writes wait for the reader, and never fail (a pipe left non-blocking under a blocking
    // write fails with `EAGAIN` here).
    let dir = setup(
        &["--tools-count", "2000"],
        &[
            initialize(),
            initialized(),
            request(json!(2), "tools/list", json!({})),
            call(json!(3), "tool_00042", json!({"query": "q"})),
            request(json!(4), "ping", json!({})),
        ],
    );
    let (status, _) = sh(
        &dir,
        r#"{ "$MONIKER" serve -c moniker.yaml < requests.jsonl; echo $? > rc; } | (sleep 3; cat > out.json)"#,
    );
    assert!(status.success(), "{status}: {}", read(&dir, "stderr.log"));
    assert_eq!(read(&dir, "rc").trim(), "0", "{}", read(&dir, "stderr.log"));
    let out = read(&dir, "out.json");
    assert!(out.len() > 256 * 1024, "{} bytes", out.len());
    let replies = replies(&out);
    let ids: Vec<Value> = replies.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(ids.len(), 4, "{ids:?}");
    let tools = &replies
        .iter()
        .find(|(id, _)| *id == json!(2))
        .expect("tools/list")
        .1;
    assert_eq!(
        tools["result"]["tools"].as_array().map(Vec::len),
        Some(2000)
    );
}

#[test]
fn stdin_and_stdout_files() {
    let dir = setup(&[], &session());
    let (status, _) = sh(
        &dir,
        r#""$MONIKER" serve -c moniker.yaml < requests.jsonl > out.json"#,
    );
    assert!(status.success(), "{status}: {}", read(&dir, "stderr.log"));
    assert_session_answered(&read(&dir, "out.json"));
}

#[test]
fn stdout_dev_null() {
    let dir = setup(&[], &session());
    let (status, _) = sh(
        &dir,
        r#""$MONIKER" serve -c moniker.yaml < requests.jsonl > /dev/null"#,
    );
    assert!(status.success(), "{status}: {}", read(&dir, "stderr.log"));
}

#[test]
fn the_end_of_stdin_does_not_cut_off_calls_in_flight() {
    // Every call takes 2.5 s; stdin ends right after the two calls are read.
    let dir = setup(
        &["--delay-ms", "2500"],
        &[
            initialize(),
            initialized(),
            call(json!(2), "discover_sub_goals", json!({})),
            call(json!(3), "trigger_consolidation", json!({})),
        ],
    );
    let (status, _) = sh(
        &dir,
        r#""$MONIKER" serve -c moniker.yaml < requests.jsonl > out.json"#,
    );
    assert!(status.success(), "{status}: {}", read(&dir, "stderr.log"));
    let out = read(&dir, "out.json");
    let replies = replies(&out);
    assert_eq!(replies.len(), 3, "{out}");
    for id in [2, 3] {
        let (_, reply) = replies
            .iter()
            .find(|(i, _)| *i == json!(id))
            .unwrap_or_else(|| panic!("no reply to call {id}:\n{out}"));
        assert!(reply["result"]["content"].is_array(), "{out}");
    }
}
