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
}
