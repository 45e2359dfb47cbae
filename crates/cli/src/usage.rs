//! `moniker stats --from URL`: how often the clients of a running gateway call each alias and
//! legacy name (its `moniker_alias_calls_total`), beside each deprecated name's schedule from
//! the config, so that a maintainer sees whether anyone still uses an old name before it goes.
//! Every deprecated name of the config is shown, called or not. Then what search did: the
//! searches by what followed them (a call of the tool at which rank, none, nothing found), and
//! each tool's bytes in search answers beside its calls, the ones never called first.

use std::collections::BTreeMap;
use std::time::Duration;

use moniker_config::Config;
use moniker_surface::Deprecation;

use crate::exit::{Exit, Failure};
use crate::output;

const METRIC: &str = "moniker_alias_calls_total";

pub fn usage(config: &Config, from: &str, token: Option<&str>) -> Result<Exit, Failure> {
    let url = metrics_url(from);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let mut request = agent.get(&url);
    if let Some(token) = token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    let text = request
        .call()
        .and_then(|mut r| r.body_mut().read_to_string())
        .map_err(|e| format!("cannot read the metrics at {url}: {e}"))?;
    let calls = parse(&text);
    let schedules = schedules(config);
    let today = config.rules.today;
    let mut rows: BTreeMap<(String, String), (u64, Option<&Deprecation>)> = BTreeMap::new();
    for ((name, tool), n) in calls {
        let schedule = schedules.get(name.as_str()).map(|(_, d)| *d);
        rows.insert((name, tool), (n, schedule));
    }
    for (name, (target, d)) in &schedules {
        if !rows.keys().any(|(n, _)| n == name) {
            rows.insert((name.clone(), target.clone()), (0, Some(*d)));
        }
    }
    let mut table = vec![
        ["NAME", "TOOL", "CALLS", "DEPRECATION"]
            .map(String::from)
            .to_vec(),
    ];
    for ((name, tool), (n, d)) in &rows {
        let schedule = match (d, today) {
            (None, _) => String::new(),
            (Some(d), Some(today)) if d.is_over(today) => {
                format!("removed after {} (over: remove it)", d.remove_after)
            }
            (Some(d), Some(today)) => format!(
                "until {} ({} days left)",
                d.remove_after,
                today.days_until(d.remove_after)
            ),
            (Some(d), None) => format!("until {}", d.remove_after),
        };
        table.push(vec![name.clone(), tool.clone(), n.to_string(), schedule]);
    }
    output::line(&crate::list::format_table(&table))?;
    if let Some(searches) = searches(&text) {
        output::line("")?;
        output::line(&searches)?;
    }
    Ok(Exit::Ok)
}

/// Whether a URL has a path after its host.
fn has_path(url: &str) -> bool {
    url.split_once("://")
        .is_some_and(|(_, rest)| rest.contains('/'))
}

/// `http://host:port` means its `/metrics`.
fn metrics_url(from: &str) -> String {
    let trimmed = from.trim_end_matches('/');
    if has_path(trimmed) {
        trimmed.to_owned()
    } else {
        format!("{trimmed}/metrics")
    }
}

/// The samples of `metric` in a Prometheus text exposition: each one's labels and value.
fn samples(text: &str, metric: &str) -> Vec<(BTreeMap<String, String>, u64)> {
    let prefix = format!("{metric}{{");
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let Ok(n) = value.trim().parse::<u64>() else {
            continue;
        };
        out.push((labels_of(labels), n));
    }
    out
}

/// `a="x",b="y \"z\""` as a map (escapes undone).
fn labels_of(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        out.insert(key.trim_start_matches(',').to_owned(), value);
        rest = &after[end..];
    }
    out
}

/// `moniker_alias_calls_total{alias="a",tool="t",deprecated="true"} 3` lines, by (alias, tool).
fn parse(text: &str) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for (labels, n) in samples(text, METRIC) {
        if let (Some(alias), Some(tool)) = (labels.get("alias"), labels.get("tool")) {
            *out.entry((alias.clone(), tool.clone())).or_insert(0) += n;
        }
    }
    out
}

/// What search did, from the metrics: the searches by what followed them, and each tool's
/// bytes in search answers beside its calls (those that took bytes and no call first).
fn searches(text: &str) -> Option<String> {
    let outcomes = samples(text, "moniker_searches_total");
    let total: u64 = outcomes.iter().map(|(_, n)| n).sum();
    if total == 0 {
        return None;
    }
    let mut out = format!("{total} searches:");
    for (labels, n) in outcomes.iter().filter(|(_, n)| *n > 0) {
        let outcome = labels.get("outcome").map_or("?", String::as_str);
        out.push_str(&format!(" {outcome} {n},"));
    }
    out.pop();
    let mut calls: BTreeMap<String, u64> = BTreeMap::new();
    for (labels, n) in samples(text, "moniker_calls_total") {
        if let Some(tool) = labels.get("tool") {
            *calls.entry(tool.clone()).or_insert(0) += n;
        }
    }
    let mut shown: Vec<(String, u64, u64)> = samples(text, "moniker_search_shown_bytes_total")
        .into_iter()
        .filter_map(|(labels, bytes)| {
            let tool = labels.get("tool")?.clone();
            let called = calls.get(&tool).copied().unwrap_or(0);
            Some((tool, bytes, called))
        })
        .collect();
    shown.sort_by_key(|(tool, bytes, called)| (*called, std::cmp::Reverse(*bytes), tool.clone()));
    let mut table = vec![["TOOL", "SHOWN BYTES", "CALLS"].map(String::from).to_vec()];
    for (tool, bytes, called) in shown {
        table.push(vec![tool, bytes.to_string(), called.to_string()]);
    }
    out.push_str("\n\n");
    out.push_str(&crate::list::format_table(&table));
    Some(out)
}

/// Every deprecated alias of the config, with the key it belongs to and its schedule.
fn schedules(config: &Config) -> BTreeMap<String, (String, &Deprecation)> {
    let rules = &config.rules;
    let mut out = BTreeMap::new();
    for (key, rule) in rules.tools.iter().chain(&rules.prompts) {
        for alias in &rule.aliases {
            if let Some(d) = &alias.deprecated {
                let target = rule.name.as_ref().map_or(key.as_str(), |n| n.as_str());
                out.insert(alias.name.as_str().to_owned(), (target.to_owned(), d));
            }
        }
    }
    for (name, action) in &rules.actions {
        for alias in &action.aliases {
            if let Some(d) = &alias.deprecated {
                out.insert(alias.name.as_str().to_owned(), (name.clone(), d));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_calls_are_read_from_the_metrics() {
        let text = "# HELP x\nmoniker_alias_calls_total{alias=\"discover_goals\",tool=\"discover_sub_goals\",deprecated=\"true\"} 3\nmoniker_calls_total{tool=\"a\"} 9\n";
        let calls = parse(text);
        assert_eq!(
            calls.get(&("discover_goals".to_owned(), "discover_sub_goals".to_owned())),
            Some(&3)
        );
        assert_eq!(calls.len(), 1);
        assert_eq!(
            metrics_url("http://127.0.0.1:8080"),
            "http://127.0.0.1:8080/metrics"
        );
        assert_eq!(metrics_url("http://h:1/metrics"), "http://h:1/metrics");
    }

    #[test]
    fn what_search_did_is_read_from_the_metrics() {
        let text = concat!(
            "moniker_searches_total{outcome=\"called_1\"} 4\n",
            "moniker_searches_total{outcome=\"no_call\"} 2\n",
            "moniker_searches_total{outcome=\"empty\"} 0\n",
            "moniker_calls_total{tool=\"read_graph\",via=\"name\",outcome=\"ok\"} 3\n",
            "moniker_calls_total{tool=\"read_graph\",via=\"alias\",outcome=\"ok\"} 1\n",
            "moniker_search_shown_bytes_total{tool=\"read_graph\"} 900\n",
            "moniker_search_shown_bytes_total{tool=\"odd \\\"name\\\"\"} 5000\n",
        );
        let said = searches(text).expect("searches");
        assert!(
            said.starts_with("6 searches: called_1 4, no_call 2\n"),
            "{said}"
        );
        let rows: Vec<&str> = said.lines().skip(3).collect();
        assert!(
            rows[0].starts_with("odd \"name\"") && rows[0].ends_with("0"),
            "{said}"
        );
        assert!(
            rows[1].starts_with("read_graph") && rows[1].ends_with("4"),
            "{said}"
        );
        assert!(searches("moniker_searches_total{outcome=\"empty\"} 0\n").is_none());
    }
}
