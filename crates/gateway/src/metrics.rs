//! Metrics in the Prometheus text format: calls per tool, per way the tool was named and per
//! outcome; call latency per server; servers up and their restarts. Kept by hand (a few maps
//! under short locks) rather than through a metrics framework: the set is small and fixed.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use moniker_surface::{ServerId, Via};

/// The `tool` label of calls of names that exist nowhere: clients choose those names, so each
/// must not get a series of its own (a client sending random names would grow moniker's memory
/// and every Prometheus behind it without bound).
pub const UNKNOWN_TOOL: &str = "<unknown>";

/// How a call ended, as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// A result.
    Ok,
    /// A result with `isError: true` (from the tool, or moniker's refusal of an action).
    ToolError,
    /// A JSON-RPC error from the server.
    Error,
    /// No such tool or prompt (`-32004`).
    Unknown,
    /// The server was not connected or went away (`-32041`).
    ServerGone,
    /// The server did not answer in time (`-32042`).
    Timeout,
    /// Cancelled by the client.
    Cancelled,
    /// Refused at once: a `max_in_flight` of the server, tool or prompt was full.
    Busy,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::Error => "error",
            Self::Unknown => "unknown",
            Self::ServerGone => "server_gone",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::Busy => "busy",
        }
    }
}

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0,
];

/// One server's calls, and how many took at most each bucket's bound (cumulative).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Latency {
    pub count: u64,
    pub within: [u64; BUCKETS.len()],
}

impl Latency {
    /// The calls of `self` that `earlier` had not seen.
    pub fn since(&self, earlier: &Self) -> Self {
        let mut within = self.within;
        for (w, e) in within.iter_mut().zip(earlier.within) {
            *w = w.saturating_sub(e);
        }
        Self {
            count: self.count.saturating_sub(earlier.count),
            within,
        }
    }

    /// The bucket bound (in seconds) under which a share `q` of the calls took (`None`: no
    /// call, or beyond the last bound).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let wanted = (self.count as f64 * q).ceil() as u64;
        BUCKETS
            .iter()
            .zip(self.within)
            .find(|(_, n)| *n >= wanted)
            .map(|(bound, _)| *bound)
    }
}

#[derive(Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    /// Its calls so far, and how many took at most each bucket's bound.
    fn latency(&self) -> Latency {
        Latency {
            count: self.count,
            within: self.counts,
        }
    }
}

const VIAS: [&str; 5] = ["name", "alias", "legacy", "action", "none"];
const OUTCOMES: [Outcome; 8] = [
    Outcome::Ok,
    Outcome::ToolError,
    Outcome::Error,
    Outcome::Unknown,
    Outcome::ServerGone,
    Outcome::Timeout,
    Outcome::Cancelled,
    Outcome::Busy,
];

/// Calls of one tool, by way of naming and by outcome.
type Counts = [[u64; OUTCOMES.len()]; VIAS.len()];

#[derive(Default)]
struct Inner {
    /// Looked up by `&str` on the call path: a new tool costs one allocation, a call none.
    calls: HashMap<String, Counts>,
    latency: HashMap<String, Histogram>,
    up: BTreeMap<String, bool>,
    restarts: BTreeMap<String, u64>,
    /// Calls by an alias or a legacy name (configured names only: a bounded set), by (name,
    /// tool): how many, and whether the name is deprecated.
    aliases: BTreeMap<(String, String), (u64, bool)>,
    /// Searches, by what followed them ([`SEARCH_OUTCOMES`]).
    searches: [u64; SEARCH_OUTCOMES.len()],
    /// The bytes of search answers each tool took (an exposed name: a bounded set).
    shown: BTreeMap<String, u64>,
}

/// What followed a search: nothing found; a call of the tool at rank 1 to 5, or of one lower
/// in its results, or of one not in them; no call (another search came first, or the session
/// ended).
pub const SEARCH_OUTCOMES: [&str; 9] = [
    "empty",
    "called_1",
    "called_2",
    "called_3",
    "called_4",
    "called_5",
    "called_lower",
    "called_other",
    "no_call",
];

/// What followed one search, for [`Metrics::search`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Searched {
    /// It found nothing.
    Empty,
    /// The next call was of the tool at this rank (0: the first), or of one it did not show.
    Called(Option<usize>),
    /// No call followed it.
    NoCall,
}

impl Searched {
    /// Its place among the searches counted: none found, a call of each of the first five,
    /// of a later one, of one not shown, no call.
    fn bucket(self) -> usize {
        match self {
            Self::Empty => 0,
            Self::Called(Some(rank)) if rank < 5 => 1 + rank,
            Self::Called(Some(_)) => 6,
            Self::Called(None) => 7,
            Self::NoCall => 8,
        }
    }
}

#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
    /// Breaking changes of the surface against `moniker.lock` now (`None`: no lock).
    lock_breaking: Mutex<Option<usize>>,
}

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        crate::sync::lock(&self.inner)
    }

    /// One call of `tool`: an exposed name (a bounded set), or [`UNKNOWN_TOOL`].
    pub fn call(
        &self,
        tool: &str,
        via: Option<Via>,
        outcome: Outcome,
        server: Option<(&ServerId, Duration)>,
    ) {
        let v = match via {
            Some(Via::Name) => 0,
            Some(Via::Alias) => 1,
            Some(Via::Legacy) => 2,
            Some(Via::Action) => 3,
            None => 4,
        };
        let o = OUTCOMES.iter().position(|x| *x == outcome).unwrap_or(0);
        let mut inner = self.lock();
        match inner.calls.get_mut(tool) {
            Some(counts) => counts[v][o] += 1,
            None => {
                let mut counts = Counts::default();
                counts[v][o] = 1;
                inner.calls.insert(tool.to_owned(), counts);
            }
        }
        if let Some((server, took)) = server {
            let h = match inner.latency.get_mut(server.as_str()) {
                Some(h) => h,
                None => inner.latency.entry(server.as_str().to_owned()).or_default(),
            };
            let secs = took.as_secs_f64();
            for (i, bound) in BUCKETS.iter().enumerate() {
                if secs <= *bound {
                    h.counts[i] += 1;
                }
            }
            h.count += 1;
            h.sum += secs;
        }
    }

    /// A call by `name`, an alias or a legacy name of `tool` (`deprecated`: on a schedule).
    pub fn alias_call(&self, name: &str, tool: &str, deprecated: bool) {
        let mut inner = self.lock();
        let key = (name.to_owned(), tool.to_owned());
        let entry = inner.aliases.entry(key).or_insert((0, deprecated));
        entry.0 += 1;
        entry.1 = deprecated;
    }

    /// One search, and what followed it.
    pub fn search(&self, searched: Searched) {
        self.lock().searches[searched.bucket()] += 1;
    }

    /// Tool `name` was shown in a search's answer, in `bytes`.
    pub fn shown(&self, name: &str, bytes: usize) {
        let mut inner = self.lock();
        match inner.shown.get_mut(name) {
            Some(n) => *n += bytes as u64,
            None => {
                inner.shown.insert(name.to_owned(), bytes as u64);
            }
        }
    }

    /// Searches by what followed them, as [`SEARCH_OUTCOMES`] names them.
    pub fn searches(&self) -> Vec<(&'static str, u64)> {
        let counts = self.lock().searches;
        SEARCH_OUTCOMES.iter().copied().zip(counts).collect()
    }

    /// How many breaking changes the surface has against the lock now.
    pub fn lock_breaking(&self, count: usize) {
        *crate::sync::lock(&self.lock_breaking) = Some(count);
    }

    pub fn server_up(&self, server: &ServerId, up: bool) {
        self.lock().up.insert(server.as_str().to_owned(), up);
    }

    pub fn server_restarted(&self, server: &ServerId) {
        *self
            .lock()
            .restarts
            .entry(server.as_str().to_owned())
            .or_default() += 1;
    }

    /// Each server's calls so far, and how many took at most each bucket's bound: what the
    /// console's charts are made of (differences of two snapshots).
    pub fn latencies(&self) -> BTreeMap<String, Latency> {
        self.lock()
            .latency
            .iter()
            .map(|(server, h)| (server.clone(), h.latency()))
            .collect()
    }

    /// Calls by (tool, via, outcome), those that happened.
    pub fn calls(&self) -> BTreeMap<(String, &'static str, &'static str), u64> {
        let inner = self.lock();
        let mut out = BTreeMap::new();
        for (tool, counts) in &inner.calls {
            for (v, row) in counts.iter().enumerate() {
                for (o, n) in row.iter().enumerate().filter(|(_, n)| **n > 0) {
                    out.insert((tool.clone(), VIAS[v], OUTCOMES[o].as_str()), *n);
                }
            }
        }
        out
    }

    /// The Prometheus text exposition of everything.
    pub fn render(&self) -> String {
        let calls = self.calls();
        let inner = self.lock();
        let mut out = String::new();
        family(
            &mut out,
            "moniker_calls_total",
            "counter",
            "Tool and prompt calls, by exposed name, by how the client named it (name, alias, legacy, action) and by outcome.",
        );
        for ((tool, via, outcome), n) in &calls {
            let _ = writeln!(
                out,
                "moniker_calls_total{{tool=\"{}\",via=\"{via}\",outcome=\"{outcome}\"}} {n}",
                escape(tool)
            );
        }
        family(
            &mut out,
            "moniker_call_duration_seconds",
            "histogram",
            "Time from forwarding a call to its server's answer.",
        );
        latency(&mut out, &inner.latency);
        servers(&mut out, &inner.up, &inner.restarts);
        family(
            &mut out,
            "moniker_alias_calls_total",
            "counter",
            "Calls by an alias or an action member's legacy name, by the name called, its tool, and whether the name is deprecated.",
        );
        for ((alias, tool), (n, deprecated)) in &inner.aliases {
            let _ = writeln!(
                out,
                "moniker_alias_calls_total{{alias=\"{}\",tool=\"{}\",deprecated=\"{deprecated}\"}} {n}",
                escape(alias),
                escape(tool)
            );
        }
        searches(&mut out, &inner);
        if let Some(count) = *crate::sync::lock(&self.lock_breaking) {
            family(
                &mut out,
                "moniker_lock_breaking_changes",
                "gauge",
                "Breaking changes of the surface against moniker.lock (gone names, new required parameters, changed types).",
            );
            let _ = writeln!(out, "moniker_lock_breaking_changes {count}");
        }
        family(
            &mut out,
            "moniker_message_reads_total",
            "counter",
            "Serde passes over messages' text: one where each message enters, and any later read of a part of one.",
        );
        let _ = writeln!(
            out,
            "moniker_message_reads_total {}",
            crate::message::passes()
        );
        out
    }
}

/// Whether each server is up, and how often it was started again.
fn servers(out: &mut String, up: &BTreeMap<String, bool>, restarts: &BTreeMap<String, u64>) {
    family(
        out,
        "moniker_server_up",
        "gauge",
        "Whether the server is connected.",
    );
    for (server, up) in up {
        let _ = writeln!(
            out,
            "moniker_server_up{{server=\"{}\"}} {}",
            escape(server),
            u8::from(*up)
        );
    }
    family(
        out,
        "moniker_server_restarts_total",
        "counter",
        "Times a server was started again after it exited or failed to start.",
    );
    for (server, n) in restarts {
        let _ = writeln!(
            out,
            "moniker_server_restarts_total{{server=\"{}\"}} {n}",
            escape(server)
        );
    }
}

/// The call duration histograms, server by server in name order.
fn latency(out: &mut String, latency: &HashMap<String, Histogram>) {
    let latency: BTreeMap<&String, &Histogram> = latency.iter().collect();
    for (server, h) in latency {
        let server = escape(server);
        for (bound, n) in BUCKETS.iter().zip(h.counts) {
            let _ = writeln!(
                out,
                "moniker_call_duration_seconds_bucket{{server=\"{server}\",le=\"{bound}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "moniker_call_duration_seconds_bucket{{server=\"{server}\",le=\"+Inf\"}} {}",
            h.count
        );
        let _ = writeln!(
            out,
            "moniker_call_duration_seconds_sum{{server=\"{server}\"}} {}",
            h.sum
        );
        let _ = writeln!(
            out,
            "moniker_call_duration_seconds_count{{server=\"{server}\"}} {}",
            h.count
        );
    }
}

/// A metric family's `# HELP` and `# TYPE` lines.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value: backslash, double quote and newline escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The search families: searches by what followed them, and the bytes each tool took.
fn searches(out: &mut String, inner: &Inner) {
    family(
        out,
        "moniker_searches_total",
        "counter",
        "search_tools answers, by what followed: empty (nothing found), called_1..called_5 (the next call was of the tool at that rank), called_lower, called_other (a tool it did not show), no_call.",
    );
    for (outcome, n) in SEARCH_OUTCOMES.iter().zip(inner.searches) {
        let _ = writeln!(out, "moniker_searches_total{{outcome=\"{outcome}\"}} {n}");
    }
    family(
        out,
        "moniker_search_shown_bytes_total",
        "counter",
        "The bytes of search_tools answers each tool took (its line, or its definition when asked by name): against moniker_calls_total, what each tool costs the model before it is called.",
    );
    for (tool, n) in &inner.shown {
        let _ = writeln!(
            out,
            "moniker_search_shown_bytes_total{{tool=\"{}\"}} {n}",
            escape(tool)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_histograms_and_gauges() {
        let m = Metrics::default();
        let s: ServerId = "cg".parse().unwrap();
        m.call(
            "discover_sub_goals",
            Some(Via::Alias),
            Outcome::Ok,
            Some((&s, Duration::from_micros(300))),
        );
        m.call(
            "discover_sub_goals",
            Some(Via::Name),
            Outcome::Ok,
            Some((&s, Duration::from_millis(20))),
        );
        m.call("nope\"x", None, Outcome::Unknown, None);
        m.server_up(&s, true);
        m.server_restarted(&s);
        let text = m.render();
        assert!(
            text.contains(
                "moniker_calls_total{tool=\"discover_sub_goals\",via=\"alias\",outcome=\"ok\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "moniker_calls_total{tool=\"nope\\\"x\",via=\"none\",outcome=\"unknown\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("moniker_call_duration_seconds_bucket{server=\"cg\",le=\"0.0005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("moniker_call_duration_seconds_bucket{server=\"cg\",le=\"0.025\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("moniker_call_duration_seconds_count{server=\"cg\"} 2"),
            "{text}"
        );
        assert!(text.contains("moniker_server_up{server=\"cg\"} 1"));
        assert!(text.contains("moniker_server_restarts_total{server=\"cg\"} 1"));
    }
}
