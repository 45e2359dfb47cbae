//! What clients see now, shared by every session until the next change of a listing or of
//! the rules.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use moniker_surface::search::{Cache, Index, Meaning};
use moniker_surface::{Exposed, Kind, ServerId, Surface, listing};
use serde_json::value::RawValue;

/// What a view is made with, of the gateway's settings.
#[derive(Clone, Default)]
pub(crate) struct ViewSettings {
    /// moniker's toolset management tools are listed.
    pub manage: bool,
    /// What search indexes are built with (`None`: the shipped table).
    pub search_model: Option<Meaning>,
    /// Where built indexes are kept between runs.
    pub search_cache: Option<PathBuf>,
}

/// What clients see now: the surface built from every server's last valid listing, which
/// servers serve it (up, or still joining with the listing kept from their last run), the listings rendered once for every `tools/list` (in the surface's
/// discovery mode; with moniker's management tools at the end when sessions manage
/// toolsets), and the search index of its tools (built at the first search: a gateway that
/// never searches never builds it).
pub struct View {
    pub surface: Surface,
    /// The servers whose items are listed: those up, and those still joining whose listing
    /// was kept from the last run (their calls wait for them to join).
    pub serving: BTreeSet<ServerId>,
    pub tools_result: String,
    pub prompts_result: String,
    index: std::sync::OnceLock<Index>,
    /// What the index is built with (`None`: the shipped table).
    model: Option<Meaning>,
    /// Where built indexes are kept between runs (`None`: nowhere).
    cache: Option<PathBuf>,
    /// Another view has taken this one's place: its index is not built ahead.
    superseded: std::sync::atomic::AtomicBool,
}

impl View {
    pub(crate) fn new(
        surface: Surface,
        serving: BTreeSet<ServerId>,
        settings: &ViewSettings,
    ) -> Self {
        let mut view = Self {
            index: std::sync::OnceLock::new(),
            model: settings.search_model.clone(),
            cache: settings.search_cache.clone(),
            superseded: std::sync::atomic::AtomicBool::new(false),
            surface,
            serving,
            tools_result: String::new(),
            prompts_result: String::new(),
        };
        let extra = if settings.manage {
            moniker_surface::management::definitions()
        } else {
            &[]
        };
        let render = |kind, extra| {
            let entries = view.entries(kind);
            let discovery = view.surface.discovery();
            let server = discovery.server(&view.surface, kind, entries.len());
            listing::render(kind, entries, extra, server)
        };
        let (tools, prompts) = (render(Kind::Tool, extra), render(Kind::Prompt, &[]));
        view.tools_result = tools;
        view.prompts_result = prompts;
        view
    }

    /// The search index of the surface's tools: built once (by the first search, or ahead of
    /// it: [`View::prepare`]), read from the cache when a run before built the same one.
    pub fn index(&self) -> &Index {
        self.index.get_or_init(|| {
            let model = self.model.clone().unwrap_or_else(Meaning::shipped);
            let cache = self.cache.clone().map(IndexFiles::new);
            let started = std::time::Instant::now();
            let index = Index::build(
                &self.surface,
                model,
                cache.as_ref().map(|c| c as &dyn Cache),
            );
            tracing::debug!(elapsed = ?started.elapsed(), "search index ready");
            if let Some(why) = index.fell_back() {
                tracing::warn!("search uses the table moniker ships: {why}");
            }
            index
        })
    }

    /// A search of this view is answered in microseconds: its index is built, with the table
    /// (a model's ranking takes milliseconds of CPU; a first build, seconds).
    pub(crate) fn searches_at_once(&self) -> bool {
        self.index
            .get()
            .is_some_and(|index| matches!(index.meaning(), Meaning::Table(_)))
    }

    /// Another view has taken this one's place.
    pub(crate) fn supersede(&self) {
        self.superseded
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Builds the search index ahead of the first search, on a thread of its own, when a
    /// session may search this view: after [`SETTLE`], and only if the view is still the
    /// current one (a burst of list changes builds the last view's index, not each one's).
    pub(crate) fn prepare(self: &Arc<Self>, searching: bool) {
        if !searching || self.index.get().is_some() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let view = Arc::downgrade(self);
        runtime.spawn(async move {
            tokio::time::sleep(SETTLE).await;
            let current = view
                .upgrade()
                .filter(|v| !v.superseded.load(std::sync::atomic::Ordering::Acquire));
            if let Some(view) = current {
                let _ = tokio::task::spawn_blocking(move || {
                    view.index();
                })
                .await;
            }
        });
    }

    /// Whether a session without a toolset may see `item`: a server that serves it is up
    /// (or joining, with the listing kept from its last run).
    pub fn is_served(&self, item: &Exposed) -> bool {
        item.servers().any(|s| self.serving.contains(s))
    }

    /// The listing entries of a session without a toolset: what a server that is up serves,
    /// tools as the surface's discovery mode shows them.
    pub fn entries(&self, kind: Kind) -> Vec<Cow<'_, RawValue>> {
        let items = self
            .surface
            .listed(kind)
            .filter(|e| self.is_served(e))
            .map(|e| (e, Cow::Borrowed(&*e.definition)));
        self.surface.discovery().entries(kind, items)
    }
}

/// Built search indexes as files in a directory of the user's (`<cache dir>/moniker/search`),
/// each named by its key: the [`KEPT`] last used are kept. A file is read only when it is a
/// regular file of at most [`MAX_FILE`] bytes; what it holds is checked by the index (its key
/// and checksum) before it is used.
pub struct IndexFiles {
    dir: PathBuf,
}

/// How long a new view waits before its index is built ahead: a server that changes its list
/// many times a second costs one build, not one each time.
pub const SETTLE: std::time::Duration = std::time::Duration::from_millis(250);

/// How many built indexes are kept: a reload or a list change makes a new one.
pub const KEPT: usize = 8;
/// The largest file read back (an index of 100,000 tools is far smaller).
pub const MAX_FILE: u64 = 512 << 20;

impl IndexFiles {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// `<user cache dir>/moniker/search`, when the platform has one.
    pub fn default_dir() -> Option<PathBuf> {
        dirs::cache_dir().map(|d| d.join("moniker").join("search"))
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.index"))
    }

    /// Removes all but the [`KEPT`] last used indexes.
    fn prune(&self) -> std::io::Result<()> {
        crate::files::prune(&self.dir, "index", KEPT)
    }
}

impl Cache for IndexFiles {
    /// The file of `key` when it is a regular file (not a link, a pipe or a device: opened
    /// without following links and without waiting) of at most [`MAX_FILE`] bytes; a file
    /// read is marked as used now, so the prune keeps it.
    fn load(&self, key: &str) -> Option<Vec<u8>> {
        crate::files::read_private(&self.path(key), MAX_FILE)
    }

    fn save(&self, key: &str, bytes: &[u8]) {
        if bytes.len() as u64 > MAX_FILE {
            return;
        }
        let path = self.path(key);
        let saved =
            crate::files::write_private(&self.dir, &path, bytes).and_then(|()| self.prune());
        if let Err(e) = saved {
            tracing::debug!(path = %path.display(), error = %e, "the search index is not cached");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_used_indexes_are_kept_and_only_files_are_read() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let files = IndexFiles::new(dir.path().join("search"));
        assert_eq!(files.load("none"), None);
        for i in 0..KEPT + 3 {
            files.save(&format!("k{i:02}"), format!("index {i}").as_bytes());
            // Written at distinct times, oldest first.
            let path = files.path(&format!("k{i:02}"));
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + i as u64);
            std::fs::File::options()
                .write(true)
                .open(path)
                .and_then(|f| f.set_modified(at))
                .expect("dated");
        }
        files.save("last", b"the newest");
        let mut kept: Vec<String> = std::fs::read_dir(dir.path().join("search"))
            .expect("the dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        kept.sort();
        assert_eq!(kept.len(), KEPT, "{kept:?}");
        assert!(kept.contains(&"last.index".to_owned()));
        assert!(!kept.contains(&"k00.index".to_owned()), "the oldest go");
        assert_eq!(files.load("last").as_deref(), Some(&b"the newest"[..]));
        // No temporary file is left behind.
        assert!(kept.iter().all(|k| k.ends_with(".index")), "{kept:?}");

        // A file over the limit is not read (a sparse one: no disk is spent).
        let big = std::fs::File::create(files.path("big")).expect("created");
        big.set_len(MAX_FILE + 1).expect("grown");
        assert_eq!(files.load("big"), None);
        // Nor what is not a file: a link (to an index, even), a pipe (no writer: opening it
        // must not wait), a directory.
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(files.path("last"), files.path("link")).expect("link");
            assert_eq!(files.load("link"), None);
            nix::unistd::mkfifo(&files.path("pipe"), nix::sys::stat::Mode::S_IRWXU)
                .expect("a pipe");
            assert_eq!(files.load("pipe"), None);
        }
        std::fs::create_dir(files.path("dir")).expect("a dir");
        assert_eq!(files.load("dir"), None);
    }
}
