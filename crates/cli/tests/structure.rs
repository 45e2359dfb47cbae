//! The shape of the code, kept ("A house that keeps its shape"): no circle of modules inside
//! a crate, at any depth. The rooms are the modules that share a parent: the crate's top-level
//! ones (`crate::view`, `crate::gateway`, each with the files below it), and the children of
//! every module (`serve/http/post.rs`, `serve/http/sessions.rs`, an inline `mod m { .. }`, with
//! what is below each). An arrow goes from one room to a sibling when its code names the
//! sibling (`use crate::view::View`, `use super::post::{Mode, answer}`, `super::stream::sse(..)`,
//! a bare `post::answer` after `use super::*`); a module naming its parent's items, or its own
//! children's, makes none. The code is read as the compiler reads it (`syn`): `use` trees,
//! paths, and the paths in a macro call's tokens, not strings or comments. Tests (`tests.rs`,
//! any item under `#[cfg(test)]`, wherever it is) are left out: they may look anywhere. A
//! circle fails with the rooms on it and a line of each that makes an arrow.

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

/// Whether an item's attributes put it under `#[cfg(test)]`.
fn for_tests(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|list| list.tokens.to_string() == "test")
    })
}

/// The attributes of an item of any kind.
fn attributes(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item;
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Whether `items` import all of their parent's names (`use super::*`).
fn imports_parent(items: &[syn::Item]) -> bool {
    items.iter().any(|item| match item {
        syn::Item::Use(u) if !for_tests(&u.attrs) => matches!(
            &u.tree,
            syn::UseTree::Path(p) if p.ident == "super" && matches!(*p.tree, syn::UseTree::Glob(_))
        ),
        _ => false,
    })
}

/// The modules of a file's code, read as the compiler reads them: `module` itself, each inline
/// `mod m { .. }` (but tests') below it, and the modules it declares for tests
/// (`#[cfg(test)] mod tests;`), whose files are left out.
fn modules_in(
    items: &[syn::Item],
    module: &[String],
    out: &mut BTreeSet<Vec<String>>,
    tests: &mut BTreeSet<Vec<String>>,
) {
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        let path = [module, &[m.ident.to_string()]].concat();
        if for_tests(&m.attrs) {
            tests.insert(path);
        } else if let Some((_, inner)) = &m.content {
            modules_in(inner, &path, out, tests);
            out.insert(path);
        }
    }
}

/// What the code of one file names: each path (`use` trees, paths of items, types and
/// expressions, and those in a macro call's tokens) whole, as the module it is written in sees
/// it (`crate::`, `self::` and `super::` resolved; a sibling's bare name after `use super::*`),
/// with its line. Items under `#[cfg(test)]` are left out: tests may look anywhere.
struct Reader<'m> {
    modules: &'m BTreeSet<Vec<String>>,
    /// The module being read, and whether it imports all of its parent's names.
    at: Vec<String>,
    glob: bool,
    /// (the module that names, the path named, its line)
    out: Vec<(Vec<String>, Vec<String>, usize)>,
}

impl Reader<'_> {
    /// Keeps `segments` (as written, on `line`) when they name something of this crate.
    fn name(&mut self, segments: Vec<String>, line: usize) {
        let Some(first) = segments.first().cloned() else {
            return;
        };
        let base = match first.as_str() {
            "crate" => Vec::new(),
            "self" | "super" => self.at.clone(),
            name if self.glob && !self.at.is_empty() => {
                let parent = &self.at[..self.at.len() - 1];
                let sibling = [parent, &[name.to_owned()]].concat();
                if !self.modules.contains(&sibling) {
                    return;
                }
                parent.to_vec()
            }
            _ => return,
        };
        let rest = segments
            .into_iter()
            .skip(usize::from(first == "crate"))
            .filter(|s| s != "self");
        let path = resolved(base.into_iter().chain(rest).collect());
        self.out.push((self.at.clone(), path, line));
    }

    /// The paths a `use` tree names, after `prefix`.
    fn tree(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>, line: usize) {
        use syn::UseTree;
        match tree {
            UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.tree(&p.tree, prefix, p.ident.span().start().line);
                prefix.pop();
            }
            UseTree::Name(n) => {
                self.name([prefix.clone(), vec![n.ident.to_string()]].concat(), line)
            }
            UseTree::Rename(r) => {
                self.name([prefix.clone(), vec![r.ident.to_string()]].concat(), line)
            }
            UseTree::Glob(_) => self.name(prefix.clone(), line),
            UseTree::Group(g) => g.items.iter().for_each(|t| self.tree(t, prefix, line)),
        }
    }

    /// The paths in a macro call's tokens: `crate::`, `self::` or `super::` and the names
    /// after it (strings are no tokens of this kind).
    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        use proc_macro2::TokenTree;
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id)
                    if ["crate", "self", "super"].contains(&id.to_string().as_str()) =>
                {
                    let line = id.span().start().line;
                    let mut segments = vec![id.to_string()];
                    while let [
                        TokenTree::Punct(a),
                        TokenTree::Punct(b),
                        TokenTree::Ident(next),
                        ..,
                    ] = &tokens[i + 1..]
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        segments.push(next.to_string());
                        i += 3;
                    }
                    if segments.len() > 1 {
                        self.name(segments, line);
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> syn::visit::Visit<'ast> for Reader<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !for_tests(attributes(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !for_tests(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let Some((_, items)) = &m.content else { return };
        self.at.push(m.ident.to_string());
        let glob = std::mem::replace(&mut self.glob, imports_parent(items));
        items.iter().for_each(|item| self.visit_item(item));
        self.glob = glob;
        self.at.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.tree(&u.tree, &mut Vec::new(), u.use_token.span.start().line);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if let Some(first) = path.segments.first() {
            let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.name(segments, first.ident.span().start().line);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }
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
    let parsed: Vec<(PathBuf, Vec<String>, String, syn::File)> = files
        .into_iter()
        .filter_map(|file| {
            let module = module(src, &file)?;
            let text = std::fs::read_to_string(&file).expect("a source file");
            let code = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            Some((file, module, text, code))
        })
        .collect();
    let mut modules = BTreeSet::new();
    let mut tests = BTreeSet::new();
    for (_, module, _, code) in &parsed {
        modules.insert(module.clone());
        modules_in(&code.items, module, &mut modules, &mut tests);
    }
    let for_tests = |m: &[String]| tests.iter().any(|t| m.starts_with(t));
    let mut out = Arrows::new();
    for (file, module, text, code) in parsed.iter().filter(|(_, m, _, _)| !for_tests(m)) {
        let mut reader = Reader {
            modules: &modules,
            at: module.clone(),
            glob: imports_parent(&code.items),
            out: Vec::new(),
        };
        syn::visit::Visit::visit_file(&mut reader, code);
        for (from, path, line) in reader.out {
            // The module named: the longest start of the path that is one (the rest are items).
            let Some(to) = (0..=path.len())
                .rev()
                .map(|n| &path[..n])
                .find(|m| modules.contains(*m) && !for_tests(m))
            else {
                continue;
            };
            // Where the two part: their rooms there are siblings, unless one holds the other.
            let shared = from.iter().zip(to).take_while(|(a, b)| a == b).count();
            if shared < from.len() && shared < to.len() {
                let at = file.strip_prefix(src).unwrap_or(file).display().to_string();
                let said = text.lines().nth(line.saturating_sub(1)).unwrap_or_default();
                out.entry((from[..=shared].join("::"), to[..=shared].join("::")))
                    .or_insert_with(|| format!("{at}:{line}: {}", said.trim()));
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
    for krate in ["surface", "model", "config", "gateway", "cli", "fixture"] {
        let src = root.join("crates").join(krate).join("src");
        let arrows = arrows_of(&src);
        assert!(
            !arrows.is_empty() || matches!(krate, "fixture" | "model"),
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
        "x/p.rs:4: q::{self, Q as Queue},"
    );
    assert_eq!(circles(&arrows), [["x::p", "x::q", "x::r"]]);
    std::fs::write(dir.join("x/r.rs"), "use super::Top;\n").expect("r");
    assert!(circles(&arrows_of(&dir)).is_empty());
}

/// The code is read as the compiler reads it: an inline module is a room of its own, whose
/// `super` is the file's module and which names a sibling bare after `use super::*`; a path in
/// a macro call's tokens is read, one in a string or a comment is not; an item under
/// `#[cfg(test)]` (a function, an impl's method, a module declared for tests) is left out.
#[test]
fn what_the_compiler_reads_is_read() {
    let dir = moniker_fixture::scratch().join("src");
    std::fs::create_dir_all(&dir).expect("dirs");
    let a = "pub fn f() {}
mod other {
    pub fn o() {}
}
mod inner {
    use super::*;
    fn g() {
        other::o();
        super::super::b::h()
    }
}
";
    let c = "pub fn k() -> &'static str { \"crate::a::f\" }
#[cfg(test)]
fn t() { crate::a::f() }
struct S;
impl S {
    #[cfg(test)]
    fn t() { crate::a::f() }
}
";
    let files = [
        ("lib.rs", "mod a;\nmod b;\nmod c;\n#[cfg(test)]\nmod d;\n"),
        ("a.rs", a),
        ("b.rs", "pub fn h() { format!(\"{}\", crate::c::k()); }\n"),
        ("c.rs", c),
        ("d.rs", "pub fn t() { crate::a::f() }\n"),
    ];
    for (path, text) in files {
        std::fs::write(dir.join(path), text).expect("a file");
    }
    let arrows = arrows_of(&dir);
    let arrow = |from: &str, to: &str| (from.to_owned(), to.to_owned());
    assert_eq!(
        arrows.keys().cloned().collect::<Vec<_>>(),
        [
            arrow("a", "b"),
            arrow("a::inner", "a::other"),
            arrow("b", "c")
        ]
    );
    assert_eq!(arrows[&arrow("a", "b")], "a.rs:9: super::super::b::h()");
    assert_eq!(
        arrows[&arrow("a::inner", "a::other")],
        "a.rs:8: other::o();"
    );
    // A path in a macro's tokens closes the circle.
    std::fs::write(dir.join("c.rs"), "pub fn k() { m!(super::a::f) }\n").expect("c");
    assert_eq!(circles(&arrows_of(&dir)), [["a", "b", "c"]]);
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

/// The gateway's architecture walk (`crates/gateway/README.md`) names every file of the crate
/// (a test file aside): by its path under `src`, or, for a file in a folder, by its folder and
/// name (`http/layers.rs`) as the walk's indented entries write it. A file the walk misses
/// fails here, so the map never falls behind the code again (it missed 17).
#[test]
fn the_gateway_walk_names_every_file() {
    let root = workspace().join("crates/gateway");
    let walk = std::fs::read_to_string(root.join("README.md")).expect("the walk");
    let named = |entry: &str| {
        walk.match_indices(entry).any(|(at, _)| {
            let before = walk[..at].chars().next_back();
            !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/')
        })
    };
    let src = root.join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut missing = Vec::new();
    for file in files {
        let path = file.strip_prefix(&src).expect("under src");
        let whole = path.to_string_lossy().into_owned();
        let parts: Vec<&str> = whole.split('/').collect();
        let short = parts[parts.len().saturating_sub(2)..].join("/");
        if !named(&whole) && !named(&short) {
            missing.push(whole);
        }
    }
    assert!(
        missing.is_empty(),
        "crates/gateway/README.md does not name: {missing:?}"
    );
}

/// The gateway's state has one owner per job: `Gateway` holds its parts (servers, naming,
/// services, control) and its settings, not the parts' state; a client's `Peer` and a server's
/// `Connection` hold their 2026-07-28 state in `modern/` types. Each struct's fields are counted
/// where it is defined, and a new one past its bound fails here: it belongs in a part.
const FIELD_BOUNDS: [(&str, &str, usize); 3] = [
    ("src/gateway.rs", "Gateway", 8),
    ("src/hub.rs", "Peer", 12),
    ("src/connect.rs", "Connection", 12),
];

/// The fields of struct `name` in the file `text`, by their names.
fn fields_of(text: &str, name: &str) -> Option<Vec<String>> {
    let file = syn::parse_file(text).expect("the file parses");
    file.items.iter().find_map(|item| match item {
        syn::Item::Struct(s) if s.ident == name => Some(
            s.fields
                .iter()
                .enumerate()
                .map(|(i, f)| f.ident.as_ref().map_or(i.to_string(), ToString::to_string))
                .collect(),
        ),
        _ => None,
    })
}

#[test]
fn the_gateway_peer_and_connection_hold_parts_not_state() {
    let src = workspace().join("crates/gateway");
    for (file, name, most) in FIELD_BOUNDS {
        let text = std::fs::read_to_string(src.join(file)).expect("the file");
        let fields = fields_of(&text, name).unwrap_or_else(|| panic!("{file} defines {name}"));
        assert!(
            fields.len() <= most,
            "{name} ({file}) has {} fields, at most {most}: {fields:?}; put the new state in the part that owns its job",
            fields.len()
        );
    }
    // The count is of the struct itself, tuple fields too.
    assert_eq!(
        fields_of("struct A { a: u8, b: u8 }\nstruct B(u8);", "B"),
        Some(vec!["0".to_owned()])
    );
}

/// The naming core builds no model code: the crates the search model needs for its forward
/// pass (`crates/model`'s dependencies, those the two share aside) are none of the naming
/// core's, and it does not depend on the model crate.
#[test]
fn the_naming_core_builds_no_model_code() {
    let root = workspace().join("crates");
    let dependencies = |krate: &str| -> BTreeSet<String> {
        let text =
            std::fs::read_to_string(root.join(krate).join("Cargo.toml")).expect("Cargo.toml");
        // The keys of its `[dependencies]` table (`name = ...` or `name.workspace = true`).
        text.lines()
            .skip_while(|l| l.trim() != "[dependencies]")
            .skip(1)
            .take_while(|l| !l.starts_with('['))
            .filter(|l| !l.trim_start().starts_with('#'))
            .filter_map(|l| l.split(['=', '.']).next())
            .map(|k| k.trim().to_owned())
            .filter(|k| !k.is_empty())
            .collect()
    };
    let core = dependencies("surface");
    let model = dependencies("model");
    assert!(
        model.contains("ndarray") && model.contains("safetensors"),
        "{model:?}"
    );
    let shared: BTreeSet<&str> = ["moniker-surface", "serde", "serde_json", "sha2"].into();
    let model_only: Vec<&String> = model
        .iter()
        .filter(|d| !shared.contains(d.as_str()))
        .collect();
    let built: Vec<&&String> = model_only.iter().filter(|d| core.contains(**d)).collect();
    assert!(
        built.is_empty(),
        "the naming core builds the model's {built:?}"
    );
    assert!(
        !core.contains("moniker-model"),
        "the naming core depends on the model"
    );
}

/// The length in lines of every function and method of the production code (`crates/*/src`,
/// tests aside): from `fn` to its closing brace.
fn function_lengths() -> Vec<usize> {
    use syn::visit::Visit;
    struct Lengths(Vec<usize>);
    impl Lengths {
        fn add(&mut self, sig: &syn::Signature, block: &syn::Block) {
            let from = sig.fn_token.span.start().line;
            let to = block.brace_token.span.close().end().line;
            self.0.push(to + 1 - from);
        }
    }
    impl<'a> Visit<'a> for Lengths {
        fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
            if !for_tests(&m.attrs) {
                syn::visit::visit_item_mod(self, m);
            }
        }
        fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
            if !for_tests(&f.attrs) {
                self.add(&f.sig, &f.block);
                syn::visit::visit_item_fn(self, f);
            }
        }
        fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
            if !for_tests(&f.attrs) {
                self.add(&f.sig, &f.block);
                syn::visit::visit_impl_item_fn(self, f);
            }
        }
        fn visit_trait_item_fn(&mut self, f: &'a syn::TraitItemFn) {
            if let Some(block) = &f.default {
                self.add(&f.sig, block);
            }
            syn::visit::visit_trait_item_fn(self, f);
        }
    }
    let mut lengths = Lengths(Vec::new());
    let crates = workspace().join("crates");
    for krate in std::fs::read_dir(&crates).expect("crates").flatten() {
        let mut files = Vec::new();
        sources(&krate.path().join("src"), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).expect("a source file");
            let parsed = syn::parse_file(&text).expect("the file parses");
            lengths.visit_file(&parsed);
        }
    }
    lengths.0.sort_unstable();
    lengths.0
}

/// The median function may not grow past this: the goal (9) is reached, and kept.
const MEDIAN_FUNCTION_AT_MOST: usize = 9;

/// One number of `CONTRIBUTING.md`'s table of what the guards keep: its row's `bound` or `now`.
fn stated(table: &str, measure: &str, column: usize) -> String {
    table
        .lines()
        .find_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            (cells.get(1) == Some(&measure)).then(|| cells.get(column).map(|c| (*c).to_owned()))
        })
        .flatten()
        .unwrap_or_else(|| panic!("CONTRIBUTING.md's table has no row `{measure}`"))
}

/// `CONTRIBUTING.md`'s numbers are the ones the guards keep and the code has: each bound is the
/// guard's (`FIELD_BOUNDS`, `clippy.toml`, the median's), each `now` is measured here. A
/// number that is no longer true fails, with the one to write.
#[test]
fn contributing_states_the_numbers_the_guards_keep() {
    let root = workspace();
    let text = std::fs::read_to_string(root.join("CONTRIBUTING.md")).expect("CONTRIBUTING.md");
    let clippy = std::fs::read_to_string(root.join("clippy.toml")).expect("clippy.toml");
    let threshold = |key: &str| {
        clippy
            .lines()
            .find_map(|l| l.strip_prefix(key)?.trim().strip_prefix('=').map(str::trim))
            .unwrap_or_else(|| panic!("clippy.toml sets {key}"))
            .to_owned()
    };
    let lengths = function_lengths();
    let median = lengths[lengths.len() / 2];
    let mut expected: Vec<(String, usize, String)> = vec![
        (
            "lines of a function".into(),
            2,
            threshold("too-many-lines-threshold"),
        ),
        (
            "parameters of a function".into(),
            2,
            threshold("too-many-arguments-threshold"),
        ),
        (
            "median function, in lines".into(),
            2,
            MEDIAN_FUNCTION_AT_MOST.to_string(),
        ),
        ("median function, in lines".into(), 3, median.to_string()),
        (
            "p90 function, in lines".into(),
            3,
            lengths[lengths.len() * 9 / 10].to_string(),
        ),
        (
            "functions of 70 lines or more".into(),
            3,
            lengths.iter().filter(|&&n| n >= 70).count().to_string(),
        ),
    ];
    let gateway = root.join("crates/gateway");
    for (file, name, most) in FIELD_BOUNDS {
        let code = std::fs::read_to_string(gateway.join(file)).expect("the file");
        let now = fields_of(&code, name).map_or(0, |f| f.len());
        let measure = format!("fields of `{name}`");
        expected.push((measure.clone(), 2, most.to_string()));
        expected.push((measure, 3, now.to_string()));
    }
    let wrong: Vec<String> = expected
        .iter()
        .filter(|(measure, column, value)| stated(&text, measure, *column) != *value)
        .map(|(measure, column, value)| {
            let which = if *column == 2 { "bound" } else { "now" };
            format!("`{measure}`: its {which} is {value}")
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "CONTRIBUTING.md's table says what is no longer true: {wrong:?}"
    );
    assert!(
        median <= MEDIAN_FUNCTION_AT_MOST,
        "the median function is {median} lines, at most {MEDIAN_FUNCTION_AT_MOST}: split the new long ones"
    );
}
