//! `moniker install CLIENT` and `moniker uninstall CLIENT`: put moniker in a client's config
//! file, beside its servers or (`--import`) in their place, and take it out again.
//!
//! The client's file is backed up once, beside it (`<file>.moniker-backup`; an empty backup
//! means there was no file), before its first change; `uninstall` undoes the change on what
//! the file is then (moniker's entry out, the imported servers back in the backup's order,
//! whatever else the person changed since kept), and when that is the backup, writes the
//! backup's very bytes. A file moniker cannot read as JSON (VS Code allows comments) is not
//! rewritten. Values (`env`, `headers`: secrets) are never printed.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::args::InstallArgs;
use crate::clients::{ENTRY, Launch, runs_moniker};
use crate::exit::{Exit, Failure};
use crate::output;

/// The first line of a config `install --import` writes.
const WRITTEN: &str = "# moniker's config, written by `moniker install";

/// The client's file, read as moniker will rewrite it.
struct ClientFile {
    /// Where the file is read and written (a link's target).
    path: PathBuf,
    /// The path as the client names it: the backup and an imported config go beside it, not
    /// beside a link's target (a dotfiles repository).
    named: PathBuf,
    /// The bytes as they were (`None`: no file).
    original: Option<String>,
    doc: Map<String, Value>,
    style: Style,
}

/// How the file was written: its indent, and whether it ends with a line end.
#[derive(Debug, Clone, Copy)]
struct Style {
    indent: &'static str,
    newline: bool,
}

impl ClientFile {
    /// The file `--file` names, else the client's own on this platform.
    fn of(args: &InstallArgs) -> Result<ClientFile, Failure> {
        match args.file.clone().or_else(|| args.client.file()) {
            Some(path) => ClientFile::read(path),
            None => Err(format!(
                "this platform has no home dir: pass the {} config file with `--file`",
                args.client.title()
            )
            .into()),
        }
    }

    fn read(path: PathBuf) -> Result<ClientFile, Failure> {
        // A file kept elsewhere and linked (dotfiles) is changed where it is: a rename over
        // the link would replace the link.
        let named = path.clone();
        let path = match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(&path)
                .map_err(|e| format!("`{}` links to nothing readable: {e}", path.display()))?,
            _ => path,
        };
        let original = match std::fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("cannot read `{}`: {e}", path.display()).into()),
        };
        let (doc, style) = match &original {
            None => (
                Map::new(),
                Style {
                    indent: "  ",
                    newline: true,
                },
            ),
            Some(text) => (parse(&path, text)?, Style::of(text)),
        };
        Ok(ClientFile {
            path,
            named,
            original,
            doc,
            style,
        })
    }

    fn servers(&mut self, key: &str) -> Result<&mut Map<String, Value>, Failure> {
        let path = self.path.display().to_string();
        match self
            .doc
            .entry(key.to_owned())
            .or_insert_with(|| Value::Object(Map::new()))
        {
            Value::Object(servers) => Ok(servers),
            _ => Err(format!(
                "`{path}`: `{key}` is not an object of servers; moniker leaves the file as it is"
            )
            .into()),
        }
    }

    fn render(&self) -> String {
        render(&self.doc, self.style)
    }

    fn backup_path(&self) -> PathBuf {
        backup_path(&self.named)
    }
}

fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".moniker-backup");
    path.with_file_name(name)
}

fn parse(path: &Path, text: &str) -> Result<Map<String, Value>, Failure> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(doc)) => Ok(doc),
        Ok(_) => Err(format!(
            "`{}` is not a JSON object; moniker leaves it as it is",
            path.display()
        )
        .into()),
        Err(e) => Err(format!(
            "`{}` is not JSON moniker can rewrite ({e}; comments and trailing commas are \
             not kept by a rewrite); moniker leaves it as it is: add the entry by hand",
            path.display()
        )
        .into()),
    }
}

impl Style {
    fn of(text: &str) -> Style {
        let indent = text
            .lines()
            .skip(1)
            .find(|l| l.starts_with([' ', '\t']))
            .map(|l| &l[..l.len() - l.trim_start_matches([' ', '\t']).len()])
            .unwrap_or("  ");
        let indent = match indent {
            "\t" => "\t",
            i if i.len() >= 4 => "    ",
            _ => "  ",
        };
        Style {
            indent,
            newline: text.ends_with('\n'),
        }
    }
}

fn render(doc: &Map<String, Value>, style: Style) -> String {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(style.indent.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(doc, &mut ser).expect("a JSON value serializes");
    let mut text = String::from_utf8(out).expect("serde_json writes UTF-8");
    if style.newline {
        text.push('\n');
    }
    text
}

/// Writes `text` to `path` through a temporary file beside it, keeping the file's permissions
/// (new files: only the user may read them, since they hold secrets).
fn write_file(path: &Path, text: &str) -> Result<(), Failure> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    }
    // A new file only the user can read (a link planted there would get the secrets).
    let failed = |e: std::io::Error| format!("cannot write `{}`: {e}", path.display());
    let (tmp, mut file) =
        moniker_gateway::files::tempfile_in(dir.unwrap_or(Path::new("."))).map_err(failed)?;
    file.write_all(text.as_bytes()).map_err(failed)?;
    file.sync_all().map_err(failed)?;
    if let Ok(meta) = std::fs::metadata(path) {
        file.set_permissions(meta.permissions()).map_err(failed)?;
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        failed(e)
    })?;
    Ok(())
}

fn absolute(path: &Path) -> Result<PathBuf, Failure> {
    std::path::absolute(path).map_err(|e| format!("`{}`: {e}", path.display()).into())
}

/// A client's server that `--import` moves into moniker's config, as moniker's config says
/// it, or the reason it stays with the client.
fn importable(client: crate::clients::Client, name: &str, entry: &Value) -> Result<Value, String> {
    if name.parse::<moniker_surface::ServerId>().is_err() {
        return Err(
            "its name is not a moniker server id (letters, digits, `_`, `-`, `.`; 64 at most)"
                .to_owned(),
        );
    }
    let Value::Object(fields) = entry else {
        return Err("it is not an object".to_owned());
    };
    if fields.get("disabled").and_then(Value::as_bool) == Some(true) {
        return Err("the client has it disabled".to_owned());
    }
    let mut out = Map::new();
    for (key, value) in fields {
        let kept = match key.as_str() {
            "command" | "args" | "env" | "cwd" | "url" | "headers" => true,
            // `type` says the transport (`stdio`, `http`, `sse`), as in moniker's config.
            "type" => true,
            // The client's own bookkeeping.
            "disabled" | "autoApprove" | "alwaysAllow" | "timeout" | "description" => false,
            "envFile" => return Err("it reads an `envFile`, which moniker does not".to_owned()),
            other => return Err(format!("its key `{other}` means nothing to moniker")),
        };
        if kept {
            out.insert(key.clone(), translate(client, value)?);
        }
    }
    if let Some(sandbox) = sandbox_for(&out, moniker_gateway::connect::http::proxy_set()) {
        out.insert("sandbox".to_owned(), sandbox);
    }
    Ok(Value::Object(out))
}

/// Servers known to need no network: their packages' names, as their command names them
/// (`npx -y @modelcontextprotocol/server-memory`, `uvx mcp-server-time`, a path into
/// `node_modules/@modelcontextprotocol/server-filesystem`: `sandbox::names_package`).
const OFFLINE: &[&str] = &[
    "@modelcontextprotocol/server-filesystem",
    "@modelcontextprotocol/server-memory",
    "@modelcontextprotocol/server-everything",
    "@modelcontextprotocol/server-sequential-thinking",
    "mcp-server-time",
    // Its tools work on the repositories at hand (status, diff, commit, log...): none fetches.
    "mcp-server-git",
    // A database file of the user's.
    "mcp-server-sqlite",
    // Arithmetic, in the process.
    "mcp-server-calculator",
];

/// Servers known to reach only their service's HTTPS API (a fixed `https://` host of theirs):
/// TCP to port 443 only (Landlock). Not the fetch server (any URL), the database or GitLab
/// servers (their URL's port), nor Obsidian's (a local port of the app's).
const HTTPS_ONLY: &[&str] = &[
    "@modelcontextprotocol/server-github",
    "@modelcontextprotocol/server-slack",
    "@modelcontextprotocol/server-google-maps",
    "@modelcontextprotocol/server-brave-search",
    "@modelcontextprotocol/server-aws-kb-retrieval",
    "@modelcontextprotocol/server-everart",
    "@upstash/context7-mcp",
    "tavily-mcp",
    "open-meteo-mcp-server",
];

/// The sandbox an imported stdio server runs in (Linux, where moniker enforces one): the
/// default (the system and its runtime read-only, a private temporary folder, the paths its
/// arguments and `env` name), with the network off for the servers known to need none, TCP to
/// port 443 only for those known to reach only an HTTPS API (unless a proxy is set, `proxied`:
/// then it reaches the proxy's port; or its `env` names a URL of its own:
/// `OPEN_METEO_API_URL`), and on for the others. `None` for a remote server, and elsewhere
/// than Linux.
fn sandbox_for(entry: &Map<String, Value>, proxied: bool) -> Option<Value> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let command = entry.get("command").and_then(Value::as_str)?;
    let args = entry.get("args").and_then(Value::as_array);
    let args: Vec<&str> = args
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let known = |names: &[&str]| {
        names
            .iter()
            .any(|name| moniker_gateway::sandbox::names_package(command, &args, name))
    };
    Some(if known(OFFLINE) {
        Value::Bool(true)
    } else if known(HTTPS_ONLY) && !proxied && !names_a_url(entry) {
        serde_json::json!({ "network": [443] })
    } else {
        serde_json::json!({ "network": "on" })
    })
}

/// Whether an entry's `env` holds a URL (an API's address of the user's own, on a port of its
/// own).
fn names_a_url(entry: &Map<String, Value>) -> bool {
    let env = entry.get("env").and_then(Value::as_object);
    env.into_iter()
        .flat_map(|env| env.values())
        .filter_map(Value::as_str)
        .any(|value| value.contains("://"))
}

fn translate(client: crate::clients::Client, value: &Value) -> Result<Value, String> {
    Ok(match value {
        Value::String(s) => Value::String(client.translate(s).map_err(|bad| {
            format!(
                "it has `{bad}`, which moniker would read as one of its variables ({} fills it in, or keeps it as text)",
                client.title()
            )
        })?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| translate(client, v))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), translate(client, v)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

/// What a person is shown of a server: its transport, never its values.
fn summary(entry: &Value) -> String {
    let count = |key: &str| {
        entry
            .get(key)
            .and_then(Value::as_object)
            .map_or(0, Map::len)
    };
    let mut parts = Vec::new();
    if let Some(command) = entry.get("command").and_then(Value::as_str) {
        parts.push(format!("runs `{command}`"));
    } else if let Some(url) = entry.get("url").and_then(Value::as_str) {
        parts.push(format!("at {}", moniker_config::shown_url(url)));
    }
    for (key, what) in [("env", "env"), ("headers", "header")] {
        match count(key) {
            0 => {}
            1 => parts.push(format!("1 {what} value, not shown")),
            n => parts.push(format!("{n} {what} values, not shown")),
        }
    }
    parts.join("; ")
}

/// A moniker config with `servers` (each a JSON value, which is YAML too).
fn moniker_config(client: &str, from: &Path, servers: &[(String, Value)]) -> String {
    let mut text = format!(
        "{WRITTEN} {client} --import` from {}.\n\
         # `moniker uninstall {client}` puts these servers back in that file.\n\
         # yaml-language-server: $schema={}\n\
         servers:\n",
        from.display(),
        moniker_config::SCHEMA_URL
    );
    for (name, entry) in servers {
        let key = serde_json::to_string(name).expect("a string serializes");
        let value = serde_json::to_string(entry).expect("a JSON value serializes");
        text.push_str(&format!("  {key}: {value}\n"));
    }
    text
}

/// The config an import writes, proven to serve.
struct Imported {
    text: String,
    /// The renames written into it (`server/origin: { name: new }`).
    renames: Vec<String>,
    /// The servers that did not start: their names are not checked.
    down: Vec<String>,
}

/// Starts the servers of `text` (the config an import would write at `target`): when their
/// names make one surface, the config as it is; when names are shared, with the renames
/// `check` proposes written in, once that serves. `Err` (nothing is written) otherwise.
fn prove_import(text: String, target: &Path) -> Result<Imported, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let name = target.display().to_string();
    let parse = |text: &str| {
        moniker_config::parse(&name, text)
            .map_err(|report| format!("the imported servers make an invalid config: {report}"))
    };
    let diagnostics = match runtime.block_on(crate::check::serves(parse(&text)?))? {
        Ok(down) => {
            return Ok(Imported {
                text,
                renames: Vec::new(),
                down,
            });
        }
        Err(diagnostics) => diagnostics,
    };
    let refuse = |diagnostics: &[moniker_surface::Diagnostic]| -> Failure {
        let problems: Vec<String> = diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| format!("  {d}"))
            .collect();
        format!(
            "nothing written: the imported servers do not make one surface, and no rename resolves it:\n{}",
            problems.join("\n")
        )
        .into()
    };
    let renames = crate::fix::renames(&diagnostics);
    if renames.is_empty() {
        return Err(refuse(&diagnostics));
    }
    let fixed = crate::fix::apply(&text, &renames)?;
    match runtime.block_on(crate::check::serves(parse(&fixed)?))? {
        Ok(down) => Ok(Imported {
            text: fixed,
            renames: renames.iter().map(|r| r.yaml()).collect(),
            down,
        }),
        Err(diagnostics) => Err(refuse(&diagnostics)),
    }
}

pub(crate) fn install(args: &InstallArgs, config: Option<&Path>) -> Result<Exit, Failure> {
    let client = args.client;
    let mut file = ClientFile::of(args)?;
    let shown = file.path.display().to_string();
    let launch = match &args.command {
        Some(command) => Launch::Path(command.clone()),
        None => Launch::detect(),
    };
    let target = Target::of(args, &mut file, config)?;

    // "Works the first time": the config an import writes serves. Its servers are started
    // and their names made one surface; names two servers share are renamed after their
    // servers (as `check` proposes) in the config written, or nothing is written.
    let imported = match target.moved.is_empty() {
        true => None,
        false => Some(prove_import(
            moniker_config(client.id(), &file.path, &target.moved),
            &target.config,
        )?),
    };

    let entry = client.entry(&launch, &target.config);
    let servers = file.servers(client.servers_key())?;
    let added = place(servers, &entry, &shown, client.id())?;
    for (name, _) in &target.moved {
        servers.shift_remove(name);
    }
    if !added && target.moved.is_empty() {
        output::line(&format!(
            "{} already runs moniker with `{}` (`{shown}`): nothing to change",
            client.title(),
            target.config.display()
        ))?;
        return Ok(Exit::Ok);
    }

    let backup = file.backup_path();
    if backup.exists() {
        return Err(format!(
            "`{}` is there from an earlier install: run `moniker uninstall {}` first (it \
             restores that backup), or remove it",
            backup.display(),
            client.id()
        )
        .into());
    }
    write_file(&backup, file.original.as_deref().unwrap_or_default())?;
    if let Some(imported) = &imported {
        write_file(&target.config, &imported.text)?;
    }
    write_file(&file.path, &file.render())?;

    let mut lines = vec![format!("{}: `{shown}`", client.title())];
    if added {
        lines.push(format!(
            "  added server `{ENTRY}`: {}",
            command_line(&entry)
        ));
    }
    target.report(client.title(), imported.as_ref(), &mut lines);
    lines.push(format!("  backup: `{}`", backup.display()));
    lines.push(format!(
        "  undo: moniker uninstall {}{}",
        client.id(),
        args.file
            .as_ref()
            .map(|f| format!(" --file {}", f.display()))
            .unwrap_or_default()
    ));
    lines.push(format!("Restart {} to use it.", client.title()));
    output::line(&lines.join("\n"))?;
    Ok(Exit::Ok)
}

/// Puts moniker's `entry` among a client's `servers`: whether it was added (not there already).
/// Another entry of moniker's name is not replaced.
fn place(
    servers: &mut Map<String, Value>,
    entry: &Value,
    shown: &str,
    client: &str,
) -> Result<bool, Failure> {
    match servers.get(ENTRY) {
        Some(there) if there == entry => Ok(false),
        Some(there) => {
            let what = match runs_moniker(there) {
                Some(other) => format!("runs moniker with `{}`", other.display()),
                None => "runs something else".to_owned(),
            };
            Err(format!(
                "`{shown}` has a server `{ENTRY}` already, which {what}: run `moniker \
                 uninstall {client}` first, or remove it"
            )
            .into())
        }
        None => {
            servers.insert(ENTRY.to_owned(), entry.clone());
            Ok(true)
        }
    }
}

/// The moniker config an install has its client run, and with `--import` the client's servers
/// moved into it and those left with the client, each with why.
struct Target {
    config: PathBuf,
    moved: Vec<(String, Value)>,
    stays: Vec<(String, String)>,
}

impl Target {
    fn of(
        args: &InstallArgs,
        file: &mut ClientFile,
        config: Option<&Path>,
    ) -> Result<Self, Failure> {
        let client = args.client;
        if !args.import {
            let Some(found) = moniker_config::find(config) else {
                return Err(format!(
                    "no moniker config for {} to run: pass `-c FILE`, or `--import` to make \
                     one from {}'s servers",
                    client.title(),
                    client.title()
                )
                .into());
            };
            if !found.is_file() {
                return Err(format!("no moniker config at `{}`", found.display()).into());
            }
            return Ok(Self {
                config: absolute(&found)?,
                moved: Vec::new(),
                stays: Vec::new(),
            });
        }
        let config = match config {
            Some(c) => absolute(c)?,
            None => absolute(&file.named)?
                .parent()
                .map(|d| d.join("moniker.yaml"))
                .ok_or("the client's file has no dir")?,
        };
        let (mut moved, mut stays) = (Vec::new(), Vec::new());
        for (name, entry) in file.servers(client.servers_key())?.iter() {
            if name == ENTRY || runs_moniker(entry).is_some() {
                continue;
            }
            match importable(client, name, entry) {
                Ok(converted) => moved.push((name.clone(), converted)),
                Err(why) => stays.push((name.clone(), why)),
            }
        }
        if !moved.is_empty() && config.exists() {
            return Err(format!(
                "`{}` exists already: pass `-c FILE` to write the imported servers elsewhere, \
                 or remove it",
                config.display()
            )
            .into());
        }
        Ok(Self {
            config,
            moved,
            stays,
        })
    }

    /// What was moved, renamed, not checked and left with the client (`title`), as lines of
    /// the install's report.
    fn report(&self, title: &str, imported: Option<&Imported>, lines: &mut Vec<String>) {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        if !self.moved.is_empty() {
            lines.push(format!(
                "  moved {} server{} into `{}` (readable by you only):",
                self.moved.len(),
                plural(self.moved.len()),
                self.config.display()
            ));
            for (name, converted) in &self.moved {
                lines.push(format!("    {name}: {}", summary(converted)));
            }
        }
        if let Some(imported) = imported {
            if !imported.renames.is_empty() {
                lines.push(format!(
                    "  {} name{} two servers shared, renamed after their servers in that config (`moniker list` shows them):",
                    imported.renames.len(),
                    plural(imported.renames.len())
                ));
                for rename in &imported.renames {
                    lines.push(format!("    {rename}"));
                }
            }
            if !imported.down.is_empty() {
                lines.push(format!(
                    "  not started now, so their names are not checked: {} (`moniker doctor` says why)",
                    imported.down.join(", ")
                ));
            }
        }
        for (name, why) in &self.stays {
            lines.push(format!("  left `{name}` with {title}: {why}"));
        }
    }
}

/// A client entry's command and arguments, as one line.
fn command_line(entry: &Value) -> String {
    let args = entry["args"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    format!("{} {args}", entry["command"].as_str().unwrap_or_default())
}

pub(crate) fn uninstall(args: &InstallArgs) -> Result<Exit, Failure> {
    let client = args.client;
    let mut file = ClientFile::of(args)?;
    let shown = file.path.display().to_string();
    let backup_path = file.backup_path();
    let backup_text = match std::fs::read_to_string(&backup_path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read `{}`: {e}", backup_path.display()).into()),
    };
    let key = client.servers_key();
    let had_servers = file.doc.contains_key(key);
    let servers = file.servers(key)?;
    let ours = servers
        .get(ENTRY)
        .filter(|e| runs_moniker(e).is_some())
        .cloned();
    if ours.is_none() && backup_text.is_none() {
        if !had_servers {
            file.doc.shift_remove(key);
        }
        output::line(&format!(
            "moniker is not installed in {} (`{shown}`): nothing to undo",
            client.title()
        ))?;
        return Ok(Exit::Ok);
    }
    let config = ours.as_ref().and_then(runs_moniker);
    servers.shift_remove(ENTRY);
    let mut lines = vec![format!("{}: `{shown}`", client.title())];
    if ours.is_some() {
        lines.push(format!("  removed server `{ENTRY}`"));
    }

    let Some(backup_text) = backup_text else {
        write_file(&file.path, &file.render())?;
        lines.push(format!(
            "  no backup at `{}`: servers moved into moniker's config were not put back",
            backup_path.display()
        ));
        output::line(&lines.join("\n"))?;
        return Ok(Exit::Ok);
    };
    let backup = if backup_text.is_empty() {
        None
    } else {
        Some(parse(&backup_path, &backup_text)?)
    };
    let before = backup
        .as_ref()
        .and_then(|b| b.get(key))
        .and_then(Value::as_object);
    let restored = put_back(servers, before);
    if !restored.is_empty() {
        lines.push(format!(
            "  put back {}: {}",
            if restored.len() == 1 {
                "1 server"
            } else {
                "servers"
            },
            restored.join(", ")
        ));
    }
    lines.push(settle(&file, backup.as_ref(), &backup_text, key)?.to_owned());
    std::fs::remove_file(&backup_path)
        .map_err(|e| format!("cannot remove `{}`: {e}", backup_path.display()))?;
    if let Some(config) = config.filter(|c| written_by_install(c)) {
        lines.push(format!(
            "  `{}` is kept (moniker's config from the import): delete it if you no longer \
             need it",
            config.display()
        ));
    }
    output::line(&lines.join("\n"))?;
    Ok(Exit::Ok)
}

/// The client's servers in the backup's order (`before`): each as it is now, or as the backup
/// had it when it is gone (moved into moniker's config); then the ones added since. The names
/// put back, moniker's own entry aside.
fn put_back(servers: &mut Map<String, Value>, before: Option<&Map<String, Value>>) -> Vec<String> {
    let mut now = std::mem::take(servers);
    let mut restored = Vec::new();
    for (name, old) in before.into_iter().flatten() {
        match now.shift_remove(name) {
            Some(current) => {
                servers.insert(name.clone(), current);
            }
            None => {
                if name != ENTRY {
                    restored.push(name.clone());
                }
                servers.insert(name.clone(), old.clone());
            }
        }
    }
    servers.extend(now);
    restored
}

/// Writes the client's file as the uninstall leaves it: the backup's very text when nothing
/// else changed, no file when moniker had made it, else as it is now. What was done, as a line
/// of the report.
fn settle(
    file: &ClientFile,
    backup: Option<&Map<String, Value>>,
    backup_text: &str,
    key: &str,
) -> Result<&'static str, Failure> {
    match backup {
        Some(b) if *b == file.doc => {
            write_file(&file.path, backup_text)?;
            Ok("  the file is as it was before `moniker install`")
        }
        None if file.doc.len() == 1 && servers_empty(&file.doc, key) => {
            match std::fs::remove_file(&file.path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(format!("cannot remove `{}`: {e}", file.path.display()).into());
                }
            }
            Ok("  removed the file, which moniker had made")
        }
        _ => {
            write_file(&file.path, &file.render())?;
            Ok("  the file changed since `moniker install`: those changes are kept")
        }
    }
}

fn servers_empty(doc: &Map<String, Value>, key: &str) -> bool {
    doc.get(key)
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
}

fn written_by_install(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| t.starts_with(WRITTEN))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::Client;
    use serde_json::json;

    #[test]
    fn an_imported_stdio_server_gets_a_sandbox_fitting_what_it_is() {
        let entry = |v: Value| v.as_object().unwrap().clone();
        let offline = sandbox_for(
            &entry(
                json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}),
            ),
            false,
        );
        let fetch = sandbox_for(
            &entry(json!({"command": "uvx", "args": ["mcp-server-fetch"]})),
            false,
        );
        let remote = sandbox_for(&entry(json!({"url": "https://x/mcp"})), false);
        let sandbox_of = |command: &str, args: Value| {
            sandbox_for(&entry(json!({"command": command, "args": args})), false)
        };
        if cfg!(target_os = "linux") {
            assert_eq!(offline, Some(json!(true)));
            assert_eq!(fetch, Some(json!({"network": "on"})));
            // The git server works offline; the GitHub server, whose name begins the same, not.
            assert_eq!(
                sandbox_of("uvx", json!(["mcp-server-git==2026.10.19"])),
                Some(json!(true))
            );
            assert_eq!(
                sandbox_of("npx", json!(["-y", "@modelcontextprotocol/server-github"])),
                Some(json!({"network": [443]}))
            );
            // Not behind a proxy, nor with an API's URL of its own: the port is another.
            let github = entry(
                json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"]}),
            );
            assert_eq!(sandbox_for(&github, true), Some(json!({"network": "on"})));
            let weather = entry(json!({
                "command": "npx",
                "args": ["-y", "open-meteo-mcp-server"],
                "env": {"OPEN_METEO_API_URL": "http://localhost:8080"}
            }));
            assert_eq!(sandbox_for(&weather, false), Some(json!({"network": "on"})));
            assert_eq!(
                sandbox_of("uvx", json!(["mcp-server-github"])),
                Some(json!({"network": "on"}))
            );
            // A path into a package's folder names it.
            let path = "/srv/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js";
            assert_eq!(sandbox_of("node", json!([path, "/tmp"])), Some(json!(true)));
        } else {
            assert_eq!((offline, fetch.clone()), (None, None));
        }
        assert_eq!(remote, None);
    }

    #[test]
    fn the_style_is_the_file_s() {
        let four = "{\n    \"a\": 1\n}";
        let s = Style::of(four);
        assert_eq!((s.indent, s.newline), ("    ", false));
        let doc = parse(Path::new("x"), four).unwrap();
        assert_eq!(render(&doc, s), four);
        let tab = Style::of("{\n\t\"a\": 1\n}\n");
        assert_eq!((tab.indent, tab.newline), ("\t", true));
    }

    #[test]
    fn only_what_moniker_reads_is_imported() {
        let ok = importable(
            Client::Cursor,
            "github",
            &json!({"command": "npx", "env": {"T": "${env:T}"}, "autoApprove": ["x"]}),
        )
        .unwrap();
        let sandbox = if cfg!(target_os = "linux") {
            json!({"sandbox": {"network": "on"}})
        } else {
            json!({})
        };
        let mut expected = json!({"command": "npx", "env": {"T": "${T}"}});
        expected
            .as_object_mut()
            .unwrap()
            .extend(sandbox.as_object().unwrap().clone());
        assert_eq!(ok, expected);
        for (name, entry) in [
            ("has space", json!({"command": "x"})),
            ("a", json!({"command": "x", "envFile": ".env"})),
            ("a", json!({"command": "x", "sandbox": true})),
            ("a", json!({"command": "x", "disabled": true})),
            (
                "a",
                json!({"url": "https://x", "headers": {"A": "${input:t}"}}),
            ),
        ] {
            assert!(importable(Client::VsCode, name, &entry).is_err(), "{entry}");
        }
    }

    #[test]
    fn secrets_are_counted_not_shown() {
        let s = summary(&json!({"command": "npx", "env": {"TOKEN": "ghp_secret"}}));
        assert_eq!(s, "runs `npx`; 1 env value, not shown");
        let s = summary(
            &json!({"url": "https://u:pw@x.example/mcp?key=k", "headers": {"A": "b", "C": "d"}}),
        );
        assert!(!s.contains("pw") && !s.contains("key=k"), "{s}");
        assert!(s.ends_with("2 header values, not shown"), "{s}");
    }

    #[test]
    fn the_written_config_is_one_moniker_reads() {
        let text = moniker_config(
            "cursor",
            Path::new("/h/.cursor/mcp.json"),
            &[
                (
                    "a.b".to_owned(),
                    json!({"command": "npx", "args": ["-y", "x: y # z"]}),
                ),
                (
                    "web".to_owned(),
                    json!({"url": "https://x/mcp", "headers": {"A": "\"q\"\n"}}),
                ),
            ],
        );
        let config = moniker_config::parse("moniker.yaml", &text).unwrap();
        assert_eq!(config.servers.len(), 2);
        let a = &config.servers[0];
        assert!(
            matches!(&a.transport, moniker_config::Transport::Stdio { args, .. } if args[1] == "x: y # z"),
            "{a:?}"
        );
    }
}
