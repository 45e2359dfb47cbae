//! `moniker.lock` on disk: where it lives (beside the config file), reading and writing it,
//! the line diff `moniker lock --diff` prints, and the breaking changes `moniker check` reports.
//! The lock itself, its format and the comparison are `moniker_surface::lock`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use moniker_config::Config;
use moniker_surface::{Breaking, Diagnostic, Lock};

use crate::exit::Failure;

/// The lock file's name, beside the config file.
pub const FILE_NAME: &str = "moniker.lock";

/// `moniker.lock` in the config file's directory.
pub fn path(config: &Config) -> PathBuf {
    Path::new(&config.source.file_name).with_file_name(FILE_NAME)
}

/// The lock at `path`; `None` when there is no such file.
pub fn read(path: &Path) -> Result<Option<Lock>, Failure> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read `{}`: {e}", path.display()).into()),
    };
    Lock::parse(&text)
        .map(Some)
        .map_err(|e| format!("`{}` {e}; `moniker lock` writes it anew", path.display()).into())
}

/// Writes `text` through a temporary file and a rename: a reader never sees half a lock.
pub fn write(path: &Path, text: &str) -> Result<(), Failure> {
    let tmp = path.with_extension("lock.tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write `{}`: {e}", path.display()).into())
}

/// What changes from `old` to `new`, line by line and by name: `+` added, `-` removed, and a
/// `-`/`+` pair for a changed name; with the counts. Empty when nothing changes.
pub fn diff(old: &Lock, new: &Lock) -> (Vec<String>, [usize; 3]) {
    let lines = |lock: &Lock| -> BTreeMap<(String, String), String> {
        let text = lock.render();
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with(' '))
            .filter_map(|l| {
                let mut words = l.split(' ');
                let key = (words.next()?.to_owned(), words.next()?.to_owned());
                Some((key, l.to_owned()))
            })
            .collect()
    };
    let (old, new) = (lines(old), lines(new));
    let mut keys: Vec<&(String, String)> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    let mut counts = [0; 3];
    for key in keys {
        match (old.get(key), new.get(key)) {
            (None, Some(line)) => {
                counts[0] += 1;
                out.push(format!("+ {line}"));
            }
            (Some(line), None) => {
                counts[1] += 1;
                out.push(format!("- {line}"));
            }
            (Some(was), Some(now)) if was != now => {
                counts[2] += 1;
                out.push(format!("- {was}"));
                out.push(format!("+ {now}"));
            }
            _ => {}
        }
    }
    (out, counts)
}

/// Each sandboxed server's sandbox as `moniker.lock` records it: its settings as compact JSON.
pub fn sandboxes(config: &Config) -> BTreeMap<String, String> {
    config
        .servers
        .iter()
        .filter_map(|(id, server)| {
            let s = server.sandbox.as_ref()?;
            let line = serde_json::json!({
                    "read": s.read,
                    "write": s.write,
                    "network": match &s.network {
                        moniker_config::Network::Off => serde_json::json!("off"),
                        moniker_config::Network::On => serde_json::json!("on"),
                        moniker_config::Network::Ports(p) => serde_json::json!(p),
                    },
                    "processes": s.processes,
                    "open_files": s.open_files,
                    "memory": s.memory_mb,
                    "best_effort": s.best_effort,
            })
            .to_string();
            Some((id.as_str().to_owned(), line))
        })
        .collect()
}

/// How each server's sandbox widened from `old` to `new` (`moniker lock --diff`): a line per
/// server, with what it may now reach that it could not.
pub fn widened(old: &moniker_surface::Lock, new: &moniker_surface::Lock) -> Vec<String> {
    let read = |line: &str| serde_json::from_str(line).unwrap_or_default();
    let mut out = Vec::new();
    for (server, before) in &old.sandboxes {
        let more = match new.sandboxes.get(server) {
            None => vec!["no sandbox any more".to_owned()],
            Some(line) => wider(&read(before), &read(line)),
        };
        if !more.is_empty() {
            out.push(format!(
                "! sandbox of `{server}` widened: {}",
                more.join("; ")
            ));
        }
    }
    out
}

/// What `now` gives that `was` did not.
fn wider(was: &serde_json::Value, now: &serde_json::Value) -> Vec<String> {
    let paths = |v: &serde_json::Value, key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str().map(str::to_owned))
            .collect()
    };
    let mut out = Vec::new();
    let (was_write, was_read) = (paths(was, "write"), paths(was, "read"));
    for path in paths(now, "write") {
        if !was_write.contains(&path) {
            out.push(format!("writes {path}"));
        }
    }
    for path in paths(now, "read") {
        if !was_read.contains(&path) && !was_write.contains(&path) {
            out.push(format!("reads {path}"));
        }
    }
    match (&was["network"], &now["network"]) {
        (a, b) if a == b || *a == "on" || *b == "off" => {}
        (serde_json::Value::Array(a), serde_json::Value::Array(b)) => {
            let added: Vec<String> = b
                .iter()
                .filter(|p| !a.contains(p))
                .map(ToString::to_string)
                .collect();
            if !added.is_empty() {
                out.push(format!("network to port {}", added.join(", ")));
            }
        }
        (_, b) => out.push(format!("network {b}")),
    }
    for limit in ["processes", "open_files", "memory"] {
        let (a, b) = (was[limit].as_u64(), now[limit].as_u64());
        if a.is_some() && (b.is_none() || b > a) {
            out.push(format!(
                "{limit} {}",
                b.map_or("unbounded".to_owned(), |n| n.to_string())
            ));
        }
    }
    if now["best_effort"] == true && was["best_effort"] != true {
        out.push("best-effort".to_owned());
    }
    out
}

/// A breaking change as a warning of `check`, its help the override that keeps a gone name.
pub fn diagnostic(breaking: &Breaking) -> Diagnostic {
    let mut d = Diagnostic::warning(breaking.code(), breaking.to_string())
        .note(format!("against `{FILE_NAME}`"));
    match breaking {
        Breaking::Gone { fix: Some(fix), .. } => {
            d = d.help(format!(
                "to keep the old names working, add to the config:\n{}",
                fix.yaml
            ));
        }
        Breaking::Gone { fix: None, .. } => {
            d = d.help(
                "if it is gone on purpose, run `moniker lock` to accept it; else give its new name the old one as an alias (`tools: { <origin name>: { aliases: [...] } }`)",
            );
        }
        Breaking::NewRequired { .. } | Breaking::TypeChanged { .. } => {
            d = d.help(
                "clients calling it as before will fail; once they are updated, run `moniker lock` to accept the change",
            );
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_shows_added_removed_and_changed_names() {
        let old = Lock::parse(
            "tool a server=s origin=a schema=1 params=\ntool b server=s origin=b schema=2 params=\n",
        )
        .expect("valid");
        let new = Lock::parse(
            "tool b server=s origin=b schema=3 params=\ntool c server=s origin=c schema=1 params=\n",
        )
        .expect("valid");
        let (lines, counts) = diff(&old, &new);
        assert_eq!(counts, [1, 1, 1]);
        assert_eq!(
            lines,
            [
                "- tool a server=s origin=a schema=0000000000000001 params=",
                "- tool b server=s origin=b schema=0000000000000002 params=",
                "+ tool b server=s origin=b schema=0000000000000003 params=",
                "+ tool c server=s origin=c schema=0000000000000001 params=",
            ]
        );
        assert_eq!(diff(&new, &new), (vec![], [0, 0, 0]));
    }

    #[test]
    fn the_lock_is_beside_the_config() {
        let config = moniker_config::parse("dir/sub/m.yaml", "servers: { a: { command: x } }\n")
            .expect("valid");
        assert_eq!(path(&config), PathBuf::from("dir/sub/moniker.lock"));
        let config =
            moniker_config::parse("m.yaml", "servers: { a: { command: x } }\n").expect("valid");
        assert_eq!(path(&config), PathBuf::from("moniker.lock"));
    }

    #[test]
    fn a_widened_sandbox_is_said_and_a_narrowed_one_is_not() {
        let config = |sandbox: &str| {
            moniker_config::parse("m.yaml", &format!("servers:\n  a:\n    command: x\n    {sandbox}\n  r:\n    url: https://r.example/mcp\n"))
                .expect("valid")
        };
        let lock = |sandbox: &str| Lock {
            sandboxes: sandboxes(&config(sandbox)),
            ..Lock::default()
        };
        let was = lock("sandbox: { write: [/srv/a], network: [443], processes: 8 }");
        // Only a sandboxed server has one; the lock writes and reads it back.
        assert_eq!(was.sandboxes.keys().collect::<Vec<_>>(), ["a"]);
        assert!(lock("disabled: false").sandboxes.is_empty());
        assert_eq!(Lock::parse(&was.render()).expect("parsed"), was);
        let now = lock("sandbox: { write: [/srv/a, /home/u], network: [443, 22], processes: 64 }");
        assert_eq!(
            widened(&was, &now),
            ["! sandbox of `a` widened: writes /home/u; network to port 22; processes 64"]
        );
        assert_eq!(
            widened(&was, &lock("sandbox: false")),
            ["! sandbox of `a` widened: no sandbox any more"]
        );
        let narrower = lock("sandbox: { write: [/srv/a], network: off, processes: 4 }");
        assert!(widened(&was, &narrower).is_empty());
        let (lines, _) = diff(&was, &now);
        assert!(
            lines.iter().any(|l| l.starts_with("+ sandbox a ")),
            "{lines:?}"
        );
    }
}
