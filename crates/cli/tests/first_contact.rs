//! What a new user meets in the first hour: why a server did not start, one-shot commands
//! without noise, and what `serve --http` says about itself.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use moniker_fixture::{fixture_bin, fixture_file, scratch};

fn moniker() -> Command {
    Command::new(Path::new(env!("CARGO_BIN_EXE_moniker")))
}

fn run(args: &[&str], config: &Path) -> (Output, String, String) {
    let out = moniker()
        .args(args)
        .arg("-c")
        .arg(config)
        .output()
        .expect("moniker");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

/// A config with a working fixture server and three that cannot start, each for its own
/// reason.
fn broken_servers() -> PathBuf {
    let config = scratch().join("moniker.yaml");
    let cg = fixture_file("contextgraph.json").display().to_string();
    std::fs::write(
        &config,
        format!(
            "servers:\n  cg:\n    command: {:?}\n    args: [{cg:?}]\n  missing:\n    command: no-such-mcp-server-xyz\n  dies:\n    command: sh\n    args: [\"-c\", \"echo 'error: GITHUB_TOKEN is not set' >&2; exit 3\"]\n",
            fixture_bin().display().to_string()
        ),
    )
    .expect("config");
    config
}

#[test]
fn a_server_that_cannot_start_is_named_with_its_cause() {
    let config = broken_servers();
    let (out, stdout, stderr) = run(&["check"], &config);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("server `missing` failed to start: cannot run `no-such-mcp-server-xyz`: command not found"),
        "{stderr}"
    );
    assert!(
        stderr.contains("server `dies` failed to start: it exited with status 3")
            && stderr.contains("GITHUB_TOKEN is not set"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("exited during the handshake\n"),
        "{stderr}"
    );

    // `list` lists what it can, and fails: a server it needs is missing.
    let (out, stdout, stderr) = run(&["list"], &config);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("discover_sub_goals"), "{stdout}");
    assert!(stderr.contains("command not found"), "{stderr}");

    // A call that the working server answers succeeds, with a warning about the others; a
    // call that finds no tool fails and says why servers are missing.
    let (out, stdout, stderr) = run(&["call", "discover_sub_goals", "{}"], &config);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains("warning: server `missing` failed to start"),
        "{stderr}"
    );
    let (out, _, stderr) = run(&["call", "create_issue", "{}"], &config);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("-32004") && stderr.contains("error: server `missing` failed to start"),
        "{stderr}"
    );
}

/// `@modelcontextprotocol/server-everything`, installed by scripts/test; required under CI.
fn everything() -> Option<PathBuf> {
    let index = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/e2e/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if index.is_file() {
        return Some(index);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} is absent: scripts/test installs it",
        index.display()
    );
    None
}

#[test]
fn one_shot_commands_in_front_of_server_everything_print_no_warning() {
    let Some(index) = everything() else { return };
    let config = scratch().join("moniker.yaml");
    std::fs::write(
        &config,
        format!(
            "servers:\n  everything:\n    command: node\n    args: [{:?}, \"stdio\"]\n",
            index.display().to_string()
        ),
    )
    .expect("config");
    for round in 0..5 {
        let (out, stdout, stderr) = run(&["list"], &config);
        assert!(out.status.success(), "round {round}: {stdout}{stderr}");
        assert!(stdout.contains("echo"), "round {round}: {stdout}");
        assert!(
            !stderr.contains("WARN") && !stderr.contains("warning"),
            "round {round}: {stderr}"
        );
    }
}

/// The lines `serve --http` writes to stderr before any request, until `until` is seen.
fn first_lines(
    args: &[&str],
    env: &[(&str, &str)],
    until: &str,
) -> (Vec<String>, std::process::Child) {
    let config = scratch().join("moniker.yaml");
    std::fs::write(
        &config,
        format!(
            "servers:\n  fx:\n    command: {:?}\n",
            fixture_bin().display().to_string()
        ),
    )
    .expect("config");
    let mut command = moniker();
    command
        .args(args)
        .arg("-c")
        .arg(&config)
        .envs(env.iter().copied());
    lines_until(&mut command, |line| line.contains(until))
}

/// Spawns `command` and reads its stderr lines until one satisfies `done` (or 20 s passed):
/// the lines, and the process (still running), with the rest of its stderr.
pub(crate) fn lines_until(
    command: &mut std::process::Command,
    done: impl Fn(&str) -> bool,
) -> (Vec<String>, std::process::Child) {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("moniker");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut lines = Vec::new();
    while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        let finished = done(&line);
        lines.push(line);
        if finished {
            break;
        }
    }
    (lines, child)
}

#[test]
fn serve_http_says_where_it_listens_and_whether_tokens_are_required() {
    let (lines, mut child) =
        first_lines(&["serve", "--http", "127.0.0.1:0"], &[], "authentication:");
    let _ = child.kill();
    let _ = child.wait();
    let text = lines.join("\n");
    let listening = lines
        .iter()
        .find(|l| l.starts_with("moniker is listening on http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("{text}"));
    let port = listening.rsplit(':').next().expect("port");
    assert!(port.parse::<u16>().is_ok_and(|p| p > 0), "{text}");
    assert!(
        text.contains(&format!("http://127.0.0.1:{port}/mcp")),
        "{text}"
    );
    assert!(
        text.contains("/metrics") && text.contains("/healthz"),
        "{text}"
    );
    assert!(text.contains("no token required"), "{text}");

    let (lines, mut child) = first_lines(
        &["serve", "--http", "127.0.0.1:0"],
        &[("MONIKER_TOKENS", "a-secret-token")],
        "authentication:",
    );
    let _ = child.kill();
    let _ = child.wait();
    let text = lines.join("\n");
    assert!(text.contains("a bearer token is required"), "{text}");
    assert!(!text.contains("a-secret-token"), "{text}");
}

#[test]
fn listening_on_every_address_without_a_token_says_how_to_set_one() {
    let (lines, mut child) = first_lines(&["serve", "--http", "0.0.0.0:0"], &[], "refusing");
    let status = child.wait().expect("exit");
    let text = lines.join("\n");
    assert_eq!(status.code(), Some(78), "{text}");
    for needed in ["http.tokens", "$MONIKER_TOKENS", "http.allowed_hosts"] {
        assert!(text.contains(needed), "{needed} in:\n{text}");
    }
}

#[test]
fn an_unreachable_https_server_is_named_with_its_reason() {
    let config = scratch().join("moniker.yaml");
    std::fs::write(
        &config,
        "servers:\n  remote:\n    url: https://127.0.0.1:9/mcp\n",
    )
    .expect("config");
    let (out, stdout, stderr) = run(&["check"], &config);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("cannot reach `https://127.0.0.1:9/mcp`"),
        "{stderr}"
    );
    assert!(!stderr.contains("TLS support"), "{stderr}");
}
