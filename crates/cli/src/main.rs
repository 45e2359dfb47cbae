//! `moniker`, the binary: parses the command line, loads the config, runs a command, and turns
//! what happened into reports and an exit code (STYLE 9): 0 ok, 1 runtime failure, 2 usage,
//! 78 invalid config; a closed stdout pipe exits 0.
//!
//! It holds no naming logic (that is `moniker-surface`) and no protocol (that is
//! `moniker-gateway`). stdout is written only by [`output`]; logs go to stderr.

mod args;
mod audit;
mod call;
mod check;
mod clients;
mod doctor;
mod elicit;
mod exit;
mod fix;
mod install;
mod list;
mod lock;
mod lockdiff;
mod lockfile;
mod login;
mod output;
mod reload;
mod render;
mod serve;
mod settings;
mod shared;
mod start;
mod stats;
mod usage;

use std::ffi::OsString;
use std::io::{IsTerminal as _, Write};
use std::process::ExitCode;

use clap::Parser as _;
use moniker_config::{Config, LoadError};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

use crate::args::{Cli, Command};
use crate::exit::{Exit, Failure, is_broken_pipe};
use crate::render::Renderer;

/// The hidden first argument of the process guard: `moniker __guard -- CMD ARGS...` runs a
/// server as a child that dies with moniker (see `moniker_gateway::guard`).
const GUARD: &str = "__guard";

/// How far ahead [`keep_a_timer_ahead`] keeps a timer.
const TIMER_AHEAD: std::time::Duration = std::time::Duration::from_secs(1);

/// tokio wakes its timer driver each time a timer is set earlier than the earliest it knows,
/// and with no timer set, that is every call's deadline: a write to an eventfd and one more
/// turn of the event loop a call (seen with perf). A timer that fires each second, set again
/// each time, keeps the earliest within a second, later than which a call's deadline is (its
/// time-out, 60 s unless the config says less than a second).
async fn keep_a_timer_ahead() {
    let mut tick = tokio::time::interval(TIMER_AHEAD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
    }
}

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == GUARD) {
        init_logging(None, u64::MAX);
        let rest = match argv.get(2) {
            Some(dashes) if dashes == "--" => &argv[3..],
            _ => &argv[2..],
        };
        // The guard's code is the server's: its exit code, 1 when a signal ended it, 126 or
        // 127 when it could not start.
        std::process::exit(moniker_gateway::guard::run(rest));
    }

    let cli = Cli::parse();
    // `doctor` is a report: the gateway it starts says nothing on its own unless asked
    // (`--log`, `RUST_LOG`); what it saw is in the report.
    let quiet = matches!(cli.command, Command::Doctor) && std::env::var_os("RUST_LOG").is_none();
    // The shared gateway's stderr is its log file: bounded while it runs too.
    let log_most = match &cli.command {
        Command::Serve(args) if args.shared => shared::LOG_MOST,
        _ => u64::MAX,
    };
    init_logging(cli.log.as_deref().or(quiet.then_some("off")), log_most);
    match run(cli) {
        Ok(exit) => exit.into(),
        Err(failure) if is_broken_pipe(failure.as_ref()) => Exit::Ok.into(),
        Err(failure) => {
            output::report(&Renderer::for_stderr().failure(failure.as_ref()));
            Exit::Failure.into()
        }
    }
}

/// `moniker forget`: removes what search learned (or lists whose it keeps, with `--list`).
fn forget(args: &args::ForgetArgs) -> Result<Exit, Failure> {
    let Some(dir) = moniker_gateway::learned::default_dir() else {
        return Err("this platform has no state directory: search learns nothing here".into());
    };
    if args.list {
        let kept = moniker_gateway::learned::summary(&dir);
        if kept.is_empty() {
            output::line(&format!("search learned nothing yet ({})", dir.display()))?;
        }
        for (principal, lessons, tools) in kept {
            output::line(&format!(
                "{principal}: {lessons} requests for {tools} tools"
            ))?;
        }
        return Ok(Exit::Ok);
    }
    let removed = moniker_gateway::learned::forget(&dir, args.principal.as_deref())?;
    let whose = args
        .principal
        .as_deref()
        .map_or("every principal's".to_owned(), |p| format!("`{p}`'s"));
    output::line(&format!(
        "forgot {whose} lessons ({removed} file{} in {})",
        if removed == 1 { "" } else { "s" },
        dir.display()
    ))?;
    Ok(Exit::Ok)
}

fn run(cli: Cli) -> Result<Exit, Failure> {
    // Every command may make a value no one may guess (a session id, OAuth state, a temporary
    // file's name): without the system's randomness, none starts (`random`: no fallback).
    moniker_gateway::random::check()?;
    // These read the clients' files, and a config that may not exist yet or be invalid.
    match &cli.command {
        Command::Install(args) => return install::install(args, cli.config.as_deref()),
        Command::Uninstall(args) => return install::uninstall(args),
        Command::Doctor => return doctor::doctor(cli.config.as_deref()),
        Command::Schema => {
            output::line(moniker_config::schema().trim_end())?;
            return Ok(Exit::Ok);
        }
        Command::Forget(args) => return forget(args),
        _ => {}
    }
    let is_check = matches!(cli.command, Command::Check(_));
    let config = match load_config(cli.config.as_deref()) {
        Ok(config) => config,
        Err(ConfigFailure::Invalid(report)) => {
            output::report(&Renderer::for_stderr().config_report(&report));
            let summary = check::invalid_summary(&report);
            if is_check {
                output::line(&summary)?;
            } else {
                // stdout may be the protocol: the count goes with the report.
                output::report(&summary);
            }
            return Ok(Exit::InvalidConfig);
        }
        Err(ConfigFailure::Other(failure)) => return Err(failure),
    };
    if let Command::Check(args) = &cli.command {
        if args.offline {
            return check::offline(&config);
        }
    }
    // One thread serves best: every message crosses several tasks, and waking another thread
    // for each hop costs more than the work; that thread stays awake a moment after each
    // message ([`moniker_gateway::awake`]), so a fast answer costs no wake-up (measured: the p50
    // of a call through moniker over stdio, the shared gateway and HTTP drops by half).
    // `serve --http --threads N` spreads many callers over N threads instead.
    let threads = match &cli.command {
        Command::Serve(args) => args.threads.unwrap_or(1),
        _ => 1,
    };
    let runtime = if threads == 1 {
        moniker_gateway::awake::runtime(moniker_gateway::awake::WINDOW)?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.into())
            .enable_all()
            .build()?
    };
    runtime.block_on(async move {
        tokio::spawn(keep_a_timer_ahead());
        match cli.command {
            Command::Serve(args) => serve::serve(config, args).await,
            Command::Check(args) => check::online(config, args.locked, args.fix).await,
            Command::Lock(args) => lock::lock(config, args).await,
            Command::List(args) => list::list(config, args).await,
            Command::Call(args) => call::call(config, args).await,
            Command::Stats(args) => match args.from {
                Some(url) => usage::usage(&config, &url, args.token.as_deref()),
                None => stats::stats(config, args.json).await,
            },
            Command::Login(args) => login::login(config, args).await,
            Command::Logout(args) => login::logout(config, args),
            Command::People(args) => login::people(config, &args),
            Command::Install(_)
            | Command::Uninstall(_)
            | Command::Doctor
            | Command::Schema
            | Command::Forget(_) => {
                unreachable!("run before the config is loaded")
            }
        }
    })
}

enum ConfigFailure {
    Invalid(moniker_config::ConfigReport),
    Other(Failure),
}

fn load_config(explicit: Option<&std::path::Path>) -> Result<Config, ConfigFailure> {
    let Some(path) = moniker_config::find(explicit) else {
        return Err(ConfigFailure::Other(
            "no config file: pass `-c FILE`, set `MONIKER_CONFIG`, or create `./moniker.yaml`"
                .into(),
        ));
    };
    tracing::debug!(path = %path.display(), "loading config");
    let mut config = moniker_config::load(&path).map_err(|e| match e {
        LoadError::Invalid(report) => ConfigFailure::Invalid(report),
        e @ LoadError::Io { .. } => ConfigFailure::Other(e.into()),
    })?;
    config.rules.today =
        Some(crate::settings::today().map_err(|e| ConfigFailure::Other(e.into()))?);
    log_ignored_keys(&config);
    Ok(config)
}

/// A client's config file (Claude Desktop, Cursor, VS Code) is read for its servers; what
/// else it holds is the client's, and the user may want to know it was read past.
fn log_ignored_keys(config: &Config) {
    if !config.ignored_keys.is_empty() {
        tracing::info!(
            file = %config.source.file_name,
            keys = %config.ignored_keys.join(", "),
            "a client's config file: its servers are read, its own keys ignored"
        );
    }
}

/// What is logged: `--log`, else `RUST_LOG`, else `warn`.
fn env_filter(flag: Option<&str>) -> EnvFilter {
    let builder = EnvFilter::builder().with_default_directive(LevelFilter::WARN.into());
    match flag {
        // `args::log_filter` has checked it already.
        Some(directives) => builder.parse_lossy(directives),
        None => builder.from_env_lossy(),
    }
}

/// Logs go to stderr only: `--log`, else `RUST_LOG`, else `warn`; a stderr that is a file
/// starts anew past `most` bytes.
fn init_logging(flag: Option<&str>, most: u64) {
    tracing_subscriber::fmt()
        .with_env_filter(env_filter(flag))
        .with_writer(Logs { most })
        .with_ansi(colored_logs())
        .init();
}

/// Whether logs are in colour: on a terminal, unless `NO_COLOR` says not.
fn colored_logs() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Where a log event goes: stderr (cut past `most`), and for `warn` and above also to the
/// shared gateway's notices (its attached clients' stderr), when there is one to hear them.
struct Logs {
    most: u64,
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Tee;

    fn make_writer(&'a self) -> Self::Writer {
        Tee {
            log: LogLines(Cut {
                out: std::io::stderr(),
                most: self.most,
                written: &LOGGED,
            }),
            notice: false,
        }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        let mut writer = self.make_writer();
        writer.notice = *meta.level() <= tracing::Level::WARN
            && moniker_gateway::serve::shared::notices().receiver_count() > 0;
        writer
    }
}

/// The log, and the notice of a `warn` or worse event (see [`Logs`]).
struct Tee {
    log: LogLines<Cut<'static, std::io::Stderr>>,
    notice: bool,
}

impl Write for Tee {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        if self.notice {
            let event = one_event(buf);
            let text = String::from_utf8_lossy(&event);
            let _ = moniker_gateway::serve::shared::notices().send(text.into());
        }
        self.log.write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.log.flush()
    }
}

/// The bytes of log written since the log file last started anew.
static LOGGED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A log that is a file, cut (emptied) once more than `most` bytes have been written to it:
/// whatever a peer makes moniker say, however often, fills no disk. Each event is written
/// whole before the count is looked at, so a cut falls between events.
struct Cut<'c, W> {
    out: W,
    most: u64,
    written: &'c std::sync::atomic::AtomicU64,
}

impl<W: Write + std::os::fd::AsFd> Write for Cut<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        self.out.write_all(buf)?;
        let written = self.written.fetch_add(buf.len() as u64, Relaxed) + buf.len() as u64;
        if written > self.most && self.written.swap(0, Relaxed) > self.most {
            // Not a file (a pipe, a terminal): nothing to cut.
            // The same open file as `out`: emptied, and (when it was not opened to append)
            // written from its start again.
            let mut file = std::fs::File::from(self.out.as_fd().try_clone_to_owned()?);
            if file.metadata().is_ok_and(|m| m.is_file())
                && file.set_len(0).is_ok()
                && std::io::Seek::rewind(&mut file).is_ok()
            {
                self.out.write_all(
                    format!("(the log was cut here: {written} bytes were written, at most {} are kept)\n", self.most)
                        .as_bytes(),
                )?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Writes one log event (tracing writes each event whole, in one call) so that nothing in it
/// can pass for another event: a line end inside it is followed by an indent, a CR becomes a
/// space. A client's tool name or a server's stderr with `\n2026-11-24T… INFO …` in it stays
/// visibly part of the event that quoted it.
struct LogLines<W>(W);

/// One log event's bytes as [`LogLines`] writes them: a line end inside it followed by an
/// indent, a CR a space.
fn one_event(buf: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let body = buf.strip_suffix(b"\n").unwrap_or(buf);
    if !body.iter().any(|b| *b == b'\n' || *b == b'\r') {
        return std::borrow::Cow::Borrowed(buf);
    }
    let mut out = Vec::with_capacity(buf.len() + 16);
    for &b in body {
        match b {
            b'\n' => out.extend_from_slice(b"\n    "),
            b'\r' => out.push(b' '),
            _ => out.push(b),
        }
    }
    if body.len() < buf.len() {
        out.push(b'\n');
    }
    std::borrow::Cow::Owned(out)
}

impl<W: Write> Write for LogLines<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.0.write_all(&one_event(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_file_is_cut_past_its_most() {
        let path = std::env::temp_dir().join(format!("moniker-log-cut-{}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        let written = std::sync::atomic::AtomicU64::new(0);
        for i in 0..100 {
            let mut out = LogLines(Cut {
                out: &file,
                most: 1000,
                written: &written,
            });
            out.write_all(format!("{i:03} an event of forty bytes, or so....\n").as_bytes())
                .unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(text.len() <= 1000 + 100, "{} bytes kept", text.len());
        assert!(text.contains("(the log was cut here"), "{text}");
        assert!(text.ends_with("099 an event of forty bytes, or so....\n"));
        // Each event whole: every line is one event, or the cut's note.
        assert!(
            text.lines()
                .all(|l| l.ends_with("....") || l.starts_with("(the log was cut"))
        );
    }

    #[test]
    fn a_log_event_stays_one_event() {
        let mut out = LogLines(Vec::new());
        out.write_all(b"INFO tool `a\nERROR forged` \r unknown\n")
            .unwrap();
        assert_eq!(out.0, b"INFO tool `a\n    ERROR forged`   unknown\n");
        let mut out = LogLines(Vec::new());
        out.write_all(b"plain\n").unwrap();
        assert_eq!(out.0, b"plain\n");
    }
}
