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
    pub fn diagnostics(&self, source: &Source, diagnostics: &[Diagnostic]) -> String {
        let named = NamedSource::new(&source.file_name, source.text.clone());
        // In file order, as config errors are; the ones with no place in the file last.
        let mut sorted: Vec<(Option<Span>, &Diagnostic)> = diagnostics
            .iter()
            .map(|d| (d.config_path.as_deref().and_then(|p| locate(source, p)), d))
            .collect();
        sorted.sort_by_key(|(span, _)| span.map_or(usize::MAX, |s| s.offset));
        let reports: Vec<String> = sorted
            .into_iter()
            .map(|(span, d)| {
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
                self.one(&Report {
                    severity: d.severity,
                    code: d.code,
                    message: &d.message,
                    source: &named,
                    labels,
                    unplaced,
                    notes: &d.notes,
                    help: d.help.as_deref(),
                })
            })
            .collect();
        reports.join("\n")
    }

    /// A runtime failure: `error: message`, then each cause on its own line.
    pub fn failure(&self, error: &(dyn Error + 'static)) -> String {
        let theme = self.theme();
        let mut out = format!("{}: {error}", theme.styles.error.style("error"));
        let mut cause = error.source();
        while let Some(e) = cause {
            out.push_str(&format!("\n  caused by: {e}"));
            cause = e.source();
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
