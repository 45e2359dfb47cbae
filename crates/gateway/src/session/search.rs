//! Search mode (DESIGN "The model's view"): `search_tools` ranks the tools the session may
//! see with the view's index and answers with a compact line each (the full definition of the
//! one tool a query names exactly); `call_tool` routes the
//! tool it names exactly as a direct call would be (toolset boundary, aliases, actions,
//! metrics).

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use moniker_surface::discovery::{self, DEFAULT_LIMIT, MAX_LIMIT, Mode};
use moniker_surface::search::{Lesson, Query};
use moniker_surface::{Kind, Tag, listing, toolsets};
use serde_json::value::RawValue;

use super::calls::{Named, Seen};
use super::{Answers, Reply, Session, Toolset, id_of};
use crate::call::Call;
use crate::errors;
use crate::message::{self, Message};
use crate::metrics::Searched;
use crate::sync::lock;
use crate::view::View;

/// The longest query, in bytes: ranking costs grow with its words, and a task says itself in
/// far fewer.
const MAX_QUERY: usize = 1024;
/// The most tags one search filters by.
const MAX_TAGS: usize = 32;
/// The most toolsets one search brings forward: the first ones, by name, that the query names
/// (each is resolved against the surface).
const MAX_NAMED: usize = 8;

#[derive(serde::Deserialize)]
struct SearchArguments {
    query: String,
    #[serde(default)]
    tags: Vec<String>,
    limit: Option<usize>,
}

#[derive(serde::Deserialize)]
struct CallArguments<'a> {
    name: String,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

impl Session {
    /// The session is in search mode: its toolset's discovery says so, or the gateway's.
    pub(super) fn searches(&self, view: &View, equipped: Option<&Toolset>) -> bool {
        let discovery = match equipped {
            Some(t) => &t.equipped.discovery,
            None => view.surface.discovery(),
        };
        discovery.mode == Mode::Search
            || self
                .answers_search
                .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `search_tools`, on the thread that asks when the view's index is built and ranks in
    /// microseconds (the table's), else on a blocking thread: a model's ranking takes
    /// milliseconds of CPU and a first index seconds, which must not hold the runtime's
    /// threads (every other session's calls run there). A refusal is noted on `record`.
    pub(super) async fn search(
        self: &Arc<Self>,
        request: &Message,
        view: &Arc<View>,
        equipped: Option<Arc<Toolset>>,
        record: &mut Call,
    ) -> Message {
        let searched = if view.searches_at_once() {
            self.ranked(request, view, equipped.as_deref())
        } else {
            // A view not indexed yet is indexed now, after the last index built: only the
            // documents that changed since are embedded (the listing that changed is searched,
            // never an older one's index).
            let previous = self.gateway.naming.indexer.last_built();
            // As many at once as there are cores: more would only queue for them, each on a
            // thread of its own (a client that searches in a loop holds no more threads).
            let _turn = searching().acquire().await;
            let (session, message, view) = (self.clone(), request.clone(), view.clone());
            let indexer = self.gateway.naming.indexer.clone();
            tokio::task::spawn_blocking(move || {
                view.index_after(previous.as_deref());
                indexer.built(&view);
                session.ranked(&message, &view, equipped.as_deref())
            })
            .await
            .unwrap_or_else(|_| {
                let why = errors::tool_error("the search failed: try again");
                Err(Message::result(id_of(request), &why))
            })
        };
        searched.unwrap_or_else(|refused| {
            record.tool_error();
            refused
        })
    }

    /// The best tools for the query among those the session sees (`Err`: the tool error that
    /// refuses the query).
    fn ranked(
        &self,
        request: &Message,
        view: &View,
        equipped: Option<&Toolset>,
    ) -> Result<Message, Message> {
        let id = id_of(request);
        let refused = |why: &str| Err(Message::result(id, &errors::tool_error(why)));
        let (args, tags) = match search_arguments(request.arguments().unwrap_or("{}")) {
            Ok(parsed) => parsed,
            Err(why) => return refused(&why),
        };
        // A query that names a tool exactly gets its definition: nothing is ranked (nor
        // embedded, nor learned).
        let found = match named_exactly(view, equipped, args.query.trim()) {
            Some(definition) => Found::Named(definition),
            None => Found::Ranked(self.best(view, equipped, &args, &tags)),
        };
        tracing::debug!(query = %args.query, "tool search");
        // Each tool shown, with the bytes it took (its line, or its whole definition).
        let (shown, result) = match found {
            Found::Named(definition) => {
                let shown = discovery::compact::name_of(&definition)
                    .map(|name| (name, definition.get().len()))
                    .into_iter()
                    .collect();
                (shown, named_answer(definition, &view.surface))
            }
            Found::Ranked(ranked) => {
                let lines: Vec<discovery::compact::Line> = ranked
                    .iter()
                    .filter_map(|(definition, server)| {
                        discovery::compact::line(definition, *server)
                    })
                    .collect();
                let result = compact_answer(&lines);
                let shown = lines.into_iter().map(|l| (l.name, l.text.len())).collect();
                (shown, result)
            }
        };
        self.searched(shown);
        Ok(Message::result(id, &result))
    }

    /// The best tools for the query among those the session sees, each with its server; the
    /// query is kept as a lesson for the principal's next call ([`crate::learned`]).
    fn best<'v>(
        &self,
        view: &'v View,
        equipped: Option<&'v Toolset>,
        args: &SearchArguments,
        tags: &[Tag],
    ) -> Vec<(Cow<'v, RawValue>, Option<&'v str>)> {
        let surface = &view.surface;
        let index = view.index();
        // The toolsets the query names rank their tools higher; a session with a toolset
        // has only its tools, and is told nothing of other toolsets.
        let sets = if equipped.is_none() {
            self.gateway.naming.catalog.sets()
        } else {
            Default::default()
        };
        let named: Vec<toolsets::Selection> = index
            .named(&args.query, sets.keys().map(String::as_str))
            .into_iter()
            .filter_map(|name| toolsets::select(surface, name, &sets).ok())
            .take(MAX_NAMED)
            .collect();
        let named: Vec<&BTreeSet<String>> = named.iter().map(|s| &s.tools).collect();
        let (learned, learner) = (&self.gateway.services.learned, self.learner());
        let taught = learned.of(&learner);
        let meant = index.meant(&args.query);
        let query = Query {
            text: &args.query,
            tags,
            limit: args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT),
            toolsets: &named,
            meant: meant.as_deref(),
            taught: taught.as_deref(),
        };
        let ranked = ranked_in(view, equipped, query);
        if learned.on() {
            let meant = meant.as_deref().map(|v| (index.meaning(), v));
            learned.asked(
                &learner,
                Lesson::new(&args.query, crate::learned::now(), meant),
            );
        }
        ranked
    }

    /// A search showed these tools, best first, each with the bytes it took: the bytes are
    /// counted by tool; the search before, if no call followed, is counted as followed by none;
    /// one that found nothing is counted at once.
    fn searched(&self, shown: Vec<(String, usize)>) {
        let metrics = &self.gateway.services.metrics;
        for (name, bytes) in &shown {
            metrics.shown(name, *bytes);
        }
        let names: Vec<String> = shown.into_iter().map(|(name, _)| name).collect();
        let before = lock(&self.last_search).take();
        if before.is_some() {
            metrics.search(Searched::NoCall);
        }
        if names.is_empty() {
            metrics.search(Searched::Empty);
        } else {
            *lock(&self.last_search) = Some(names);
        }
    }

    /// Tool `name` is called: the search before it, if any, is counted with the rank it
    /// showed the tool at (or as not showing it); the principal's searches since its last
    /// call go with the call (`record`), which teaches them to search if it succeeds.
    pub(super) fn called_after_search(&self, name: &str, record: &mut Call) {
        self.count_search_before(name);
        let learner = self.learner();
        let asked = self.gateway.services.learned.take_asked(&learner);
        if !asked.is_empty() {
            record.teaches(&learner, asked);
        }
    }

    /// Counts the search before a call of tool `name`, if any, with the rank it showed the
    /// tool at (or as not showing it).
    fn count_search_before(&self, name: &str) {
        if let Some(names) = lock(&self.last_search).take() {
            let rank = names.iter().position(|n| n == name);
            self.gateway.services.metrics.search(Searched::Called(rank));
        }
    }

    /// `call_tool`: the named tool, called with the given arguments as if called directly.
    pub(super) async fn call_found(
        self: &Arc<Self>,
        request: &Message,
        seen: Seen<'_>,
        answers: &Answers,
        record: &mut Call,
    ) -> Reply {
        let id = id_of(request);
        let arguments = request.arguments().unwrap_or("{}");
        let mut refused = |why: &str| {
            record.tool_error();
            Some(Message::result(id, &errors::tool_error(why)))
        };
        let args: CallArguments<'_> =
            match crate::message::counted(|| serde_json::from_str(arguments)) {
                Ok(args) => args,
                Err(e) => {
                    return refused(&format!(
                        "call_tool takes {{\"name\": string, \"arguments\"?: object}}: {e}"
                    ));
                }
            };
        if [discovery::SEARCH_TOOLS, discovery::CALL_TOOL].contains(&args.name.as_str()) {
            return refused(&format!(
                "call `{}` directly, not through call_tool",
                args.name
            ));
        }
        let inner = args.arguments.map_or("{}", RawValue::get);
        if !inner.trim_start().starts_with('{') {
            return refused("call_tool's `arguments` must be an object");
        }
        // Arguments that cannot fit are refused with the tool's definition: a compact search
        // answer never costs a second search.
        let misfit = named_exactly(seen.view, seen.equipped, &args.name).and_then(|definition| {
            discovery::compact::misfit(&definition, inner)
                .map(|why| (why, definition.get().to_owned()))
        });
        if let Some((why, definition)) = misfit {
            return refused(&format!(
                "the arguments do not fit `{}` ({why}); its definition: {definition}",
                args.name
            ));
        }
        record.through(discovery::CALL_TOOL, &args.name);
        let call = Named {
            name: &args.name,
            arguments: Some(inner),
            seen,
        };
        self.route(request, call, answers, record).await
    }
}

/// What a search found: the one tool the query names exactly (a name or an alias: its full
/// definition is asked for), or the best tools for it, each with its server.
enum Found<'v> {
    Named(Cow<'v, RawValue>),
    Ranked(Vec<(Cow<'v, RawValue>, Option<&'v str>)>),
}

/// The tools `query` ranks among those the session sees (its toolset's, else those served),
/// each with its server.
fn ranked_in<'v>(
    view: &'v View,
    equipped: Option<&'v Toolset>,
    query: Query<'_>,
) -> Vec<(Cow<'v, RawValue>, Option<&'v str>)> {
    let surface = &view.surface;
    let index = view.index();
    let server = |e: &'v moniker_surface::Exposed| e.origin().map(|o| o.server.as_str());
    match equipped {
        Some(t) => {
            let selection = &t.equipped.listed;
            let ranked = index.search(surface, query, None, |e| selection.tools.contains(&e.name));
            ranked
                .into_iter()
                .map(|e| (toolsets::entry(selection, Kind::Tool, e), server(e)))
                .collect()
        }
        None => {
            let ranked = index.search(surface, query, None, |e| view.is_served(e));
            ranked
                .into_iter()
                .map(|e| (Cow::Borrowed(&*e.definition), server(e)))
                .collect()
        }
    }
}

/// The definition, as the session sees it, of the tool `name` names exactly (its name, an
/// alias or a legacy name) among those it may call.
fn named_exactly<'v>(
    view: &'v View,
    equipped: Option<&'v Toolset>,
    name: &str,
) -> Option<Cow<'v, RawValue>> {
    match equipped {
        Some(t) => {
            let selection = &t.equipped.listed;
            toolsets::resolve(&view.surface, selection, Kind::Tool, name)
                .map(|exact| toolsets::entry(selection, Kind::Tool, exact.exposed))
        }
        None => view
            .surface
            .resolve(Kind::Tool, name)
            .map(|r| r.exposed)
            .filter(|e| view.is_served(e))
            .map(|e| Cow::Borrowed(&*e.definition)),
    }
}

/// `search_tools`' result for the tool a query names exactly: its full definition, as a listing
/// would give it, in the text and as `structuredContent`.
fn named_answer(definition: Cow<'_, RawValue>, surface: &moniker_surface::Surface) -> String {
    let tools = listing::render(
        Kind::Tool,
        vec![definition],
        &[],
        surface.server(Kind::Tool),
    );
    format!(
        r#"{{"content":[{{"type":"text","text":{}}}],"structuredContent":{tools}}}"#,
        message::string(&tools)
    )
}

/// `search_tools`' result for the tools found: a compact line each, in plain text
/// ([`discovery::compact`]), and nothing else: a client that hands the model
/// `structuredContent` when there is one (Pydantic AI does) hands it these lines.
fn compact_answer(lines: &[discovery::compact::Line]) -> String {
    format!(
        r#"{{"content":[{{"type":"text","text":{}}}]}}"#,
        message::string(&discovery::compact::text(lines))
    )
}

/// The turns of searches off the runtime's threads: one per core.
fn searching() -> &'static tokio::sync::Semaphore {
    static TURNS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    TURNS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        tokio::sync::Semaphore::new(cores)
    })
}

/// `search_tools`'s arguments and its tags, or why they are refused (each within its bound).
fn search_arguments(arguments: &str) -> Result<(SearchArguments, Vec<Tag>), String> {
    let args: SearchArguments =
        crate::message::counted(|| serde_json::from_str(arguments)).map_err(|e| {
            format!(
                "search_tools takes {{\"query\": string, \"tags\"?: [string], \"limit\"?: integer}}: {e}"
            )
        })?;
    if args.query.len() > MAX_QUERY {
        return Err(format!(
            "the query is {} bytes: say it in {MAX_QUERY} at most",
            args.query.len()
        ));
    }
    if args.tags.len() > MAX_TAGS {
        return Err(format!("{} tags: {MAX_TAGS} at most", args.tags.len()));
    }
    let tags = args
        .tags
        .iter()
        .map(|text| {
            text.parse::<Tag>()
                .map_err(|e| format!("`{text}` is not a tag: {e}"))
        })
        .collect::<Result<Vec<Tag>, String>>()?;
    Ok((args, tags))
}
