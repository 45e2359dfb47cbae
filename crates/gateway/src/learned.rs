//! What calls taught search, per principal (DESIGN "The model's view"), kept in the user's state
//! directory: one private file a principal (named by a digest of it), read when the principal
//! first searches and again when another process changed or removed it (`moniker forget`),
//! written off the runtime's threads after each lesson. A principal's lessons rank that
//! principal's searches only; nothing of it leaves the machine.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use moniker_surface::search::{Lesson, Taught};
use sha2::{Digest as _, Sha256};

use crate::sync::lock;

/// The most principals held in memory: the least recently used goes (its file stays).
const MAX_HELD: usize = 256;
/// The largest file read back: a principal's lessons are bounded far below it.
const MAX_FILE: u64 = 4 << 20;
/// The most searches of a principal kept as the lessons of its next call (the last ones).
pub(crate) const MAX_PENDING: usize = 4;

/// The principals' lessons: in memory, and in `dir` when learning is on.
pub(crate) struct Learned {
    /// `None`: learning is off (`discovery.learn: false`, or no state directory).
    dir: Option<PathBuf>,
    held: Mutex<HashMap<String, Held>>,
    /// Each principal's searches since its last call (the last [`MAX_PENDING`]): a principal's,
    /// not a session's, since a 2026-07-28 client's every request is a session of its own.
    asked: Mutex<HashMap<String, Vec<Lesson>>>,
    /// Taken while a file is written: the latest lessons are written last.
    writing: Mutex<()>,
}

struct Held {
    taught: Arc<Taught>,
    /// The file's modification time and length as this process last read or wrote it.
    stamp: Option<(SystemTime, u64)>,
    used: Instant,
}

/// One principal's file.
#[derive(serde::Serialize, serde::Deserialize)]
struct File {
    principal: String,
    taught: Taught,
}

impl Learned {
    pub(crate) fn new(dir: Option<PathBuf>) -> Self {
        Self {
            dir,
            held: Mutex::default(),
            asked: Mutex::default(),
            writing: Mutex::default(),
        }
    }

    /// `principal` searched for `lesson`'s request: the next successful call of a tool teaches
    /// it, with the principal's other searches since its last call (the last [`MAX_PENDING`]).
    pub(crate) fn asked(&self, principal: &str, lesson: Lesson) {
        if self.dir.is_none() {
            return;
        }
        let mut asked = lock(&self.asked);
        if !asked.contains_key(principal) && asked.len() >= MAX_HELD {
            // The principal that asked longest ago (its searches are the oldest) gives way.
            let oldest = asked
                .iter()
                .min_by_key(|(_, l)| l.last().map_or(0, |l| l.at))
                .map(|(p, _)| p.clone());
            if let Some(oldest) = oldest {
                asked.remove(&oldest);
            }
        }
        let pending = asked.entry(principal.to_owned()).or_default();
        if pending.len() == MAX_PENDING {
            pending.remove(0);
        }
        pending.push(lesson);
    }

    /// `principal`'s searches since its last call, which a call takes: none are left.
    pub(crate) fn take_asked(&self, principal: &str) -> Vec<Lesson> {
        // Every call of a tool asks: with learning off, nothing is locked for it.
        if self.dir.is_none() {
            return Vec::new();
        }
        lock(&self.asked).remove(principal).unwrap_or_default()
    }

    /// Whether search learns.
    pub(crate) fn on(&self) -> bool {
        self.dir.is_some()
    }

    /// What `principal`'s calls taught (`None` when learning is off or nothing was taught).
    pub(crate) fn of(&self, principal: &str) -> Option<Arc<Taught>> {
        let dir = self.dir.as_deref()?;
        let path = path_of(dir, principal);
        let now = stamp(&path);
        let mut held = lock(&self.held);
        if let Some(h) = held.get_mut(principal) {
            // Changed or removed by another process since: read again.
            if h.stamp == now {
                h.used = Instant::now();
                return (!h.taught.is_empty()).then(|| h.taught.clone());
            }
        }
        let taught = Arc::new(read(&path, principal).unwrap_or_default());
        make_room(&mut held);
        held.insert(
            principal.to_owned(),
            Held {
                taught: taught.clone(),
                stamp: stamp(&path),
                used: Instant::now(),
            },
        );
        (!taught.is_empty()).then_some(taught)
    }

    /// `principal` called `tool` after searching for `lessons`: they are kept for it, and the
    /// principal's file is written (on a blocking thread when there is a runtime).
    pub(crate) fn teach(self: &Arc<Self>, principal: &str, tool: &str, lessons: Vec<Lesson>) {
        if self.dir.is_none() || lessons.is_empty() {
            return;
        }
        let _ = self.of(principal);
        {
            let mut held = lock(&self.held);
            let Some(h) = held.get_mut(principal) else {
                return;
            };
            let mut taught = (*h.taught).clone();
            taught.teach(tool, lessons, now());
            h.taught = Arc::new(taught);
        }
        let (learned, principal) = (self.clone(), principal.to_owned());
        let write = move || learned.write(&principal);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(write)),
            Err(_) => write(),
        }
    }

    /// Writes `principal`'s latest lessons to its file.
    fn write(&self, principal: &str) {
        let Some(dir) = self.dir.as_deref() else {
            return;
        };
        let _writing = lock(&self.writing);
        let Some(taught) = lock(&self.held).get(principal).map(|h| h.taught.clone()) else {
            return;
        };
        let file = File {
            principal: principal.to_owned(),
            taught: (*taught).clone(),
        };
        let path = path_of(dir, principal);
        let written = serde_json::to_vec(&file)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                crate::files::create_private_dir(dir)?;
                crate::files::write_private(dir, &path, &bytes)
            });
        match written {
            Ok(()) => {
                if let Some(h) = lock(&self.held).get_mut(principal) {
                    h.stamp = stamp(&path);
                }
            }
            Err(e) => tracing::warn!(
                path = %path.display(),
                error = %e,
                "what search learned could not be kept"
            ),
        }
    }
}

/// `<user state dir>/moniker/learned`, when the platform has one.
pub fn default_dir() -> Option<PathBuf> {
    dirs::state_dir()
        .or_else(dirs::cache_dir)
        .map(|d| d.join("moniker").join("learned"))
}

/// Removes what search learned: every principal's file in `dir`, or `principal`'s alone. How
/// many files went.
///
/// # Errors
/// When a file cannot be removed (one that is not there is not an error).
pub fn forget(dir: &Path, principal: Option<&str>) -> std::io::Result<usize> {
    let paths: Vec<PathBuf> = match principal {
        Some(principal) => vec![path_of(dir, principal)],
        None => match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        },
    };
    let mut removed = 0;
    for path in paths {
        match std::fs::remove_file(&path) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

/// What each principal taught, as its file says: (principal, lessons, tools), by principal.
pub fn summary(dir: &Path) -> Vec<(String, usize, usize)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, usize, usize)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let bytes = crate::files::read_private(&e.path(), MAX_FILE)?;
            let file: File = serde_json::from_slice(&bytes).ok()?;
            Some((
                file.principal,
                file.taught.lessons(),
                file.taught.tools().count(),
            ))
        })
        .collect();
    out.sort();
    out
}

/// The file of `principal`'s lessons: named by a digest, never by the principal itself.
fn path_of(dir: &Path, principal: &str) -> PathBuf {
    let digest = Sha256::digest(principal.as_bytes());
    dir.join(format!("{}.json", crate::files::hex(&digest[..16])))
}

/// `principal`'s lessons as its file holds them, within the bounds as of now: `None` when
/// there is no file, or it is not one of this principal's (a digest's collision, a hand-made
/// file), or cannot be read.
fn read(path: &Path, principal: &str) -> Option<Taught> {
    let bytes = crate::files::read_private(path, MAX_FILE)?;
    match serde_json::from_slice::<File>(&bytes) {
        Ok(file) if file.principal == principal => {
            let mut taught = file.taught;
            taught.bound(now());
            Some(taught)
        }
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "what search learned could not be read: it starts again");
            None
        }
    }
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let metadata = std::fs::symlink_metadata(path).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

/// Room for one more principal: the least recently used goes when [`MAX_HELD`] are held.
fn make_room(held: &mut HashMap<String, Held>) {
    if held.len() < MAX_HELD {
        return;
    }
    let oldest = held.iter().min_by_key(|(_, h)| h.used);
    if let Some(principal) = oldest.map(|(p, _)| p.clone()) {
        held.remove(&principal);
    }
}

/// Seconds since the epoch.
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lessons(request: &str) -> Vec<Lesson> {
        vec![Lesson::new(request, now(), None)]
    }

    #[test]
    fn a_principal_reads_its_own_lessons_and_no_one_else_s() {
        let dir = tempfile::tempdir().expect("dir");
        let learned = Arc::new(Learned::new(Some(dir.path().to_owned())));
        learned.teach(
            "token aa",
            "delete_relations",
            lessons("note that Alice moved"),
        );
        assert!(learned.of("token bb").is_none());
        let fresh = Learned::new(Some(dir.path().to_owned()));
        let taught = fresh.of("token aa").expect("kept");
        assert_eq!(
            taught.tools().collect::<Vec<_>>(),
            [("delete_relations", 1)]
        );
        assert!(fresh.of("token bb").is_none());
        // A file of another principal's under this one's name (a hand-made one) is not read.
        std::fs::copy(
            path_of(dir.path(), "token aa"),
            path_of(dir.path(), "token bb"),
        )
        .expect("copy");
        assert!(
            Learned::new(Some(dir.path().to_owned()))
                .of("token bb")
                .is_none()
        );
    }

    #[test]
    fn a_file_that_is_not_lessons_starts_again_and_forget_removes_them() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(
            path_of(dir.path(), "stdio"),
            b"{\"principal\": \"stdio\", \"taught\": 7}",
        )
        .expect("write");
        let learned = Arc::new(Learned::new(Some(dir.path().to_owned())));
        assert!(learned.of("stdio").is_none());
        learned.teach("stdio", "read_graph", lessons("show me everything I know"));
        assert!(learned.of("stdio").is_some());
        assert_eq!(summary(dir.path()), [("stdio".to_owned(), 1, 1)]);
        assert_eq!(forget(dir.path(), None).expect("forget"), 1);
        // A running gateway forgets at its next look.
        assert!(learned.of("stdio").is_none());
        assert_eq!(forget(dir.path(), Some("stdio")).expect("again"), 0);
    }

    #[test]
    fn off_keeps_nothing() {
        let learned = Arc::new(Learned::new(None));
        learned.teach("stdio", "read_graph", lessons("show me everything"));
        assert!(!learned.on() && learned.of("stdio").is_none());
    }
}
