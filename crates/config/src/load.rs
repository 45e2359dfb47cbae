//! The I/O edge: which file is the config, and reading it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::{Config, ConfigReport, parse};

/// Why [`load`] failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read config file `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Invalid(ConfigReport),
}

const FILE_NAMES: &[&str] = &["moniker.yaml", "moniker.yml", "moniker.json"];

/// Why [`find`] chose a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// `-c FILE` named it.
    Flag,
    /// `$MONIKER_CONFIG` named it.
    Env,
    /// It is in the working dir.
    WorkingDir,
    /// It is in the user config dir's `moniker`.
    UserDir,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Found::Flag => "named by `-c`",
            Found::Env => "named by `$MONIKER_CONFIG`",
            Found::WorkingDir => "found in the working dir (no `-c`, no `$MONIKER_CONFIG`)",
            Found::UserDir => {
                "found in the user config dir (no `-c`, no `$MONIKER_CONFIG`, none in the working dir)"
            }
        })
    }
}

/// The config file to use: `explicit` (`--config`), else `$MONIKER_CONFIG`, else
/// `./moniker.yaml` (or `./moniker.yml`, `./moniker.json`), else the same names in
/// `<user config dir>/moniker/`. An explicit path or `$MONIKER_CONFIG` is returned whether or
/// not it exists, so that [`load`] reports it missing; the others only when they exist.
pub fn find(explicit: Option<&Path>) -> Option<PathBuf> {
    find_why(explicit).map(|(path, _)| path)
}

/// [`find`], and why.
pub fn find_why(explicit: Option<&Path>) -> Option<(PathBuf, Found)> {
    search(
        explicit,
        std::env::var_os("MONIKER_CONFIG"),
        dirs::config_dir().as_deref(),
        |p| p.is_file(),
    )
}

fn search(
    explicit: Option<&Path>,
    from_env: Option<OsString>,
    config_dir: Option<&Path>,
    exists: impl Fn(&Path) -> bool,
) -> Option<(PathBuf, Found)> {
    if let Some(path) = explicit {
        return Some((path.to_path_buf(), Found::Flag));
    }
    if let Some(path) = from_env.filter(|p| !p.is_empty()) {
        return Some((PathBuf::from(path), Found::Env));
    }
    let local = FILE_NAMES
        .iter()
        .map(|n| (PathBuf::from(n), Found::WorkingDir));
    let user = config_dir.into_iter().flat_map(|dir| {
        FILE_NAMES
            .iter()
            .map(move |name| (dir.join("moniker").join(name), Found::UserDir))
    });
    local.chain(user).find(|(p, _)| exists(p))
}

/// Reads and parses the config at `path`. `${VAR}` are not expanded yet.
pub fn load(path: &Path) -> Result<Config, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&path.display().to_string(), &text).map_err(LoadError::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_order() {
        let none = |_: &Path| false;
        let all = |_: &Path| true;
        let dir = Path::new("/home/u/.config");
        assert_eq!(
            search(
                Some(Path::new("x.yaml")),
                Some("env.yaml".into()),
                Some(dir),
                all
            ),
            Some((PathBuf::from("x.yaml"), Found::Flag))
        );
        assert_eq!(
            search(None, Some("env.yaml".into()), Some(dir), none),
            Some((PathBuf::from("env.yaml"), Found::Env))
        );
        assert_eq!(
            search(None, Some("".into()), Some(dir), all),
            Some((PathBuf::from("moniker.yaml"), Found::WorkingDir))
        );
        assert_eq!(
            search(None, None, Some(dir), |p| p == Path::new("moniker.json")),
            Some((PathBuf::from("moniker.json"), Found::WorkingDir))
        );
        assert_eq!(
            search(None, None, Some(dir), |p| p.starts_with(dir)),
            Some((dir.join("moniker").join("moniker.yaml"), Found::UserDir))
        );
        assert_eq!(search(None, None, Some(dir), none), None);
        assert_eq!(search(None, None, None, none), None);
    }

    #[test]
    fn load_reports_missing_and_invalid_files() {
        let missing = Path::new("/nonexistent/moniker-config-test/moniker.yaml");
        let err = load(missing).expect_err("missing");
        assert!(matches!(err, LoadError::Io { .. }), "{err:?}");
        assert!(err.to_string().contains("moniker.yaml"), "{err}");

        let dir = std::env::temp_dir().join(format!("moniker-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("moniker.yaml");
        std::fs::write(&file, "servers:\n  a: { comand: x }\n").expect("write");
        let err = load(&file).expect_err("invalid");
        let LoadError::Invalid(report) = &err else {
            panic!("{err:?}")
        };
        assert!(
            report
                .errors
                .iter()
                .any(|e| e.code == crate::codes::UNKNOWN_KEY)
        );
        std::fs::write(&file, "servers:\n  a: { command: x }\n").expect("write");
        let config = load(&file).expect("valid");
        assert_eq!(config.servers.len(), 1);
        assert_eq!(config.source.file_name, file.display().to_string());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
