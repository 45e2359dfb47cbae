//! `moniker login` and `moniker logout`: a person's OAuth authorization of one remote server.

use moniker_config::{Config, ServerConfig, Transport};
use moniker_gateway::auth::{Browser, Store};
use moniker_gateway::connect;
use moniker_surface::ServerId;

use crate::args::ServerArg;
use crate::exit::{Exit, Failure};
use crate::output;
use crate::render::Renderer;

/// The configured server named `name`, with `${VAR}`s expanded.
fn server(
    config: &mut Config,
    name: &str,
) -> Result<Result<(ServerId, ServerConfig), Exit>, Failure> {
    if let Err(report) = config.expand_env(|name| std::env::var(name).ok()) {
        output::report(&Renderer::for_stderr().config_report(&report));
        return Ok(Err(Exit::InvalidConfig));
    }
    let found = config
        .servers
        .iter()
        .find(|(id, _)| id.as_str() == name)
        .map(|(id, server)| (id.clone(), server.clone()));
    match found {
        Some(found) => Ok(Ok(found)),
        None => {
            let known: Vec<&str> = config.servers.keys().map(|id| id.as_str()).collect();
            let hint = match moniker_surface::diagnostic::did_you_mean(name, known.iter().copied())
            {
                Some(close) => format!(": did you mean `{close}`?"),
                None if known.is_empty() => String::new(),
                None => format!(" (servers: {})", known.join(", ")),
            };
            Err(format!("no server `{name}` in `{}`{hint}", config.source.file_name).into())
        }
    }
}

pub async fn login(mut config: Config, args: ServerArg) -> Result<Exit, Failure> {
    let (id, server) = match server(&mut config, &args.server)? {
        Ok(found) => found,
        Err(exit) => return Ok(exit),
    };
    let shown = id.clone();
    let browser = Browser::from_env(Box::new(move |url| {
        output::report(&format!(
            "To log in to `{shown}`, open this URL in a browser (moniker tries to open it):\n\n    {url}\n"
        ));
    }));
    let timeout = config.gateway.start_timeout;
    match connect::login(&id, &server.transport, &browser, timeout).await {
        Ok(done) => {
            let tools = format!(
                "{} tool{}",
                done.tools,
                if done.tools == 1 { "" } else { "s" }
            );
            if done.authorizations == 0 {
                output::line(&format!(
                    "`{id}` answers without a login from you ({tools}); nothing to do"
                ))?;
            } else {
                let scope = done
                    .scope
                    .map(|s| format!(" with scope `{s}`"))
                    .unwrap_or_default();
                let kept = done
                    .path
                    .map(|p| format!("; tokens kept in {}", p.display()))
                    .unwrap_or_default();
                output::line(&format!("logged in to `{id}`{scope} ({tools}){kept}"))?;
            }
            Ok(Exit::Ok)
        }
        Err(why) => {
            output::report(&format!("error: cannot log in to `{id}`: {why}"));
            Ok(Exit::Failure)
        }
    }
}

pub fn logout(mut config: Config, args: ServerArg) -> Result<Exit, Failure> {
    let (id, server) = match server(&mut config, &args.server)? {
        Ok(found) => found,
        Err(exit) => return Ok(exit),
    };
    let Transport::Http { url, .. } = &server.transport else {
        output::line(&format!(
            "`{id}` is a stdio server: moniker keeps no tokens for it"
        ))?;
        return Ok(Exit::Ok);
    };
    let Some(dir) = Store::default_dir() else {
        return Err("this platform has no user data dir: moniker keeps no tokens".into());
    };
    // Its tools are not listed from its last listing while it waits for a login again.
    if let Some(known) = moniker_gateway::known::Known::default_dir() {
        let entries = crate::settings::entries(&config);
        if let Some(entry) = entries.iter().find(|e| e.id == id) {
            moniker_gateway::known::Known::new(known).forget(&entry.id, &entry.spec);
        }
    }
    if Store::new(dir).remove(id.as_str(), url)? {
        output::line(&format!("logged out of `{id}`: its tokens are forgotten"))?;
    } else {
        output::line(&format!("moniker keeps no tokens for `{id}`"))?;
    }
    Ok(Exit::Ok)
}

/// `moniker people SERVER [--forget SUB]`: who is signed in to a server that acts as each
/// person, as its sealed sign-ins say; or one of them signed out.
pub fn people(mut config: Config, args: &crate::args::PeopleArgs) -> Result<Exit, Failure> {
    use moniker_gateway::auth::personal::{KEY_VAR, Sealed, folder, key_from};
    let (id, server) = match server(&mut config, &args.server)? {
        Ok(found) => found,
        Err(exit) => return Ok(exit),
    };
    let (place, what) = match &server.transport {
        Transport::Http { url, auth, .. } if auth.per_person => (url.clone(), "signed in to"),
        Transport::Stdio { command, args, .. } if server.per_person.is_some() => (
            moniker_gateway::auth::personal::started_as(command, args),
            "has set their secrets for",
        ),
        _ => {
            return Err(format!(
                "`{id}` does not act as each person (`per_person`, `auth.per_person`)"
            )
            .into());
        }
    };
    let Some(text) = std::env::var(KEY_VAR).ok().filter(|t| !t.trim().is_empty()) else {
        return Err(format!("${KEY_VAR} is not set: people's sign-ins and secrets are sealed with it (without it, the running gateway keeps them in memory only)").into());
    };
    if let (Some(name), Some(person)) = (&args.set, &args.for_person) {
        return set_secret(&config, &id, &server, &place, name, person);
    }
    let key = key_from(&text)?;
    let Some(dir) = folder(id.as_str(), &place) else {
        return Err("this platform has no user data dir".into());
    };
    let people: Vec<(std::path::PathBuf, String, String)> = match &server.transport {
        Transport::Http { .. } => Sealed::list(&dir, id.as_str(), &key)
            .into_iter()
            .map(|(path, person, expires)| (path, person, token_left(expires)))
            .collect(),
        Transport::Stdio { .. } => Sealed::list_secrets(&dir, id.as_str(), &key)
            .into_iter()
            .map(|(path, person, names)| (path, person, format!("secrets {}", names.join(", "))))
            .collect(),
    };
    let Some(name) = &args.forget else {
        if people.is_empty() {
            output::line(&format!("nobody {what} `{id}` ({})", dir.display()))?;
        }
        for (_, person, said) in &people {
            output::line(&format!("{person}: {what} `{id}`; {said}"))?;
        }
        return Ok(Exit::Ok);
    };
    let theirs: Vec<_> = people.iter().filter(|(_, p, _)| p == name).collect();
    for (path, _, _) in &theirs {
        std::fs::remove_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    output::line(&match theirs.len() {
        0 => format!("`{name}` is not known to `{id}`"),
        _ => format!("`{name}` is signed out of `{id}`: their next call asks them again"),
    })?;
    Ok(Exit::Ok)
}

/// `moniker people SERVER --set NAME --for SUB`: the person's secret NAME set to what stdin
/// holds (its last line end dropped), sealed as the person's own `PUT` would.
fn set_secret(
    config: &Config,
    id: &ServerId,
    server: &ServerConfig,
    place: &str,
    name: &str,
    person: &str,
) -> Result<Exit, Failure> {
    use moniker_gateway::auth::personal::{Person, Secrets};
    let Some(each) = &server.per_person else {
        return Err(format!(
            "`{id}` is not a stdio server run once for each person: it keeps no secrets"
        )
        .into());
    };
    let settable = |value: &str| {
        moniker_gateway::auth::personal::settable(&each.secrets, name, value)
            .map_err(|why| format!("`{id}`: {why}"))
    };
    // Its name before anything is read.
    settable("")?;
    let Some(issuer) = config.http.auth.as_ref().map(|a| a.issuer.clone()) else {
        return Err("the config has no `http.auth`: no one is a person here".into());
    };
    let mut value = String::new();
    let most = moniker_gateway::auth::personal::SECRET_MAX as u64;
    std::io::Read::read_to_string(
        &mut std::io::Read::take(std::io::stdin(), most + 1),
        &mut value,
    )?;
    let value = value.strip_suffix('\n').unwrap_or(&value);
    let value = value.strip_suffix('\r').unwrap_or(value);
    if value.is_empty() {
        return Err("the value (read from stdin) is empty".into());
    }
    settable(value)?;
    let secrets = Secrets::of(id, place);
    let values = std::collections::BTreeMap::from([(name.to_owned(), value.to_owned())]);
    secrets.set(&Person::named(&issuer, person), values)?;
    output::line(&format!(
        "`{person}`'s {name} for `{id}` is set: their instance starts anew with it at their next call"
    ))?;
    Ok(Exit::Ok)
}

/// What a sign-in's token has left, in words.
fn token_left(expires: Option<u64>) -> String {
    let now = moniker_gateway::auth::now();
    match expires {
        Some(at) if at > now => format!("its token expires in {} s", at - now),
        Some(_) => "its token has expired (refreshed at the next call)".to_owned(),
        None => "its token does not say when it expires".to_owned(),
    }
}

/// The servers whose last challenge waits for a person, with the scope they asked for.
pub(crate) fn waiting(config: &Config) -> Vec<(ServerId, Option<String>)> {
    let Some(dir) = Store::default_dir() else {
        return Vec::new();
    };
    let store = Store::new(dir);
    config
        .servers
        .iter()
        .filter(|(_, server)| !server.disabled)
        .filter_map(|(id, server)| match &server.transport {
            Transport::Http { url, .. } => store
                .pending(id.as_str(), url)
                .map(|scope| (id.clone(), scope)),
            Transport::Stdio { .. } => None,
        })
        .collect()
}

/// Says, for each server that waits for a person to log in, the command to run.
pub fn report_needed_logins(config: &Config) {
    for (id, scope) in waiting(config) {
        let scope = scope.map(|s| format!(" (scope `{s}`)")).unwrap_or_default();
        output::report(&format!(
            "hint: `{id}` waits for you to log in{scope}: run `moniker login {id}`"
        ));
    }
}

/// Whether a server waits for a person to log in.
pub fn needs_login(config: &Config) -> bool {
    !waiting(config).is_empty()
}
