//! The findability benchmark (issue "The model's view"): for each task (a request a user
//! would type, and the one tool that does it), does moniker's `search_tools` find the tool,
//! at rank 1 and in the first 5? Against a baseline: the same ranker over the raw surface
//! (origin names and descriptions only, what a client's own search sees). On surfaces of 30,
//! 100 and 300 tools made of whole servers (the last one cut), with the tokens of the first
//! listing in each discovery mode.
//!
//! `cargo run -p moniker-findability` prints the tables of BENCHMARKS.md; `-- --json` the
//! numbers.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

mod learning;

use moniker_model::Encoder;
use moniker_surface::discovery::{Discovery, Mode};
use moniker_surface::search::{Cache, Index, Meaning, Model, Part, Query, Ranker};
use moniker_surface::{Kind, Listing, Override, Rules, Surface, build, listing};
use serde_json::Value;
use serde_json::value::RawValue;

/// The sizes of the surfaces.
const SIZES: [usize; 3] = [30, 100, 300];
/// The order servers join a surface: the three reference servers first, then a mix of
/// domains; any inventory not named here joins last, by name.
const ORDER: &[&str] = &[
    "filesystem",
    "memory",
    "everything",
    "github",
    "slack",
    "ctxsys",
    "playwright",
    "brave-search",
    "google-maps",
    "notion",
    "contextgraph",
    "postgres",
    "sentry",
    "kubernetes",
    "bridge",
    "gitlab",
    "chrome-devtools",
    "mongodb",
    "tavily",
    "exa",
    "firecrawl",
    "context7",
    "sequential-thinking",
    "azure",
];

#[derive(serde::Deserialize)]
struct Task {
    request: String,
    server: String,
    tool: String,
}

struct Inventory {
    server: String,
    tools: Vec<Box<RawValue>>,
}

fn origin_name(tool: &RawValue) -> String {
    let value: Value = serde_json::from_str(tool.get()).unwrap_or(Value::Null);
    value["name"].as_str().unwrap_or_default().to_owned()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn inventory(path: &Path) -> Inventory {
    let value = read_json(path);
    let server = path
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let tools = value["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| serde_json::value::to_raw_value(t).ok())
        .collect();
    Inventory { server, tools }
}

/// Every inventory: the benchmark's own (captured from npm) and the seed fixtures.
fn inventories(root: &Path) -> Vec<Inventory> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root.join("bench/findability/inventories"))
        .map(|dir| dir.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    for seed in ["contextgraph", "ctxsys", "bridge"] {
        paths.push(root.join(format!("fixtures/{seed}.json")));
    }
    paths.retain(|p| p.extension().is_some_and(|e| e == "json"));
    let mut all: Vec<Inventory> = paths.iter().map(|p| inventory(p)).collect();
    let rank = |s: &str| ORDER.iter().position(|o| *o == s).unwrap_or(ORDER.len());
    all.sort_by(|a, b| {
        rank(&a.server)
            .cmp(&rank(&b.server))
            .then(a.server.cmp(&b.server))
    });
    all
}

/// The inventories of a folder (each `*.json`), by server.
fn inventories_in(dir: &Path) -> Vec<Inventory> {
    let mut found: Vec<Inventory> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| Some(e.ok()?.path())).collect::<Vec<_>>())
        .unwrap_or_default()
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| inventory(p))
        .collect();
    found.sort_by(|a, b| a.server.cmp(&b.server));
    found
}

/// A surface of `size` tools: whole servers in order, the last one cut (its tasks' tools
/// first).
fn pick(all: &[Inventory], size: usize, targets: &BTreeSet<(String, String)>) -> Vec<Inventory> {
    let mut out = Vec::new();
    let mut left = size;
    for inv in all {
        if left == 0 {
            break;
        }
        let mut tools: Vec<Box<RawValue>> = inv.tools.clone();
        if tools.len() > left {
            tools.sort_by_key(|t| !targets.contains(&(inv.server.clone(), origin_name(t))));
            tools.truncate(left);
        }
        left -= tools.len();
        out.push(Inventory {
            server: inv.server.clone(),
            tools,
        });
    }
    out
}

/// The rules of `config` with the renames `moniker check` proposes for names exposed twice
/// (what a user pastes), applied until the surface builds.
fn surface(config: &Rules, servers: &[Inventory]) -> Surface {
    let listings: Vec<Listing> = servers
        .iter()
        .map(|inv| Listing {
            server: inv
                .server
                .parse()
                .unwrap_or_else(|_| panic!("server id {}", inv.server)),
            tools: inv.tools.clone(),
            prompts: Vec::new(),
            version: None,
        })
        .collect();
    let mut rules = config.clone();
    for _ in 0..4 {
        let built = build(&rules, &listings);
        if let Some(surface) = built.surface {
            return surface;
        }
        let mut renamed = false;
        for d in built.diagnostics.iter().filter(|d| d.is_error()) {
            for r in &d.fix.renames {
                if let Ok(name) = r.name.parse() {
                    rules.tools.insert(
                        format!("{}/{}", r.server, r.origin),
                        Override {
                            name: Some(name),
                            ..Override::default()
                        },
                    );
                    renamed = true;
                }
            }
        }
        if !renamed {
            panic!("the surface does not build: {:#?}", built.diagnostics);
        }
    }
    panic!("the surface does not build after the proposed renames");
}

#[derive(Default, serde::Serialize)]
struct Recall {
    tasks: usize,
    at1: usize,
    at5: usize,
}

impl Recall {
    fn add(&mut self, rank: Option<usize>) {
        self.tasks += 1;
        self.at1 += usize::from(rank == Some(0));
        self.at5 += usize::from(rank.is_some_and(|r| r < 5));
    }

    fn pct(n: usize, of: usize) -> f64 {
        if of == 0 {
            0.0
        } else {
            n as f64 * 100.0 / of as f64
        }
    }
}

#[derive(serde::Serialize)]
struct Row {
    size: usize,
    servers: usize,
    moniker: Recall,
    lexical: Recall,
    semantic: Recall,
    raw: Recall,
    /// Building the index, and one search (p50 over the tasks), in microseconds.
    build_us: u128,
    /// The same index read from what the build saved.
    cached_us: u128,
    query_p50_us: u128,
    tokens_raw: usize,
    tokens_list: usize,
    /// What a model is shown of each listed tool (name, description, input schema), raw and
    /// in list mode.
    model_raw: usize,
    model_list: usize,
    tokens_hints: usize,
    tokens_search: usize,
}

/// LiveMCPBench's inventory (a list of servers, each with `name` and `tools: {key: {tools}}`),
/// read from a path given by hand: third-party data the repository does not hold. A server is
/// named by its `name`, made a server id (lowercase, runs of other characters a `-`).
fn livemcpbench(path: &Path) -> Vec<Inventory> {
    let value = read_json(path);
    let mut out: Vec<Inventory> = value
        .as_array()
        .into_iter()
        .flatten()
        .map(|server| Inventory {
            server: server_id(server["name"].as_str().unwrap_or_default()),
            tools: server["tools"]
                .as_object()
                .into_iter()
                .flat_map(|m| m.values())
                .flat_map(|s| s["tools"].as_array().into_iter().flatten())
                .filter_map(|t| serde_json::value::to_raw_value(t).ok())
                .collect(),
        })
        .collect();
    out.sort_by(|a, b| a.server.cmp(&b.server));
    out
}

fn server_id(name: &str) -> String {
    let mut id = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            id.push(c.to_ascii_lowercase());
        } else if !id.ends_with('-') {
            id.push('-');
        }
    }
    id.trim_matches('-').to_owned()
}

/// What a run measures: the task set, the servers, and the sizes of the surfaces.
struct Setup {
    tasks: Vec<Task>,
    all: Vec<Inventory>,
    config: Rules,
    sizes: Vec<usize>,
    /// What the index is built with: `--model DIR` (a model's folder, run whole), else the
    /// shipped table.
    meaning: Meaning,
}

impl Setup {
    /// From the command line: `--tasks FILE` (else `tasks.json`), `--livemcpbench TOOLS.json`
    /// (its 70 servers instead of the benchmark's, with no rules but the proposed renames, in
    /// one surface of all their tools and the usual smaller ones), `--inventories DIR` (more
    /// servers, before the benchmark's: the held-out set's, in surfaces of 30, 100 and 300
    /// tools and one of every tool), `--model DIR` (a sentence-embedding model's folder).
    fn from_args(root: &Path, args: &[String]) -> Self {
        let mut setup = Self::of_tasks(root, args);
        if let Some(dir) = args
            .iter()
            .position(|a| a == "--model")
            .and_then(|i| args.get(i + 1))
        {
            let dir = Path::new(dir);
            let read = |name: &str| {
                std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
            };
            let weights = std::fs::File::open(dir.join("model.safetensors"))
                .unwrap_or_else(|e| panic!("model.safetensors: {e}"));
            let encoder = Encoder::new(weights, &read("config.json"), &read("tokenizer.json"))
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            setup.meaning = Meaning::Encoder(std::sync::Arc::new(encoder));
        }
        setup
    }

    fn of_tasks(root: &Path, args: &[String]) -> Self {
        let after = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1))
                .map(PathBuf::from)
        };
        let tasks_path =
            after("--tasks").unwrap_or_else(|| root.join("bench/findability/tasks.json"));
        let mut tasks: Vec<Task> = serde_json::from_value(read_json(&tasks_path))
            .expect("tasks: [{request, server, tool}]");
        match after("--livemcpbench") {
            Some(path) => {
                let all = livemcpbench(&path);
                for task in &mut tasks {
                    task.server = server_id(&task.server);
                }
                let total = all.iter().map(|i| i.tools.len()).sum();
                Self {
                    tasks,
                    all,
                    config: Rules::default(),
                    sizes: vec![30, 100, 300, total],
                    meaning: Meaning::shipped(),
                }
            }
            None => {
                let config_text =
                    std::fs::read_to_string(root.join("bench/findability/moniker.yaml"))
                        .expect("bench/findability/moniker.yaml");
                let config = moniker_config::parse("moniker.yaml", &config_text)
                    .unwrap_or_else(|e| panic!("{e:?}"))
                    .rules;
                let mut all = inventories(root);
                let mut sizes = SIZES.to_vec();
                // A set's own servers come first; distractors (servers no task names) after
                // the benchmark's, so the smaller surfaces stay as they were.
                if let Some(dir) = after("--inventories") {
                    let mut more = inventories_in(&dir);
                    more.append(&mut all);
                    all = more;
                    sizes.push(all.iter().map(|i| i.tools.len()).sum());
                }
                if let Some(dir) = after("--distractors") {
                    all.append(&mut inventories_in(&dir));
                    sizes.push(all.iter().map(|i| i.tools.len()).sum());
                }
                Self {
                    tasks,
                    all,
                    config,
                    sizes,
                    meaning: Meaning::shipped(),
                }
            }
        }
    }
}

/// A cache in memory: what a restart would read from the disk, without the disk.
#[derive(Default)]
struct Memory(std::sync::Mutex<std::collections::HashMap<String, Vec<u8>>>);

impl Cache for Memory {
    fn load(&self, key: &str) -> Option<Vec<u8>> {
        self.0.lock().ok()?.get(key).cloned()
    }

    fn save(&self, key: &str, bytes: &[u8]) {
        if let Ok(mut saved) = self.0.lock() {
            saved.insert(key.to_owned(), bytes.to_vec());
        }
    }
}

fn run(setup: &Setup) -> Vec<Row> {
    let targets: BTreeSet<(String, String)> = setup
        .tasks
        .iter()
        .map(|t| (t.server.clone(), t.tool.clone()))
        .collect();
    let bpe = tiktoken_rs::o200k_base().expect("o200k");
    let tokens = |text: &str| bpe.encode_ordinary(text).len();
    // The table is read once per process, before any build is timed.
    Model::shipped();
    setup
        .sizes
        .iter()
        .map(|&size| {
            let servers = pick(&setup.all, size, &targets);
            let surface = surface(&setup.config, &servers);
            let mut row = recall(setup, &servers, &surface, size);
            count_tokens(&mut row, &servers, &surface, &tokens);
            row
        })
        .collect()
}

/// The index over `surface` built (timed), then built again from what the first build saved
/// (as after a restart): the index, and each build's time in microseconds.
fn timed_builds(surface: &Surface, meaning: &Meaning) -> (Index, u128, u128) {
    let cache = Memory::default();
    let started = std::time::Instant::now();
    let index = Index::build(surface, meaning.clone(), Some(&cache));
    let build_us = started.elapsed().as_micros();
    let started = std::time::Instant::now();
    let _ = Index::build(surface, meaning.clone(), Some(&cache));
    (index, build_us, started.elapsed().as_micros())
}

/// The baseline: the servers' own names and descriptions, the same ranker: each tool's
/// (server, name), and the ranker over them.
fn raw_baseline(servers: &[Inventory]) -> (Vec<(&str, String)>, Ranker) {
    let raw: Vec<(&str, String)> = servers
        .iter()
        .flat_map(|inv| inv.tools.iter().map(move |t| (inv.server.as_str(), t)))
        .map(|(server, t)| (server, origin_name(t)))
        .collect();
    let docs: Vec<String> = servers
        .iter()
        .flat_map(|inv| inv.tools.iter())
        .map(|t| {
            let v: Value = serde_json::from_str(t.get()).unwrap_or(Value::Null);
            format!(
                "{}\n{}",
                v["name"].as_str().unwrap_or_default(),
                v["description"].as_str().unwrap_or_default()
            )
        })
        .collect();
    (raw, Ranker::new(&docs))
}

/// Each task whose tool is in `surface`, searched for: the row's recalls and times.
fn recall(setup: &Setup, servers: &[Inventory], surface: &Surface, size: usize) -> Row {
    let (index, build_us, cached_us) = timed_builds(surface, &setup.meaning);
    let (raw, ranker) = raw_baseline(servers);
    let mut row = Row {
        size: raw.len(),
        servers: servers.len(),
        moniker: Recall::default(),
        lexical: Recall::default(),
        semantic: Recall::default(),
        raw: Recall::default(),
        build_us,
        cached_us,
        query_p50_us: 0,
        tokens_raw: 0,
        tokens_list: 0,
        model_raw: 0,
        model_list: 0,
        tokens_hints: 0,
        tokens_search: 0,
    };
    let mut query_us = Vec::new();
    let mut answer_bytes = Vec::new();
    for task in &setup.tasks {
        if !raw
            .iter()
            .any(|(s, n)| *s == task.server && *n == task.tool)
        {
            continue;
        }
        let query = Query {
            text: &task.request,
            tags: &[],
            limit: 5,
            toolsets: &[],
            ..Default::default()
        };
        let exact = surface
            .resolve(Kind::Tool, task.request.trim())
            .map(|r| r.exposed);
        let started = std::time::Instant::now();
        let found = index.search(surface, query, exact, |_| true);
        query_us.push(started.elapsed().as_micros());
        let wanted = |e: &&moniker_surface::Exposed| {
            e.origin()
                .is_some_and(|o| o.server.as_str() == task.server && o.name == task.tool)
        };
        let ours = found.iter().position(wanted);
        for (part, recall) in [
            (Part::Lexical, &mut row.lexical),
            (Part::Semantic, &mut row.semantic),
        ] {
            let found = index.search_by(part, surface, query, exact, |_| true);
            recall.add(found.iter().position(wanted));
        }
        let rank = ranker
            .rank(&task.request)
            .iter()
            .take(5)
            .position(|(doc, _)| raw[*doc].0 == task.server && raw[*doc].1 == task.tool);
        if ours != Some(0) && std::env::args().any(|a| a == "--misses") {
            say_miss(task, size, (ours, rank), &found);
        }
        if std::env::args().any(|a| a == "--bytes") {
            answer_bytes.push(answer_bytes_of(&found));
        }
        row.moniker.add(ours);
        row.raw.add(rank);
    }
    if !answer_bytes.is_empty() {
        say_bytes(size, &mut answer_bytes);
    }
    query_us.sort_unstable();
    row.query_p50_us = query_us
        .get(query_us.len() / 2)
        .copied()
        .unwrap_or_default();
    row
}

/// The bytes of `search_tools`' result for `found` (`--bytes`): as it was (each tool's full
/// definition, in the text and again as `structuredContent`) and as it is (a compact line each).
fn answer_bytes_of(found: &[&moniker_surface::Exposed]) -> (usize, usize) {
    let definitions: Vec<std::borrow::Cow<'_, RawValue>> = found
        .iter()
        .map(|e| std::borrow::Cow::Borrowed(&*e.definition))
        .collect();
    let tools = listing::render(Kind::Tool, definitions, &[], None);
    let quoted = |text: &str| serde_json::to_string(text).unwrap_or_default();
    let full = format!(
        r#"{{"content":[{{"type":"text","text":{}}}],"structuredContent":{tools}}}"#,
        quoted(&tools)
    );
    let lines: Vec<_> = found
        .iter()
        .filter_map(|e| {
            moniker_surface::discovery::compact::line(
                &e.definition,
                e.origin().map(|o| o.server.as_str()),
            )
        })
        .collect();
    let compact = format!(
        r#"{{"content":[{{"type":"text","text":{}}}]}}"#,
        quoted(&moniker_surface::discovery::compact::text(&lines))
    );
    (full.len(), compact.len())
}

/// The median and largest answer, before and after, on stderr.
fn say_bytes(size: usize, bytes: &mut [(usize, usize)]) {
    let at = |mut v: Vec<usize>| {
        v.sort_unstable();
        (v[v.len() / 2], v[v.len() - 1])
    };
    let (full, compact) = (
        at(bytes.iter().map(|b| b.0).collect()),
        at(bytes.iter().map(|b| b.1).collect()),
    );
    eprintln!(
        "{size} tools, {} requests: search answer median {} B -> {} B, largest {} B -> {} B",
        bytes.len(),
        full.0,
        compact.0,
        full.1,
        compact.1
    );
}

/// A request `search_tools` did not find first (`--misses`): where it was, ours and the raw
/// search's, and what was found instead.
fn say_miss(
    task: &Task,
    size: usize,
    (ours, raw): (Option<usize>, Option<usize>),
    found: &[&moniker_surface::Exposed],
) {
    let got: Vec<&str> = found.iter().map(|e| e.name.as_str()).collect();
    let place = ours.map_or("not in the first 5".to_owned(), |at| {
        format!("at {}", at + 1)
    });
    let raw_found = match raw {
        Some(at) => format!("; the raw search: at {}", at + 1),
        None => String::new(),
    };
    eprintln!(
        "not first at {size} ({place}{raw_found}): {:?} wants {}/{}; found {got:?}",
        task.request, task.server, task.tool
    );
}

/// The tokens of the first `tools/list`: the servers' own listings, moniker's in each mode,
/// and what a client shows its model of each tool (its name, description and input schema).
fn count_tokens(
    row: &mut Row,
    servers: &[Inventory],
    surface: &Surface,
    tokens: &dyn Fn(&str) -> usize,
) {
    let raw_tools = || {
        servers
            .iter()
            .flat_map(|inv| inv.tools.iter().map(|t| &**t))
    };
    row.tokens_raw = tokens(&listing::render(Kind::Tool, raw_tools(), &[], None));
    let model_view = |definitions: &mut dyn Iterator<Item = &RawValue>| {
        definitions
            .map(|d| {
                let v: Value = serde_json::from_str(d.get()).unwrap_or(Value::Null);
                let seen = serde_json::json!({
                    "name": v["name"], "description": v["description"], "inputSchema": v["inputSchema"],
                });
                tokens(&seen.to_string())
            })
            .sum::<usize>()
    };
    row.model_raw = model_view(&mut raw_tools());
    row.model_list = model_view(&mut surface.listed(Kind::Tool).map(|e| &*e.definition));
    let mode = |mode: Mode| {
        let discovery = Discovery {
            mode,
            ..Discovery::default()
        };
        let entries = discovery.entries(
            Kind::Tool,
            surface
                .listed(Kind::Tool)
                .map(|e| (e, std::borrow::Cow::Borrowed(&*e.definition))),
        );
        let server = discovery.server(surface, Kind::Tool, entries.len());
        tokens(&listing::render(Kind::Tool, entries, &[], server))
    };
    row.tokens_list = mode(Mode::List);
    row.tokens_hints = mode(Mode::Hints);
    row.tokens_search = mode(Mode::Search);
}

/// The section of BENCHMARKS.md: the tables, and the goals against what was measured.
fn section(rows: &[Row], tasks: usize) -> String {
    let mut out = String::new();
    let mut line = |text: String| {
        out.push_str(&text);
        out.push('\n');
    };
    line("## Findability".to_owned());
    line(String::new());
    line(format!(
        "Made by `cargo run -p moniker-findability -- --write BENCHMARKS.md` (data in `bench/findability/`): \
         {tasks} requests a user would type, each with the one tool that does it, over the inventories \
         of {} real servers from npm and the seed fixtures, mixed into surfaces of whole servers \
         (the last one cut). *moniker* is `search_tools` over the surface `bench/findability/moniker.yaml` \
         names (a few tags per server, the renames `moniker check` proposes for collisions), its fused \
         ranking; *lexical* and *semantic* are its two halves alone; *raw BM25* is the lexical ranker \
         over the servers' own names and descriptions. A task counts at a size when its tool is in \
         that surface. Index build (and the same index read back from what the build saved, as \
         after a restart: *from cache*) and query p50 are this run's (release build).",
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("inventories"))
            .map_or(0, |d| d.count())
    ));
    line(String::new());
    line("| tools | servers | tasks | recall@1 moniker | lexical | semantic | raw BM25 | recall@5 moniker | lexical | semantic | raw BM25 | index build | from cache | query p50 |".to_owned());
    line("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|".to_owned());
    for r in rows {
        let pct = |r: &Recall, n: usize| format!("{:.1}%", Recall::pct(n, r.tasks));
        line(format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} ms | {:.1} ms | {} µs |",
            r.size,
            r.servers,
            r.moniker.tasks,
            pct(&r.moniker, r.moniker.at1),
            pct(&r.lexical, r.lexical.at1),
            pct(&r.semantic, r.semantic.at1),
            pct(&r.raw, r.raw.at1),
            pct(&r.moniker, r.moniker.at5),
            pct(&r.lexical, r.lexical.at5),
            pct(&r.semantic, r.semantic.at5),
            pct(&r.raw, r.raw.at5),
            r.build_us as f64 / 1000.0,
            r.cached_us as f64 / 1000.0,
            r.query_p50_us,
        ));
    }
    line(String::new());
    line("Tokens of the first `tools/list` (o200k); search mode with no pinned tool:".to_owned());
    line(String::new());
    line("| tools | raw (the servers' own listings) | moniker list | moniker hints | moniker search | search / raw | the model's view: raw | moniker list |".to_owned());
    line("|---:|---:|---:|---:|---:|---:|---:|---:|".to_owned());
    for r in rows {
        line(format!(
            "| {} | {} | {} | {} | {} | {:.1}% | {} | {} |",
            r.size,
            r.tokens_raw,
            r.tokens_list,
            r.tokens_hints,
            r.tokens_search,
            Recall::pct(r.tokens_search, r.tokens_raw),
            r.model_raw,
            r.model_list,
        ));
    }
    line(String::new());
    line(
        "*The model's view* counts what a client shows its model of each listed tool: its name, \
          description and input schema (the listing's other fields, moniker's `aliases` and \
          `_meta` included, reach programs, not the model)."
            .to_owned(),
    );
    out
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let args: Vec<String> = std::env::args().collect();
    let setup = Setup::from_args(&root, &args);
    if let Some(pairs) = args
        .iter()
        .position(|a| a == "--learning")
        .and_then(|i| args.get(i + 1))
    {
        let surface = surface(&setup.config, &setup.all);
        learning::run(&setup, &surface, Path::new(pairs));
        return;
    }
    let rows = run(&setup);
    if args.iter().any(|a| a == "--json") {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        );
        return;
    }
    let text = section(&rows, setup.tasks.len());
    match args.iter().position(|a| a == "--write") {
        Some(i) => {
            // The section replaces the one there (up to the next section, which stays: every
            // task set's, written by bench/search-sets.py), or is appended.
            let path = args
                .get(i + 1)
                .map_or_else(|| root.join("BENCHMARKS.md"), PathBuf::from);
            let before = std::fs::read_to_string(&path).unwrap_or_default();
            let (kept, after) = match before.find("\n## Findability") {
                None => (before.as_str(), ""),
                Some(at) => {
                    let rest = &before[at + 1..];
                    let next = rest.find("\n## ").map_or(rest.len(), |n| n + 1);
                    (&before[..at], &rest[next..])
                }
            };
            let out = format!("{}\n\n{text}\n{after}", kept.trim_end());
            std::fs::write(&path, out).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            println!("{text}");
        }
        None => println!("{text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every task set whose servers the repository holds names, in each task, a tool of its
    /// pool (a typo would leave a task out of every size unseen). LiveMCPBench's two sets need
    /// its inventory, which the repository does not hold.
    #[test]
    fn every_task_set_names_tools_of_its_pool() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let data = root.join("bench/findability");
        for (set, more) in [
            ("tasks.json", None),
            ("tasks-plain.json", None),
            ("tasks-fixture.json", None),
            ("tasks-heldout.json", Some("inventories-heldout")),
            ("tasks-pypi.json", Some("inventories-pypi")),
        ] {
            let tasks: Vec<Task> =
                serde_json::from_value(read_json(&data.join(set))).expect("tasks");
            let mut pool = more
                .map(|d| inventories_in(&data.join(d)))
                .unwrap_or_default();
            pool.extend(inventories(&root));
            let missing: Vec<String> = tasks
                .iter()
                .filter(|t| {
                    !pool.iter().any(|i| {
                        i.server == t.server && i.tools.iter().any(|x| origin_name(x) == t.tool)
                    })
                })
                .map(|t| format!("{}/{}", t.server, t.tool))
                .collect();
            assert!(
                !tasks.is_empty() && missing.is_empty(),
                "{set}: {missing:?}"
            );
        }
    }

    /// The data holds together: every task's tool is in the pool, the surfaces have the sizes
    /// asked, the search finds something, and search mode's listing is the smallest.
    #[test]
    fn the_benchmark_runs_on_its_data() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let tasks: Vec<Task> =
            serde_json::from_value(read_json(&root.join("bench/findability/tasks.json")))
                .expect("tasks");
        assert!(tasks.len() >= 150, "{} tasks", tasks.len());
        let all = inventories(&root);
        for task in &tasks {
            let inv = all
                .iter()
                .find(|i| i.server == task.server)
                .unwrap_or_else(|| panic!("no inventory {}", task.server));
            assert!(
                inv.tools.iter().any(|t| origin_name(t) == task.tool),
                "{}/{}",
                task.server,
                task.tool
            );
        }
        let rows = run(&Setup::from_args(&root, &[]));
        assert_eq!(rows.iter().map(|r| r.size).collect::<Vec<_>>(), SIZES);
        for r in &rows {
            assert!(r.moniker.tasks > 0 && r.moniker.at5 > 0, "{}", r.size);
            assert!(
                r.tokens_search < r.tokens_list && r.tokens_list < r.tokens_hints,
                "{}",
                r.size
            );
        }
    }
}
