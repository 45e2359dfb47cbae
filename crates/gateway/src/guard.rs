//! The guard: a tiny process between moniker and each server process, so that no server is
//! left behind when moniker is killed (even by SIGKILL, when moniker itself runs no code).
//!
//! moniker starts `moniker __guard -- COMMAND ARGS...` as the leader of a new process group;
//! the guard starts the server in that group with the same stdin, stdout and stderr (so the
//! data path does not pass through it), waits for it, and polls its own parent: when the
//! parent changes, moniker is gone, and the guard ends the whole group. moniker ends a server
//! by signalling the group.

use std::ffi::OsString;
use std::io::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// Runs the guard: `[--sandbox PLAN] [--] COMMAND ARGS...`; returns the exit code to exit with.
pub fn run(args: &[OsString]) -> i32 {
    let (plan, args) = match args {
        [flag, plan, rest @ ..] if flag == "--sandbox" => (Some(plan), rest),
        _ => (None, args),
    };
    let args = match args.split_first() {
        Some((dashes, rest)) if dashes == "--" => rest,
        _ => args,
    };
    let Some((command, rest)) = args.split_first() else {
        tracing::error!("the guard needs a command to run");
        return 2;
    };
    let parent = std::os::unix::process::parent_id();
    let mut server = Command::new(command);
    server.args(rest);
    if let Some(plan) = plan {
        match sandboxed(plan) {
            Ok(temp) => {
                server.env("TMPDIR", temp);
            }
            Err(why) => {
                // On the server's stderr, which moniker reads: why it did not start.
                let _ = writeln!(std::io::stderr(), "moniker sandbox: {why}");
                return 126;
            }
        }
    }
    let mut child = match server.spawn() {
        Ok(child) => child,
        Err(e) => {
            // On the server's stderr, which moniker reads: the reason it did not start.
            let why = crate::connect::stdio::cannot_run(&command.to_string_lossy(), &e);
            let _ = writeln!(std::io::stderr(), "{why}");
            return match e.kind() {
                std::io::ErrorKind::PermissionDenied => 126,
                _ => 127,
            };
        }
    };
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.code().unwrap_or(1),
            Ok(None) => {}
            Err(_) => return 1,
        }
        if std::os::unix::process::parent_id() != parent {
            end_group_but_self();
            return 1;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Applies the sandbox `plan` (JSON, a [`crate::sandbox::Plan`]) to the guard, which the server
/// then inherits; says what is enforced. The server's temporary folder.
fn sandboxed(plan: &OsString) -> Result<std::path::PathBuf, String> {
    let plan: crate::sandbox::Plan = plan
        .to_str()
        .and_then(|text| serde_json::from_str(text).ok())
        .ok_or("its plan is not one moniker made")?;
    let enforced = crate::sandbox::apply(&plan)?;
    let _ = writeln!(
        std::io::stderr(),
        "moniker sandbox: files {} (Landlock); network {}; at most {} processes ({}), {} open files{}",
        enforced.landlock,
        enforced.network,
        plan.processes,
        enforced.processes,
        plan.open_files,
        plan.memory
            .map(|m| format!(", {} MB of data", m >> 20))
            .unwrap_or_default(),
    );
    Ok(enforced.temp)
}

/// SIGTERM to every other member of this process group, then SIGKILL to those still there
/// after two seconds.
fn end_group_but_self() {
    let me = std::process::id();
    let group = nix::unistd::getpgrp();
    let others = || {
        group_members(group.as_raw())
            .into_iter()
            .filter(move |&p| p != me as i32)
    };
    for pid in others() {
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && others().next().is_some() {
        std::thread::sleep(Duration::from_millis(50));
    }
    for pid in others() {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// The live (not zombie) processes of a process group, from `/proc`.
fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let pid: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
        let after = &stat[stat.rfind(')')? + 2..];
        let mut fields = after.split(' ');
        let state = fields.next()?;
        let pgrp: i32 = fields.nth(1)?.parse().ok()?;
        (pgrp == pgid && state != "Z").then_some(pid)
    })
    .collect()
}

/// Ends a process group started by moniker: SIGTERM now, SIGKILL after `grace` if any member
/// is left. Returns when the group is empty or SIGKILL was sent.
pub async fn end_group(pgid: u32, grace: Duration) {
    let group = Pid::from_raw(pgid as i32);
    if killpg(group, Signal::SIGTERM).is_err() {
        return;
    }
    if !emptied(pgid, grace).await {
        let _ = killpg(group, Signal::SIGKILL);
    }
}

/// Whether process group `pgid` is empty within `grace`, looked at every 25 ms.
async fn emptied(pgid: u32, grace: Duration) -> bool {
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if group_members(pgid as i32).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}
