//! Snapshots of the surfaces that the example configs make of the fixture inventories: what a
//! client would list, and where every name and alias goes. Built from the files directly (no
//! server process), through the same config parser and naming core as `moniker serve`.

use moniker_fixture::{fixture_file, repo_root};
use moniker_surface::{Kind, Listing, Route, ServerId, Surface, build};
use serde_json::Value;
use serde_json::value::RawValue;

fn listing(server: &str, file: &str) -> Listing {
    let text = std::fs::read_to_string(fixture_file(file)).expect("fixture");
    let inventory: Value = serde_json::from_str(&text).expect("JSON");
    let items = |key: &str| -> Vec<Box<RawValue>> {
        inventory[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| RawValue::from_string(v.to_string()).expect("JSON"))
            .collect()
    };
    Listing {
        server: server.parse::<ServerId>().expect("id"),
        tools: items("tools"),
        prompts: items("prompts"),
        version: None,
    }
}

fn surface(example: &str, listings: &[Listing]) -> Surface {
    let path = repo_root().join("examples").join(example);
    let config = moniker_config::load(&path).expect("the example parses");
    let built = build(&config.rules, listings);
    let errors: Vec<String> = built.errors().map(ToString::to_string).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    built.surface.expect("valid")
}

/// The listing as a client gets it (with the server the listing says once, when every entry
/// has it), and the route of every name and alias.
fn shown(surface: &Surface) -> Value {
    let mut routes = serde_json::Map::new();
    let mut listed = serde_json::Map::new();
    let mut servers = serde_json::Map::new();
    for kind in [Kind::Tool, Kind::Prompt] {
        servers.insert(kind.section().into(), surface.server(kind).into());
        let items: Vec<Value> = surface
            .items(kind)
            .iter()
            .map(|e| serde_json::from_str(e.definition.get()).expect("JSON"))
            .collect();
        listed.insert(kind.section().into(), Value::Array(items));
        for e in surface.items(kind) {
            let target = match &e.route {
                Route::Origin(origin) => format!("{}/{}", origin.server, origin.name),
                Route::Action(route) => {
                    let members: Vec<String> = route
                        .members
                        .iter()
                        .map(|m| format!("{}={}/{}", m.action, m.origin.server, m.origin.name))
                        .collect();
                    format!("actions [{}]", members.join(", "))
                }
            };
            for name in std::iter::once(&e.name)
                .chain(&e.aliases)
                .chain(&e.hidden_aliases)
            {
                let via = surface.resolve(kind, name).expect("resolves").via.as_str();
                routes.insert(
                    format!("{} {name}", kind.noun()),
                    Value::String(format!("{target} (by {via})")),
                );
            }
        }
    }
    serde_json::json!({"routes": routes, "listing": listed, "said_once": servers})
}

#[test]
fn contextgraph_with_the_prd_aliases() {
    let s = surface(
        "contextgraph.yaml",
        &[listing("contextgraph", "contextgraph.json")],
    );
    insta::assert_json_snapshot!(shown(&s));
}

#[test]
fn bridge_with_clean_names_and_tags() {
    let s = surface("bridge.yaml", &[listing("bridge", "bridge.json")]);
    insta::assert_json_snapshot!(shown(&s));
}

#[test]
fn the_demo_with_three_servers() {
    let s = surface(
        "demo.yaml",
        &[
            listing("contextgraph", "contextgraph.json"),
            listing("ctxsys", "ctxsys.json"),
            listing("bridge", "bridge.json"),
        ],
    );
    assert_eq!(s.tools().len(), 70);
    insta::assert_json_snapshot!(shown(&s)["routes"]);
}

#[test]
fn ctxsys_folded_into_action_tools() {
    let s = surface("ctxsys.yaml", &[listing("ctxsys", "ctxsys.json")]);
    assert_eq!(s.listed(Kind::Tool).count(), 12);
    insta::assert_json_snapshot!(shown(&s));
}
