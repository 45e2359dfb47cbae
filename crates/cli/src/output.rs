//! The only place that writes to stdout and stderr directly (STYLE 11): the workspace denies
//! the print macros, and in stdio mode stdout belongs to the protocol, so everything a command
//! prints for a human or a script goes through here. Logs go through `tracing` instead.

use std::io::{self, Write};

/// `text`'s lines, each after `width` spaces (trailing blank lines dropped).
pub fn indent(text: &str, width: usize) -> String {
    let pad = " ".repeat(width);
    text.trim_end()
        .lines()
        .map(|l| format!("{pad}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Writes `text` and a newline to stdout. A closed pipe (`moniker list | head -1`) comes back
/// as an `io::Error` of kind `BrokenPipe`, which `main` turns into exit code 0.
pub fn line(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.write_all(b"\n")?;
    out.flush()
}

/// Writes `text` to stderr, adding a newline if it lacks one: rendered reports and failures.
/// Errors are ignored: when stderr is gone there is nowhere left to say so.
pub fn report(text: &str) {
    let mut err = io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = err.write_all(b"\n");
    }
    let _ = err.flush();
}

/// A question on stderr, without a line end: the answer is typed after it.
pub fn prompt(text: &str) {
    let mut err = io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}
