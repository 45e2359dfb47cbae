//! `moniker stats --from URL`: how often the clients of a running gateway call each alias and
//! legacy name (its `moniker_alias_calls_total`), beside each deprecated name's schedule from
//! the config, so that a maintainer sees whether anyone still uses an old name before it goes.
//! Every deprecated name of the config is shown, called or not.

use std::collections::BTreeMap;
use std::time::Duration;

use moniker_config::Config;
use moniker_surface::Deprecation;

use crate::exit::{Exit, Failure};
use crate::output;

const METRIC: &str = "moniker_alias_calls_total{";

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
    Ok(Exit::Ok)
}

/// `http://host:port` means its `/metrics`.
fn metrics_url(from: &str) -> String {
    let trimmed = from.trim_end_matches('/');
    let has_path = trimmed
        .split_once("://")
        .is_some_and(|(_, rest)| rest.contains('/'));
    if has_path {
        trimmed.to_owned()
    } else {
        format!("{trimmed}/metrics")
    }
}

/// `moniker_alias_calls_total{alias="a",tool="t",deprecated="true"} 3` lines, by (alias, tool).
fn parse(text: &str) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(METRIC) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |key: &str| {
            let start = labels.find(&format!("{key}=\""))? + key.len() + 2;
            let end = labels[start..].find('"')? + start;
            Some(
                labels[start..end]
                    .replace("\\\"", "\"")
                    .replace("\\\\", "\\"),
            )
        };
        if let (Some(alias), Some(tool), Ok(n)) =
            (label("alias"), label("tool"), value.trim().parse::<u64>())
        {
            *out.entry((alias, tool)).or_insert(0) += n;
        }
    }
    out
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
}
