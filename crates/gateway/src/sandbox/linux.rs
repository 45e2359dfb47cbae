//! What the kernel enforces of a sandbox, on Linux: a pids cgroup, namespaces, limits, Landlock.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::{Inside, Net, Outside, Plan, pids_cgroup};

/// The ABI whose rights a sandbox asks for: the kernel's own may be lower (negotiated).
const ABI_ASKED: ABI = ABI::V6;

/// The guard and the init: in the sandbox's process limits beside the server's own.
const OURS: u64 = 2;

/// Enforces from outside what of `plan` is (this process is the guard; its temporary folder
/// `temp` made): its process limit (a cgroup, made through /sys), its namespaces (user, PID,
/// and network when off), its limits; and hands the init it starts the right to mount its
/// `/proc`.
pub(super) fn outside(plan: Plan, temp: PathBuf) -> Result<Outside, String> {
    let best_effort = plan.best_effort;
    let processes = match own_pids(plan.processes.saturating_add(OURS)) {
        Ok(()) => Ok("a pids cgroup of its own"),
        Err(_) if !nix::unistd::geteuid().is_root() => Ok("its user namespace's process limit"),
        Err(why) => Err(format!(
            "{why}, and the kernel exempts root from the process limit"
        )),
    };
    let processes = unless_best_effort(
        best_effort,
        processes,
        "processes are not limited",
        "not limited (root, no cgroup)",
    )?;
    let namespaces = own_namespaces(&plan.network);
    let made = namespaces.is_ok();
    let network = unless_best_effort(
        best_effort,
        namespaces,
        "running without it",
        "as the user's (no namespace)",
    )?;
    if made {
        let pid = own_pid_namespace().and_then(|()| hand_mount_to_init());
        unless_best_effort(best_effort, pid, "the system's processes are seen", ())?;
    }
    limits(&plan)?;
    Ok(Outside {
        plan,
        temp,
        processes: processes.to_owned(),
        network: network.to_owned(),
    })
}

/// What was `done`; or, when it could not be and the plan is best-effort, `fallback`, said
/// with why and what is left out (`without`).
fn unless_best_effort<T>(
    best_effort: bool,
    done: Result<T, String>,
    without: &str,
    fallback: T,
) -> Result<T, String> {
    match done {
        Ok(done) => Ok(done),
        Err(why) if best_effort => {
            super::say(&format!("{why}; {without} (best-effort)"));
            Ok(fallback)
        }
        Err(why) => Err(format!("{why}: `sandbox: best-effort` runs it without")),
    }
}

/// Enforces the rest inside (this process is the init of the server's PID namespace): its own
/// `/proc`, then no capability left and no tracing of it, then the files' rules (after which
/// nothing can be mounted).
pub(super) fn inside(outside: &Outside) -> Result<Inside, String> {
    let plan = &outside.plan;
    // Without namespaces (best-effort), this process is no namespace's init (1): a /proc of
    // its own would show the system's processes all the same.
    let own = if std::process::id() == 1 {
        own_proc()
    } else {
        Err("no PID namespace of its own".to_owned())
    };
    let processes_seen = unless_best_effort(
        plan.best_effort,
        own.map(|()| "only its own processes seen (a PID namespace and its /proc)"),
        "the system's processes are seen",
        "the system's processes seen (best-effort)",
    )?;
    rustix::thread::clear_ambient_capability_set()
        .and_then(|()| {
            rustix::thread::set_capabilities(
                None,
                rustix::thread::CapabilitySets {
                    effective: rustix::thread::CapabilitySet::empty(),
                    permitted: rustix::thread::CapabilitySet::empty(),
                    inheritable: rustix::thread::CapabilitySet::empty(),
                },
            )
        })
        .map_err(|e| format!("cannot drop its capabilities ({e})"))?;
    // Not dumpable: the server (the same user, in the same Landlock domain) cannot trace it,
    // and so cannot make it leave the process group moniker ends.
    nix::sys::prctl::set_dumpable(false)
        .map_err(|e| format!("cannot keep its init from being traced ({e})"))?;
    let mut write = plan.write.clone();
    write.push(outside.temp.clone());
    Ok(Inside {
        landlock: landlock(plan, &write)?,
        processes_seen,
    })
}

/// A PID namespace for the processes it starts, the init first (apart from the user and network
/// namespaces: a kernel may give those and not this).
fn own_pid_namespace() -> Result<(), String> {
    use nix::sched::{CloneFlags, unshare};
    unshare(CloneFlags::CLONE_NEWPID).map_err(|e| {
        format!("the kernel gives no PID namespace ({e}): other processes would be seen")
    })
}

/// Keeps the right to mount (`CAP_SYS_ADMIN` in the guard's new user namespace) across the
/// init's start, through the ambient set: the user's own id keeps no capability past `exec`
/// otherwise. The init drops it once its `/proc` is mounted.
fn hand_mount_to_init() -> Result<(), String> {
    use rustix::thread::{CapabilitySet, capabilities, configure_capability_in_ambient_set};
    let why = |e: rustix::io::Errno| format!("cannot hand its init the right to mount ({e})");
    let mut sets = capabilities(None).map_err(why)?;
    sets.inheritable |= CapabilitySet::SYS_ADMIN;
    rustix::thread::set_capabilities(None, sets).map_err(why)?;
    configure_capability_in_ambient_set(CapabilitySet::SYS_ADMIN, true).map_err(why)
}

/// A `/proc` of its own (in a mount namespace of its own), of the PID namespace this process
/// is init of: the processes outside it, moniker's among them, are not there to read.
fn own_proc() -> Result<(), String> {
    use nix::mount::{MsFlags, mount};
    use nix::sched::{CloneFlags, unshare};
    unshare(CloneFlags::CLONE_NEWNS).map_err(|e| {
        format!("no mount namespace of its own ({e}): other processes would be seen")
    })?;
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("proc"), "/proc", Some("proc"), flags, None::<&str>)
        .map_err(|e| format!("cannot mount its own /proc ({e}): other processes would be seen"))
}

/// This process (the guard) in a pids cgroup of its own, of at most `limit` processes.
fn own_pids(limit: u64) -> Result<(), String> {
    let dir = pids_cgroup(std::process::id()).ok_or("no pids cgroup here")?;
    if let Some(base) = dir.parent() {
        remove_ended(base, std::process::id());
    }
    // Made, limited and joined; made again when another guard removed it in between (one
    // whose number was this one's a moment ago: `remove_ended` read it as ended).
    let join = || -> std::io::Result<()> {
        match std::fs::create_dir(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        std::fs::write(dir.join("pids.max"), limit.to_string())?;
        std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string())
    };
    let mut tries = 0;
    loop {
        match join() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 3 => tries += 1,
            done => return done.map_err(|e| format!("{}: {e}", dir.display())),
        }
    }
}

/// Removes the cgroups in `base` of sandboxes that ended while moniker could not remove them (a
/// one-shot command exits first): not one with a process in it (the kernel refuses), nor one
/// whose guard still runs (it may have made it and not joined it yet: removed then, its start
/// failed). The guard `own`'s name is one left by a process of the same number, long gone.
fn remove_ended(base: &Path, own: u32) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(guard) = name
            .to_str()
            .and_then(|n| n.strip_prefix("moniker-sandbox-"))
        else {
            continue;
        };
        let running = guard
            .parse::<u32>()
            .is_ok_and(|pid| pid != own && Path::new("/proc").join(pid.to_string()).exists());
        if !running {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// A user namespace of its own (processes counted apart from the user's others), and with the
/// network off a network namespace with no interface up.
fn own_namespaces(network: &Net) -> Result<&'static str, String> {
    use nix::sched::{CloneFlags, unshare};
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    let mut flags = CloneFlags::CLONE_NEWUSER;
    if *network == Net::Off {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|e| format!("the kernel gives no user namespace ({e}): the network cannot be taken away and processes cannot be counted apart"))?;
    // The same user inside as outside: files are theirs as before.
    let write =
        |file: &str, text: String| std::fs::write(file, text).map_err(|e| format!("{file}: {e}"));
    write("/proc/self/setgroups", "deny".to_owned())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    Ok(match network {
        Net::Off => "off (a network namespace of its own)",
        Net::On => "on",
        Net::Ports(_) => "TCP to the ports named (Landlock)",
    })
}

fn limits(plan: &Plan) -> Result<(), String> {
    use nix::sys::resource::{Resource, setrlimit};
    let mut set = vec![
        (
            Resource::RLIMIT_NPROC,
            plan.processes.saturating_add(OURS),
            "processes",
        ),
        (Resource::RLIMIT_NOFILE, plan.open_files, "open_files"),
    ];
    if let Some(bytes) = plan.memory {
        set.push((Resource::RLIMIT_DATA, bytes, "memory"));
    }
    for (resource, limit, name) in set {
        setrlimit(resource, limit, limit).map_err(|e| format!("sandbox.{name}: {e}"))?;
    }
    Ok(())
}

/// The files (and TCP ports) rules, at the best ABI the kernel has: what it enforced, said.
fn landlock(plan: &Plan, write: &[PathBuf]) -> Result<String, String> {
    let level = if plan.best_effort {
        CompatLevel::BestEffort
    } else {
        CompatLevel::HardRequirement
    };
    let fs_read = AccessFs::from_read(ABI_ASKED);
    let fs_all = AccessFs::from_all(ABI_ASKED);
    let why = |e: landlock::RulesetError| format!("Landlock: {e}");
    let mut ruleset = Ruleset::default()
        .set_compatibility(level)
        .handle_access(fs_all)
        .map_err(why)?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(why)?;
    if let Net::Ports(_) = plan.network {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(why)?;
    }
    let mut created = ruleset.create().map_err(why)?;
    for (paths, access) in [(&plan.read, fs_read), (&write.to_vec(), fs_all)] {
        for path in paths {
            // A path that is not there gives nothing (a folder a config names may come later).
            let Ok(fd) = PathFd::new(path) else { continue };
            let access = if path.is_dir() {
                access
            } else {
                access & AccessFs::from_file(ABI_ASKED)
            };
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(why)?;
        }
    }
    if let Net::Ports(ports) = &plan.network {
        for port in ports {
            created = created
                .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
                .map_err(why)?;
        }
    }
    let status = created.restrict_self().map_err(why)?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => "fully enforced".to_owned(),
        RulesetStatus::PartiallyEnforced => "partly enforced (an older kernel)".to_owned(),
        RulesetStatus::NotEnforced => "not enforced (no Landlock here)".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_cgroups_of_ended_guards_are_removed() {
        let base = tempfile::tempdir().expect("dir");
        let running = std::process::id();
        // A process number past the kernel's largest is no running guard's.
        let ended = u32::MAX;
        for pid in [running, ended, 7] {
            std::fs::create_dir(base.path().join(format!("moniker-sandbox-{pid}"))).expect("dir");
        }
        std::fs::create_dir(base.path().join("another")).expect("dir");
        remove_ended(base.path(), 7);
        let left: std::collections::BTreeSet<String> = std::fs::read_dir(base.path())
            .expect("dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        let expected: std::collections::BTreeSet<String> =
            [format!("moniker-sandbox-{running}"), "another".to_owned()].into();
        assert_eq!(left, expected);
    }
}
