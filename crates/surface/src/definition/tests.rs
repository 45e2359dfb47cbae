use super::*;

fn fields(text: &str) -> IndexMap<String, Box<RawValue>> {
    serde_json::from_str(text).unwrap()
}

fn tags(list: &[&str]) -> Vec<Tag> {
    list.iter().map(|t| t.parse().unwrap()).collect()
}

/// The surface's rewrite: everything set.
fn full(text: &str, aliases: &[&str], tag_list: &[&str]) -> String {
    let aliases: Vec<String> = aliases.iter().map(|a| a.to_string()).collect();
    let tags = tags(tag_list);
    rewrite(
        &fields(text),
        &Rewrite {
            name: Some("new"),
            description: None,
            input_schema: None,
            aliases: Some(&aliases),
            tags: Some(&tags),
            server: Server::Named("srv"),
        },
    )
    .get()
    .to_owned()
}

/// A server said by the listing is said by no entry: not moniker, not the server.
#[test]
fn a_server_said_by_the_listing_is_in_no_entry() {
    let tags = tags(&["t1"]);
    let said_once = |text: &str| {
        rewrite(
            &fields(text),
            &Rewrite {
                name: Some("new"),
                tags: Some(&tags),
                server: Server::ByTheListing,
                ..Rewrite::default()
            },
        )
        .get()
        .to_owned()
    };
    assert_eq!(
        said_once(r#"{"name":"old"}"#),
        r#"{"name":"new","_meta":{"io.moniker/tags":["t1"]}}"#
    );
    assert_eq!(
        said_once(r#"{"name":"old","_meta":{"io.moniker/server":"evil","theirs":1}}"#),
        r#"{"name":"new","_meta":{"theirs":1,"io.moniker/tags":["t1"]}}"#
    );
    // A `_meta` that is not an object is replaced even when moniker says nothing there.
    for bad in ["null", r#""x""#, "[]", "1"] {
        let listed = rewrite(
            &fields(&format!(r#"{{"name":"old","_meta":{bad}}}"#)),
            &Rewrite {
                server: Server::ByTheListing,
                ..Rewrite::default()
            },
        );
        assert_eq!(listed.get(), r#"{"name":"old","_meta":{}}"#, "{bad}");
    }
}

#[test]
fn without_meta_one_is_added_last() {
    assert_eq!(
        full(r#"{"name":"old","inputSchema":{}}"#, &["a1", "a2"], &["t1"]),
        r#"{"name":"new","inputSchema":{},"aliases":["a1","a2"],"_meta":{"io.moniker/tags":["t1"],"io.moniker/server":"srv"}}"#
    );
    // No listed aliases, no tags: no key for them.
    assert_eq!(
        full(r#"{"name":"old"}"#, &[], &[]),
        r#"{"name":"new","_meta":{"io.moniker/server":"srv"}}"#
    );
}

/// One place per fact: the aliases in `aliases` (and the description, for the model), the tags
/// and the server in `_meta`; what a server sends at the top under `tags` or `server_name`
/// (where moniker said them before) is taken out.
#[test]
fn each_fact_is_said_once() {
    let entry = full(
        r#"{"name":"old","tags":["theirs"],"server_name":"theirs","aliases":["theirs"]}"#,
        &["a1"],
        &["t1"],
    );
    assert_eq!(
        entry,
        r#"{"name":"new","aliases":["a1"],"_meta":{"io.moniker/tags":["t1"],"io.moniker/server":"srv"}}"#
    );
    let value: serde_json::Value = serde_json::from_str(&entry).unwrap();
    assert!(value["_meta"].get("io.moniker/aliases").is_none());
}

#[test]
fn the_servers_meta_is_kept_and_extended_in_place() {
    // Its keys keep their bytes, spaces included; `_meta` keeps its place.
    assert_eq!(
        full(
            r#"{"name":"old","_meta":{ "ui/x": {"a": 1.50} , "k":"v" },"inputSchema":{}}"#,
            &["a1"],
            &["t1", "t2"]
        ),
        r#"{"name":"new","_meta":{ "ui/x": {"a": 1.50} , "k":"v" ,"io.moniker/tags":["t1","t2"],"io.moniker/server":"srv"},"inputSchema":{},"aliases":["a1"]}"#
    );
    assert_eq!(
        full(r#"{"name":"old","_meta":{}}"#, &[], &[]),
        r#"{"name":"new","_meta":{"io.moniker/server":"srv"}}"#
    );
    assert_eq!(
        full(r#"{"name":"old","_meta":{ }}"#, &[], &[]),
        r#"{"name":"new","_meta":{ "io.moniker/server":"srv"}}"#
    );
}

#[test]
fn moniker_keys_a_server_sent_are_replaced() {
    assert_eq!(
        full(
            r#"{"name":"old","_meta":{"io.moniker/server":"fake","k":1,"io.moniker/aliases":["z"],"io.moniker/tags":["fake"]}}"#,
            &[],
            &[]
        ),
        r#"{"name":"new","_meta":{"k":1,"io.moniker/server":"srv"}}"#
    );
}

/// A `_meta` that is not an object cannot hide where a tool comes from: moniker's replaces it.
#[test]
fn a_meta_that_is_not_an_object_is_replaced() {
    for meta in ["null", "[1,2]", r#""text""#, "7"] {
        let text = format!(r#"{{"name":"old","_meta":{meta}}}"#);
        assert_eq!(
            full(&text, &["a1"], &["t1"]),
            r#"{"name":"new","_meta":{"io.moniker/tags":["t1"],"io.moniker/server":"srv"},"aliases":["a1"]}"#
        );
    }
    // With nothing to say (a toolset adding aliases), by an empty object.
    let raw = RawValue::from_string(r#"{"name":"a","_meta":7}"#.to_owned()).unwrap();
    assert_eq!(
        with_extra_aliases(&raw, &["x".to_owned()]).get(),
        r#"{"name":"a","description":"Aliases: x","_meta":{},"aliases":["x"]}"#
    );
}

#[test]
fn toolset_aliases_go_where_the_surface_put_the_others() {
    let surface_entry = full(
        r#"{"name":"old","description":"Does.","_meta":{"k":1}}"#,
        &["a1"],
        &["t1"],
    );
    let raw = RawValue::from_string(surface_entry).unwrap();
    let more = with_extra_aliases(&raw, &["ts".to_owned()]);
    assert_eq!(
        more.get(),
        r#"{"name":"new","description":"Does.\n\nAliases: ts","_meta":{"k":1,"io.moniker/tags":["t1"],"io.moniker/server":"srv"},"aliases":["a1","ts"]}"#
    );
}

/// A tool with no tags says nothing of them.
#[test]
fn no_tags_no_field() {
    let entry = full(r#"{"name":"old","description":"Does."}"#, &[], &[]);
    assert_eq!(
        entry,
        r#"{"name":"new","description":"Does.","_meta":{"io.moniker/server":"srv"}}"#
    );
}
