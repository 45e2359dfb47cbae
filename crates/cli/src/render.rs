//! The one place that turns config errors and naming diagnostics into reports for people:
//! `error[code]: message`, the config line with a label under the entry, the notes, and the
//! help (a did-you-mean, or a ready-to-paste YAML fix whose indentation is kept).
//!
//! Snippets are drawn by miette's graphical handler. Output is deterministic: ASCII without
//! color unless stderr is a terminal, and no line wrapping, so that a YAML fix can be pasted
//! as printed and snapshots do not depend on the terminal.

use std::error::Error;
use std::fmt::{self, Write as _};
use std::io::IsTerminal as _;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceCode};
use moniker_config::{ConfigReport, Source, Span};
use moniker_surface::vocab::{Seg, path};
use moniker_surface::{Diagnostic, Severity};

/// How reports look: plain ASCII for pipes, files and tests; unicode, and color unless
/// `NO_COLOR` is set, on a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renderer {
    unicode: bool,
    color: bool,
}

impl Renderer {
    /// ASCII, no color: the same bytes everywhere.
    pub fn plain() -> Self {
        Self {
            unicode: false,
            color: false,
        }
    }

    /// What suits stderr: plain unless it is a terminal; no color when `NO_COLOR` is set.
    pub fn for_stderr() -> Self {
        if !std::io::stderr().is_terminal() {
            return Self::plain();
        }
        Self {
            unicode: true,
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    /// Every error of an invalid config file, in file order.
    pub fn config_report(&self, report: &ConfigReport) -> String {
        let source = NamedSource::new(&report.file_name, report.text.clone());
        let reports: Vec<String> = report
            .errors
            .iter()
            .map(|error| {
                let label = (!error.path.is_empty()).then(|| error.path.clone());
                let mut labels = Vec::new();
                if let Some(span) = error.span {
                    labels.push(LabeledSpan::new_primary_with_span(label, miette_span(span)));
                }
                self.one(&Report {
                    severity: Severity::Error,
                    code: error.code,
                    message: &error.message,
                    source: &source,
                    labels,
                    unplaced: (error.span.is_none() && !error.path.is_empty())
                        .then_some(error.path.as_str()),
                    notes: &[],
                    help: error.help.as_deref(),
                })
            })
            .collect();
        reports.join("\n")
    }

    /// Naming diagnostics, each shown at the config entry it is about (or the closest entry
    /// that has a place in the file); the ones about listings alone have no snippet.
    ///
    /// When several are fixed by renames (or a server prefix fixes them all), each is shown
    /// once without its own fix, the ones with no place in the file on one line each, and
    /// one fix for all follows: blocks pasted one after the other would repeat `tools:`.
    pub fn diagnostics(&self, source: &Source, diagnostics: &[Diagnostic]) -> String {
        let named = NamedSource::new(&source.file_name, source.text.clone());
        // Every rename is shown in one block after the reports, at column 0, so that it can be
        // pasted as printed (a block inside a report's help would be indented).
        let merged = diagnostics.iter().any(|d| !d.fix.renames.is_empty());
        // In file order, as config errors are; the ones with no place in the file last.
        let mut sorted: Vec<(Option<Span>, &Diagnostic)> = diagnostics
            .iter()
            .map(|d| (d.config_path.as_deref().and_then(|p| locate(source, p)), d))
            .collect();
        sorted.sort_by_key(|(span, _)| span.map_or(usize::MAX, |s| s.offset));
        let mut reports = Vec::new();
        let mut short = String::new();
        for (span, d) in sorted {
            let in_merged_fix = merged && !d.fix.renames.is_empty();
            if in_merged_fix && d.config_path.is_none() {
                short.push_str(&self.short(d));
                continue;
            }
            let mut labels = Vec::new();
            let mut unplaced = None;
            if let Some(path) = d.config_path.as_deref() {
                match span {
                    Some(span) => labels.push(LabeledSpan::new_primary_with_span(
                        Some(path.to_owned()),
                        miette_span(span),
                    )),
                    None => unplaced = Some(path),
                }
            }
            // Other entries the notes name (`as an alias at `tools.b.aliases[0]``) get a
            // label too, so that both sides of a conflict show in the file.
            for other in d.notes.iter().flat_map(|n| quoted(n)) {
                let is_path = other.contains(['.', '[']);
                if !is_path || Some(other) == d.config_path.as_deref() {
                    continue;
                }
                if let Some(span) = source.span(other) {
                    labels.push(LabeledSpan::new_with_span(
                        Some(other.to_owned()),
                        miette_span(span),
                    ));
                }
            }
            reports.push(self.one(&Report {
                severity: d.severity,
                code: d.code,
                message: &d.message,
                source: &named,
                labels,
                unplaced,
                notes: &d.notes,
                help: if in_merged_fix {
                    None
                } else {
                    d.help.as_deref()
                },
            }));
        }
        if !short.is_empty() {
            reports.push(short);
        }
        if merged {
            reports.push(self.merged_fix(source, diagnostics));
        }
        reports.join("\n")
    }

    /// One line: `error[naming::duplicate]: tool name `echo` is exposed twice (from
    /// `a/echo` and `b/echo`)`.
    fn short(&self, d: &Diagnostic) -> String {
        let theme = self.theme();
        let (style, level) = match d.severity {
            Severity::Error => (theme.styles.error, "error"),
            Severity::Warning => (theme.styles.warning, "warning"),
        };
        let origins: Vec<String> = d
            .fix
            .renames
            .iter()
            .map(|r| format!("`{}/{}`", r.server, r.origin))
            .collect();
        let origins = match origins.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => String::new(),
        };
        format!(
            "{} {} (from {origins})\n",
            style.style(format!("{level}[{}]:", d.code)),
            d.message
        )
    }

    /// The one fix for every diagnostic that renames: a server prefix when one resolves them
    /// all, then every rename in one block (per section), ready to paste.
    fn merged_fix(&self, source: &Source, diagnostics: &[Diagnostic]) -> String {
        let help = self.theme().styles.help.style("help:");
        let fixed: Vec<&Diagnostic> = diagnostics
            .iter()
            .filter(|d| !d.fix.renames.is_empty())
            .collect();
        let mut out = String::new();
        let count = match fixed.len() {
            1 => "the error above".to_owned(),
            2 => "both errors above".to_owned(),
            n => format!("all {n} errors above"),
        };
        // Of the servers a prefix would do for, the last in the file: more likely the copy.
        let prefix = diagnostics
            .iter()
            .flat_map(|d| &d.fix.prefix)
            .max_by_key(|id| {
                let at = path(&[Seg::Key(source.servers_key()), Seg::Key(id)]);
                source.span(&at).map(|s| s.offset)
            })
            .map(String::as_str);
        let mut servers: Vec<&str> = fixed
            .iter()
            .flat_map(|d| &d.fix.renames)
            .map(|r| r.server.as_str())
            .collect();
        servers.sort_unstable();
        servers.dedup();
        if let (Some(server), [a, b]) = (prefix, servers.as_slice()) {
            let _ = writeln!(
                out,
                "{help} {count} {} between servers `{a}` and `{b}`: the line `prefix: true` in server `{server}`'s entry (`{}.{server}`) resolves {} (its names then start with `{server}`)",
                if fixed.len() == 1 { "is" } else { "are" },
                source.servers_key(),
                if fixed.len() == 1 { "it" } else { "them" },
            );
            let _ = write!(out, "{help} or rename each one;");
        } else {
            let _ = write!(out, "{help} one fix for {count}:");
        }
        // Each item once, tools first; the first name suggested for it wins (what `--fix`
        // writes).
        let sections = crate::fix::sections(&crate::fix::renames(diagnostics));
        let existing: Vec<String> = sections
            .iter()
            .filter(|(section, _)| source.span(section).is_some())
            .map(|(section, _)| format!("`{section}:`"))
            .collect();
        // `moniker check --fix` writes it; printed, it is pasted as it is: appended to the
        // file, or, for a section the file has, each line under it.
        if existing.is_empty() {
            let _ = writeln!(
                out,
                " add to the end of {} (or run `moniker check --fix`):",
                source.file_name
            );
        } else {
            let _ = writeln!(
                out,
                " add to {} under its {} (or run `moniker check --fix`):",
                source.file_name,
                existing.join(" and ")
            );
        }
        for (section, lines) in sections {
            if source.span(section).is_none() {
                let _ = writeln!(out, "{section}:");
            }
            for line in lines {
                let _ = writeln!(out, "  {line}");
            }
        }
        out
    }

    /// A runtime failure: `error: message`, then each cause on its own line.
    pub fn failure(&self, error: &(dyn Error + 'static)) -> String {
        let theme = self.theme();
        let mut out = format!("{}: {error}", theme.styles.error.style("error"));
        for cause in std::iter::successors(error.source(), |&e| e.source()) {
            out.push_str(&format!("\n  caused by: {cause}"));
        }
        out.push('\n');
        out
    }

    fn theme(&self) -> GraphicalTheme {
        match (self.unicode, self.color) {
            (false, false) => GraphicalTheme::none(),
            (false, true) => GraphicalTheme::ascii(),
            (true, false) => GraphicalTheme::unicode_nocolor(),
            (true, true) => GraphicalTheme::unicode(),
        }
    }

    fn one(&self, report: &Report<'_>) -> String {
        let mut theme = self.theme();
        // The severity mark miette puts before the message becomes `error[code]:`, so that a
        // report starts the way rustc's do.
        theme.characters.error = format!("error[{}]:", report.code);
        theme.characters.warning = format!("warning[{}]:", report.code);
        let label_style = theme.styles.help;
        let handler = GraphicalReportHandler::new_themed(theme)
            .with_wrap_lines(false)
            .with_links(false)
            .without_cause_chain();
        let mut rendered = String::new();
        // Writing to a String cannot fail, and the handler only fails when its writer does.
        let _ = handler.render_report(&mut rendered, report);
        // miette indents the message line by two: the code starts the report, as in rustc.
        // Its blank source lines end in spaces, which editors strip from snapshots: cut them.
        let mut out: String = rendered
            .strip_prefix("  ")
            .unwrap_or(&rendered)
            .lines()
            .flat_map(|line| [line.trim_end(), "\n"])
            .collect();
        if let Some(path) = report.unplaced {
            let _ = writeln!(
                out,
                "  {} `{path}` in {}",
                label_style.style("at:"),
                report.source.name()
            );
        }
        for note in report.notes {
            let _ = writeln!(out, "  {} {note}", label_style.style("note:"));
        }
        if let Some(help) = report.help {
            // Continuation lines line up under the first one, so YAML keeps its shape.
            let help = help.replace('\n', "\n        ");
            let _ = writeln!(out, "  {} {help}", label_style.style("help:"));
        }
        out
    }
}

/// One report, as miette sees it. The code and severity are drawn by the theme (see
/// [`Renderer::one`]); notes and help are added after the snippet.
struct Report<'a> {
    severity: Severity,
    code: &'static str,
    message: &'a str,
    source: &'a NamedSource<String>,
    labels: Vec<LabeledSpan>,
    /// A config path that has no place in the file, said in words instead.
    unplaced: Option<&'a str>,
    notes: &'a [String],
    help: Option<&'a str>,
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Report")
            .field("code", &self.code)
            .field("message", &self.message)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message)
    }
}

impl Error for Report<'_> {}

impl miette::Diagnostic for Report<'_> {
    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(self.source)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.labels.is_empty() {
            return None;
        }
        Some(Box::new(self.labels.iter().cloned()))
    }
}

fn miette_span(span: Span) -> miette::SourceSpan {
    (span.offset, span.len).into()
}

/// The span of `path`, else of its closest ancestor that has one: a diagnostic about
/// `tools.x.aliases[1]` still points into `tools.x` when only that entry was recorded.
pub fn locate(source: &Source, path: &str) -> Option<Span> {
    let mut path = path;
    loop {
        if let Some(span) = source.span(path) {
            return Some(span);
        }
        path = parent(path)?;
    }
}

/// `path` without its last segment (`.key`, `."quoted key"` or `[i]`); `None` at the top.
fn parent(path: &str) -> Option<&str> {
    let mut last = None;
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in path.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '.' | '[' if !quoted && i > 0 => last = Some(i),
            _ => {}
        }
    }
    last.map(|i| &path[..i])
}

/// The text between each pair of backticks.
fn quoted(text: &str) -> impl Iterator<Item = &str> {
    text.split('`').skip(1).step_by(2)
}

#[cfg(test)]
mod tests;
