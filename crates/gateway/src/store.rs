//! The persistent store of run-time toolsets: the toolsets MCP clients build through
//! `build-toolset`, kept in one JSON file so they survive restarts.
//!
//! The file is `{"version": 1, "toolsets": {"name": {...}}}`, pretty-printed, toolsets sorted
//! by name. Every change rewrites the whole file atomically (a uniquely named temporary file in
//! the same directory, written, `fsync`ed, renamed over the store, then the directory
//! `fsync`ed), so a crash at any moment leaves either the old or the new file, never a torn one,
//! and a change is acknowledged only once it is durable.
//!
//! A store that cannot be used is never silently overwritten: a file that does not parse is
//! moved aside (`<name>.corrupt-<unix seconds>`) and the store starts empty; a file written by a
//! newer moniker, or one that cannot be read at all, makes the store read-only.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub mod redis;

/// The version of the store file this build writes, and the newest it can change.
pub const STORE_VERSION: u32 = 1;

/// A toolset as stored: a named subset of tools with optional per-tool aliases.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredToolset {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub tools: Vec<StoredTool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<String>,
}

/// One tool of a stored toolset: its surface name and the alias it is exposed under, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredTool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
}

/// What [`Store::open`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    /// There was no store file: the store starts empty; the file (and its directory) is
    /// created by the first write.
    Fresh,
    /// The store file was read.
    Loaded,
    /// The store file could not be parsed: it was renamed to `to` and the store starts empty.
    MovedAside { to: PathBuf, reason: String },
    /// The store file cannot be changed safely (written by a newer moniker, or unreadable): it
    /// is left untouched and every change fails.
    ReadOnly { reason: String },
}

/// Why a change to the store failed. When this is returned the store's contents in memory are
/// still those of the file on disk.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "the toolset store `{path}` was written by a newer moniker (store version {found}, this \
         moniker supports up to {supported}); it is left untouched: upgrade moniker to change it"
    )]
    Newer {
        path: PathBuf,
        found: u64,
        supported: u32,
    },
    #[error("the toolset store `{path}` could not be read ({reason}); it is left untouched")]
    Unreadable { path: PathBuf, reason: String },
    #[error("cannot create the toolset store directory `{path}`: {source}")]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("cannot write the toolset store `{path}`: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error(
        "the toolset store `{path}` was replaced but its directory could not be synced, so the \
         change may not survive a crash: {source}"
    )]
    SyncDir { path: PathBuf, source: io::Error },
    #[error("cannot serialize the toolset store `{path}`: {source}")]
    Serialize {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// Why the store refuses changes.
#[derive(Debug, Clone)]
enum Lock {
    Newer { found: u64 },
    Unreadable { reason: String },
}

/// The persistent store of run-time toolsets. See the module documentation.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    toolsets: BTreeMap<String, StoredToolset>,
    lock: Option<Lock>,
}

#[derive(Serialize)]
struct FileOut<'a> {
    version: u32,
    toolsets: &'a BTreeMap<String, StoredToolset>,
}

/// The current version's file; `version` was checked before.
#[derive(Deserialize)]
struct FileIn {
    toolsets: BTreeMap<String, StoredToolset>,
}

/// How a store file's contents were understood.
enum Parsed {
    Current(BTreeMap<String, StoredToolset>),
    Newer {
        found: u64,
        salvaged: BTreeMap<String, StoredToolset>,
    },
    Corrupt(String),
}

impl Store {
    /// `<data dir>/moniker/toolsets.json`, if the platform has a data directory.
    pub fn default_path() -> Option<PathBuf> {
        dirs::data_dir().map(|dir| dir.join("moniker").join("toolsets.json"))
    }

    /// Opens the store at `path`. Never fails: what was found is reported in [`Opened`], and a
    /// store that cannot be changed safely is opened read-only.
    pub fn open(path: PathBuf) -> (Store, Opened) {
        let mut store = Store {
            path,
            toolsets: BTreeMap::new(),
            lock: None,
        };
        store.clean_temp_files();
        let bytes = match fs::read(&store.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return (store, Opened::Fresh),
            Err(e) => {
                let reason = e.to_string();
                store.lock = Some(Lock::Unreadable {
                    reason: reason.clone(),
                });
                return (store, Opened::ReadOnly { reason });
            }
        };
        let opened = match parse(&bytes) {
            Parsed::Current(toolsets) => {
                store.toolsets = toolsets;
                Opened::Loaded
            }
            Parsed::Newer { found, salvaged } => {
                store.toolsets = salvaged;
                store.lock = Some(Lock::Newer { found });
                Opened::ReadOnly {
                    reason: format!(
                        "written by a newer moniker (store version {found}, this moniker \
                         supports up to {STORE_VERSION})"
                    ),
                }
            }
            Parsed::Corrupt(reason) => match move_aside(&store.path) {
                Ok(to) => Opened::MovedAside { to, reason },
                Err(e) => {
                    let reason =
                        format!("it does not parse ({reason}) and cannot be moved aside ({e})");
                    store.lock = Some(Lock::Unreadable {
                        reason: reason.clone(),
                    });
                    Opened::ReadOnly { reason }
                }
            },
        };
        (store, opened)
    }

    /// The stored toolsets, by name.
    pub fn toolsets(&self) -> &BTreeMap<String, StoredToolset> {
        &self.toolsets
    }

    /// The store file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether changes are refused (see [`Opened::ReadOnly`]).
    pub fn is_read_only(&self) -> bool {
        self.lock.is_some()
    }

    /// Adds or replaces the toolset `name`. Returns `Ok` only once the change is durable.
    pub fn put(&mut self, name: &str, toolset: StoredToolset) -> Result<(), StoreError> {
        self.check_writable()?;
        let mut next = self.toolsets.clone();
        next.insert(name.to_owned(), toolset);
        self.commit(next)
    }

    /// Removes the toolset `name`; `Ok(false)` if there was none (nothing is written then).
    /// Returns `Ok(true)` only once the removal is durable.
    pub fn remove(&mut self, name: &str) -> Result<bool, StoreError> {
        self.check_writable()?;
        if !self.toolsets.contains_key(name) {
            return Ok(false);
        }
        let mut next = self.toolsets.clone();
        next.remove(name);
        self.commit(next)?;
        Ok(true)
    }

    fn check_writable(&self) -> Result<(), StoreError> {
        match &self.lock {
            None => Ok(()),
            Some(Lock::Newer { found }) => Err(StoreError::Newer {
                path: self.path.clone(),
                found: *found,
                supported: STORE_VERSION,
            }),
            Some(Lock::Unreadable { reason }) => Err(StoreError::Unreadable {
                path: self.path.clone(),
                reason: reason.clone(),
            }),
        }
    }

    /// Writes `next` atomically and durably, then makes it the in-memory state. The in-memory
    /// state follows the file: it changes exactly when the rename happened.
    fn commit(&mut self, next: BTreeMap<String, StoredToolset>) -> Result<(), StoreError> {
        let mut text = serde_json::to_string_pretty(&FileOut {
            version: STORE_VERSION,
            toolsets: &next,
        })
        .map_err(|source| StoreError::Serialize {
            path: self.path.clone(),
            source,
        })?;
        text.push('\n');

        let dir = parent_dir(&self.path);
        fs::create_dir_all(&dir).map_err(|source| StoreError::CreateDir {
            path: dir.clone(),
            source,
        })?;
        let write_err = |source| StoreError::Write {
            path: self.path.clone(),
            source,
        };
        let (temp_path, mut temp) = create_temp(&dir, &self.path).map_err(write_err)?;
        let written = temp
            .write_all(text.as_bytes())
            .and_then(|()| temp.sync_all())
            .and_then(|()| {
                drop(temp);
                fs::rename(&temp_path, &self.path)
            });
        if let Err(source) = written {
            let _ = fs::remove_file(&temp_path);
            return Err(write_err(source));
        }
        // The file on disk is now `next`, whether or not the directory entry is durable yet.
        self.toolsets = next;
        sync_dir(&dir).map_err(|source| StoreError::SyncDir {
            path: self.path.clone(),
            source,
        })
    }

    /// Removes temporary files left by writers that died mid-write (their process is gone).
    /// Best effort: they are never read, so any that stay are harmless.
    fn clean_temp_files(&self) {
        let Some(prefix) = temp_prefix(&self.path) else {
            return;
        };
        let Ok(entries) = fs::read_dir(parent_dir(&self.path)) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
                continue;
            };
            let Some((pid, counter)) = rest.split_once('-') else {
                continue;
            };
            if counter.is_empty() || !counter.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let Ok(pid) = pid.parse::<i32>() else {
                continue;
            };
            if pid > 0 && !process_alive(pid) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}

fn parse(bytes: &[u8]) -> Parsed {
    let value: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(e) => return Parsed::Corrupt(e.to_string()),
    };
    let Some(object) = value.as_object() else {
        return Parsed::Corrupt("the store is not a JSON object".to_owned());
    };
    let Some(found) = object.get("version").and_then(serde_json::Value::as_u64) else {
        return Parsed::Corrupt("the store has no numeric `version`".to_owned());
    };
    if found > u64::from(STORE_VERSION) {
        // Keep whatever reads as this version's toolsets, so they can still be served.
        let salvaged = object
            .get("toolsets")
            .and_then(serde_json::Value::as_object)
            .map(|toolsets| {
                toolsets
                    .iter()
                    .filter_map(|(name, toolset)| {
                        StoredToolset::deserialize(toolset)
                            .ok()
                            .map(|t| (name.clone(), t))
                    })
                    .collect()
            })
            .unwrap_or_default();
        return Parsed::Newer { found, salvaged };
    }
    if found != u64::from(STORE_VERSION) {
        return Parsed::Corrupt(format!("unsupported store version {found}"));
    }
    match serde_json::from_slice::<FileIn>(bytes) {
        Ok(file) => Parsed::Current(file.toolsets),
        Err(e) => Parsed::Corrupt(e.to_string()),
    }
}

/// Renames the unparsable store to `<name>.corrupt-<unix seconds>[-n]`, never over an existing
/// file, and returns where it went.
fn move_aside(path: &Path) -> io::Result<PathBuf> {
    let file_name = path
        .file_name()
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "the store path has no file name",
            )
        })?
        .to_string_lossy()
        .into_owned();
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let dir = parent_dir(path);
    for n in 0u32.. {
        let candidate = if n == 0 {
            dir.join(format!("{file_name}.corrupt-{secs}"))
        } else {
            dir.join(format!("{file_name}.corrupt-{secs}-{n}"))
        };
        match fs::symlink_metadata(&candidate) {
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        fs::rename(path, &candidate)?;
        // Best effort: the rename is what matters; a crash before this only undoes it.
        let _ = sync_dir(&dir);
        return Ok(candidate);
    }
    Err(io::Error::other("no free name to move the store aside to"))
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Temporary files for `path` are named `.<file name>.tmp-<pid>-<counter>`.
fn temp_prefix(path: &Path) -> Option<String> {
    path.file_name()
        .map(|name| format!(".{}.tmp-", name.to_string_lossy()))
}

/// Creates a new, uniquely named temporary file next to `path`.
fn create_temp(dir: &Path, path: &Path) -> io::Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix = temp_prefix(path).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the store path has no file name",
        )
    })?;
    let pid = std::process::id();
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp_path = dir.join(format!("{prefix}{pid}-{n}"));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp_path)
        {
            Ok(file) => return Ok((temp_path, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Whether process `pid` exists (a process of another user counts as existing).
fn process_alive(pid: i32) -> bool {
    use nix::errno::Errno;
    use nix::sys::signal::kill;
    use nix::unistd::Pid;
    !matches!(kill(Pid::from_raw(pid), None), Err(Errno::ESRCH))
}

#[cfg(test)]
mod tests;

/// Where run-time toolsets are kept: the file (the default), or Redis, shared by replicas.
pub enum Backend {
    File(Store),
    Redis(std::sync::Arc<redis::RedisStore>),
}

impl Backend {
    /// Opens `location`: a `redis://` (or `rediss://`) URL, else a file path. What was found
    /// is logged.
    pub fn open(location: PathBuf) -> Option<Self> {
        let text = location.to_string_lossy().into_owned();
        if text.starts_with("redis://") || text.starts_with("rediss://") {
            return match redis::RedisStore::open(&text) {
                Ok(store) => {
                    tracing::info!(store = store.shown(), "toolset store: Redis");
                    Some(Self::Redis(std::sync::Arc::new(store)))
                }
                Err(why) => {
                    tracing::error!("{why}: no run-time toolsets");
                    None
                }
            };
        }
        let (store, opened) = Store::open(location);
        let path = store.path().display().to_string();
        match opened {
            Opened::Fresh => tracing::info!(path, "toolset store: none yet, starting empty"),
            Opened::Loaded => {
                tracing::info!(
                    path,
                    toolsets = store.toolsets().len(),
                    "toolset store loaded"
                )
            }
            Opened::MovedAside { to, reason } => tracing::error!(
                path, moved_to = %to.display(), %reason,
                "toolset store was unreadable: moved aside, starting empty (static toolsets still work)"
            ),
            Opened::ReadOnly { reason } => {
                tracing::error!(path, %reason, "toolset store is read-only: toolsets cannot be saved or deleted")
            }
        }
        Some(Self::File(store))
    }

    pub fn toolsets(&self) -> BTreeMap<String, StoredToolset> {
        match self {
            Self::File(store) => store.toolsets().clone(),
            Self::Redis(store) => store.toolsets(),
        }
    }

    /// The store shared with other replicas, if it is one.
    pub fn shared(&self) -> Option<std::sync::Arc<redis::RedisStore>> {
        match self {
            Self::Redis(store) => Some(store.clone()),
            Self::File(_) => None,
        }
    }

    pub fn put(&mut self, name: &str, toolset: StoredToolset) -> Result<(), String> {
        match self {
            Self::File(store) => store.put(name, toolset).map_err(|e| e.to_string()),
            Self::Redis(store) => store.put(name, &toolset),
        }
    }

    pub fn remove(&mut self, name: &str) -> Result<bool, String> {
        match self {
            Self::File(store) => store.remove(name).map_err(|e| e.to_string()),
            Self::Redis(store) => store.remove(name),
        }
    }
}
