//! Resolution cost: one lookup by name, by alias, and a miss, in a surface of 10,000 tools
//! with 1,000 aliases. DESIGN's goal is < 100 ns p99 (the seed asks < 1 µs).
#![allow(clippy::unwrap_used)] // a benchmark fails loudly on a bad set-up

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use moniker_surface::{AliasRule, Listing, Override, Rules, ServerRules, Surface, build};
use serde_json::value::RawValue;

fn surface() -> Surface {
    let mut rules = Rules::default();
    let mut listings = Vec::new();
    for s in 0..10 {
        let server: moniker_surface::ServerId = format!("server{s}").parse().unwrap();
        rules.servers.insert(server.clone(), ServerRules::default());
        let tools = (0..1000)
            .map(|t| {
                let def = format!(
                    r#"{{"name":"s{s}_tool_{t:04}","description":"Tool {t}.","inputSchema":{{"type":"object","properties":{{"a":{{"type":"string"}}}}}}}}"#
                );
                RawValue::from_string(def).unwrap()
            })
            .collect();
        listings.push(Listing {
            server,
            tools,
            prompts: Vec::new(),
            version: None,
        });
    }
    for i in 0..1000 {
        let (s, t) = (i % 10, i);
        rules.tools.insert(
            format!("s{s}_tool_{t:04}"),
            Override {
                aliases: vec![AliasRule {
                    name: format!("alias_{i:04}").parse().unwrap(),
                    hidden: false,
                    deprecated: None,
                }],
                ..Default::default()
            },
        );
    }
    let built = build(&rules, &listings);
    built.surface.expect("the benchmark surface is valid")
}

fn resolve(c: &mut Criterion) {
    let surface = surface();
    assert_eq!(surface.tools().len(), 10_000);
    let mut group = c.benchmark_group("resolve (10,000 tools, 1,000 aliases)");
    group.bench_function("hit by name", |b| {
        b.iter(|| surface.resolve_tool(black_box("s7_tool_0507")).is_some())
    });
    group.bench_function("hit by alias", |b| {
        b.iter(|| surface.resolve_tool(black_box("alias_0507")).is_some())
    });
    group.bench_function("miss", |b| {
        b.iter(|| {
            surface
                .resolve_tool(black_box("nonexistent_tool"))
                .is_none()
        })
    });
    group.finish();
}

fn build_surface(c: &mut Criterion) {
    c.bench_function("build (10,000 tools, 1,000 aliases)", |b| b.iter(surface));
}

criterion_group!(benches, resolve, build_surface);
criterion_main!(benches);
