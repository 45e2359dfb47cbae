//! The console's read-only pages: servers, namespace, who sees what, activity. Each is
//! bounded: tables are paged or capped, a listing shown whole is cut at [`MAX_SHOWN`](super::playground::MAX_SHOWN) bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::response::Response;
use moniker_surface::discovery::Mode;
use moniker_surface::{Exposed, Kind, Route};

use super::{Desk, Nav, html, query_toolset};
use crate::sync::lock;

/// Rows of a table page.
const PAGE: usize = 100;
/// Activity rows shown at most.
const ACTIVITY_ROWS: usize = 200;

#[derive(Template)]
#[template(path = "console/refused.html")]
pub(super) struct Refused {
    pub why: String,
    /// Where the console is from the page ([`super::Away::at`]).
    pub root: &'static str,
}

pub(super) struct ServerRow {
    pub id: String,
    pub state: &'static str,
    pub error: String,
    pub restarts: u64,
    pub tools: usize,
    pub prompts: usize,
    pub era: String,
    pub calls: u64,
    pub p50: String,
    pub p99: String,
    /// The SVG polylines of its calls per second, p50 and p99 over the samples (empty: too
    /// few samples).
    pub points: String,
    pub rate: String,
    pub p50_points: String,
    pub p99_points: String,
}

#[derive(Template)]
#[template(path = "console/servers.html")]
struct ServersPage {
    nav: Nav,
    servers: Vec<ServerRow>,
    minutes: u64,
    people: Vec<PersonRow>,
}

/// A person a server is called as (`auth.exchange`, `auth.per_person`).
pub(super) struct PersonRow {
    pub server: String,
    pub how: &'static str,
    pub person: String,
    pub left: String,
}

/// Everyone each server is called as now.
fn people(gateway: &crate::gateway::Gateway) -> Vec<PersonRow> {
    let mut rows = Vec::new();
    for (id, slot) in gateway.servers.slots().iter() {
        for (person, idle) in slot.people.iter().flat_map(|p| p.people()) {
            rows.push(PersonRow {
                server: id.to_string(),
                how: "own instance",
                person,
                left: format!("idle {}", duration(idle as f64)),
            });
        }
    }
    for (conn, _) in gateway.servers.connections() {
        for (how, person, left) in conn.people() {
            rows.push(PersonRow {
                server: conn.server.to_string(),
                how,
                person,
                left: left.map_or("–".to_owned(), |s| duration(s as f64)),
            });
        }
    }
    rows
}

#[derive(serde::Deserialize)]
pub(super) struct ForgetForm {
    server: String,
    person: String,
    csrf: String,
}

/// `POST /console/people`: an admin stops a server being called as a person with what is
/// kept for them (they sign in again, or their token is exchanged again).
pub(super) async fn forget_person(
    State(shared): State<Arc<Desk>>,
    admin: super::Admin,
    axum::extract::Form(form): axum::extract::Form<ForgetForm>,
) -> Response {
    if !admin.checks(&form.csrf) {
        return super::refused(
            axum::http::StatusCode::FORBIDDEN,
            "this form is not from this console (CSRF)",
        );
    }
    let conn = form
        .server
        .parse()
        .ok()
        .and_then(|id| shared.gateway.servers.connection(&id));
    if let Some(conn) = conn {
        let dropped = conn.forget_person(&form.person);
        tracing::info!(server = %conn.server, person = %form.person, dropped, "an admin signed a person out of a server");
    }
    let slot = form
        .server
        .parse()
        .ok()
        .and_then(|id| shared.gateway.servers.slot(&id));
    let issuer = shared
        .gateway
        .control
        .http()
        .auth
        .as_ref()
        .map(|a| a.issuer.clone());
    if let (Some(slot), Some(issuer)) = (slot, issuer) {
        if let Some(people) = &slot.people {
            let dropped = people.forget_named(&issuer, &form.person);
            tracing::info!(server = %slot.entry.id, person = %form.person, dropped, "an admin stopped a person's instance and forgot their secrets");
        }
    }
    axum::response::IntoResponse::into_response(axum::response::Redirect::to("servers"))
}

pub(super) async fn servers(State(shared): State<Arc<Desk>>, admin: super::Admin) -> Response {
    let gateway = &shared.gateway;
    let status = gateway.servers.server_status();
    let listings = gateway.naming.listings();
    let eras: BTreeMap<String, String> = gateway
        .servers
        .connections()
        .into_iter()
        .map(|(conn, info)| (conn.server.to_string(), info.protocol_version))
        .collect();
    let held = gateway.naming.refused_listings();
    let samples: Vec<_> = lock(&shared.console.samples).iter().cloned().collect();
    let latest = gateway.services.metrics.latencies();
    let servers = status
        .iter()
        .map(|(id, s)| {
            let listing = listings.iter().find(|l| &l.server == id);
            let now = latest.get(id.as_str()).copied().unwrap_or_default();
            let window = samples
                .first()
                .and_then(|first| first.get(id.as_str()))
                .map_or(now, |first| now.since(first));
            let seconds = |q: f64| {
                window
                    .quantile(q)
                    .map_or("–".to_owned(), |s| format!("≤ {}", duration(s)))
            };
            let series = Series::of(id.as_str(), &samples);
            let rates: Vec<Option<f64>> = series.rates.iter().copied().map(Some).collect();
            ServerRow {
                id: id.to_string(),
                state: state_of(held.contains_key(id), s),
                error: match (&s.last_error, s.failed_at) {
                    (Some(error), Some(at)) => format!("{} (at {})", error, when(at)),
                    (Some(error), None) => error.clone(),
                    (None, _) => String::new(),
                },
                restarts: s.restarts,
                tools: listing.map_or(0, |l| l.tools.len()),
                prompts: listing.map_or(0, |l| l.prompts.len()),
                era: eras.get(id.as_str()).cloned().unwrap_or_default(),
                calls: now.count,
                p50: seconds(0.5),
                p99: seconds(0.99),
                points: points(&rates),
                rate: series
                    .rates
                    .last()
                    .map_or("–".to_owned(), |r| format!("{r:.1}/s")),
                p50_points: points(&series.p50),
                p99_points: points(&series.p99),
            }
        })
        .collect();
    html(&ServersPage {
        nav: Nav::of("servers", &admin),
        servers,
        minutes: (super::SAMPLE_EVERY.as_secs() * super::SAMPLES as u64) / 60,
        people: people(gateway),
    })
}

/// What a server is doing: held out (its names collide), connected, restarting (waiting out
/// the restart delay), failed (no more restarts), or starting (again, after a failure whose
/// error is shown beside).
fn state_of(held: bool, status: &crate::gateway::ServerStatus) -> &'static str {
    use crate::gateway::Next;
    match (held, status.up, status.next) {
        (true, ..) => "held out",
        (false, true, _) => "connected",
        (false, false, Next::Restart) => "restarting",
        (false, false, Next::GivenUp) => "failed",
        (false, false, Next::Start) => "starting",
    }
}

/// A moment as UTC `HH:MM:SS`, and how long ago.
fn when(at: std::time::SystemTime) -> String {
    let since_epoch = at
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let ago = std::time::SystemTime::now()
        .duration_since(at)
        .unwrap_or_default()
        .as_secs();
    let of_day = since_epoch % 86_400;
    format!(
        "{:02}:{:02}:{:02} UTC, {ago} s ago",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

fn duration(seconds: f64) -> String {
    if seconds < 1.0 {
        format!("{} ms", seconds * 1000.0)
    } else {
        format!("{seconds} s")
    }
}

/// What the charts of `server` show, between each two samples: calls per second, and the p50
/// and p99 latency of the calls in between (none: no call).
struct Series {
    rates: Vec<f64>,
    p50: Vec<Option<f64>>,
    p99: Vec<Option<f64>>,
}

impl Series {
    fn of(server: &str, samples: &[BTreeMap<String, crate::metrics::Latency>]) -> Self {
        let at: Vec<crate::metrics::Latency> = samples
            .iter()
            .map(|s| s.get(server).copied().unwrap_or_default())
            .collect();
        let windows: Vec<crate::metrics::Latency> =
            at.windows(2).map(|w| w[1].since(&w[0])).collect();
        Self {
            rates: windows
                .iter()
                .map(|w| w.count as f64 / super::SAMPLE_EVERY.as_secs_f64())
                .collect(),
            p50: windows.iter().map(|w| w.quantile(0.5)).collect(),
            p99: windows.iter().map(|w| w.quantile(0.99)).collect(),
        }
    }
}

/// `values` as SVG points on a 120×24 box, each against the largest (a gap where there is
/// none); empty when there are fewer than two.
fn points(values: &[Option<f64>]) -> String {
    if values.len() < 2 {
        return String::new();
    }
    let top = values.iter().flatten().copied().fold(0.0_f64, f64::max);
    let top = if top > 0.0 { top } else { 1.0 };
    let step = 120.0 / (values.len() - 1) as f64;
    values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            Some(format!(
                "{:.1},{:.1}",
                i as f64 * step,
                23.0 - (*v)? / top * 22.0
            ))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) struct ToolRow {
    pub kind: &'static str,
    pub name: String,
    pub aliases: String,
    pub hidden: String,
    pub origin: String,
    pub tags: String,
    pub toolsets: String,
    pub lock: String,
    pub deprecated: String,
    pub listed: bool,
}

pub(super) struct Problem {
    pub message: String,
    pub fix: String,
}

#[derive(Template)]
#[template(path = "console/namespace.html")]
struct NamespacePage {
    nav: Nav,
    q: String,
    rows: Vec<ToolRow>,
    total: usize,
    page: usize,
    pages: usize,
    problems: Vec<Problem>,
}

#[derive(serde::Deserialize, Default)]
pub(super) struct NamespaceQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    page: usize,
}

pub(super) async fn namespace(
    State(shared): State<Arc<Desk>>,
    admin: super::Admin,
    Query(query): Query<NamespaceQuery>,
) -> Response {
    let gateway = &shared.gateway;
    let view = gateway.naming.view();
    let mut in_sets: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for name in gateway.naming.toolset_names() {
        for tool in gateway.naming.toolset(&name, &view).tools {
            in_sets.entry(tool).or_default().push(name.clone());
        }
    }
    let drift = gateway.naming.drift();
    let lock_of = |item: &Exposed| -> String {
        let Some((drift, _)) = &drift else {
            return "no lock".to_owned();
        };
        match drift.iter().find(|d| d.tool == item.name) {
            Some(d) if d.is_new() => "new: not in the lock".to_owned(),
            Some(d) => format!("changed: {}", d.changed.join(", ")),
            None => "as locked".to_owned(),
        }
    };
    let needle = query.q.to_lowercase();
    let all: Vec<ToolRow> = [Kind::Tool, Kind::Prompt]
        .into_iter()
        .flat_map(|kind| view.surface.items(kind).iter().map(move |e| (kind, e)))
        .map(|(kind, item)| row(kind, item, &in_sets, &lock_of))
        .filter(|r| needle.is_empty() || r.words().contains(&needle))
        .collect();
    let total = all.len();
    let pages = total.div_ceil(PAGE).max(1);
    let page = query.page.min(pages - 1);
    let rows = all.into_iter().skip(page * PAGE).take(PAGE).collect();
    html(&NamespacePage {
        nav: Nav::of("namespace", &admin),
        q: query.q,
        rows,
        total,
        page,
        pages,
        problems: problems(gateway),
    })
}

fn row(
    kind: Kind,
    item: &Exposed,
    in_sets: &BTreeMap<String, Vec<String>>,
    lock_of: &impl Fn(&Exposed) -> String,
) -> ToolRow {
    let origin = match &item.route {
        Route::Origin(o) => format!("{}/{}", o.server, o.name),
        Route::Action(a) => {
            let actions: Vec<String> = a
                .members
                .iter()
                .map(|m| format!("{} → {}", m.action, m.name))
                .collect();
            format!("action tool: {}", actions.join(", "))
        }
    };
    let deprecated: Vec<String> = item
        .deprecated
        .iter()
        .map(|(name, d)| format!("{name}: since {}, gone after {}", d.since, d.remove_after))
        .collect();
    ToolRow {
        kind: match kind {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
        },
        name: item.name.clone(),
        aliases: item.aliases.join(", "),
        hidden: item.hidden_aliases.join(", "),
        origin,
        tags: item
            .tags
            .iter()
            .map(|t| t.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        toolsets: in_sets
            .get(&item.name)
            .map(|s| s.join(", "))
            .unwrap_or_default(),
        lock: match kind {
            Kind::Tool => lock_of(item),
            Kind::Prompt => String::new(),
        },
        deprecated: deprecated.join("; "),
        listed: item.listed,
    }
}

impl ToolRow {
    fn words(&self) -> String {
        format!(
            "{} {} {} {} {} {}",
            self.name, self.aliases, self.hidden, self.origin, self.tags, self.toolsets
        )
        .to_lowercase()
    }
}

/// The build's errors, the listings held out and the names served by none (claimed twice),
/// each with the fix moniker proposes, each once.
fn problems(gateway: &crate::Gateway) -> Vec<Problem> {
    let built = gateway
        .naming
        .diagnostics()
        .into_iter()
        .filter(|d| d.is_error());
    let held = gateway.naming.refused_listings().into_values().flatten();
    let contested = gateway.naming.contested_names().into_values().flatten();
    let mut seen = std::collections::HashSet::new();
    built
        .chain(held)
        .chain(contested)
        .filter(|d| seen.insert(d.to_string()))
        .take(PAGE)
        .map(|d| Problem {
            message: std::iter::once(d.message.clone())
                .chain(d.notes.iter().cloned())
                .collect::<Vec<_>>()
                .join("\n"),
            fix: d.help.clone().unwrap_or_default(),
        })
        .collect()
}

pub(super) struct ToolsetRow {
    pub name: String,
    pub tools: String,
    pub mode: String,
}

pub(super) struct RuleRow {
    pub who: String,
    pub toolset: String,
}

#[derive(Template)]
#[template(path = "console/access.html")]
struct AccessPage {
    nav: Nav,
    toolsets: Vec<ToolsetRow>,
    tokens: Vec<RuleRow>,
    identities: Vec<RuleRow>,
    identity_provider: String,
    view_as: String,
    mode: String,
    view: Option<super::playground::Seen>,
}

#[derive(serde::Deserialize, Default)]
pub(super) struct AccessQuery {
    /// A toolset to see the listing of (empty: the whole surface).
    #[serde(default, rename = "as")]
    view_as: Option<String>,
    /// `list`, `hints` or `search`: the listing were that the toolset's mode (empty: as its
    /// client receives it now).
    #[serde(default)]
    mode: String,
}

pub(super) async fn access(
    State(shared): State<Arc<Desk>>,
    admin: super::Admin,
    Query(query): Query<AccessQuery>,
) -> Response {
    let gateway = &shared.gateway;
    let view = gateway.naming.view();
    let rules = gateway.naming.rules();
    let gateway_mode = view.surface.discovery().mode;
    let toolsets = gateway
        .naming
        .toolset_names()
        .into_iter()
        .map(|name| {
            let selection = gateway.naming.toolset(&name, &view);
            let mode = rules
                .toolsets
                .sets
                .get(&name)
                .and_then(|t| t.discovery.as_ref())
                .map_or(gateway_mode, |d| d.mode);
            ToolsetRow {
                tools: selection.tools.into_iter().collect::<Vec<_>>().join(", "),
                mode: format!("{mode:?}").to_lowercase(),
                name,
            }
        })
        .collect();
    let (tokens, identities, identity_provider) = rules_of(&gateway.control.http());
    let view_as = query.view_as.unwrap_or_default();
    let known: BTreeSet<String> = gateway.naming.toolset_names().into_iter().collect();
    let seen = match (query_toolset(&view_as, &known), Mode::parse(&query.mode)) {
        (Ok(toolset), Some(mode)) => {
            Some(super::playground::listing_in(&shared, toolset, mode).await)
        }
        (Ok(toolset), None) => {
            Some(super::playground::listing_as(&shared, toolset, &admin.name).await)
        }
        (Err(()), _) => None,
    };
    html(&AccessPage {
        nav: Nav::of("access", &admin),
        toolsets,
        tokens,
        identities,
        identity_provider,
        view_as,
        mode: query.mode,
        view: seen,
    })
}

/// Each token and the toolset it leads to (never its secret); each identity rule; the
/// identity provider.
fn rules_of(settings: &moniker_config::HttpConfig) -> (Vec<RuleRow>, Vec<RuleRow>, String) {
    let tokens = settings
        .tokens
        .iter()
        .enumerate()
        .map(|(i, t)| RuleRow {
            who: t
                .name
                .clone()
                .unwrap_or_else(|| format!("token #{}", i + 1)),
            toolset: t.toolset.clone().unwrap_or_else(|| "(all)".to_owned()),
        })
        .collect();
    let (identities, identity_provider) = match &settings.auth {
        None => (Vec::new(), String::new()),
        Some(auth) => {
            let said = |when: &moniker_config::IdentityMatch| match when {
                moniker_config::IdentityMatch::Claim { claim, value } => {
                    format!("claim {claim} = {value}")
                }
                moniker_config::IdentityMatch::Scope(scope) => format!("scope {scope}"),
            };
            let mut rows: Vec<RuleRow> = auth
                .toolsets
                .iter()
                .map(|r| RuleRow {
                    who: said(&r.when),
                    toolset: r.toolset.clone(),
                })
                .collect();
            rows.push(RuleRow {
                who: "anyone else".to_owned(),
                toolset: auth
                    .default_toolset
                    .clone()
                    .unwrap_or_else(|| "(all)".to_owned()),
            });
            rows.extend(auth.admins.iter().map(|when| RuleRow {
                who: format!("admins: {}", said(when)),
                toolset: "the console, too".to_owned(),
            }));
            (rows, format!("{} for {}", auth.issuer, auth.resource))
        }
    };
    (tokens, identities, identity_provider)
}

pub(super) struct CallRow {
    pub time: String,
    pub principal: String,
    pub name: String,
    pub tool: String,
    pub server: String,
    pub outcome: String,
    pub duration: String,
}

#[derive(Template)]
#[template(path = "console/activity.html")]
struct ActivityPage {
    nav: Nav,
    rows: Vec<CallRow>,
    principal: String,
    tool: String,
    outcome: String,
    kept: usize,
    /// `search_tools` answers by what followed them, with their share.
    searches: Vec<(&'static str, u64, String)>,
}

#[derive(serde::Deserialize, Default)]
pub(super) struct ActivityQuery {
    #[serde(default)]
    principal: String,
    #[serde(default)]
    tool: String,
    #[serde(default)]
    outcome: String,
}

pub(super) async fn activity(
    State(shared): State<Arc<Desk>>,
    admin: super::Admin,
    Query(query): Query<ActivityQuery>,
) -> Response {
    let lines = shared.gateway.services.recent_calls();
    let field = |v: &serde_json::Value, k: &str| -> String {
        match v.get(k) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        }
    };
    let has = |text: &str, wanted: &str| wanted.is_empty() || text.contains(wanted);
    let rows: Vec<CallRow> = lines
        .iter()
        .rev()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .map(|v| CallRow {
            time: field(&v, "time"),
            principal: field(&v, "principal"),
            name: field(&v, "name"),
            tool: field(&v, "tool"),
            server: field(&v, "server"),
            outcome: field(&v, "outcome"),
            duration: field(&v, "duration_ms"),
        })
        .filter(|r| has(&r.principal, &query.principal))
        .filter(|r| has(&r.name, &query.tool) || has(&r.tool, &query.tool))
        .filter(|r| has(&r.outcome, &query.outcome))
        .take(ACTIVITY_ROWS)
        .collect();
    html(&ActivityPage {
        nav: Nav::of("activity", &admin),
        rows,
        principal: query.principal,
        tool: query.tool,
        outcome: query.outcome,
        kept: crate::audit::RECENT,
        searches: searches(&shared.gateway.services.metrics),
    })
}

/// Searches by what followed them since moniker started, each with its share of all.
fn searches(metrics: &crate::metrics::Metrics) -> Vec<(&'static str, u64, String)> {
    let counts = metrics.searches();
    let all: u64 = counts.iter().map(|(_, n)| n).sum();
    counts
        .into_iter()
        .map(|(outcome, n)| (outcome, n, share(n, all)))
        .collect()
}

/// `n` as a share of `all`, in percent (a dash when there are none at all).
fn share(n: u64, all: u64) -> String {
    if all == 0 {
        "–".to_owned()
    } else {
        format!("{:.0}%", 100.0 * n as f64 / all as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Latency;

    fn sample(count: u64, within: u64) -> BTreeMap<String, Latency> {
        // `within` calls fell in every bucket (the fastest), the rest beyond the 4th.
        let mut latency = Latency {
            count,
            ..Latency::default()
        };
        for (i, w) in latency.within.iter_mut().enumerate() {
            *w = if i < 4 { within } else { count };
        }
        [("s".to_owned(), latency)].into()
    }

    #[test]
    fn the_charts_are_made_of_what_happened_between_samples() {
        let samples = [sample(0, 0), sample(10, 10), sample(30, 10), sample(30, 10)];
        let series = Series::of("s", &samples);
        assert_eq!(series.rates, [1.0, 2.0, 0.0]);
        // Between the first two, every call was fast; between the next two, none was.
        assert_eq!(series.p50, [Some(0.0001), Some(0.0025), None]);
        let drawn = points(&series.p50);
        assert_eq!(
            drawn.split(' ').count(),
            2,
            "no point where no call was: {drawn}"
        );
        assert_eq!(points(&[Some(1.0)]), "", "one window is no chart");
        assert!(
            Series::of("other", &samples)
                .rates
                .iter()
                .all(|r| *r == 0.0)
        );
    }
}

#[cfg(test)]
mod states {
    use super::*;
    use crate::gateway::{Next, ServerStatus};

    #[test]
    fn a_server_s_state_says_what_comes_next() {
        let status = |up, next, error: Option<&str>| ServerStatus {
            up,
            next,
            last_error: error.map(str::to_owned),
            ..ServerStatus::default()
        };
        let error = Some("exited");
        assert_eq!(state_of(true, &status(true, Next::Start, None)), "held out");
        assert_eq!(
            state_of(false, &status(true, Next::Start, error)),
            "connected"
        );
        assert_eq!(
            state_of(false, &status(false, Next::Restart, error)),
            "restarting"
        );
        assert_eq!(
            state_of(false, &status(false, Next::GivenUp, error)),
            "failed"
        );
        assert_eq!(
            state_of(false, &status(false, Next::Start, None)),
            "starting"
        );
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(86_400 + 3_723);
        assert!(when(at).starts_with("01:02:03 UTC, "), "{}", when(at));
    }
}
