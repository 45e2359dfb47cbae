//! The ContextGraph story: a client relies on `discover_goals`, the server ships it as
//! `discover_sub_goals`. `moniker lock` remembers the name, `moniker check --locked` catches
//! the rename and prints the override, and with the override the old name works again.

use std::path::Path;

use serde_json::json;

use crate::check::{moniker, run};

/// A fixture inventory with one tool named `goals_tool` (and one that stays).
fn inventory(path: &Path, goals_tool: &str) {
    let goal_schema = json!({
        "type": "object",
        "properties": {
            "goal_id": {"type": "string", "description": "The goal to expand"},
            "max_depth": {"type": "integer"}
        },
        "required": ["goal_id"]
    });
    std::fs::write(
        path,
        json!({
            "serverInfo": {"name": "contextgraph", "version": "1.0.0"},
            "tools": [
                {"name": goals_tool, "description": "Sub-goals of a goal.", "inputSchema": goal_schema},
                {"name": "abort_dream", "description": "Abort the dream.", "inputSchema": {"type": "object"}}
            ]
        })
        .to_string(),
    )
    .expect("inventory");
}

#[test]
fn a_renamed_tool_is_caught_and_kept_by_its_override() {
    let dir = moniker_fixture::scratch();
    let inv = dir.join("contextgraph.json");
    inventory(&inv, "discover_goals");
    let servers = format!(
        "servers:\n{}",
        moniker_fixture::fixture_server("contextgraph", &[&inv.display().to_string()])
    );
    let config = dir.join("moniker.yaml");
    std::fs::write(&config, &servers).expect("config");
    let lock_path = dir.join("moniker.lock");
    let with_config = |args: &[&str]| {
        let mut command = moniker(args);
        command.args(["--log", "off", "-c"]).arg(&config);
        run(&mut command)
    };

    // Without a lock, `check` says nothing of one; `--locked` asks for it.
    let (code, stdout, stderr) = with_config(&["check"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stdout.contains("moniker.lock"), "{stdout}");
    let (code, _, stderr) = with_config(&["check", "--locked"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("write it with `moniker lock`"), "{stderr}");

    let (code, stdout, stderr) = with_config(&["lock", "--diff"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("+ tool discover_goals server=contextgraph origin=discover_goals schema="),
        "{stdout}"
    );
    assert!(stdout.contains("2 added, 0 removed, 0 changed"), "{stdout}");
    assert!(!lock_path.exists(), "--diff writes nothing");

    let (code, stdout, stderr) = with_config(&["lock"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.starts_with("wrote `"), "{stdout}");
    let locked = std::fs::read_to_string(&lock_path).expect("moniker.lock written");
    assert!(
        locked.contains("\ntool discover_goals server=contextgraph origin=discover_goals schema=")
            && locked.contains(" params=goal_id!:string,max_depth:integer\n"),
        "{locked}"
    );
    let (code, stdout, stderr) = with_config(&["lock", "--diff"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.ends_with("is up to date\n"), "{stdout}");
    let (code, stdout, stderr) = with_config(&["check", "--locked"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("no breaking change against"), "{stdout}");

    // The server renames the tool.
    inventory(&inv, "discover_sub_goals");
    let (code, stdout, stderr) = with_config(&["check"]);
    assert_eq!(code, 0, "a warning without --locked: {stdout}{stderr}");
    assert!(stdout.contains("1 breaking change against"), "{stdout}");
    let (code, stdout, stderr) = with_config(&["check", "--locked"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains("tool `discover_goals` of server `contextgraph` is gone: likely renamed to `discover_sub_goals`"),
        "{stderr}"
    );
    assert!(stderr.contains("lock::gone"), "{stderr}");
    let fix = "tools:\n  discover_sub_goals: { aliases: [discover_goals] }";
    let printed: Vec<&str> = stderr.lines().map(str::trim).collect();
    let at = printed
        .iter()
        .position(|l| *l == "tools:")
        .unwrap_or_else(|| panic!("the override in:\n{stderr}"));
    assert_eq!(
        printed[at + 1],
        "discover_sub_goals: { aliases: [discover_goals] }",
        "{stderr}"
    );
    let (code, stdout, stderr) = with_config(&["call", "discover_goals", "{}"]);
    assert_eq!(code, 1, "the old name is broken: {stdout}{stderr}");
    serve_reports_the_rename(&config);

    // The override, pasted.
    std::fs::write(&config, format!("{servers}{fix}\n")).expect("config");
    let (code, stdout, stderr) = with_config(&["check", "--locked"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("no breaking change against"), "{stdout}");
    let (code, stdout, stderr) = with_config(&["call", "discover_goals", r#"{"goal_id": "g1"}"#]);
    assert_eq!(code, 0, "{stdout}{stderr}");
}

/// `serve` checks the surface against the lock as servers join: the rename is in its log,
/// with the override, and in its metrics.
fn serve_reports_the_rename(config: &Path) {
    let mut command = moniker(&["serve", "--http", "127.0.0.1:0", "--log", "warn", "-c"]);
    command.arg(config);
    // It listens at once; the server's joining brings the warning, its fix last (before or
    // after the address, as the server is fast: its listing is known from the runs before).
    let (fix, listening) = (std::cell::Cell::new(false), std::cell::Cell::new(false));
    let (lines, mut child) = crate::first_contact::lines_until(&mut command, |l| {
        fix.set(fix.get() || l.contains("discover_sub_goals: { aliases: [discover_goals] }"));
        listening.set(listening.get() || l.starts_with("moniker is listening on "));
        fix.get() && listening.get()
    });
    let address = lines
        .iter()
        .find_map(|l| l.strip_prefix("moniker is listening on "))
        .map(|a| a.trim().to_owned());
    let log = lines.join("\n");
    let address = address.unwrap_or_else(|| panic!("no address in:\n{log}"));
    let scrape = || {
        ureq::get(&format!("{address}/metrics"))
            .call()
            .map(|mut r| r.body_mut().read_to_string().unwrap_or_default())
            .unwrap_or_default()
    };
    // The count is set once the warning is written.
    let mut metrics = scrape();
    for _ in 0..100 {
        if metrics.contains("moniker_lock_breaking_changes 1") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        metrics = scrape();
    }
    let _ = child.kill();
    let _ = child.wait();
    let log = lines.join("\n");
    assert!(
        log.contains("tool `discover_goals` of server `contextgraph` is gone: likely renamed to `discover_sub_goals`")
            && log.contains("discover_sub_goals: { aliases: [discover_goals] }"),
        "{log}"
    );
    assert!(
        metrics.contains("moniker_lock_breaking_changes 1"),
        "{metrics}"
    );
}
