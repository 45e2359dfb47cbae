//! Starting the gateway for a command: the config's `${VAR}`s expanded, its settings, the
//! servers started (and waited for, but by `serve`, which answers at once).

use std::path::PathBuf;
use std::sync::Arc;

use moniker_config::Config;
use moniker_gateway::store::Store;
use moniker_gateway::{Gateway, Settings, StartError};

use crate::exit::{Exit, Failure};
use crate::output;
use crate::render::Renderer;
use crate::settings::entries;

/// How a command uses toolsets.
#[derive(Default)]
pub(crate) struct Toolsets {
    pub(crate) manage: bool,
    pub(crate) store: Option<PathBuf>,
    pub(crate) toolset: Option<String>,
    /// The caller shows the surface's warnings itself (`check`).
    pub(crate) quiet: bool,
    /// `serve`: the search index is built ahead and kept in the user's cache (a one-shot
    /// command builds it only if it searches, and keeps nothing).
    pub(crate) serving: bool,
    /// `install --import`'s check: the caller says what an invalid surface means itself (it
    /// fixes it), and a `${VAR}` that is unset stands empty (the client sets it, later).
    pub(crate) silent: bool,
    /// `moniker lock`: the surface as the servers say it, not as the lock decides it.
    pub(crate) unsealed: bool,
}

impl Toolsets {
    /// The flags over the config: `--manage` or `toolsets.manage`; `--store`, else
    /// `toolsets.store`, else the default place. The store is opened when toolsets are
    /// managed or one is named (it may be a saved one).
    pub(crate) fn new(
        config: &Config,
        manage: bool,
        store: Option<PathBuf>,
        toolset: Option<String>,
    ) -> Self {
        let manage = manage || config.toolsets.manage;
        let store = (manage || toolset.is_some())
            .then(|| {
                store
                    .or_else(|| {
                        config
                            .toolsets
                            .store
                            .as_deref()
                            .map(crate::settings::expand_home)
                    })
                    .or_else(Store::default_path)
            })
            .flatten();
        Self {
            manage,
            store,
            toolset,
            quiet: false,
            serving: false,
            silent: false,
            unsealed: false,
        }
    }
}

/// Expands `${VAR}`s and starts every server. `Err(exit)` when the config or the surface is
/// invalid; the diagnostics have been rendered to stderr.
/// Why the gateway did not start: the exit, and for a surface of errors its diagnostics (they
/// are reported already).
pub(crate) struct NotStarted {
    pub exit: Exit,
    pub diagnostics: Vec<moniker_surface::Diagnostic>,
}

impl From<Exit> for NotStarted {
    fn from(exit: Exit) -> Self {
        Self {
            exit,
            diagnostics: Vec::new(),
        }
    }
}

pub(crate) async fn start(
    config: &mut Config,
) -> Result<Result<Arc<Gateway>, NotStarted>, Failure> {
    start_with(config, Toolsets::default()).await
}

pub(crate) async fn start_with(
    config: &mut Config,
    toolsets: Toolsets,
) -> Result<Result<Arc<Gateway>, NotStarted>, Failure> {
    // An import's check starts the servers before the client that will run them: a variable
    // the client sets is unset here, and stands empty.
    let lenient = toolsets.silent;
    let lookup = |name: &str| {
        std::env::var(name)
            .ok()
            .or_else(|| lenient.then(String::new))
    };
    if let Err(report) = config.expand_env(lookup) {
        output::report(&Renderer::for_stderr().config_report(&report));
        return Ok(Err(Exit::InvalidConfig.into()));
    }
    let servers = entries(config);
    let quiet = toolsets.quiet;
    let silent = toolsets.silent;
    let sealed = !toolsets.unsealed;
    let settings = match settings(config, toolsets) {
        Ok(settings) => settings,
        Err(why) => {
            output::report(&format!("error: {why}"));
            return Ok(Err(Exit::InvalidConfig.into()));
        }
    };
    let serving = settings.search_ahead;
    let started = if serving {
        Gateway::open(config.rules.clone(), servers, settings).await
    } else {
        Gateway::start(config.rules.clone(), servers, settings).await
    };
    match started {
        Ok(gateway) => {
            // One surface for every path: `call`, `list` and `check` take the lock's decisions
            // as `serve` does (a tool withheld under `integrity: block` is withheld here too).
            if sealed {
                crate::reload::watch_lock(&gateway, config);
            }
            // Servers that need a person never hold the others up: the command is said.
            crate::login::report_needed_logins(config);
            // `check` shows them itself; every other command says them once, here.
            if !quiet {
                for d in gateway.naming.diagnostics() {
                    tracing::warn!("{d}");
                }
            }
            Ok(Ok(gateway))
        }
        Err(StartError::Invalid(diagnostics)) => {
            if !silent {
                output::report(&Renderer::for_stderr().diagnostics(&config.source, &diagnostics));
            }
            Ok(Err(NotStarted {
                exit: Exit::InvalidConfig,
                diagnostics,
            }))
        }
        Err(StartError::Setup(why)) => Err(why.into()),
    }
}

/// The gateway's settings for `config` (its `${VAR}`s expanded).
pub(crate) fn settings(config: &Config, toolsets: Toolsets) -> Result<Settings, String> {
    Ok(Settings {
        config: config.gateway.clone(),
        guard: std::env::current_exe().ok(),
        manage: toolsets.manage,
        store: toolsets.store,
        default_toolset: toolsets.toolset,
        limits: config.limits.clone(),
        audit: config.audit.clone().map(|mut audit| {
            if let moniker_config::AuditTo::File(path) = &mut audit.to {
                *path = crate::settings::expand_home(path).display().to_string();
            }
            audit
        }),
        telemetry: crate::settings::telemetry(config),
        search_model: crate::settings::search_model(config),
        search_cache: toolsets
            .serving
            .then(moniker_gateway::view::IndexFiles::default_dir)
            .flatten(),
        search_ahead: toolsets.serving,
        known: moniker_gateway::known::Known::default_dir().map(moniker_gateway::known::Known::new),
        learned: config
            .search_learns
            .then(moniker_gateway::learned::default_dir)
            .flatten(),
    })
}

/// Starts the servers of `config` (its `${VAR}`s expanded) and builds their surface, valid or
/// not: for `moniker doctor`.
pub(crate) async fn launch(config: &Config) -> Result<Arc<Gateway>, Failure> {
    let settings = settings(config, Toolsets::default())?;
    Gateway::launch(config.rules.clone(), entries(config), settings)
        .await
        .map_err(|e| e.to_string().into())
}

/// Says why each server that is not up failed (as `level: server ... failed to start: why`);
/// how many.
pub(crate) fn report_failed_servers(gateway: &Gateway, level: &str) -> usize {
    let mut failed = 0;
    for (id, status) in gateway.servers.server_status() {
        if let (false, Some(error)) = (status.up, &status.last_error) {
            output::report(&format!("{level}: server `{id}` failed to start: {error}"));
            failed += 1;
        }
        if let Some(refused) = &status.sandbox_refused {
            output::report(&format!(
                "{level}: server `{id}` was refused by its sandbox: {refused}"
            ));
        }
    }
    failed
}
