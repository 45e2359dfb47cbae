//! Finding a tool by what a model asks for. [`Ranker`] is BM25 (the `bm25` crate) over
//! [`Words`]; [`Index`] ranks a surface's listed tools with everything moniker knows of each:
//! its name, aliases (hidden ones too), tags, server, description, parameter names, and for
//! an action tool the names of its members. A name or alias asked for exactly is found first,
//! whatever the ranking says.
//!
//! Pure and deterministic: the same surface and query give the same tools in the same order
//! (equal scores keep the surface's order, which is by name).

use std::collections::{BTreeSet, HashSet};

use bm25::{Embedder, EmbedderBuilder, Scorer, Tokenizer};
use serde_json::Value;

use crate::names::Tag;
use crate::surface::{Exposed, Surface};
use crate::vocab::Kind;

mod cache;
mod findable;
mod meaning;
mod semantic;
mod taught;
pub use crate::words::Words;
pub(crate) use crate::words::humps;
pub use cache::Cache;
pub use findable::unfindable;
pub use meaning::{Encode, Meaning, Vectors};
pub use semantic::{Model, ModelError, WordPiece};
pub use taught::{Lesson, Taught};

/// The tokenizer of the BM25 crate over text that is [`Words`] already, joined by spaces: a
/// text is cut into words (and stemmed) once.
#[derive(Default)]
struct Stems;

impl Tokenizer for Stems {
    fn tokenize(&self, input_text: &str) -> Vec<String> {
        input_text.split_whitespace().map(str::to_owned).collect()
    }
}

/// BM25 over documents known by their position.
pub struct Ranker {
    words: Words,
    embedder: Embedder<u32, Stems>,
    scorer: Scorer<u32, u32>,
}

impl Ranker {
    pub fn new<S: AsRef<str>>(documents: &[S]) -> Self {
        let words = Words::default();
        let stems: Vec<String> = documents
            .iter()
            .map(|d| words.of(d.as_ref()).join(" "))
            .collect();
        Self::of_stems(words, &stems)
    }

    /// Over documents given as their [`Words`], joined by spaces.
    fn of_stems(words: Words, stems: &[String]) -> Self {
        let total: usize = stems.iter().map(|d| d.split_whitespace().count()).sum();
        // No documents: the crate's own fallback (a length of 0 says "use it").
        let average = if stems.is_empty() {
            0.0
        } else {
            (total as f64 / stems.len() as f64) as f32
        };
        let embedder = EmbedderBuilder::<u32, Stems>::with_avgdl(average).build();
        let mut scorer = Scorer::new();
        for (i, text) in stems.iter().enumerate() {
            // More than u32::MAX documents cannot have been listed.
            scorer.upsert(&(i as u32), embedder.embed(text));
        }
        Self {
            words,
            embedder,
            scorer,
        }
    }

    /// The documents that share a word with `query`, best first: (position, score). Equal
    /// scores are in position order.
    pub fn rank(&self, query: &str) -> Vec<(usize, f32)> {
        let query = self.words.of(query).join(" ");
        let mut ranked: Vec<(usize, f32)> = self
            .scorer
            .matches(&self.embedder.embed(&query))
            .into_iter()
            .map(|d| (d.id as usize, d.score))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked
    }
}

/// How many new documents a rebuild embeds between two looks at whether it is still wanted.
const REBUILD_CHUNK: usize = 16;

/// The cache's key of these documents (their words' and meaning's texts) with `meaning`.
fn cache_key(meaning: &Meaning, words: &[String], meanings: &[String]) -> String {
    let documents = words.iter().zip(meanings);
    cache::key(meaning, documents.map(|(w, m)| (w.as_str(), m.as_str())))
}

/// The stems and vectors `cache` keeps under `key`, when they are whole and of `documents`.
fn cached(
    cache: &dyn Cache,
    key: &str,
    meaning: &Meaning,
    documents: usize,
) -> Option<(Vec<String>, Vectors)> {
    let built = cache::Built::decode(&cache.load(key)?, key, documents, meaning.dims())?;
    let vectors = Vectors::of_flat(meaning.clone(), built.flat, documents)?;
    Some((built.stems, vectors))
}

/// A document's meaning text, hashed: the same text gives the same vector.
fn text_hash(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// How often each field is said in a tool's document: BM25 counts words, so a word of the
/// name weighs more than one of the description.
const NAME_WEIGHT: usize = 3;
const ALIAS_WEIGHT: usize = 2;
const TAG_WEIGHT: usize = 2;

/// The listed tools of a surface, ranked for a query.
pub struct Index {
    ranker: Ranker,
    vectors: Vectors,
    /// Document `i` is the surface's tool `tools[i]`.
    tools: Vec<usize>,
    /// Why the model it was asked to use failed, when it is built with the shipped table
    /// instead.
    fell_back: Option<ModelError>,
    /// A hash of each document's meaning text, in document order: the next build of a
    /// changed surface embeds only the documents whose text is new ([`Index::rebuild`]).
    texts: Vec<u64>,
    /// The documents' servers, ranked by their names.
    servers: Servers,
}

/// Which ranking a search uses: both fused (what moniker does), or one alone (to measure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Fused,
    Lexical,
    Semantic,
}

/// Reciprocal rank fusion's constant, for a toolset the query names: a document's score is the
/// sum over the rankings of `1 / (FUSION_K + its rank)`. 60 is the value of the method's paper
/// (Cormack et al., 2009).
const FUSION_K: f32 = 60.0;

/// What a search asks for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Query<'q> {
    pub text: &'q str,
    /// Only tools with one of these tags (none: any tool).
    pub tags: &'q [Tag],
    pub limit: usize,
    /// The tools of each toolset the text names ([`Index::named`]): they rank higher, as if
    /// the toolset's name were a word of each.
    pub toolsets: &'q [&'q BTreeSet<String>],
    /// The text's vector by the index's meaning ([`Index::meant`]), when the caller made it
    /// already (else the index makes it).
    pub meant: Option<&'q [f32]>,
    /// What the asker's calls taught ([`Taught`]): tools looked for with requests like this
    /// one rank higher.
    pub taught: Option<&'q Taught>,
}

impl Index {
    /// The index of `surface` with the table moniker ships.
    pub fn new(surface: &Surface) -> Self {
        Self::build(surface, Meaning::shipped(), None)
    }

    /// The index of `surface` with `meaning`; what takes the time of a build (the documents'
    /// words and vectors) is read from `cache` when it holds this surface's with this
    /// meaning, and saved there when it does not. A model that fails to run gives way to the
    /// shipped table ([`Index::fell_back`] says why).
    pub fn build(surface: &Surface, meaning: Meaning, cache: Option<&dyn Cache>) -> Self {
        match Self::build_with(surface, meaning, cache) {
            Ok(index) => index,
            Err(why) => {
                let mut index = Self::build_with(surface, Meaning::shipped(), cache)
                    .expect("the shipped table embeds any text");
                index.fell_back = Some(why);
                index
            }
        }
    }

    /// The index of `surface` as [`Index::build`] makes it, built after `previous` (an index of
    /// an earlier surface): a document whose text is the same as one of `previous` takes its
    /// vector, and only the new ones are embedded, a few at a time. `None` when `cancelled`
    /// says so between two of those (a newer surface supersedes this one), or when the model
    /// fails (then [`Index::build`] falls back).
    pub fn rebuild(
        surface: &Surface,
        meaning: Meaning,
        cache: Option<&dyn Cache>,
        previous: Option<&Index>,
        cancelled: &dyn Fn() -> bool,
    ) -> Option<Self> {
        let same_meaning = |p: &&Index| p.meaning().fingerprint() == meaning.fingerprint();
        let Some(previous) = previous.filter(same_meaning) else {
            return (!cancelled()).then(|| Self::build(surface, meaning, cache));
        };
        let (tools, words, meanings) = documents(surface, meaning.reads_words());
        let texts: Vec<u64> = meanings.iter().map(|m| text_hash(m)).collect();
        let cache = cache.map(|c| (c, cache_key(&meaning, &words, &meanings)));
        if let Some((stems, vectors)) = cache
            .as_ref()
            .and_then(|(c, key)| cached(*c, key, &meaning, tools.len()))
        {
            let servers = Servers::of(surface, &tools);
            return Some(Self {
                ranker: Ranker::of_stems(Words::default(), &stems),
                vectors,
                tools,
                fell_back: None,
                texts,
                servers,
            });
        }
        let dims = meaning.dims();
        let flat = previous.reused_or_embedded(&meaning, &texts, &meanings, cancelled)?;
        let stemmer = Words::default();
        let stems: Vec<String> = words.iter().map(|w| stemmer.of(w).join(" ")).collect();
        if let Some((c, key)) = &cache {
            c.save(key, &cache::encode(key, dims, &stems, &flat));
        }
        let vectors = Vectors::of_flat(meaning, flat, tools.len())?;
        let servers = Servers::of(surface, &tools);
        Some(Self {
            ranker: Ranker::of_stems(stemmer, &stems),
            vectors,
            tools,
            fell_back: None,
            texts,
            servers,
        })
    }

    /// The vectors of documents whose meaning texts are `meanings` (hashed: `texts`), one after
    /// another: a text this index has takes its vector, and only the new ones are embedded, a
    /// few at a time. `None` when `cancelled` says so between two of those, or when the model
    /// fails.
    fn reused_or_embedded(
        &self,
        meaning: &Meaning,
        texts: &[u64],
        meanings: &[String],
        cancelled: &dyn Fn() -> bool,
    ) -> Option<Vec<f32>> {
        let dims = meaning.dims();
        let known: std::collections::HashMap<u64, usize> = self
            .texts
            .iter()
            .enumerate()
            .map(|(i, h)| (*h, i))
            .collect();
        let mut flat = vec![0.0; texts.len() * dims];
        let fresh: Vec<usize> = (0..texts.len())
            .filter(|i| match known.get(&texts[*i]) {
                Some(&at) => {
                    let old = &self.vectors.flat()[at * dims..(at + 1) * dims];
                    flat[i * dims..(i + 1) * dims].copy_from_slice(old);
                    false
                }
                None => true,
            })
            .collect();
        for chunk in fresh.chunks(REBUILD_CHUNK) {
            if cancelled() {
                return None;
            }
            let texts: Vec<&str> = chunk.iter().map(|&i| meanings[i].as_str()).collect();
            let vectors = Vectors::new(meaning.clone(), &texts).ok()?;
            for (k, &i) in chunk.iter().enumerate() {
                flat[i * dims..(i + 1) * dims]
                    .copy_from_slice(&vectors.flat()[k * dims..(k + 1) * dims]);
            }
        }
        Some(flat)
    }

    /// How many documents it has.
    pub fn documents(&self) -> usize {
        self.tools.len()
    }

    /// Why the model asked for failed, when the index was built with the shipped table.
    pub fn fell_back(&self) -> Option<&ModelError> {
        self.fell_back.as_ref()
    }

    /// Its documents as vectors.
    pub fn vectors(&self) -> &Vectors {
        &self.vectors
    }

    /// What gives its documents and queries their vectors.
    pub fn meaning(&self) -> &Meaning {
        self.vectors.meaning()
    }

    fn build_with(
        surface: &Surface,
        meaning: Meaning,
        cache: Option<&dyn Cache>,
    ) -> Result<Self, ModelError> {
        let (tools, words, meanings) = documents(surface, meaning.reads_words());
        let cache = cache.map(|c| (c, cache_key(&meaning, &words, &meanings)));
        let saved = cache
            .as_ref()
            .and_then(|(c, key)| cached(*c, key, &meaning, tools.len()));
        let stemmer = Words::default();
        let (stems, vectors) = match saved {
            Some(saved) => saved,
            None => {
                let stems: Vec<String> = words.iter().map(|w| stemmer.of(w).join(" ")).collect();
                let vectors = Vectors::new(meaning.clone(), &meanings)?;
                if let Some((c, key)) = &cache {
                    c.save(
                        key,
                        &cache::encode(key, meaning.dims(), &stems, vectors.flat()),
                    );
                }
                (stems, vectors)
            }
        };
        let servers = Servers::of(surface, &tools);
        Ok(Self {
            ranker: Ranker::of_stems(stemmer, &stems),
            vectors,
            tools,
            fell_back: None,
            texts: meanings.iter().map(|m| text_hash(m)).collect(),
            servers,
        })
    }

    /// The `names` (toolsets') of which `text` says a word: "tools for triage" names
    /// `triage` and `bug-triage`.
    pub fn named<'n>(&self, text: &str, names: impl IntoIterator<Item = &'n str>) -> Vec<&'n str> {
        let words = &self.ranker.words;
        let said: HashSet<String> = words.of(text).into_iter().collect();
        names
            .into_iter()
            .filter(|name| words.of(name).iter().any(|w| said.contains(w)))
            .collect()
    }

    /// The listed tools for `text`, best first (positions in the index), by `part`; the fused
    /// ranking fuses a second one by rank when `named` accepts documents (a toolset the text
    /// names has them).
    fn ranked(&self, asked: Asked<'_>, part: Part, named: impl Fn(usize) -> bool) -> Vec<usize> {
        let Asked {
            text,
            meant,
            learned,
        } = asked;
        let by_score = |score: &[f32], docs: &mut Vec<usize>| {
            docs.sort_by(|a, b| score[*b].total_cmp(&score[*a]).then(a.cmp(b)));
        };
        let lexical = || self.ranker.rank(text).into_iter().map(|(d, _)| d);
        let semantic = || self.vectors.rank_of(meant).into_iter().map(|(d, _)| d);
        match part {
            Part::Lexical => lexical().collect(),
            Part::Semantic => semantic().collect(),
            Part::Fused => {
                let score = self.fused(text, meant, learned);
                let mut docs: Vec<usize> = (0..score.len()).filter(|&d| score[d] > 0.0).collect();
                by_score(&score, &mut docs);
                let mut members: Vec<usize> = (0..score.len()).filter(|&d| named(d)).collect();
                if members.is_empty() {
                    return docs;
                }
                // A toolset the text names is a second ranking: its tools, in the order the
                // halves gave them (as if its name were a word of each), fused by rank with
                // the halves' ranking, which counts as the two it stands for.
                by_score(&score, &mut members);
                let mut fused = vec![0.0f32; score.len()];
                for (rank, &doc) in docs.iter().enumerate() {
                    fused[doc] += 2.0 / (FUSION_K + rank as f32 + 1.0);
                }
                for (rank, doc) in members.into_iter().enumerate() {
                    fused[doc] += 1.0 / (FUSION_K + rank as f32 + 1.0);
                }
                let mut docs: Vec<usize> = (0..fused.len()).filter(|&d| fused[d] > 0.0).collect();
                by_score(&fused, &mut docs);
                docs
            }
        }
    }

    /// Each document's fused score for `text`: the two halves by their scores, each over its
    /// best (so each half's best weighs 1), a convex combination (Bruch et al., "An Analysis
    /// of Fusion Functions for Hybrid Retrieval", 2023: unlike fusing ranks, it keeps how far
    /// ahead a half's first tool is); then what the server a request names and the lessons add.
    fn fused(&self, text: &str, meant: Option<&[f32]>, learned: Vec<(usize, f32)>) -> Vec<f32> {
        let mut score = vec![0.0f32; self.tools.len()];
        let share = self.meaning().lexical_share();
        for (ranking, share) in [
            (self.ranker.rank(text), share),
            (self.vectors.rank_of(meant), 1.0 - share),
        ] {
            let Some(&(_, best)) = ranking.first().filter(|(_, best)| *best > 0.0) else {
                continue;
            };
            for (doc, s) in ranking {
                score[doc] += share * s / best;
            }
        }
        self.servers.lift(text, &mut score);
        for (doc, boost) in learned {
            score[doc] += boost;
        }
        score
    }

    /// The tools for `query`, best first, at most `query.limit`: `exact` (the tool a name or
    /// alias equal to the query names, resolved by the caller, who knows the session's
    /// toolset) first, then the ranking; only tools `keep` accepts. A query without words
    /// but with tags gives the tools with those tags, by name.
    pub fn search<'s>(
        &self,
        surface: &'s Surface,
        query: Query<'_>,
        exact: Option<&'s Exposed>,
        keep: impl Fn(&Exposed) -> bool,
    ) -> Vec<&'s Exposed> {
        self.search_by(Part::Fused, surface, query, exact, keep)
    }

    /// [`Index::search`] by one part of the ranking (the benchmark measures each).
    pub fn search_by<'s>(
        &self,
        part: Part,
        surface: &'s Surface,
        query: Query<'_>,
        exact: Option<&'s Exposed>,
        keep: impl Fn(&Exposed) -> bool,
    ) -> Vec<&'s Exposed> {
        let tagged =
            |e: &Exposed| query.tags.is_empty() || e.tags.iter().any(|t| query.tags.contains(t));
        let accept = |e: &Exposed| keep(e) && tagged(e) && e.withheld.is_none();
        let all = surface.tools();
        let ranked: Vec<&'s Exposed> = if query.text.trim().is_empty() {
            self.tools.iter().map(|&i| &all[i]).collect()
        } else {
            let named = |doc: usize| {
                let name = &all[self.tools[doc]].name;
                query.toolsets.iter().any(|t| t.contains(name))
            };
            let made;
            let meant = match query.meant {
                Some(meant) => Some(meant),
                None => {
                    made = self.meant(query.text);
                    made.as_deref()
                }
            };
            let asked = Asked {
                text: query.text,
                meant,
                learned: self.learned(surface, query.text, meant, query.taught),
            };
            self.ranked(asked, part, named)
                .into_iter()
                .map(|doc| &all[self.tools[doc]])
                .collect()
        };
        let exact = exact.map(|e| shown(surface, e));
        let mut out: Vec<&'s Exposed> = Vec::with_capacity(query.limit);
        for tool in exact.into_iter().chain(ranked) {
            if out.len() == query.limit {
                break;
            }
            if accept(tool) && !out.iter().any(|o| std::ptr::eq(*o, tool)) {
                out.push(tool);
            }
        }
        out
    }
}

/// What a server's name adds to the fused score of its tools that a request ranks, times how
/// well the request's words match the name (over the best-matched server's): a request that
/// names its server ("with Desktop Commander, read ...") finds that server's tools first.
/// Chosen on the tuning sets alone (`tasks.json`, `tasks-plain.json`, `tasks-livemcpbench.json`:
/// 0.1 to 0.5 tried with the table, 0.1 to 0.3 with all-MiniLM-L6-v2; 0.2 found the most in the
/// first five and first with the model, and as many in the first five with the table). A server ranked as one document of
/// all its tools' words and vectors found fewer at every share tried, so only its name is read.
const SERVER_NAME_SHARE: f32 = 0.2;

/// The servers of an index's documents, ranked by their names.
struct Servers {
    /// Document `i`'s server is `of[i]`, a document of `names`.
    of: Vec<usize>,
    /// BM25 over the servers' names.
    names: Ranker,
    /// How many there are.
    count: usize,
}

impl Servers {
    /// The servers of the surface's tools `tools` (an index's documents, in its order).
    fn of(surface: &Surface, tools: &[usize]) -> Self {
        let all = surface.tools();
        let mut names: Vec<&str> = Vec::new();
        let mut known: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        let of = tools
            .iter()
            .map(|&i| {
                let name = all[i].server_name.as_str();
                *known.entry(name).or_insert_with(|| {
                    names.push(name);
                    names.len() - 1
                })
            })
            .collect();
        Self {
            of,
            names: Ranker::new(&names),
            count: names.len(),
        }
    }

    /// Adds to each ranked document's `score` ([`SERVER_NAME_SHARE`]) as far as `text` names
    /// its server.
    fn lift(&self, text: &str, score: &mut [f32]) {
        let ranking = self.names.rank(text);
        let Some(&(_, best)) = ranking.first().filter(|(_, best)| *best > 0.0) else {
            return;
        };
        let mut named = vec![0.0f32; self.count];
        for (server, s) in ranking {
            named[server] = SERVER_NAME_SHARE * s / best;
        }
        for (doc, s) in score.iter_mut().enumerate() {
            if *s > 0.0 {
                *s += named[self.of[doc]];
            }
        }
    }
}

/// A request being ranked: its text, its vector, and what lessons add to each document's
/// score.
struct Asked<'a> {
    text: &'a str,
    meant: Option<&'a [f32]>,
    learned: Vec<(usize, f32)>,
}

impl Index {
    /// The vector of `text` by the index's meaning (`None`: no word of it is known).
    pub fn meant(&self, text: &str) -> Option<Vec<f32>> {
        self.meaning().embed(text)
    }

    /// What `taught` adds to each document's score for `text`: (document, boost).
    fn learned(
        &self,
        surface: &Surface,
        text: &str,
        meant: Option<&[f32]>,
        taught: Option<&Taught>,
    ) -> Vec<(usize, f32)> {
        let Some(taught) = taught.filter(|t| !t.is_empty()) else {
            return Vec::new();
        };
        let words = &self.ranker.words;
        let asked = taught::Asked::new(text, words, self.meaning(), meant);
        let likeness = taught.likeness(&asked, words);
        if likeness.is_empty() {
            return Vec::new();
        }
        let all = surface.tools();
        let doc_of: std::collections::HashMap<&str, usize> = self
            .tools
            .iter()
            .enumerate()
            .map(|(doc, &i)| (all[i].name.as_str(), doc))
            .collect();
        likeness
            .into_iter()
            .filter_map(|(tool, boost)| Some((*doc_of.get(tool)?, boost)))
            .collect()
    }
}

/// The listed tools of `surface` as documents: their positions in the surface, the text of
/// each for the lexical ranking and for the semantic one (a description read to its
/// `reads_words`th word).
fn documents(surface: &Surface, reads_words: usize) -> (Vec<usize>, Vec<String>, Vec<String>) {
    let all = surface.tools();
    let mut tools = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut meanings: Vec<String> = Vec::new();
    for (i, tool) in all.iter().enumerate() {
        if tool.listed {
            tools.push(i);
            let fields = Fields::of(tool);
            let (mut w, mut m) = (String::new(), String::new());
            fields.write(None, &mut w);
            fields.write(Some(reads_words), &mut m);
            words.push(w);
            meanings.push(m);
        }
    }
    // A member that is not listed is found through its action tool: its names, aliases
    // and description are the action tool's words too.
    for member in all.iter().filter(|t| !t.listed) {
        let Some((action_tool, _)) = &member.member_of else {
            continue;
        };
        let at = tools
            .iter()
            .position(|&i| all[i].name == *action_tool && all[i].member_of.is_none());
        if let Some(at) = at {
            let fields = Fields::of(member);
            fields.write(None, &mut words[at]);
            fields.write(Some(reads_words), &mut meanings[at]);
        }
    }
    (tools, words, meanings)
}

/// What a search shows for a tool: the tool, or for a member that is not listed, its action
/// tool.
fn shown<'s>(surface: &'s Surface, tool: &'s Exposed) -> &'s Exposed {
    match (&tool.member_of, tool.listed) {
        (Some((action_tool, _)), false) => surface
            .resolve(Kind::Tool, action_tool)
            .map_or(tool, |r| r.exposed),
        _ => tool,
    }
}

/// What a tool is found by, field by field.
struct Fields<'t> {
    tool: &'t Exposed,
    description: String,
    /// Its parameters' names.
    parameters: Vec<String>,
}

impl<'t> Fields<'t> {
    fn of(tool: &'t Exposed) -> Self {
        let definition: Value = serde_json::from_str(tool.definition.get()).unwrap_or(Value::Null);
        let properties = definition
            .get("inputSchema")
            .or_else(|| definition.get("arguments"))
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object);
        let parameters = properties
            .into_iter()
            .flat_map(|p| p.keys().cloned())
            .collect();
        Self {
            tool,
            description: definition
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            parameters,
        }
    }

    fn names(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.tool.name)
            .chain(&self.tool.aliases)
            .chain(&self.tool.hidden_aliases)
    }

    /// The text a tool is found by, added to `out`: for the lexical ranking (`semantic` is
    /// `None`) each field said as often as it weighs (BM25 counts words, so a word of the name
    /// weighs more than one of the description), for the semantic one once (its vector is the
    /// mean of all its words': measured, this finds more than fields embedded apart and
    /// weighed), its description to the `semantic`th word.
    fn write(&self, semantic: Option<usize>, out: &mut String) {
        let weighed = semantic.is_none();
        let mut say = |text: &str, times: usize| {
            for _ in 0..if weighed { times } else { 1 } {
                out.push_str(text);
                out.push('\n');
            }
        };
        for (i, name) in self.names().enumerate() {
            say(name, if i == 0 { NAME_WEIGHT } else { ALIAS_WEIGHT });
        }
        for tag in &self.tool.tags {
            say(tag.as_str(), TAG_WEIGHT);
        }
        say(&self.tool.server_name, 1);
        // The table reads a description's opening only: it was fitted to texts no longer than
        // that, and a longer one's usage notes and examples pull its mean vector away from
        // what the tool does (a model, and the lexical half, which weighs words by rarity,
        // read it whole).
        say(
            match semantic {
                None => &self.description,
                Some(n) => first_words(&self.description, n),
            },
            1,
        );
        for name in &self.parameters {
            say(name, 1);
        }
    }
}

/// `text` up to the end of its `n`th word (words as white space parts them); all of it when
/// it has no more.
fn first_words(text: &str, n: usize) -> &str {
    let (mut words, mut in_word) = (0, false);
    for (at, c) in text.char_indices() {
        match (c.is_whitespace(), in_word) {
            (true, true) => {
                words += 1;
                if words == n {
                    return &text[..at];
                }
                in_word = false;
            }
            (false, false) => in_word = true,
            _ => {}
        }
    }
    text
}

#[cfg(test)]
mod tests;
