//! The learning protocol (issue "The model's view, third round"): each pair is a tool, a request
//! that teaches it (searched, then the tool called) and a probe that shares few words with it.
//! Over one surface of every tool: the probes' recall with nothing taught, then after one use
//! (each pair taught alone: one principal, one lesson), then with every pair taught at once (a
//! principal's history), and each taught request asked again; and the tasks of `--tasks` whose tool was never taught, with and
//! without that history (teaching one tool must not push the others out).

use std::time::{SystemTime, UNIX_EPOCH};

use moniker_surface::search::{Index, Lesson, Query, Taught};
use moniker_surface::{Exposed, Surface};

use super::{Recall, Setup, Task};

#[derive(serde::Deserialize)]
struct Pair {
    server: String,
    tool: String,
    teach: String,
    probe: String,
}

/// The exposed name of `server`'s `tool` in `surface`.
fn exposed<'s>(surface: &'s Surface, server: &str, tool: &str) -> Option<&'s Exposed> {
    surface.tools().iter().find(|e| {
        e.origin()
            .is_some_and(|o| o.server.as_str() == server && o.name == tool)
    })
}

/// The rank of `server`'s `tool` among the first five `index` finds for `text`.
fn rank(
    index: &Index,
    surface: &Surface,
    text: &str,
    taught: Option<&Taught>,
    want: &Exposed,
) -> Option<usize> {
    let meant = index.meant(text);
    let query = Query {
        text,
        limit: 5,
        meant: meant.as_deref(),
        taught,
        ..Default::default()
    };
    index
        .search(surface, query, None, |_| true)
        .iter()
        .position(|e| std::ptr::eq(*e, want))
}

/// A lesson of `text` now, with its vector by the index's meaning.
fn lesson(index: &Index, text: &str) -> Lesson {
    let meant = index.meant(text);
    Lesson::new(text, now(), meant.as_deref().map(|v| (index.meaning(), v)))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Runs the protocol on the pairs of `path` over `surface`; prints its table.
pub(super) fn run(setup: &Setup, surface: &Surface, path: &std::path::Path) {
    let pairs: Vec<Pair> = serde_json::from_value(super::read_json(path))
        .expect("pairs: [{server, tool, teach, probe}]");
    let index = Index::build(surface, setup.meaning.clone(), None);
    let (mut before, mut alone, mut together, mut again) = (
        Recall::default(),
        Recall::default(),
        Recall::default(),
        Recall::default(),
    );
    let mut history = Taught::default();
    let mut known = Vec::new();
    for pair in &pairs {
        let server = super::server_id(&pair.server);
        let Some(want) = exposed(surface, &server, &pair.tool) else {
            eprintln!("not in the surface: {server}/{}", pair.tool);
            continue;
        };
        known.push((pair, want));
        history.teach(&want.name, vec![lesson(&index, &pair.teach)], now());
    }
    for (pair, want) in &known {
        before.add(rank(&index, surface, &pair.probe, None, want));
        let mut one = Taught::default();
        one.teach(&want.name, vec![lesson(&index, &pair.teach)], now());
        alone.add(rank(&index, surface, &pair.probe, Some(&one), want));
        again.add(rank(&index, surface, &pair.teach, Some(&one), want));
        together.add(rank(&index, surface, &pair.probe, Some(&history), want));
    }
    let (mut untaught_before, mut untaught_after) = (Recall::default(), Recall::default());
    for task in setup.tasks.iter().filter(|t: &&Task| {
        !known
            .iter()
            .any(|(p, _)| super::server_id(&p.server) == t.server && p.tool == t.tool)
    }) {
        let Some(want) = exposed(surface, &task.server, &task.tool) else {
            continue;
        };
        untaught_before.add(rank(&index, surface, &task.request, None, want));
        untaught_after.add(rank(&index, surface, &task.request, Some(&history), want));
    }
    let row = |what: &str, r: &Recall| {
        println!(
            "| {what} | {} | {:.1}% | {:.1}% |",
            r.tasks,
            Recall::pct(r.at5, r.tasks),
            Recall::pct(r.at1, r.tasks)
        );
    };
    println!(
        "Learning from calls, {} tools, {} pairs ({}), {}:\n",
        surface.tools().iter().filter(|e| e.listed).count(),
        known.len(),
        path.display(),
        if matches!(setup.meaning, moniker_surface::search::Meaning::Table(_)) {
            "the table"
        } else {
            "the model"
        }
    );
    println!("| probes | requests | recall@5 | recall@1 |\n|---|---|---|---|");
    row("nothing taught", &before);
    row("after one use (each pair alone)", &alone);
    row("every pair taught (one history)", &together);
    row("the taught request asked again", &again);
    row("untaught tools' tasks, nothing taught", &untaught_before);
    row("untaught tools' tasks, with the history", &untaught_after);
}
