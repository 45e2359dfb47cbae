//! The shape of the code, kept ("A house that keeps its shape"): no circle of modules inside
//! a crate. A module is a crate's top-level room (`crate::view`, `crate::gateway`, with the
//! files below it); an arrow goes from one room to another when its code names the other
//! (`use crate::view::View`, `crate::view::SETTLE`). Tests (`tests.rs`, `#[cfg(test)]` modules
//! at the end of a file) are left out: they may look anywhere. A circle fails with the rooms on
//! it and a line of each that makes an arrow.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Where each room's code names another: (from, to) to the first place it does.
type Arrows = BTreeMap<(String, String), String>;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace")
}

/// Every `.rs` file below `dir`, but test files.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// The top-level room of a file of `src`: `view` for `src/view.rs` and `src/view/x.rs`; `None`
/// for the crate root (`lib.rs`, `main.rs`), which declares the rooms.
fn room(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.trim_end_matches(".rs");
    (!matches!(name, "lib" | "main" | "bin")).then(|| name.to_owned())
}

/// The code of a file without its test module (`#[cfg(test)]` and what follows it, where
/// tests sit at a file's end) and without comments.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The rooms the code names: `crate::X` and `use crate::{X, Y::..}`.
fn named(code: &str, rooms: &BTreeSet<String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in code.lines() {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let mut names: Vec<&str> = Vec::new();
            if let Some(group) = rest.strip_prefix('{') {
                // `crate::{a, b::c}`: each first name.
                let inside = group.split('}').next().unwrap_or_default();
                names.extend(
                    inside
                        .split(',')
                        .map(|n| n.trim().split("::").next().unwrap_or_default()),
                );
            } else {
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                names.push(&rest[..end]);
            }
            for name in names {
                if rooms.contains(name) {
                    out.push((name.to_owned(), line.trim().to_owned()));
                }
            }
        }
    }
    out
}

/// The arrows between the rooms of the crate whose `src` this is.
fn arrows_of(src: &Path) -> Arrows {
    let mut files = Vec::new();
    sources(src, &mut files);
    let rooms: BTreeSet<String> = files.iter().filter_map(|f| room(src, f)).collect();
    let mut out = Arrows::new();
    for file in &files {
        let Some(from) = room(src, file) else {
            continue;
        };
        let text = std::fs::read_to_string(file).expect("a source file");
        for (to, line) in named(&code(&text), &rooms) {
            if to != from {
                let at = file.strip_prefix(src).unwrap_or(file).display().to_string();
                out.entry((from.clone(), to))
                    .or_insert_with(|| format!("{at}: {line}"));
            }
        }
    }
    out
}

/// Every circle among the arrows, each once (as found first by a walk in name order).
fn circles(arrows: &Arrows) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in arrows.keys() {
        next.entry(from).or_default().push(to);
    }
    let mut found: Vec<Vec<String>> = Vec::new();
    let mut seen: BTreeSet<BTreeSet<String>> = BTreeSet::new();
    for start in next.keys() {
        // Depth-first, iterative: the path so far, and each room's next arrow to try.
        let mut path: Vec<(&str, usize)> = vec![(start, 0)];
        while let Some(&(room, i)) = path.last() {
            let Some(&to) = next.get(room).and_then(|n| n.get(i)) else {
                path.pop();
                continue;
            };
            if let Some(top) = path.last_mut() {
                top.1 += 1;
            }
            if to == *start {
                let circle: Vec<String> = path.iter().map(|(r, _)| (*r).to_owned()).collect();
                if seen.insert(circle.iter().cloned().collect()) {
                    found.push(circle);
                }
            } else if to > *start && !path.iter().any(|(r, _)| *r == to) {
                path.push((to, 0));
            }
        }
    }
    found
}

#[test]
fn no_crate_has_a_circle_of_modules() {
    let root = workspace();
    let mut report = Vec::new();
    for krate in ["surface", "config", "gateway", "cli", "fixture"] {
        let src = root.join("crates").join(krate).join("src");
        let arrows = arrows_of(&src);
        assert!(
            !arrows.is_empty() || krate == "fixture",
            "{krate}: no arrows read"
        );
        for circle in circles(&arrows) {
            let mut lines = vec![format!("{krate}: {} -> {}", circle.join(" -> "), circle[0])];
            for (i, from) in circle.iter().enumerate() {
                let to = &circle[(i + 1) % circle.len()];
                lines.push(format!("    {}", arrows[&(from.clone(), to.clone())]));
            }
            report.push(lines.join("\n"));
        }
    }
    assert!(
        report.is_empty(),
        "circles of modules:\n{}",
        report.join("\n")
    );
}

/// The check itself finds a circle, and a line of each arrow on it.
#[test]
fn a_circle_is_found() {
    let dir = moniker_fixture::scratch().join("src");
    std::fs::create_dir_all(dir.join("b")).expect("dirs");
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").expect("lib");
    std::fs::write(dir.join("a.rs"), "use crate::b::Thing;\n").expect("a");
    std::fs::write(dir.join("b.rs"), "mod inner;\n").expect("b");
    std::fs::write(dir.join("b/inner.rs"), "pub fn f() { crate::c::g() }\n").expect("inner");
    std::fs::write(
        dir.join("c.rs"),
        "use crate::{a::X, a::Y};\n#[cfg(test)]\nmod tests { use crate::b; }\n",
    )
    .expect("c");
    assert_eq!(circles(&arrows_of(&dir)), [["a", "b", "c"]]);
    std::fs::write(dir.join("c.rs"), "// use crate::a::X;\n").expect("c");
    assert!(circles(&arrows_of(&dir)).is_empty());
}

/// Functions that have not been split yet (over 80 lines or 6 parameters: `clippy.toml`) each
/// carry `#[expect(clippy::..., reason = "not split yet: ...")]`: clippy fails on a new long
/// function without one, and on one that was split and still carries it. This keeps their
/// number from growing: it may only go down (lower [`NOT_SPLIT_YET`] when it does).
const NOT_SPLIT_YET: usize = 18;
/// The reason those `expect`s give.
const NOT_SPLIT_REASON: &str = "not split yet: see CONTRIBUTING.md";

#[test]
fn long_functions_only_get_fewer() {
    let mut files = Vec::new();
    for top in ["crates", "bench"] {
        sources(&workspace().join(top), &mut files);
    }
    let marked: Vec<String> = files
        .iter()
        .filter(|f| !f.components().any(|c| c.as_os_str() == "target"))
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            text.lines()
                .enumerate()
                // The reason, written whole (rustfmt may put it on a line of its own).
                .filter(|(_, l)| l.contains(&format!("reason = \"{NOT_SPLIT_REASON}\"")))
                .map(|(n, _)| format!("{}:{}", f.display(), n + 1))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        marked.len() <= NOT_SPLIT_YET,
        "{} functions are marked `not split yet`, more than the {NOT_SPLIT_YET} there were: split the new one\n{}",
        marked.len(),
        marked.join("\n")
    );
}
