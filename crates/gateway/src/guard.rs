//! The guard: a tiny process between moniker and each server process, so that no server is
//! left behind when moniker is killed (even by SIGKILL, when moniker itself runs no code).
//!
//! moniker starts `moniker __guard -- COMMAND ARGS...` as the leader of a new process group;
//! the guard starts the server in that group with the same stdin, stdout and stderr (so the
//! data path does not pass through it), waits for it, and polls its own parent: when the
//! parent changes, moniker is gone, and the guard ends the whole group. moniker ends a server
//! by signalling the group.
//!
//! A sandboxed server has one process more between them: the guard applies what is applied
//! from outside (a cgroup, namespaces, limits), then starts moniker again as the init of the
//! server's PID namespace (`--inside`), which applies the rest and starts the server.

use std::ffi::OsString;
use std::io::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// What a guard process does, as its first arguments say.
enum Role<'a> {
    /// Starts the server and watches it.
    Plain,
    /// Applies the sandbox (`--sandbox PLAN`, a [`crate::sandbox::Plan`] in JSON) from outside,
    /// then starts and watches the init of its namespaces.
    Sandbox(&'a OsString),
    /// Stands as the init of a sandbox's namespaces (`--inside OUTSIDE`, a
    /// [`crate::sandbox::Outside`] in JSON): applies the rest, starts the server, reaps.
    Inside(&'a OsString),
}

/// Runs the guard: `[--sandbox PLAN | --inside OUTSIDE] [--] COMMAND ARGS...`; returns the exit
/// code to exit with.
pub fn run(args: &[OsString]) -> i32 {
    let (role, args) = match args {
        [flag, plan, rest @ ..] if flag == "--sandbox" => (Role::Sandbox(plan), rest),
        [flag, outside, rest @ ..] if flag == "--inside" => (Role::Inside(outside), rest),
        _ => (Role::Plain, args),
    };
    let args = match args.split_first() {
        Some((dashes, rest)) if dashes == "--" => rest,
        _ => args,
    };
    let Some((command, rest)) = args.split_first() else {
        tracing::error!("the guard needs a command to run");
        return 2;
    };
    let mut server = Command::new(command);
    server.args(rest);
    match role {
        Role::Plain => watch(server),
        Role::Sandbox(plan) => match init_of(plan, args) {
            Ok((init, temp)) => {
                let code = watch(init);
                // The server ended on its own, or moniker is gone (when moniker ends it, the
                // guard ends with it, and moniker removes the folder).
                let _ = std::fs::remove_dir_all(temp);
                code
            }
            Err(why) => refused(&why),
        },
        Role::Inside(outside) => match confined(outside) {
            Ok(temp) => {
                server.env("TMPDIR", temp);
                match start(&mut server) {
                    Ok(child) => reap_until(child.id()),
                    Err(code) => code,
                }
            }
            Err(why) => refused(&why),
        },
    }
}

/// Says on the server's stderr, which moniker reads, why it did not start: 126.
fn refused(why: &str) -> i32 {
    crate::sandbox::say(why);
    126
}

/// Starts `command` (the server or its init) and waits for it, polling the guard's own parent:
/// when it changes, moniker is gone, and the guard ends the whole group.
fn watch(mut command: Command) -> i32 {
    let parent = std::os::unix::process::parent_id();
    let mut child = match start(&mut command) {
        Ok(child) => child,
        Err(code) => return code,
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

/// Starts `command`; if it cannot, says why on its stderr (which moniker reads) and gives the
/// code to exit with.
fn start(command: &mut Command) -> Result<std::process::Child, i32> {
    command.spawn().map_err(|e| {
        let program = command.get_program().to_string_lossy();
        let why = crate::connect::stdio::cannot_run(&program, &e);
        let _ = writeln!(std::io::stderr(), "{why}");
        match e.kind() {
            std::io::ErrorKind::PermissionDenied => 126,
            _ => 127,
        }
    })
}

/// Applies the sandbox `plan` from outside to the guard, and gives the command that starts
/// its init (this program again, `--inside`) inside the namespaces made, to run `server`, and
/// the server's temporary folder.
fn init_of(plan: &OsString, server: &[OsString]) -> Result<(Command, std::path::PathBuf), String> {
    let plan: crate::sandbox::Plan = handed(plan, "its plan is not one moniker made")?;
    let outside = crate::sandbox::apply(plan)?;
    let handed = serde_json::to_string(&outside).map_err(|e| e.to_string())?;
    let mut init = Command::new(own_program()?);
    init.args(["__guard", "--inside", &handed, "--"])
        .args(server);
    Ok((init, outside.temp))
}

/// This program, to start again: on Linux through `/proc`, which names it even once an
/// upgrade replaced its file.
fn own_program() -> Result<std::path::PathBuf, String> {
    if cfg!(target_os = "linux") {
        return Ok("/proc/self/exe".into());
    }
    std::env::current_exe().map_err(|e| format!("cannot find moniker's own program ({e})"))
}

/// Applies the rest of the sandbox (`outside`, what the guard made of it) to this process, the
/// init inside its namespaces, and says what is enforced. The server's temporary folder.
fn confined(outside: &OsString) -> Result<std::path::PathBuf, String> {
    let outside: crate::sandbox::Outside = handed(
        outside,
        "what its guard made is not said as moniker says it",
    )?;
    crate::sandbox::say(&crate::sandbox::confine(&outside)?);
    Ok(outside.temp)
}

/// What moniker handed a guard as one argument (JSON it wrote); `unread` when it does not read.
fn handed<T: serde::de::DeserializeOwned>(arg: &OsString, unread: &str) -> Result<T, String> {
    arg.to_str()
        .and_then(|text| serde_json::from_str(text).ok())
        .ok_or_else(|| unread.to_owned())
}

/// Waits, as the init of a sandbox's namespaces, until the server (`server`) ends, reaping
/// every process orphaned in them on the way; the server's exit code. When the init ends, the
/// kernel ends whatever is left in its namespace.
fn reap_until(server: u32) -> i32 {
    use nix::errno::Errno;
    use nix::sys::wait::{WaitStatus, waitpid};
    let server = Pid::from_raw(server as i32);
    loop {
        match waitpid(None::<Pid>, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == server => return code,
            Ok(WaitStatus::Signaled(pid, ..)) if pid == server => return 1,
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return 1,
        }
    }
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

/// Whether process group `pgid` is empty within `grace`, looked at every 25 ms (each look a
/// scan of `/proc`, on a blocking thread: not on the one that serves the clients).
async fn emptied(pgid: u32, grace: Duration) -> bool {
    let deadline = Instant::now() + grace;
    let empty = move || group_members(pgid as i32).is_empty();
    while Instant::now() < deadline {
        if tokio::task::spawn_blocking(empty).await.unwrap_or(true) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}
