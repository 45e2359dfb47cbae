//! The audit log: one JSON line per finished call ([`crate::call::Call`]), to stderr or to a
//! file rotated by size (`audit.jsonl` → `audit.jsonl.1` → … → `.keep`). Off by default. A
//! token is named by its `name` or a digest, never by its secret; arguments and results are
//! never written.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Mutex;

use moniker_config::{AuditSettings, AuditTo};

use crate::sync::lock;

pub(crate) struct Audit {
    out: Mutex<Out>,
}

enum Out {
    Stderr,
    File(Rotating),
}

struct Rotating {
    path: PathBuf,
    file: Option<File>,
    size: u64,
    max_bytes: u64,
    keep: u32,
}

impl Audit {
    /// The audit log of `settings`; a file that cannot be opened is an error to show at start.
    pub(crate) fn open(settings: &AuditSettings) -> Result<Self, String> {
        let out = match &settings.to {
            AuditTo::Stderr => Out::Stderr,
            AuditTo::File(path) => {
                let path = PathBuf::from(path);
                let file = append(&path)
                    .map_err(|e| format!("cannot open the audit log {}: {e}", path.display()))?;
                let size = file.metadata().map(|m| m.len()).unwrap_or(0);
                Out::File(Rotating {
                    path,
                    file: Some(file),
                    size,
                    max_bytes: settings.max_bytes,
                    keep: settings.keep,
                })
            }
        };
        Ok(Self {
            out: Mutex::new(out),
        })
    }

    /// Writes one line (`line` has no line end of its own: it is JSON on one line).
    pub(crate) fn write(&self, line: &str) {
        let mut out = lock(&self.out);
        match &mut *out {
            Out::Stderr => {
                let _ = writeln!(std::io::stderr().lock(), "{line}");
            }
            Out::File(file) => file.write(line),
        }
    }
}

/// The last [`RECENT`] audit lines in memory (the console's Activity page): kept only once the
/// console has asked for them, whether or not an audit log is written.
#[derive(Default)]
pub struct Recent {
    lines: Mutex<std::collections::VecDeque<String>>,
}

/// How many audit lines [`Recent`] keeps.
pub const RECENT: usize = 500;

impl Recent {
    pub(crate) fn push(&self, line: String) {
        let mut lines = lock(&self.lines);
        if lines.len() == RECENT {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        lock(&self.lines).iter().cloned().collect()
    }
}

impl Rotating {
    fn write(&mut self, line: &str) {
        let len = line.len() as u64 + 1;
        if self.size > 0 && self.size + len > self.max_bytes {
            self.rotate();
        }
        if self.file.is_none() {
            // Rotated, or lost: opened again (and, while it cannot be, lines are dropped with
            // a warning rather than held).
            match append(&self.path) {
                Ok(file) => {
                    self.size = file.metadata().map(|m| m.len()).unwrap_or(0);
                    self.file = Some(file);
                }
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), error = %e, "cannot write the audit log");
                    return;
                }
            }
        }
        if let Some(file) = &mut self.file {
            let mut bytes = Vec::with_capacity(line.len() + 1);
            bytes.extend_from_slice(line.as_bytes());
            bytes.push(b'\n');
            match file.write_all(&bytes) {
                Ok(()) => self.size += len,
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), error = %e, "cannot write the audit log");
                    self.file = None;
                }
            }
        }
    }

    /// `path.{keep-1}` → `path.{keep}`, …, `path` → `path.1`; the oldest beyond `keep` goes.
    fn rotate(&mut self) {
        self.file = None;
        let numbered = |n: u32| {
            let mut name = self.path.clone().into_os_string();
            name.push(format!(".{n}"));
            PathBuf::from(name)
        };
        if self.keep == 0 {
            let _ = std::fs::remove_file(&self.path);
        } else {
            let _ = std::fs::remove_file(numbered(self.keep));
            for n in (1..self.keep).rev() {
                let _ = std::fs::rename(numbered(n), numbered(n + 1));
            }
            let _ = std::fs::rename(&self.path, numbered(1));
        }
        self.size = 0;
    }
}

fn append(path: &PathBuf) -> std::io::Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new().create(true).append(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_rotated_by_size_and_keeps_so_many() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("audit.jsonl");
        let audit = Audit::open(&AuditSettings {
            to: AuditTo::File(path.display().to_string()),
            max_bytes: 100,
            keep: 2,
        })
        .expect("open");
        for i in 0..20 {
            audit.write(&format!(r#"{{"n":{i:02},"pad":"xxxxxxxxxxxxxxxxxx"}}"#));
        }
        let read = |p: &PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        let now = read(&path);
        let one = read(&dir.path().join("audit.jsonl.1"));
        let two = read(&dir.path().join("audit.jsonl.2"));
        assert!(!dir.path().join("audit.jsonl.3").exists(), "only 2 kept");
        for text in [&now, &one, &two] {
            assert!(text.len() <= 100, "{text}");
            assert!(text.lines().count() >= 1, "every file has whole lines");
        }
        assert!(now.contains(r#""n":19"#), "{now}");
        // The newest lines, in order, across the files.
        let all: Vec<&str> = two.lines().chain(one.lines()).chain(now.lines()).collect();
        let last = all.iter().map(|l| &l[5..7]).collect::<Vec<_>>().join(",");
        assert!(last.ends_with("17,18,19"), "{last}");
    }
}
