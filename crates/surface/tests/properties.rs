//! Invariants of the naming pipeline, over generated listings and rules.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use moniker_surface::{
    AliasRule, Kind, Listing, Override, Rules, ServerRules, Surface, Via, build,
};
use proptest::prelude::*;
use serde_json::value::RawValue;
use serde_json::{Value, json};

fn raw(v: &Value) -> Box<RawValue> {
    RawValue::from_string(v.to_string()).unwrap()
}

/// Origin names from a small alphabet, so that collisions are frequent; some use `__`, some
/// break the portable profile.
fn origin_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-c]{1,3}",
        2 => "[a-c]{1,2}__[a-c]{1,2}",
        1 => "p_[a-c]{1,2}",
        1 => "[a-c]\\.[a-c]",
    ]
}

type OverrideCase = (String, Option<String>, Vec<(String, bool)>, bool);

#[derive(Debug, Clone)]
struct Case {
    listings: Vec<(String, Vec<String>)>,
    overrides: Vec<OverrideCase>,
    prefix: Option<String>,
}

fn case() -> impl Strategy<Value = Case> {
    let listings = proptest::collection::btree_map(
        "[a-d]",
        proptest::collection::vec(origin_name(), 0..8),
        1..4,
    )
    .prop_map(|m| m.into_iter().collect::<Vec<_>>());
    let overrides = proptest::collection::vec(
        (
            prop_oneof![
                1 => "[a-c]{1,3}",
                1 => "[a-d]/[a-c]{1,3}",
                // An index into the listed origin names: `@7` unqualified, `@@7` qualified.
                4 => (0usize..64, any::<bool>()).prop_map(|(i, q)| format!("{}{i}", if q { "@@" } else { "@" })),
            ],
            proptest::option::of("[a-e]{1,4}"),
            proptest::collection::vec(("[a-f]{1,4}", any::<bool>()), 0..3),
            proptest::bool::weighted(0.1),
        ),
        0..6,
    );
    (listings, overrides, proptest::option::of("[a-d]")).prop_map(
        |(listings, overrides, prefix)| Case {
            listings,
            overrides,
            prefix,
        },
    )
}

fn rules_of(case: &Case) -> Rules {
    let mut rules = Rules::default();
    rules.naming.strip_prefixes = vec!["p_".into()];
    for (server, _) in &case.listings {
        let prefix = case.prefix.as_ref().filter(|p| *p == server).cloned();
        rules.servers.insert(
            server.parse().unwrap(),
            ServerRules {
                tags: vec![],
                prefix,
            },
        );
    }
    let origins: Vec<(&String, &String)> = case
        .listings
        .iter()
        .flat_map(|(s, tools)| tools.iter().map(move |t| (s, t)))
        .collect();
    for (key, name, aliases, hidden) in &case.overrides {
        let key = match key.strip_prefix('@') {
            Some(_) if origins.is_empty() => continue,
            Some(rest) => {
                let (qualified, i) = match rest.strip_prefix('@') {
                    Some(i) => (true, i),
                    None => (false, rest),
                };
                let (server, origin) = origins[i.parse::<usize>().unwrap() % origins.len()];
                if qualified {
                    format!("{server}/{origin}")
                } else {
                    origin.clone()
                }
            }
            None => key.clone(),
        };
        rules.tools.insert(
            key,
            Override {
                name: name.as_ref().map(|n| n.parse().unwrap()),
                aliases: aliases
                    .iter()
                    .map(|(a, h)| AliasRule {
                        name: a.parse().unwrap(),
                        hidden: *h,
                        deprecated: None,
                    })
                    .collect(),
                hidden: *hidden,
                ..Default::default()
            },
        );
    }
    rules
}

fn listings_of(case: &Case) -> Vec<Listing> {
    case.listings
        .iter()
        .map(|(server, tools)| Listing {
            server: server.parse().unwrap(),
            tools: tools
                .iter()
                .map(|t| raw(&json!({"name": t, "inputSchema": {"type": "object"}})))
                .collect(),
            prompts: tools
                .iter()
                .take(2)
                .map(|t| raw(&json!({"name": t})))
                .collect(),
            version: None,
        })
        .collect()
}

/// Everything observable about a surface, for comparisons.
fn observe(surface: &Surface) -> Vec<String> {
    [Kind::Tool, Kind::Prompt]
        .iter()
        .flat_map(|&k| surface.items(k))
        .map(|e| {
            format!(
                "{:?} {:?} {:?} {}",
                e.aliases,
                e.hidden_aliases,
                e.origin(),
                e.definition.get()
            )
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_name_and_alias_resolves_to_its_origin_and_none_collide(case in case()) {
        let rules = rules_of(&case);
        let listings = listings_of(&case);
        let built = build(&rules, &listings);
        prop_assert_eq!(built.surface.is_some(), built.errors().next().is_none());
        let Some(surface) = built.surface else { return Ok(()) };
        for kind in [Kind::Tool, Kind::Prompt] {
            let mut seen = BTreeSet::new();
            for exposed in surface.items(kind) {
                let origin = exposed.origin().unwrap();
                let listing = listings.iter().find(|l| l.server == origin.server).unwrap();
                let items = if kind == Kind::Tool { &listing.tools } else { &listing.prompts };
                let needle = format!("\"name\":{}", serde_json::to_string(&origin.name).unwrap());
                prop_assert!(items.iter().any(|t| t.get().contains(&needle)));
                let r = surface.resolve(kind, &exposed.name).unwrap();
                prop_assert_eq!(r.via, Via::Name);
                prop_assert_eq!(r.exposed.origin(), Some(origin));
                prop_assert!(seen.insert(exposed.name.clone()), "name `{}` twice", exposed.name);
                for alias in exposed.aliases.iter().chain(&exposed.hidden_aliases) {
                    let r = surface.resolve(kind, alias).unwrap();
                    prop_assert_eq!(r.via, Via::Alias);
                    prop_assert_eq!(r.exposed.origin(), Some(origin));
                    prop_assert!(seen.insert(alias.clone()), "alias `{}` twice", alias);
                }
                if kind == Kind::Tool {
                    for name in std::iter::once(&exposed.name).chain(&exposed.aliases).chain(&exposed.hidden_aliases) {
                        prop_assert!(rules.naming.profile.check(name).is_ok(), "`{}` breaks the profile", name);
                    }
                    let listed: Value = serde_json::from_str(exposed.definition.get()).unwrap();
                    prop_assert_eq!(listed["name"].as_str(), Some(exposed.name.as_str()));
                }
            }
        }
    }

    #[test]
    fn building_does_not_depend_on_order(case in case(), seed in any::<u64>()) {
        let rules = rules_of(&case);
        let listings = listings_of(&case);
        let mut shuffled = listings.clone();
        // A deterministic shuffle of servers and of each server's items.
        let mut state = seed | 1;
        let mut next = move || { state ^= state << 13; state ^= state >> 7; state ^= state << 17; state };
        for l in &mut shuffled {
            for i in (1..l.tools.len()).rev() { let j = (next() as usize) % (i + 1); l.tools.swap(i, j); }
        }
        for i in (1..shuffled.len()).rev() { let j = (next() as usize) % (i + 1); shuffled.swap(i, j); }
        let a = build(&rules, &listings);
        let b = build(&rules, &shuffled);
        prop_assert_eq!(&a.diagnostics, &b.diagnostics);
        prop_assert_eq!(a.surface.as_ref().map(observe), b.surface.as_ref().map(observe));
    }

    #[test]
    fn arbitrary_listings_never_panic(items in proptest::collection::vec(arbitrary_json(), 0..12)) {
        let listing = Listing {
            server: "s".parse().unwrap(),
            tools: items.iter().map(raw).collect(),
            prompts: items.iter().rev().map(raw).collect(), version: None,
        };
        let built = build(&Rules::default(), &[listing]);
        prop_assert_eq!(built.surface.is_some(), built.errors().next().is_none());
    }
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    let value = leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(
                prop_oneof!["name", "description", "aliases", "tags", "\\PC{0,6}"],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    prop_oneof![
        value.clone(),
        ("\\PC{0,70}", value)
            .prop_map(|(name, v)| json!({"name": name, "description": v, "inputSchema": v})),
    ]
}

/// The properties above say little if most generated cases fail to build: make sure many
/// build, and that those carry aliases and prefixes.
#[test]
fn generated_cases_often_build() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut built, mut with_aliases) = (0, 0);
    for _ in 0..400 {
        let case = case().new_tree(&mut runner).unwrap().current();
        if let Some(surface) = build(&rules_of(&case), &listings_of(&case)).surface {
            built += 1;
            if surface.tools().iter().any(|t| !t.aliases.is_empty()) {
                with_aliases += 1;
            }
        }
    }
    assert!(built > 100, "only {built} of 400 cases built");
    assert!(
        with_aliases > 20,
        "only {with_aliases} surfaces had aliases"
    );
}
