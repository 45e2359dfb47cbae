//! The renames `check` proposes for names exposed twice, as one list and as the config's text
//! with them written in: what `moniker check --fix` and `moniker install --import` write.

use moniker_surface::{Diagnostic, Rename};

/// Where the file as it was goes before a fix is written: `<file>.bak`.
pub(crate) fn backup_path(path: &std::path::Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".bak");
    std::path::PathBuf::from(name)
}

/// Every rename the diagnostics propose, each item once (the first name proposed for it wins),
/// tools first.
pub(crate) fn renames(diagnostics: &[Diagnostic]) -> Vec<&Rename> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for section in ["tools", "prompts"] {
        out.extend(
            diagnostics
                .iter()
                .flat_map(|d| &d.fix.renames)
                .filter(|r| r.section == section)
                .filter(|r| seen.insert((r.section, r.server.as_str(), r.origin.as_str()))),
        );
    }
    out
}

/// The lines of `renames` (`server/origin: { name: new }`) by section, tools first; a
/// section with none is left out.
pub(crate) fn sections(renames: &[&Rename]) -> Vec<(&'static str, Vec<String>)> {
    ["tools", "prompts"]
        .into_iter()
        .map(|section| (section, lines_of(renames, section)))
        .filter(|(_, lines)| !lines.is_empty())
        .collect()
}

/// The lines of the renames of `section`.
fn lines_of(renames: &[&Rename], section: &str) -> Vec<String> {
    renames
        .iter()
        .filter(|r| r.section == section)
        .map(|r| r.yaml())
        .collect()
}

/// `text` (a moniker config) with `renames` written in: each under its section (`tools:`,
/// `prompts:`) when the file has it at the top level in block style, else in a new section at
/// the end. `Err` when a section is written in flow style (`tools: { ... }`), which a line
/// cannot be added to: it names the section.
pub(crate) fn apply(text: &str, renames: &[&Rename]) -> Result<String, String> {
    let mut out = text.to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    for (section, lines) in sections(renames) {
        out = match find_section(&out, section) {
            Some(Section::Block { after, indent }) => {
                let block: String = lines
                    .iter()
                    .map(|l| format!("{}{l}\n", " ".repeat(indent)))
                    .collect();
                format!("{}{block}{}", &out[..after], &out[after..])
            }
            Some(Section::Flow) => {
                return Err(format!(
                    "`{section}:` is written in flow style (`{section}: {{ ... }}`): add the renames to it by hand"
                ));
            }
            None => {
                let mut appended = out;
                appended.push_str(&format!("{section}:\n"));
                for line in &lines {
                    appended.push_str(&format!("  {line}\n"));
                }
                appended
            }
        };
    }
    Ok(out)
}

enum Section {
    /// `section:` alone on its line: its children go from byte `after` on (the start of the
    /// next line), indented by `indent` (its first child's, else 2).
    Block { after: usize, indent: usize },
    /// `section: { ... }` or `section: []`.
    Flow,
}

/// Where the top-level key `section` is, and how it is written (`text` ends with a newline).
fn find_section(text: &str, section: &str) -> Option<Section> {
    let mut offset = 0;
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        offset += line.len();
        let Some(value) = line
            .strip_prefix(section)
            .and_then(|rest| rest.strip_prefix(':'))
        else {
            continue;
        };
        let value = value.split(" #").next().unwrap_or_default().trim();
        if !value.is_empty() {
            return Some(Section::Flow);
        }
        let indent = lines
            .peek()
            .map(|next| next.len() - next.trim_start_matches(' ').len())
            .filter(|n| *n > 0)
            .unwrap_or(2);
        return Some(Section::Block {
            after: offset,
            indent,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rename(section: &'static str, server: &str, origin: &str, name: &str) -> Rename {
        Rename {
            section,
            server: server.to_owned(),
            origin: origin.to_owned(),
            name: name.to_owned(),
        }
    }

    #[test]
    fn renames_go_under_the_sections_the_file_has_else_at_its_end() {
        let r = [
            rename("tools", "a", "search", "a_search"),
            rename("tools", "b", "search", "b_search"),
            rename("prompts", "a", "greet", "a_greet"),
        ];
        let all: Vec<&Rename> = r.iter().collect();
        let text = "servers:\n  a: { command: a }\ntools:\n    x: { aliases: [y] }\nnaming: { split: \"__\" }\n";
        assert_eq!(
            apply(text, &all).unwrap(),
            "servers:\n  a: { command: a }\ntools:\n    a/search: { name: a_search }\n    b/search: { name: b_search }\n    x: { aliases: [y] }\nnaming: { split: \"__\" }\nprompts:\n  a/greet: { name: a_greet }\n"
        );
        // No newline at the end: one is added first.
        assert_eq!(
            apply("servers: {}", &all[..1]).unwrap(),
            "servers: {}\ntools:\n  a/search: { name: a_search }\n"
        );
        // A key that only starts like the section, or one indented, is not it.
        assert_eq!(
            apply("toolsets:\n  r: {}\nx:\n  tools: 1\n", &all[..1]).unwrap(),
            "toolsets:\n  r: {}\nx:\n  tools: 1\ntools:\n  a/search: { name: a_search }\n"
        );
        assert!(apply("tools: { x: {} }\n", &all[..1]).is_err());
        assert_eq!(
            apply("tools:   # overrides\n", &all[..1]).unwrap(),
            "tools:   # overrides\n  a/search: { name: a_search }\n"
        );
    }
}
