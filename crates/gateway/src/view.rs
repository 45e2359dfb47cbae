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
    /// Each new view's index is built ahead of its first search (`serve`).
    pub ahead: bool,
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
    /// it: [`Indexer::want`]), read from the cache when a run before built the same one.
    pub fn index(&self) -> &Index {
        self.index_after(None)
    }

    /// Its index, built (when it is not yet) after `previous`'s view's index, reusing the
    /// vectors of the documents whose text did not change; whole when there is none.
    pub(crate) fn index_after(&self, previous: Option<&View>) -> &Index {
        let previous = previous.and_then(|p| p.index.get());
        self.index.get_or_init(|| {
            if let Some(index) = previous.and_then(|p| self.build_after(p, false)) {
                return index;
            }
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

    /// Whether another view has taken this one's place.
    fn is_superseded(&self) -> bool {
        self.superseded.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Builds its index after `previous` (the vectors of unchanged documents reused); when
    /// `cancellable`, not if a newer view supersedes it meanwhile. A cached index of the same
    /// documents is read instead.
    fn build_after(&self, previous: &Index, cancellable: bool) -> Option<Index> {
        let model = self.model.clone().unwrap_or_else(Meaning::shipped);
        let cache = self.cache.clone().map(IndexFiles::new);
        let started = std::time::Instant::now();
        let cache = cache.as_ref().map(|c| c as &dyn Cache);
        let index = Index::rebuild(&self.surface, model, cache, Some(previous), &|| {
            cancellable && self.is_superseded()
        })?;
        tracing::debug!(elapsed = ?started.elapsed(), documents = index.documents(), "search index rebuilt");
        Some(index)
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

/// The views' search indexes, built off the request path one at a time, for the whole
/// gateway: the newest view's, after the last one built (only the documents whose text
/// changed are embedded again); a build a newer view supersedes is cancelled between two
/// batches of documents. A search of a view whose index is not built yet builds it the same
/// way, after the last one (a few documents, not all), so a listing that changes every second
/// neither stacks builds nor makes a search wait for a whole one.
#[derive(Default)]
pub(crate) struct Indexer {
    inner: std::sync::Mutex<Indexing>,
}

#[derive(Default)]
struct Indexing {
    /// The view whose index is to be built next.
    wanted: Option<std::sync::Weak<View>>,
    /// A build is under way (or about to be).
    running: bool,
    /// The newest view whose index is built.
    last: Option<Arc<View>>,
    /// Indexes built so far (what a storm of list changes cost).
    builds: usize,
    /// Builds under way now, and the most there ever were at once (one, by design).
    building: usize,
    most_at_once: usize,
}

impl Indexer {
    /// `view`'s index is wanted: built after [`SETTLE`], by the one build there is (started
    /// now if none is under way), unless a newer view is wanted by then.
    pub(crate) fn want(self: &Arc<Self>, view: &Arc<View>) {
        let mut indexing = crate::sync::lock(&self.inner);
        indexing.wanted = Some(Arc::downgrade(view));
        if indexing.running {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        indexing.running = true;
        drop(indexing);
        let indexer = self.clone();
        runtime.spawn(async move {
            tokio::time::sleep(SETTLE).await;
            let _ = tokio::task::spawn_blocking(move || indexer.work()).await;
        });
    }

    /// Builds the wanted views' indexes, newest first, until none is wanted.
    fn work(&self) {
        loop {
            let (view, previous) = {
                let mut indexing = crate::sync::lock(&self.inner);
                match indexing.wanted.take().and_then(|w| w.upgrade()) {
                    Some(view) if !view.is_superseded() => (view, indexing.last.clone()),
                    Some(_) => continue,
                    None => {
                        indexing.running = false;
                        return;
                    }
                }
            };
            {
                let mut indexing = crate::sync::lock(&self.inner);
                indexing.building += 1;
                indexing.most_at_once = indexing.most_at_once.max(indexing.building);
            }
            match previous.as_ref().and_then(|p| p.index.get()) {
                _ if view.index.get().is_some() => {}
                // The first: built as a search would build it (a search meanwhile waits for
                // this build rather than making another).
                None => {
                    view.index();
                }
                Some(previous) => {
                    if let Some(index) = view.build_after(previous, true) {
                        let _ = view.index.set(index);
                    }
                }
            }
            let mut indexing = crate::sync::lock(&self.inner);
            indexing.building -= 1;
            if view.index.get().is_some() {
                indexing.builds += 1;
                indexing.last = Some(view);
            }
        }
    }

    /// The newest view whose index is built: a view searched before its own is built builds
    /// it after this one's ([`View::index_after`]).
    pub(crate) fn last_built(&self) -> Option<Arc<View>> {
        crate::sync::lock(&self.inner).last.clone()
    }

    /// Keeps `view` as the last built, when its index is (the first search built it).
    pub(crate) fn built(&self, view: &Arc<View>) {
        if view.index.get().is_some() && !view.is_superseded() {
            crate::sync::lock(&self.inner).last = Some(view.clone());
        }
    }
}

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

    fn view_of(tools: usize, generation: usize) -> Arc<View> {
        let definitions: Vec<Box<RawValue>> = (0..tools)
            .map(|i| {
                let text = format!(
                    r#"{{"name":"tool_{i}","description":"Does thing {i} of generation {}.","inputSchema":{{"type":"object"}}}}"#,
                    // One tool changes with each generation; the others stay as they were.
                    if i == 0 { generation } else { 0 }
                );
                RawValue::from_string(text).expect("JSON")
            })
            .collect();
        let listing = moniker_surface::Listing {
            server: "s".parse().expect("id"),
            tools: definitions,
            prompts: Vec::new(),
            version: None,
        };
        let surface = moniker_surface::build(&moniker_surface::Rules::default(), &[&listing])
            .surface
            .expect("valid");
        let serving = [listing.server.clone()].into_iter().collect();
        Arc::new(View::new(surface, serving, &ViewSettings::default()))
    }

    /// Finding 7: a listing that changes again and again costs one build at a time, of the
    /// newest view, never one a view; a search of a newer view builds it after the last.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_storm_of_views_builds_one_index_at_a_time_the_newest() {
        let indexer = Arc::new(Indexer::default());
        let first = view_of(200, 0);
        indexer.want(&first);
        let mut newest = first.clone();
        for generation in 1..=100 {
            let view = view_of(200, generation);
            newest.supersede();
            indexer.want(&view);
            newest = view;
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while newest.index.get().is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "the newest view's index is built"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let (builds, most) = {
            let indexing = crate::sync::lock(&indexer.inner);
            (indexing.builds, indexing.most_at_once)
        };
        assert_eq!(most, 1, "one build at a time");
        assert!(
            builds < 101,
            "superseded views are passed over: {builds} builds"
        );
        assert!(Arc::ptr_eq(
            crate::sync::lock(&indexer.inner)
                .last
                .as_ref()
                .expect("one"),
            &newest
        ));
        // A search of a view not built yet builds it after the last one: the vectors of the
        // 199 documents that did not change are the last index's, the one that did is new.
        let next = view_of(200, 101);
        newest.supersede();
        let last = indexer.last_built().expect("one");
        assert!(Arc::ptr_eq(&last, &newest));
        let index = next.index_after(Some(&last));
        assert_eq!(index.documents(), 200);
        assert!(next.index.get().is_some());
    }

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
