//! Deprecation with a schedule: an alias (or an action tool's legacy names) may say when it
//! was deprecated, after which day it stops resolving, and what to use instead. Pure: "today"
//! is the caller's (`Rules::today`), so tests pin it.
//!
//! Before the build, the names whose day has passed are taken out of the rules (they resolve
//! no more), and every scheduled name gets a diagnostic: the days left, or that it is over and
//! its line can go.

use crate::diagnostic::Diagnostic;
use crate::rules::{Legacy, Rules};
pub use crate::schedule::{Date, Deprecation};

/// The rules as they apply on `rules.today`: aliases and legacy names whose day has passed
/// taken out; and a diagnostic for each scheduled name (days left, or over).
pub fn apply(rules: &Rules) -> (Rules, Vec<Diagnostic>) {
    let mut out = rules.clone();
    let mut diagnostics = Vec::new();
    let Some(today) = rules.today else {
        return (out, diagnostics);
    };
    let sections = [("tools", &mut out.tools), ("prompts", &mut out.prompts)];
    for (section, overrides) in sections {
        for (key, rule) in overrides.iter_mut() {
            let at = format!("{section}.{key}.aliases");
            retire(&mut rule.aliases, key, &at, today, &mut diagnostics);
        }
    }
    for (name, action) in out.actions.iter_mut() {
        let at = format!("actions.{name}.aliases");
        retire(&mut action.aliases, name, &at, today, &mut diagnostics);
        if let Some(d) = &action.legacy_deprecated {
            let at = format!("actions.{name}.legacy");
            let what = format!("the legacy names of `{name}`'s members");
            diagnostics.push(scheduled(&what, name, d, today, &at));
            if d.is_over(today) {
                action.legacy = Legacy::Off;
            }
        }
    }
    (out, diagnostics)
}

/// Takes out of `aliases` (of `target`, written at `at`) those whose day has passed; a
/// diagnostic for each one with a schedule.
fn retire(
    aliases: &mut Vec<crate::AliasRule>,
    target: &str,
    at: &str,
    today: Date,
    diagnostics: &mut Vec<Diagnostic>,
) {
    aliases.retain(|alias| {
        let Some(d) = &alias.deprecated else {
            return true;
        };
        diagnostics.push(scheduled(alias.name.as_str(), target, d, today, at));
        !d.is_over(today)
    });
}

fn scheduled(name: &str, target: &str, d: &Deprecation, today: Date, at: &str) -> Diagnostic {
    let left = today.days_until(d.remove_after);
    let shown = if name.starts_with("the legacy") {
        name.to_owned()
    } else {
        format!("`{name}` (of `{target}`)")
    };
    if d.is_over(today) {
        Diagnostic::warning(
            "deprecation::expired",
            format!(
                "{shown} stopped resolving after {}: calls by it are unknown now",
                d.remove_after
            ),
        )
        .at(at.to_owned())
        .help("remove it from the config")
    } else {
        let days = match left {
            0 => "its last day is today".to_owned(),
            1 => "1 day left".to_owned(),
            n => format!("{n} days left"),
        };
        Diagnostic::warning(
            "deprecation::scheduled",
            format!(
                "{shown} is deprecated since {}: it stops resolving after {} ({days})",
                d.since, d.remove_after
            ),
        )
        .at(at.to_owned())
        .help("`moniker stats --from <gateway>` shows whether clients still call it")
    }
}
