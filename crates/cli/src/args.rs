//! The command line, as clap parses it. Usage errors exit with code 2 (clap's default).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use moniker_surface::Tag;
use serde_json::value::RawValue;

/// `moniker --version`: the version and the commit it was built from.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("MONIKER_COMMIT"),
    ")"
);

/// An MCP gateway that gives every tool and prompt of your MCP servers a clean, stable,
/// collision-free name.
#[derive(Debug, Parser)]
#[command(name = "moniker", version = VERSION, about, propagate_version = true)]
pub struct Cli {
    /// The config file. Else `$MONIKER_CONFIG`, else `./moniker.yaml`, else `moniker.yaml` in
    /// the user config dir.
    #[arg(short, long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Log filter for stderr: a level (`debug`) or `tracing` directives
    /// (`moniker_gateway=debug,warn`). Else `$RUST_LOG`, else `warn`.
    #[arg(long, global = true, value_name = "LEVEL", value_parser = log_filter)]
    pub log: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway: MCP on stdio (the default) or Streamable HTTP.
    Serve(ServeArgs),
    /// Check the config, connect to the servers and build the surface; print every
    /// diagnostic with its fix. Exit 0 ok, 1 runtime failure, 78 invalid config.
    Check(CheckArgs),
    /// The exposed surface (tools and prompts): name, aliases, server, origin name, tags.
    List(ListArgs),
    /// One tool call through the full pipeline; the result is printed.
    Call(CallArgs),
    /// Tools, bytes and tokens of the listing, per server and total.
    ///
    /// With `--from`: how often clients of a running gateway call each alias and legacy
    /// name, from its metrics, beside the deprecation schedule of each; and what its search
    /// did (searches by what followed them, each tool's bytes in answers beside its calls).
    Stats(StatsArgs),
    /// Write `moniker.lock` beside the config: every exposed name and alias, with its server,
    /// origin and schema hash, so that `moniker check` can tell when a change breaks a client.
    Lock(LockArgs),
    /// Log in to a remote server that asks for OAuth: the browser opens (`$BROWSER`, else
    /// the platform's opener; the URL is printed too), and the tokens are kept where only you
    /// can read them. `serve` and the other commands use and refresh them.
    Login(ServerArg),
    /// Forget the tokens moniker keeps for a remote server.
    Logout(ServerArg),
    /// Who is signed in to a server that acts as each person (`auth.per_person`), from the
    /// sealed sign-ins (`$MONIKER_SECRET_KEY` opens them); `--forget` signs one out (a running
    /// gateway asks them to sign in again at their next call).
    People(PeopleArgs),
    /// Put moniker in an MCP client's config (Claude Desktop, Claude Code, Cursor, VS Code):
    /// beside the client's servers, running the config `-c` (or the one moniker finds), or
    /// with `--import` in their place, the servers moved into a moniker config. The client's
    /// file is backed up first; a second run changes nothing.
    Install(InstallArgs),
    /// Take moniker out of a client's config: the servers `install --import` moved are put
    /// back, and the file is the backup again when nothing else changed.
    Uninstall(InstallArgs),
    /// Say what is wrong and what to do: the config used and why, each server's state, the
    /// names that collide, and the clients that run moniker.
    Doctor,
    /// Print the JSON Schema of `moniker.yaml`: for editors (the YAML language server checks
    /// a config against it as you type) and other tools.
    Schema,
    /// Forget what search learned from the calls that followed it (kept per principal in the
    /// user's state directory): everyone's, or one principal's. A running gateway forgets it
    /// too, at its next search.
    Forget(ForgetArgs),
}

#[derive(Debug, Clone, Args)]
pub struct PeopleArgs {
    /// The server's id in the config.
    pub server: String,
    /// Sign this person (their `sub`) out of the server.
    #[arg(long, value_name = "SUB")]
    pub forget: Option<String>,
    /// Set the secret NAME of the person `--for` names (a server run once for each person),
    /// its value read from stdin; their instance starts anew with it at their next call.
    #[arg(long, value_name = "NAME", requires = "for_person")]
    pub set: Option<String>,
    /// The person (their `sub` at `http.auth.issuer`) whose secret `--set` sets.
    #[arg(long = "for", value_name = "SUB", id = "for_person")]
    pub for_person: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ForgetArgs {
    /// Only this principal's, as `--list` names it: `stdio` (a client on stdio), `anyone` (the
    /// open HTTP endpoint), `token <digest>` (a token of `http.tokens`), `user <issuer> <sub>`
    /// (a person signed in at the identity provider).
    #[arg(long, value_name = "NAME")]
    pub principal: Option<String>,
    /// Say whose lessons are kept, and forget nothing.
    #[arg(long)]
    pub list: bool,
}

#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    /// The client.
    pub client: crate::clients::Client,
    /// Move the client's servers into a moniker config (beside the client's file, or `-c`),
    /// leaving moniker as the client's one server.
    #[arg(long)]
    pub import: bool,
    /// The client's config file, when it is not the usual one (a project's `.mcp.json` or
    /// `.vscode/mcp.json`).
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The program the client runs (default: this moniker, by its full path, or `npx`/`uvx`
    /// when this one runs from their cache).
    #[arg(long, value_name = "PROGRAM")]
    pub command: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct StatsArgs {
    /// Print JSON (the per-tool costs, the repeated text and the savings) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// A running gateway: its address (`http://127.0.0.1:8080`) or its metrics URL.
    #[arg(long, value_name = "URL")]
    pub from: Option<String>,
    /// The bearer token the gateway's HTTP transport asks for (else `$MONIKER_TOKEN`).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "MONIKER_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ServerArg {
    /// The server's id in the config.
    pub server: String,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Serve Streamable HTTP on this address (`127.0.0.1:8080`) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// With `--http`: the threads that serve requests. One (the default) answers a call
    /// soonest: it stays awake a moment after each message instead of sleeping until the next.
    /// More serve more callers at once on a machine of many cores.
    #[arg(long, requires = "http", value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
    /// With `--http`: serve the console at `/console` (as `http.console: true` does).
    #[arg(long, requires = "http")]
    pub console: bool,
    /// Also serve Prometheus metrics at `http://ADDR/metrics` (with `--http`, they are at
    /// `/metrics` of the same address).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// Equip this toolset for every client session.
    #[arg(long, value_name = "NAME")]
    pub toolset: Option<String>,
    /// Expose moniker's toolset management tools (`build-toolset`, `equip-toolset`, ...).
    #[arg(long)]
    pub manage: bool,
    /// The toolset store file (default: under the user data dir).
    #[arg(long, value_name = "PATH")]
    pub store: Option<PathBuf>,
    /// Run a gateway of this process's own for this client, rather than attach to the
    /// person's shared gateway for the config (also `MONIKER_STANDALONE=1`).
    #[arg(long)]
    pub standalone: bool,
    /// Be the shared gateway of the config: serve the clients that attach on its socket
    /// (started by `serve` itself when none runs).
    #[arg(long, hide = true, conflicts_with_all = ["http", "metrics", "standalone", "toolset"])]
    pub shared: bool,
}

impl ServeArgs {
    /// Whether this `serve` attaches to the shared gateway: over stdio, without a metrics
    /// endpoint of its own, unless told to stand alone.
    pub fn attaches(&self) -> bool {
        self.http.is_none()
            && self.metrics.is_none()
            && !self.standalone
            && !self.shared
            && std::env::var_os("MONIKER_STANDALONE").is_none_or(|v| v.is_empty() || v == "0")
    }
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Check the config file and its naming rules only: start no server.
    #[arg(long)]
    pub offline: bool,
    /// Exit 1 when the surface breaks a name or a schema of `moniker.lock` (beside the config).
    #[arg(long, conflicts_with = "offline")]
    pub locked: bool,
    /// Write the renames `check` proposes for names exposed twice into the config (each under
    /// its section; the file before kept beside it as `<file>.bak`), then check again.
    #[arg(long, conflicts_with = "offline")]
    pub fix: bool,
}

#[derive(Debug, Clone, Args)]
pub struct LockArgs {
    /// Print what would change in `moniker.lock`, without writing it: the names, and for each
    /// tool whose server changed it, a word diff of its description, the annotations that
    /// flipped, a diff of its schemas and the parameters likely renamed.
    #[arg(long)]
    pub diff: bool,
    /// Accept what these tools are now (by exposed name; repeatable): their entries in
    /// `moniker.lock` are written anew, every other entry is kept as it is.
    #[arg(long, value_name = "TOOL", conflicts_with = "diff")]
    pub accept: Vec<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Only the tools of this toolset.
    #[arg(long, value_name = "NAME")]
    pub toolset: Option<String>,
    /// Only the tools and prompts with this tag.
    #[arg(long, value_name = "TAG")]
    pub tag: Option<Tag>,
}

#[derive(Debug, Clone, Args)]
pub struct CallArgs {
    /// The exposed name or an alias of the tool.
    pub name: String,
    /// The arguments, a JSON object (default `{}`).
    #[arg(value_name = "JSON", value_parser = json_object)]
    pub arguments: Option<Box<RawValue>>,
}

fn log_filter(text: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::builder()
        .parse(text)
        .map(|_| text.to_owned())
        .map_err(|e| e.to_string())
}

/// Kept as the user wrote it (key order, numbers); only checked to be one JSON object.
fn json_object(text: &str) -> Result<Box<RawValue>, String> {
    let raw: Box<RawValue> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if raw.get().starts_with('{') {
        Ok(raw)
    } else {
        Err("the arguments must be a JSON object: `{\"key\": \"value\"}`".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn call_arguments_must_be_one_object() {
        let raw = json_object(" {\"b\": 1.50, \"a\": 2} ").expect("object");
        assert_eq!(raw.get(), "{\"b\": 1.50, \"a\": 2}");
        assert!(json_object("[1]").is_err());
        assert!(json_object("{").is_err());
    }

    #[test]
    fn global_flags_go_anywhere() {
        let cli =
            Cli::try_parse_from(["moniker", "check", "--offline", "-c", "x.yaml"]).expect("parses");
        assert_eq!(cli.config, Some(PathBuf::from("x.yaml")));
        assert!(matches!(
            cli.command,
            Command::Check(CheckArgs { offline: true, .. })
        ));
        assert!(Cli::try_parse_from(["moniker", "check", "--offline", "--locked"]).is_err());
        assert!(matches!(
            Cli::try_parse_from(["moniker", "lock", "--diff"]).map(|c| c.command),
            Ok(Command::Lock(LockArgs { diff: true, .. }))
        ));
        assert!(Cli::try_parse_from(["moniker", "--log", "debug", "stats"]).is_ok());
        assert!(Cli::try_parse_from(["moniker", "--log", "a=b=c", "stats"]).is_err());
        assert!(Cli::try_parse_from(["moniker", "list", "--tag", "Git"]).is_err());
    }
}
