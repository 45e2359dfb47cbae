//! The shape of the code, kept ("A house that keeps its shape"): no circle of modules inside
//! a crate, at any depth. The rooms are the modules that share a parent: the crate's top-level
//! ones (`crate::view`, `crate::gateway`, each with the files below it), and the children of
//! every module with files of its own (`serve/http/post.rs`, `serve/http/sessions.rs`, with the
//! files below each). An arrow goes from one room to a sibling when its code names the sibling
//! (`use crate::view::View`, `use super::post::{Mode, answer}`, `super::stream::sse(..)`); a
//! module naming its parent's items, or its own children's, makes none. Tests (`tests.rs`,
//! `#[cfg(test)]` modules and imports, wherever they are) are left out: they may look anywhere. A circle
//! fails with the rooms on it and a line of each that makes an arrow.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Where each room's code names a sibling: (from, to), both written whole (`serve::http::post`),
/// to the first place it does.
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

/// The module a file of `src` is: `["serve", "http", "post"]` for `src/serve/http/post.rs` (or
/// `.../post/mod.rs`); empty for the crate root (`lib.rs`, `main.rs`); `None` for `src/bin`,
/// crates of their own.
fn module(src: &Path, file: &Path) -> Option<Vec<String>> {
    let relative = file.strip_prefix(src).ok()?;
    let mut parts = relative
        .components()
        .map(|c| c.as_os_str().to_str().map(str::to_owned))
        .collect::<Option<Vec<String>>>()?;
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    let root = parts.is_empty() && matches!(stem, "lib" | "main");
    if !(root || stem == "mod") {
        parts.push(stem.to_owned());
    }
    Some(parts)
}

/// The code of a file without its tests and comments: a `#[cfg(test)]` module (to its closing
/// brace) and a `#[cfg(test)]` import (to its `;`) are left out; any other `#[cfg(test)]` item is
/// read (it may make an arrow that is not there, never hide one that is).
fn code(text: &str) -> String {
    let text: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = rest[at + "#[cfg(test)]".len()..].trim_start();
        let skipped = if item.starts_with("mod ") {
            test_module_end(item)
        } else if item.starts_with("use ") {
            item.find(';').map_or(item.len(), |end| end + 1)
        } else {
            0
        };
        rest = &item[skipped..];
    }
    out.push_str(rest);
    out
}

/// Where the module `text` starts with ends: after its matching closing brace (or at `;`, for
/// `mod x;`).
fn test_module_end(text: &str) -> usize {
    let mut depth = 0usize;
    for (at, c) in text.char_indices() {
        match c {
            ';' if depth == 0 => return at + 1,
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return at + 1;
                }
            }
            _ => {}
        }
    }
    text.len()
}

fn ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths a use-tree names, read from the start of `text` (what follows `crate::`, or from
/// `self::` or `super::` on): `a::b` and `{a, b::{c, self}}`, each as its segments (`self` adds
/// none; `super` is kept, for [`resolved`]). Returns them and how much of `text` they took.
fn tree(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut at = 0;
    let mut prefix: Vec<String> = Vec::new();
    loop {
        let rest = &text[at..];
        if let Some(group) = rest.strip_prefix('{') {
            at += 1;
            let mut out = Vec::new();
            let mut inside = group;
            loop {
                let skipped =
                    inside.len() - inside.trim_start_matches([' ', '\n', '\t', ',']).len();
                at += skipped;
                inside = &inside[skipped..];
                if inside.is_empty() || inside.starts_with('}') {
                    at += usize::from(!inside.is_empty());
                    return (out, at);
                }
                let (paths, took) = tree(inside);
                // Past at least one character: what no path starts with is skipped.
                let mut took = took.max(inside.chars().next().map_or(1, char::len_utf8));
                // `a::B as C`: the new name is no path.
                let after = &inside[took..];
                if let Some(renamed) = after.trim_start().strip_prefix("as ") {
                    let name = renamed.trim_start();
                    let name_len = name.find(|c: char| !ident(c)).unwrap_or(name.len());
                    took = inside.len() - name.len() + name_len;
                }
                at += took;
                inside = &inside[took..];
                out.extend(paths.into_iter().map(|p| [prefix.clone(), p].concat()));
            }
        }
        let end = rest.find(|c: char| !ident(c)).unwrap_or(rest.len());
        if end == 0 {
            return (vec![prefix], at);
        }
        if &rest[..end] != "self" {
            prefix.push(rest[..end].to_owned());
        }
        at += end;
        match text[at..].strip_prefix("::") {
            Some(_) => at += 2,
            None => return (vec![prefix], at),
        }
    }
}

/// The modules' paths that the code of `module` names, whole (`crate::`, `super::`, `self::`
/// resolved), each with the line it starts on.
fn named(code: &str, module: &[String]) -> Vec<(Vec<String>, String)> {
    let line_of = |at: usize| {
        let start = code[..at].rfind('\n').map_or(0, |n| n + 1);
        let end = code[at..].find('\n').map_or(code.len(), |n| at + n);
        code[start..end].trim().to_owned()
    };
    let mut out = Vec::new();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let word_start = !code[..at].chars().next_back().is_some_and(ident);
        // `crate::` starts from the root; `self::` and `super::` from this module, the path
        // keeping its `self`s and `super`s for [`resolved`].
        let base = if !word_start {
            None
        } else if rest.starts_with("crate::") {
            Some((Vec::new(), "crate::".len()))
        } else if rest.starts_with("self::") || rest.starts_with("super::") {
            Some((module.to_vec(), 0))
        } else {
            None
        };
        let Some((base, taken)) = base else {
            at += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        let (paths, took) = tree(&rest[taken..]);
        out.extend(
            paths
                .into_iter()
                .map(|p| (resolved([base.clone(), p].concat()), line_of(at))),
        );
        at += taken + took;
    }
    out
}

/// A path with the `super`s inside it resolved (`self::super::q`, `use super::{super::q}`): each
/// takes away the segment before it.
fn resolved(path: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(path.len());
    for segment in path {
        if segment == "super" {
            out.pop();
        } else {
            out.push(segment);
        }
    }
    out
}

/// The arrows between sibling rooms of the crate whose `src` this is.
fn arrows_of(src: &Path) -> Arrows {
    let mut files = Vec::new();
    sources(src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().filter_map(|f| module(src, f)).collect();
    let mut out = Arrows::new();
    for file in &files {
        let Some(from) = module(src, file) else {
            continue;
        };
        let text = std::fs::read_to_string(file).expect("a source file");
        for (path, line) in named(&code(&text), &from) {
            // The module named: the longest start of the path that is one (the rest are items).
            let Some(to) = (0..=path.len())
                .rev()
                .map(|n| &path[..n])
                .find(|m| modules.contains(*m))
            else {
                continue;
            };
            // Where the two part: their rooms there are siblings, unless one holds the other.
            let shared = from.iter().zip(to).take_while(|(a, b)| a == b).count();
            if shared < from.len() && shared < to.len() {
                let at = file.strip_prefix(src).unwrap_or(file).display().to_string();
                out.entry((from[..=shared].join("::"), to[..=shared].join("::")))
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

/// A circle of files under one module is found too, however its paths are written (`super::`,
/// `self::`, `crate::` written whole, groups over lines, renames); naming the parent's items or
/// a child's makes no arrow.
#[test]
fn a_circle_of_siblings_is_found() {
    let dir = moniker_fixture::scratch().join("src");
    let files = [
        ("lib.rs", "mod x;\n"),
        ("x.rs", "mod p;\nmod q;\nmod r;\npub struct Top;\n"),
        (
            "x/p.rs",
            "mod deep;\nuse super::{\n    Top,\n    q::{self, Q as Queue},\n};\n",
        ),
        ("x/p/deep.rs", "use super::super::Top;\n"),
        (
            "x/q.rs",
            "#[cfg(test)]\nuse super::p::T;\nfn f() { crate::x::r::g() }\nuse self::inner::Z;\n#[cfg(test)]\nmod tests { fn t() { super::super::p::u() } }\n",
        ),
        ("x/r.rs", "use self::super::{super::x::p::deep::D};\n"),
    ];
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("dirs");
        std::fs::write(&path, text).expect("a file");
    }
    let arrows = arrows_of(&dir);
    assert_eq!(
        arrows.keys().cloned().collect::<Vec<_>>(),
        [
            ("x::p".to_owned(), "x::q".to_owned()),
            ("x::q".to_owned(), "x::r".to_owned()),
            ("x::r".to_owned(), "x::p".to_owned()),
        ]
    );
    assert_eq!(
        arrows[&("x::p".to_owned(), "x::q".to_owned())],
        "x/p.rs: use super::{"
    );
    assert_eq!(circles(&arrows), [["x::p", "x::q", "x::r"]]);
    std::fs::write(dir.join("x/r.rs"), "use super::Top;\n").expect("r");
    assert!(circles(&arrows_of(&dir)).is_empty());
}

/// Functions over 80 lines or 6 parameters (`clippy.toml`) were once marked
/// `#[expect(clippy::..., reason = "not split yet: ...")]`, and their number could only go
/// down. It reached none: every function of the crates and the benchmarks (tests aside) is
/// within those bounds, and clippy fails on a new one. This keeps it so: no function is marked,
/// and out of tests neither lint is named at all.
/// The reason those `expect`s give.
const NOT_SPLIT_REASON: &str = "not split yet: see CONTRIBUTING.md";
/// The lints that bound a function's length and parameters.
const LENGTH_LINTS: [&str; 2] = ["clippy::too_many_lines", "clippy::too_many_arguments"];

#[test]
fn no_function_is_let_past_the_length_lints() {
    let mut files = Vec::new();
    for top in ["crates", "bench"] {
        sources(&workspace().join(top), &mut files);
    }
    // Tests may be long (a scenario reads top to bottom): their files are exempt.
    let is_test =
        |f: &Path| f.components().any(|c| c.as_os_str() == "tests") || f.ends_with("tests.rs");
    let marked: Vec<String> = files
        .iter()
        .filter(|f| !f.components().any(|c| c.as_os_str() == "target"))
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            let test = is_test(f);
            text.lines()
                .enumerate()
                // The reason, written whole (rustfmt may put it on a line of its own); or, out
                // of tests, the lints named at all (an `allow` with another reason, or none,
                // would let a long function in unseen).
                .filter(|(_, l)| {
                    l.contains(&format!("reason = \"{NOT_SPLIT_REASON}\""))
                        || (!test && LENGTH_LINTS.iter().any(|lint| l.contains(lint)))
                })
                .map(|(n, _)| format!("{}:{}", f.display(), n + 1))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        marked.is_empty(),
        "{} functions are let past the length lints: split them instead\n{}",
        marked.len(),
        marked.join("\n")
    );
}
