//! A stdio server's sandbox (`servers.<id>.sandbox`): what it may reach, made into a [`Plan`] in
//! moniker (paths resolved against the server's command, arguments and the config, defaults
//! filled) and handed to the guard, which applies it to itself before it starts the server, so
//! that the server and every process it starts inherit it, at no cost on the call path:
//!
//! - files, by Landlock: the system and the server's runtime readable (and runnable), a private
//!   temporary folder (`$TMPDIR`), the paths its arguments name and those the config names;
//!   nothing else of the user's home. Landlock also keeps it from tracing (or reading the
//!   `/proc/<pid>/environ` of) any process outside the sandbox, moniker's included.
//! - processes: a PID namespace of its own, with its own `/proc`: no process outside it is
//!   seen (nor its command line read). The guard starts its init (moniker again, `__guard
//!   --inside`), which mounts that `/proc`, applies the files' rules, starts the server and
//!   reaps what is orphaned; when the server ends, the kernel ends what is left.
//! - the network: `off` is a network namespace of its own (in a user namespace), with no
//!   interface up: no connection of any kind; a list of ports is Landlock's TCP rules.
//! - limits: processes (counted in its user namespace, so the user's other processes do not
//!   count), open files, memory (data), and no new privileges.
//!
//! The kernel's Landlock ABI is negotiated: what is enforced is said on the server's stderr
//! (which moniker logs); what cannot be is refused, unless `best_effort`.

use std::path::{Path, PathBuf};

use moniker_config::{Network, Sandbox};
use serde::{Deserialize, Serialize};

/// Processes a sandboxed server may run at once unless its config says otherwise.
const PROCESSES: u64 = 256;
/// Files it may hold open unless its config says otherwise.
const OPEN_FILES: u64 = 1024;
/// The system's folders every sandbox may read and run (those that exist).
const SYSTEM: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix",
    "/snap",
    "/proc",
    "/sys",
    "/dev",
    // `/etc/resolv.conf` links here on systemd's machines; the rest of /run (the user's
    // runtime folder, moniker's own socket among them) is not given.
    "/run/systemd/resolve",
];
/// Devices every sandbox may write.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];
/// What the guard applies: every path absolute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Readable and runnable.
    pub read: Vec<PathBuf>,
    /// Readable and writable.
    pub write: Vec<PathBuf>,
    pub network: Net,
    pub processes: u64,
    pub open_files: u64,
    /// Bytes of data.
    pub memory: Option<u64>,
    pub best_effort: bool,
    /// Where the server's private temporary folder is made: moniker's own temporary folder
    /// (not the server's `TMPDIR`), where moniker finds it to remove when the server ends
    /// ([`release`]). (Absent from a plan of a moniker before it: an upgrade's guard reads it.)
    #[serde(default = "temp_base")]
    pub temp_in: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Net {
    Off,
    On,
    Ports(Vec<u16>),
}

/// What a stdio server runs: its command and arguments, the folder it runs in, and where the
/// user's home is (for `~`).
pub struct Server<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    pub cwd: Option<&'a str>,
    /// The `PATH` its command is looked up in.
    pub path: Option<&'a str>,
    pub home: Option<&'a Path>,
    /// Its own `env:` (not what it inherits): a value that is a path names where it works.
    pub env: &'a indexmap::IndexMap<String, String>,
}

impl Server<'_> {
    /// `p` with a leading `~` made the user's home.
    fn at_home(&self, p: &str) -> PathBuf {
        match (p.strip_prefix("~/"), self.home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ if p == "~" => self
                .home
                .map_or_else(|| PathBuf::from(p), Path::to_path_buf),
            _ => PathBuf::from(p),
        }
    }

    /// The paths its arguments name (relative ones from `base`, its folder): a folder is the
    /// server's to work in (a filesystem server's roots), added to `write`; a file, with the
    /// package it is part of, to read.
    fn arguments_paths(
        &self,
        base: Option<&Path>,
        read: &mut Vec<PathBuf>,
        write: &mut Vec<PathBuf>,
    ) {
        for arg in self.args {
            // `--root=/srv/x` names a path as well as `/srv/x`.
            let value = arg.split_once('=').map_or(arg.as_str(), |(_, v)| v);
            let path = self.at_home(value);
            let path = match (base, path.is_relative()) {
                (Some(base), true) if !value.starts_with('-') => base.join(path),
                (_, true) => continue,
                (_, false) => path,
            };
            // As the kernel will open it: `..` and links resolved.
            let Ok(path) = std::fs::canonicalize(&path) else {
                continue;
            };
            if path.is_dir() {
                if path != Path::new("/") {
                    write.push(path);
                }
            } else {
                read.push(package_of(&path));
            }
        }
    }

    /// The folders of the paths its `env` names (`MEMORY_FILE_PATH`), or a flag of a
    /// well-known server names (`--db-path`): each the server's to work in, as the kernel will
    /// open it (`..` and links resolved). Never `/`, the user's home nor a folder above it.
    fn work_folders(&self) -> Vec<PathBuf> {
        let named = self.env.values().map(String::as_str);
        let home = self.home.and_then(|h| std::fs::canonicalize(h).ok());
        let too_wide =
            |f: &Path| f == Path::new("/") || home.as_ref().is_some_and(|h| h.starts_with(f));
        let mut out = Vec::new();
        for value in named.chain(known_work(self)) {
            if value.contains(':') || !(value.starts_with('/') || value.starts_with("~/")) {
                continue;
            }
            let path = self.at_home(value);
            let folder = if path.is_dir() {
                Some(path.as_path())
            } else {
                path.parent()
            };
            // A `~` with no home known stays relative: nothing of it is given.
            let resolved = folder
                .filter(|f| f.is_absolute())
                .and_then(|f| std::fs::canonicalize(f).ok());
            if let Some(folder) = resolved.filter(|f| f.is_dir() && !too_wide(f)) {
                out.push(folder);
            }
        }
        out
    }
}

impl Plan {
    /// The plan of `sandbox` for `server`.
    pub fn of(sandbox: &Sandbox, server: &Server<'_>) -> Self {
        let home = |p: &str| server.at_home(p);
        let mut read: Vec<PathBuf> = SYSTEM.iter().map(PathBuf::from).collect();
        let mut write: Vec<PathBuf> = DEVICES.iter().map(PathBuf::from).collect();
        read.extend(runtime(server));
        read.extend(known_needs(server).iter().map(|p| home(p)));
        write.extend(runtime_caches(server.command, server.home));
        let base = server.cwd.map(&home);
        server.arguments_paths(base.as_deref(), &mut read, &mut write);
        write.extend(server.work_folders());
        read.extend(base);
        read.extend(sandbox.read.iter().map(|p| home(p)));
        write.extend(sandbox.write.iter().map(|p| home(p)));
        // Each as the kernel will open it (`..` and links resolved: `/usr/..` is `/`, and is
        // said as such), once, in order. One not there stays as written: it gives nothing.
        for paths in [&mut read, &mut write] {
            let mut seen = std::collections::HashSet::new();
            for path in paths.iter_mut() {
                // Not one that resolves into /proc (`/dev/fd`): that is moniker's own, which
                // the server's /proc does not show.
                match std::fs::canonicalize(&*path) {
                    Ok(resolved) if !resolved.starts_with("/proc") => *path = resolved,
                    _ => {}
                }
            }
            paths.retain(|p| seen.insert(p.clone()));
        }
        Self {
            read,
            write,
            network: match &sandbox.network {
                Network::Off => Net::Off,
                Network::On => Net::On,
                Network::Ports(ports) => Net::Ports(ports.clone()),
            },
            processes: sandbox.processes.unwrap_or(PROCESSES),
            open_files: sandbox.open_files.unwrap_or(OPEN_FILES),
            memory: sandbox.memory_mb.map(|mb| mb.saturating_mul(1 << 20)),
            best_effort: sandbox.best_effort,
            temp_in: temp_base(),
        }
    }
}

impl Plan {
    /// The plan of `sandbox` for the stdio server `spec` run with `environment` (its `PATH`
    /// and `HOME`: [`crate::connect::stdio::environment`]); `None` for a remote server.
    pub fn of_stdio(
        sandbox: &Sandbox,
        spec: &moniker_config::Transport,
        environment: &[(std::ffi::OsString, std::ffi::OsString)],
    ) -> Option<Self> {
        let moniker_config::Transport::Stdio {
            command,
            args,
            cwd,
            env,
            ..
        } = spec
        else {
            return None;
        };
        let var = |name: &str| {
            environment
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.to_str())
        };
        let server = Server {
            command,
            args,
            cwd: cwd.as_deref(),
            path: var("PATH"),
            home: var("HOME").map(Path::new),
            env,
        };
        Some(Self::of(sandbox, &server))
    }

    /// Those of `paths` (a plan's) that are not the system's (what every sandbox is given).
    pub fn beyond_system(paths: &[PathBuf]) -> Vec<&PathBuf> {
        paths
            .iter()
            .filter(|p| !SYSTEM.iter().chain(DEVICES).any(|s| p.starts_with(s)))
            .collect()
    }
}

/// The server's runtime: its command, and the interpreter its first line names when it is a
/// script (a venv's console script, `#!/usr/bin/env node`), each as named and as resolved (a
/// link to an interpreter), with the folder above each one's (a venv, a Node prefix, a pyenv
/// version: where its packages are).
fn runtime(server: &Server<'_>) -> Vec<PathBuf> {
    let named = which(server.command, server.path);
    let interpreter = named
        .as_deref()
        .and_then(|script| interpreter_of(script, server.path));
    let mut out = Vec::new();
    for named in named.into_iter().chain(interpreter) {
        let resolved = std::fs::canonicalize(&named).ok();
        for path in std::iter::once(named).chain(resolved) {
            if let Some(prefix) = path.parent().and_then(Path::parent) {
                out.push(prefix.to_path_buf());
            }
            out.push(path);
        }
    }
    out
}

/// The interpreter the first line of `script` names (`#!/path/python`, `#!/usr/bin/env node`).
fn interpreter_of(script: &Path, path: Option<&str>) -> Option<PathBuf> {
    use std::io::Read as _;
    let mut first = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut first).ok()?;
    let line = std::str::from_utf8(&first[..n]).ok()?.strip_prefix("#!")?;
    let line = line.lines().next()?;
    let mut words = line.split_whitespace();
    let program = words.next()?;
    match (Path::new(program).file_name(), words.next()) {
        (Some(env), Some(named)) if env == "env" => which(named, path),
        _ => Some(PathBuf::from(program)),
    }
}

/// What a file an argument names belongs to: the outermost `node_modules` or the
/// `site-packages` it is in (the packages it loads beside it), else its folder.
fn package_of(file: &Path) -> PathBuf {
    let mut at = PathBuf::new();
    for part in file.components() {
        at.push(part);
        let name = part.as_os_str();
        if name == "node_modules" || name == "site-packages" {
            return at;
        }
    }
    file.parent()
        .map_or_else(|| file.to_path_buf(), Path::to_path_buf)
}

/// What well-known servers read beyond their arguments, by their package's name: the git
/// server the user's git configuration files (git stops at a configuration it may not read;
/// one that is not there is no matter), not the folder beside them (`~/.config/git` may hold
/// the plain credential store).
const KNOWN_NEEDS: &[(&str, &[&str])] = &[(
    "mcp-server-git",
    &[
        "~/.gitconfig",
        "~/.config/git/config",
        "~/.config/git/ignore",
        "~/.config/git/attributes",
    ],
)];

/// The paths [`KNOWN_NEEDS`] gives `server`: when its command names the package
/// ([`names_package`]).
fn known_needs(server: &Server<'_>) -> Vec<&'static str> {
    let args: Vec<&str> = server.args.iter().map(String::as_str).collect();
    KNOWN_NEEDS
        .iter()
        .filter(|(package, _)| names_package(server.command, &args, package))
        .flat_map(|(_, paths)| paths.iter().copied())
        .collect()
}

/// The flags of well-known servers whose value is a file the server writes, by their
/// package's name: the SQLite server creates and writes its database (and the journal beside
/// it), which an argument naming a file (read-only, as a script is) would not allow.
const KNOWN_WORK: &[(&str, &str)] = &[("mcp-server-sqlite", "--db-path")];

/// The values of the flags [`KNOWN_WORK`] names for `server` (`--db-path x` or
/// `--db-path=x`), when its command names the package.
fn known_work<'s>(server: &Server<'s>) -> Vec<&'s str> {
    let args: Vec<&str> = server.args.iter().map(String::as_str).collect();
    let mut out = Vec::new();
    for (package, flag) in KNOWN_WORK {
        if !names_package(server.command, &args, package) {
            continue;
        }
        for (i, arg) in server.args.iter().enumerate() {
            match arg.strip_prefix(flag) {
                Some("") => out.extend(server.args.get(i + 1).map(String::as_str)),
                Some(value) => out.extend(value.strip_prefix('=')),
                None => {}
            }
        }
    }
    out
}

/// Whether a server's `command` and `args` run the package `package` (an npm package with its
/// scope, `@modelcontextprotocol/server-memory`; a PyPI one, `mcp-server-git`): its program is
/// the package's (`…/bin/mcp-server-git`), or the first argument that is no flag is the package
/// as `npx`, `uvx` or `python -m` name it, with a version or not (`mcp-server-git==1.2`,
/// `@modelcontextprotocol/server-memory@1.2`, `mcp_server_git`), or a path into its folder of
/// installed packages (`…/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js`).
/// Another scope's package of the same name, a name that only begins so
/// (`mcp-server-github`), a package named after a flag (`uvx --from other mcp-server-git`) or
/// a later argument (a folder of the user's) is not it.
pub fn names_package(command: &str, args: &[&str], package: &str) -> bool {
    let module = (!package.starts_with('@')).then(|| package.replace('-', "_"));
    let is = |word: &str| {
        let version = |v: &str| {
            !v.is_empty()
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".+-_*".contains(c))
        };
        module.as_deref() == Some(word)
            || match word.strip_prefix(package) {
                Some("") => true,
                Some(rest) => rest
                    .strip_prefix('@')
                    .or_else(|| rest.strip_prefix("=="))
                    .is_some_and(version),
                None => false,
            }
    };
    let in_packages = |path: &str| {
        let parts: Vec<&str> = path.split('/').collect();
        parts.iter().enumerate().any(|(i, part)| {
            let (Some(first), true) = (
                parts.get(i + 1),
                matches!(*part, "node_modules" | "site-packages"),
            ) else {
                return false;
            };
            match (first.starts_with('@'), parts.get(i + 2)) {
                (true, Some(name)) => is(&format!("{first}/{name}")),
                (true, None) => false,
                (false, _) => is(first),
            }
        })
    };
    let program = Path::new(command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(command);
    // `uvx --from pkg cmd`, `uvx --with pkg cmd`, `npx -p pkg cmd`: the program run is not
    // the package named, so neither is it known.
    let named_by_flag = args.iter().any(|arg| {
        let flag = arg.split_once('=').map_or(*arg, |(flag, _)| flag);
        matches!(flag, "--from" | "--with" | "-p" | "--package")
    });
    let first = args.iter().find(|arg| !arg.starts_with('-'));
    is(program) || (!named_by_flag && first.is_some_and(|arg| is(arg) || in_packages(arg)))
}

/// The caches a runtime writes to as it fetches the server (`npx`, `uvx`): under the home.
fn runtime_caches(command: &str, home: Option<&Path>) -> Vec<PathBuf> {
    let Some(home) = home else {
        return Vec::new();
    };
    let name = Path::new(command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(command);
    match name {
        "npx" | "npm" | "node" | "pnpm" | "pnpx" => vec![home.join(".npm")],
        "uvx" | "uv" => vec![home.join(".cache/uv"), home.join(".local/share/uv")],
        _ => Vec::new(),
    }
}

/// `command` as the system finds it: itself when it names a path, else the first in `path`.
fn which(command: &str, path: Option<&str>) -> Option<PathBuf> {
    if command.contains('/') {
        return Some(PathBuf::from(command));
    }
    path?
        .split(':')
        .map(|dir| Path::new(dir).join(command))
        .find(|candidate| candidate.is_file())
}

/// Words of the errors a refusal of the sandbox gives, and the setting that would allow what was
/// refused.
const REFUSALS: &[(&str, &str)] = &[
    ("Network is unreachable", "`sandbox.network`"),
    ("ENETUNREACH", "`sandbox.network`"),
    ("Temporary failure in name resolution", "`sandbox.network`"),
    ("EAI_AGAIN", "`sandbox.network`"),
    ("getaddrinfo", "`sandbox.network`"),
    // httpx's (Python), when no address it tried could be reached.
    ("All connection attempts failed", "`sandbox.network`"),
    // Landlock refuses a TCP connection to a port its rules do not name with EACCES: Node
    // says `connect EACCES 10.0.0.1:3128`.
    ("connect EACCES", "`sandbox.network`"),
    ("Permission denied", "`sandbox.read` or `sandbox.write`"),
    ("EACCES", "`sandbox.read` or `sandbox.write`"),
    (
        "Operation not permitted",
        "`sandbox.read` or `sandbox.write`",
    ),
    ("Resource temporarily unavailable", "`sandbox.processes`"),
    ("Too many open files", "`sandbox.open_files`"),
    ("Cannot allocate memory", "`sandbox.memory`"),
];
/// The most of a server's words a note keeps.
const NOTED: usize = 240;

/// How the guard's and the init's own lines on a server's stderr begin.
const SAID: &str = "moniker sandbox: ";

/// Says `text` on the server's stderr (which moniker reads and logs), as the sandbox's own.
pub fn say(text: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{SAID}{text}");
}

/// Whether `text` holds any of a refusal's words (before anything reads it further).
pub fn mentions_a_refusal(text: &str) -> bool {
    REFUSALS.iter().any(|(words, _)| text.contains(words))
}

/// The line of `text` that reads as a refusal of the sandbox (the kernel reports Landlock's
/// denials to its audit log alone: the server's own error is what moniker sees), cut to
/// [`NOTED`] bytes, and the setting that would allow it.
pub fn likely(text: &str) -> Option<(String, &'static str)> {
    // The sandbox's own lines (why it could not be made) are not the server's refusals.
    text.lines()
        .filter(|l| !l.starts_with(SAID))
        .find_map(|line| {
            let (_, setting) = REFUSALS.iter().find(|(words, _)| line.contains(words))?;
            let mut end = line.len().min(NOTED);
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            Some((shown(line[..end].trim()), *setting))
        })
}

/// `text` with what would change how it shows (control characters: line and carriage
/// breaks, escapes; the Unicode separators and direction marks) made spaces: a server's words
/// in `/healthz` and `doctor` stay on their line and read as written.
fn shown(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}' => ' ',
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => ' ',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

/// What the guard makes of a sandbox from outside the server's namespaces (its cgroup, its
/// namespaces, its limits), handed to the process it starts inside them (`__guard --inside`),
/// which stands as their init, makes the rest (its own `/proc`, the files' rules) and starts the
/// server.
#[derive(Debug, Serialize, Deserialize)]
pub struct Outside {
    pub plan: Plan,
    /// The server's temporary folder (its `$TMPDIR`).
    pub temp: PathBuf,
    /// What was made of the process limit and of the network, to say.
    pub processes: String,
    pub network: String,
}

/// Applies what of `plan` is made from outside to this process (the guard, before it starts
/// the server's init): its private temporary folder, its cgroup, namespaces and limits. `Err`:
/// what could not be enforced (and was not allowed to be left out).
pub fn apply(plan: Plan) -> Result<Outside, String> {
    let temp = private_temp(&plan.temp_in, std::os::unix::process::parent_id())?;
    outside(plan, temp.clone()).inspect_err(|_| {
        let _ = std::fs::remove_dir(&temp);
    })
}

/// Applies the rest of `outside` to this process (the init inside the server's namespaces,
/// before it starts the server): its own `/proc` and the files' rules. What is enforced, in one
/// line, to say on the server's stderr.
pub fn confine(outside: &Outside) -> Result<String, String> {
    let inside = inside(outside)?;
    let plan = &outside.plan;
    Ok(format!(
        "files {} (Landlock); network {}; at most {} processes ({}), {} open files{}; {}",
        inside.landlock,
        outside.network,
        plan.processes,
        outside.processes,
        plan.open_files,
        plan.memory
            .map(|m| format!(", {} MB of data", m >> 20))
            .unwrap_or_default(),
        inside.processes_seen,
    ))
}

/// What the init enforced inside, to say.
struct Inside {
    landlock: String,
    processes_seen: &'static str,
}

/// Elsewhere than Linux nothing of the sandbox can be enforced: refused, unless best-effort.
#[cfg(not(target_os = "linux"))]
fn outside(plan: Plan, temp: PathBuf) -> Result<Outside, String> {
    if !plan.best_effort {
        return Err("a sandbox needs Linux (Landlock, namespaces): this system cannot enforce it; `sandbox: best-effort` runs the server without".to_owned());
    }
    Ok(Outside {
        plan,
        temp,
        processes: "not limited".to_owned(),
        network: "as the user's".to_owned(),
    })
}

#[cfg(not(target_os = "linux"))]
fn inside(_: &Outside) -> Result<Inside, String> {
    Ok(Inside {
        landlock: "not enforced (not Linux; best-effort)".to_owned(),
        processes_seen: "the system's processes seen",
    })
}

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux::{inside, outside};

/// The cgroup of the sandbox whose guard is `guard` (its process id): below the pids cgroup
/// moniker is in (cgroup v1's pids hierarchy), when there is one.
pub fn pids_cgroup(guard: u32) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "pids")
            .then(|| path.trim_start_matches('/').to_owned())
    })?;
    let base = Path::new("/sys/fs/cgroup/pids").join(path);
    base.is_dir()
        .then(|| base.join(format!("moniker-sandbox-{guard}")))
}

/// Removes what the sandbox whose guard was `guard` left outside once it ended (moniker does,
/// from outside the sandbox): its cgroup, and its temporary folder with whatever the server
/// left in it. On a blocking thread: the server decides how much that is, and the thread that
/// serves the clients is never held by it.
pub async fn release(guard: u32) {
    let _ = tokio::task::spawn_blocking(move || release_now(guard)).await;
}

/// [`release`] from where nothing can wait for it (a drop): started, not awaited.
pub fn release_soon(guard: u32) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn_blocking(move || release_now(guard))),
        Err(_) => release_now(guard),
    }
}

fn release_now(guard: u32) {
    if let Some(dir) = pids_cgroup(guard) {
        let _ = std::fs::remove_dir(dir);
    }
    remove_temp(&temp_base(), std::process::id(), guard);
}

/// moniker's temporary folder, absolute (a relative `TMPDIR` would name another folder in the
/// server's `cwd`, where the guard runs).
fn temp_base() -> PathBuf {
    let base = std::env::temp_dir();
    std::path::absolute(&base).unwrap_or(base)
}

/// Removes the private temporary folders (`moniker-sandbox-<owner>-<guard>-<random>`) in `base`
/// of the sandbox of `owner` (the moniker that started it: another's guard may have had the same
/// number) whose guard was `guard`: only folders of this user's, never through a link.
fn remove_temp(base: &Path, owner: u32, guard: u32) {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let prefix = format!("{TEMP_PREFIX}{owner}-{guard}-");
    let me = nix::unistd::getuid().as_raw();
    for entry in entries.flatten() {
        let its = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.starts_with(&prefix));
        // The entry's own metadata: a link is not followed.
        let ours = entry.metadata().is_ok_and(|m| m.is_dir() && m.uid() == me);
        if its && ours {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// How a sandbox's private temporary folder is named, before the process ids of the moniker
/// that started it and of its guard.
const TEMP_PREFIX: &str = "moniker-sandbox-";

/// A folder of the server's own in `base` (moniker's temporary folder), only its user's, named
/// by the process ids of `owner` (the moniker that started the guard) and of its guard (this
/// process), and a random part.
fn private_temp(base: &Path, owner: u32) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt as _;
    let dir = base.join(format!(
        "{TEMP_PREFIX}{owner}-{}-{}",
        std::process::id(),
        crate::random::text(8)
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the ended guard's own folders go, with what is in them: not another guard's whose
    /// number starts the same, not one of another moniker's guard of the same number, not a
    /// link's target.
    #[test]
    fn a_sandbox_s_temporary_folder_goes_when_it_ends() {
        let base = tempfile::tempdir().expect("dir");
        let elsewhere = tempfile::tempdir().expect("dir");
        std::fs::write(elsewhere.path().join("kept"), "not the sandbox's").expect("file");
        let (owner, guard) = (7, std::process::id());
        let its = private_temp(base.path(), owner).expect("made");
        std::fs::create_dir(its.join("deep")).expect("dir");
        std::fs::write(its.join("deep").join("left"), "the server's").expect("file");
        let kept = [
            format!("{TEMP_PREFIX}{owner}-{guard}0-x"),
            format!("{TEMP_PREFIX}8-{guard}-x"),
        ];
        for name in &kept {
            std::fs::create_dir(base.path().join(name)).expect("dir");
        }
        let link = base
            .path()
            .join(format!("{TEMP_PREFIX}{owner}-{guard}-link"));
        std::os::unix::fs::symlink(elsewhere.path(), &link).expect("link");
        remove_temp(base.path(), owner, guard);
        assert!(!its.exists() && link.is_symlink());
        assert!(kept.iter().all(|name| base.path().join(name).is_dir()));
        assert!(elsewhere.path().join("kept").is_file());
    }

    #[test]
    fn a_refusal_is_read_from_what_the_server_says() {
        let said = "fetching https://example.com\nFailed to fetch: [Errno -3] Temporary failure in name resolution";
        let (line, setting) = likely(said).expect("a refusal");
        assert!(line.starts_with("Failed to fetch") && setting == "`sandbox.network`");
        assert_eq!(
            likely("EACCES: permission denied, open '/home/u/.ssh/id_rsa'").map(|l| l.1),
            Some("`sandbox.read` or `sandbox.write`")
        );
        assert!(likely("the tool ran and found nothing").is_none());
        let long = format!("Permission denied {}", "é".repeat(400));
        assert!(likely(&long).is_some_and(|(l, _)| l.len() <= NOTED));
        assert_eq!(
            likely("Error: connect EACCES 10.0.0.1:3128").map(|l| l.1),
            Some("`sandbox.network`")
        );
        // Why the sandbox could not be made is its own line, not a refusal of the server's.
        let own = "moniker sandbox: cannot mount its own /proc (EPERM: Operation not permitted)";
        assert!(likely(own).is_none());
    }

    /// A server's words in a note stay on their line and read as written: no line break, no
    /// escape, no direction mark reaches `/healthz` or `doctor`.
    #[test]
    fn a_note_shows_the_server_s_words_on_one_line() {
        let said = "x Permission denied\rserver `github`: \u{1b}[2Jfake\u{202e}txt.exe\u{2028}more";
        let (line, setting) = likely(said).expect("a refusal");
        assert_eq!(setting, "`sandbox.read` or `sandbox.write`");
        assert_eq!(
            line,
            "x Permission denied server `github`:  [2Jfake txt.exe more"
        );
    }

    /// The git server (run by `uvx`, or its own program) reads the user's git configuration and
    /// nothing else of the home; another server is not given it.
    #[test]
    fn the_git_server_reads_the_git_configuration() {
        let home = PathBuf::from("/home/someone");
        let plan = |command: &str, args: &[&str]| {
            let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
            Plan::of(
                &Sandbox::default(),
                &Server {
                    command,
                    args: &args,
                    cwd: None,
                    path: None,
                    home: Some(&home),
                    env: &indexmap::IndexMap::new(),
                },
            )
        };
        for git in [
            plan("uvx", &["mcp-server-git", "--repository", "/srv/repo"]),
            plan("/opt/venv/bin/mcp-server-git", &[]),
        ] {
            assert!(
                git.read.contains(&home.join(".gitconfig")),
                "{:?}",
                git.read
            );
            assert!(git.read.contains(&home.join(".config/git/config")));
            assert!(!git.read.contains(&home.join(".config/git")));
            assert!(!git.read.iter().chain(&git.write).any(|p| *p == home));
        }
        for other in [
            plan("uvx", &["mcp-server-time"]),
            plan("uvx", &["mcp-server-github"]),
            plan(
                "npx",
                &["server-filesystem", "/home/someone/src/mcp-server-git"],
            ),
            plan("npx", &["-y", "@anyone/mcp-server-git"]),
            plan("uvx", &["--from", "other", "mcp-server-git"]),
            plan("uvx", &["--with", "mcp-server-git", "other"]),
            plan("npx", &["-p", "mcp-server-git", "other"]),
            plan("uvx", &["--from=mcp-server-git", "other"]),
            plan(
                "npx",
                &[
                    "-y",
                    "@modelcontextprotocol/server-filesystem",
                    "mcp-server-git",
                ],
            ),
            plan("sh", &["-c", "mcp-server-git== ; cat ~/.gitconfig"]),
        ] {
            assert!(
                !other.read.contains(&home.join(".gitconfig")),
                "{:?}",
                other.read
            );
        }
        let versioned = plan("uvx", &["mcp-server-git==2026.10.19"]);
        assert!(versioned.read.contains(&home.join(".gitconfig")));
    }

    #[test]
    fn a_plan_gives_the_system_the_runtime_the_arguments_and_the_config() {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path().join("notes");
        std::fs::create_dir_all(&root).expect("notes");
        let file = dir.path().join("inventory.json");
        std::fs::write(&file, "{}").expect("file");
        let sandbox = Sandbox {
            read: vec!["~/docs".to_owned()],
            write: vec!["/srv/out".to_owned()],
            network: Network::Ports(vec![443]),
            ..Sandbox::default()
        };
        let args = vec![
            "-y".to_owned(),
            root.display().to_string(),
            format!("--inventory={}", file.display()),
            "/not/there".to_owned(),
        ];
        let home = dir.path().join("home");
        let plan = Plan::of(
            &sandbox,
            &Server {
                command: "npx",
                args: &args,
                cwd: None,
                path: Some("/usr/bin:/bin"),
                home: Some(&home),
                env: &indexmap::IndexMap::from([
                    (
                        "MEMORY_FILE_PATH".to_owned(),
                        dir.path().join("memory.jsonl").display().to_string(),
                    ),
                    ("HOME_COPY".to_owned(), home.display().to_string()),
                    ("SEARCH".to_owned(), "/usr/bin:/bin".to_owned()),
                ]),
            },
        );
        assert!(plan.read.contains(&PathBuf::from("/usr")));
        assert!(plan.write.contains(&root) && !plan.read.contains(&root));
        // A file's folder (no package around it), and the folder of the file `env` names.
        assert!(plan.read.contains(&dir.path().to_path_buf()));
        assert!(plan.write.contains(&dir.path().to_path_buf()));
        assert!(
            !plan
                .read
                .iter()
                .chain(&plan.write)
                .any(|p| p.starts_with("/not"))
        );
        assert!(plan.read.contains(&home.join("docs")));
        assert!(plan.write.contains(&PathBuf::from("/srv/out")));
        assert!(plan.write.contains(&home.join(".npm")));
        // Never the user's home, nor the runtime folder where moniker's socket is.
        assert!(
            !plan
                .read
                .iter()
                .chain(&plan.write)
                .any(|p| *p == home || p.starts_with("/run/user"))
        );
        assert_eq!(plan.network, Net::Ports(vec![443]));
        assert_eq!(
            (plan.processes, plan.open_files, plan.memory),
            (PROCESSES, OPEN_FILES, None)
        );
    }

    #[test]
    fn the_sqlite_server_works_in_its_database_s_folder() {
        let dir = tempfile::tempdir().expect("dir");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).expect("data");
        let db = data.join("app.db").display().to_string();
        let plan = |command: &str, args: &[String]| {
            Plan::of(
                &Sandbox::default(),
                &Server {
                    command,
                    args,
                    cwd: None,
                    path: Some("/usr/bin:/bin"),
                    home: Some(dir.path()),
                    env: &indexmap::IndexMap::new(),
                },
            )
        };
        // Not there yet, as at a first run: the folder it will be made in.
        for args in [
            vec!["--db-path".to_owned(), db.clone()],
            vec![format!("--db-path={db}")],
            vec![
                "mcp-server-sqlite".to_owned(),
                "--db-path".to_owned(),
                db.clone(),
            ],
        ] {
            let command = if args.len() == 3 {
                "uvx"
            } else {
                "/venv/bin/mcp-server-sqlite"
            };
            assert!(
                plan(command, &args).write.contains(&data),
                "{command} {args:?}"
            );
        }
        // Never `/`, the home nor above it, however the path is written.
        let home_above = dir.path().parent().expect("above").to_path_buf();
        for wide in [
            "/../x.db".to_owned(),
            "~/../x.db".to_owned(),
            format!("{}/x.db", home_above.display()),
            format!("{}/./x.db", dir.path().display()),
        ] {
            let wide = plan(
                "/venv/bin/mcp-server-sqlite",
                &["--db-path".to_owned(), wide],
            );
            assert!(
                !wide
                    .write
                    .iter()
                    .any(|p| p == Path::new("/") || dir.path().starts_with(p)),
                "{:?}",
                wide.write
            );
        }
        // Another server's flag of that name is a file to read, as any argument's.
        std::fs::write(&db, "").expect("db");
        let other = plan(
            "/venv/bin/other-server",
            &["--db-path".to_owned(), db.clone()],
        );
        assert!(!other.write.contains(&data) && other.read.contains(&data));
    }

    #[test]
    fn a_path_the_config_names_is_said_as_the_kernel_opens_it() {
        // `/usr/..` is `/`: given as `/`, and said by `moniker check` as beyond the system's.
        let sandbox = Sandbox {
            write: vec!["/usr/..".to_owned()],
            ..Sandbox::default()
        };
        let plan = Plan::of(
            &sandbox,
            &Server {
                command: "/bin/true",
                args: &[],
                cwd: None,
                path: Some("/usr/bin:/bin"),
                home: None,
                env: &indexmap::IndexMap::new(),
            },
        );
        let root = PathBuf::from("/");
        assert!(plan.write.contains(&root), "{:?}", plan.write);
        assert_eq!(Plan::beyond_system(&plan.write), vec![&root]);
    }
}
