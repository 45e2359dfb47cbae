//! Where a tool or prompt call goes: a pure decision on the call (the name the client used,
//! its arguments) against the surface and the equipped toolset. No locks, no I/O, no clock:
//! the session carries the decision out (limits, progress, the forward, the record).

use moniker_surface::params::Params;
use moniker_surface::toolsets::Selection;
use moniker_surface::{Exposed, Kind, Origin, Route, Surface, Via, actions};
use serde_json::value::RawValue;

use crate::message;

/// The decision.
#[derive(Debug)]
pub(crate) enum Decision<'v> {
    /// No tool or prompt of that name under this surface and toolset.
    Unknown,
    /// An action tool whose arguments choose no member: the tool error to answer with.
    Refused {
        exposed: &'v Exposed,
        via: Via,
        message: String,
    },
    /// Send it to `origin`.
    Forward(Forward<'v>),
}

/// A call to send on.
#[derive(Debug)]
pub(crate) struct Forward<'v> {
    /// What the name resolved to, and how the client named it.
    pub exposed: &'v Exposed,
    pub via: Via,
    /// The server and the name it knows the tool or prompt by.
    pub origin: &'v Origin,
    /// Arguments that replace the client's (an action member's own, or those `call_tool`
    /// was given); `None`: the client's go as they are.
    pub arguments: Option<String>,
    /// The action member chosen (`action`, member's name), for an action tool.
    pub action: Option<(&'v str, &'v str)>,
}

/// The arguments a call carries: the request's own, or those given for it (`call_tool`'s),
/// which stand in for the request's.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arguments<'a> {
    Own(Option<&'a str>),
    Given(&'a str),
}

/// Decides the call of `name` (a `kind`) with its `arguments`.
pub(crate) fn decide<'v>(
    surface: &'v Surface,
    selection: Option<&'v Selection>,
    kind: Kind,
    name: &str,
    arguments: Arguments<'_>,
) -> Decision<'v> {
    let (given, own) = match arguments {
        Arguments::Own(own) => (None, own),
        Arguments::Given(given) => (Some(given), None),
    };
    let resolved = match selection {
        Some(selection) => moniker_surface::toolsets::resolve(surface, selection, kind, name),
        None => surface.resolve(kind, name),
    };
    let Some(resolved) = resolved else {
        return Decision::Unknown;
    };
    let (exposed, via) = (resolved.exposed, resolved.via);
    // A toolset that selects some members of an action tool offers those actions alone.
    let route = match selection {
        Some(selection) => selection.route_of(exposed),
        None => &exposed.route,
    };
    let refused = |message| Decision::Refused {
        exposed,
        via,
        message,
    };
    if let Some(why) = &exposed.withheld {
        return refused(why.to_string());
    }
    match route {
        Route::Origin(origin) => match through(
            [
                selection
                    .and_then(|s| s.reshaped.get(&exposed.name))
                    .map(|r| &*r.params),
                exposed.params.as_deref(),
            ],
            given,
            own,
        ) {
            Ok(arguments) => Decision::Forward(Forward {
                exposed,
                via,
                origin,
                arguments,
                action: None,
            }),
            Err(message) => refused(message),
        },
        Route::Action(route) => {
            let arguments = given.or(own).and_then(message::read::<&RawValue>);
            let (i, arguments) = match actions::dispatch(&route.specs, arguments) {
                Ok(chosen) => chosen,
                Err(message) => return refused(message),
            };
            let member = &route.members[i];
            if let Some(why) = &member.withheld {
                return refused(why.to_string());
            }
            match through([None, member.params.as_deref()], Some(&arguments), None) {
                Ok(shaped) => Decision::Forward(Forward {
                    exposed,
                    via,
                    origin: &member.origin,
                    arguments: Some(shaped.unwrap_or(arguments)),
                    action: Some((member.action.as_str(), member.name.as_str())),
                }),
                Err(message) => refused(message),
            }
        }
    }
}

/// The arguments to send, through the parameter rules there are (the toolset's, then the
/// tool's): `given` (which replaces the request's own) or the request's `own`, rewritten;
/// `None`: the request's own go as they are.
fn through(
    layers: [Option<&Params>; 2],
    given: Option<&str>,
    own: Option<&str>,
) -> Result<Option<String>, String> {
    // A toolset's rules know the names the tool lists; the tool's rules take more (the
    // server's own name of a renamed parameter, aliases): none of those may reach a parameter
    // the toolset withholds.
    if let [Some(outer), Some(inner)] = layers {
        if let Some(text) = given.or(own) {
            // What cannot be read is refused by the rules themselves, below.
            let keys: indexmap::IndexMap<String, &RawValue> =
                serde_json::from_str(text).unwrap_or_default();
            if let Some(why) = keys.keys().find_map(|k| outer.refused_through(inner, k)) {
                return Err(why);
            }
        }
    }
    let mut now: Option<String> = given.map(str::to_owned);
    for params in layers.into_iter().flatten() {
        let arguments = now.as_deref().or(own);
        if let Some(rewritten) = params.arguments(arguments)? {
            now = Some(rewritten);
        }
    }
    Ok(now)
}

#[cfg(test)]
mod tests {
    use moniker_surface::{ActionRule, AliasRule, Listing, Name, Override, Rules, build};
    use serde_json::json;

    use super::*;

    /// `gh`: `get_pr_info` (alias `pr_info`); `ctx`: `create_project`, `list_projects`
    /// folded into the action tool `project`.
    fn surface() -> Surface {
        let mut rules = Rules::default();
        rules.tools.insert(
            "get_pr_info".into(),
            Override {
                aliases: vec![AliasRule {
                    name: "pr_info".parse().unwrap(),
                    hidden: false,
                    deprecated: None,
                }],
                ..Default::default()
            },
        );
        let mut members = indexmap::IndexMap::new();
        members.insert(
            "create".to_owned(),
            "create_project".parse::<Name>().unwrap(),
        );
        members.insert("list".to_owned(), "list_projects".parse::<Name>().unwrap());
        rules.actions.insert(
            "project".into(),
            ActionRule {
                tools: members,
                ..Default::default()
            },
        );
        let listing = |server: &str, tools: &[&str]| Listing {
            server: server.parse().unwrap(),
            tools: tools
                .iter()
                .map(|t| {
                    let tool = json!({"name": t, "inputSchema": {"type": "object"}});
                    RawValue::from_string(tool.to_string()).unwrap()
                })
                .collect(),
            prompts: vec![],
            version: None,
        };
        let built = build(
            &rules,
            &[
                listing("gh", &["get_pr_info"]),
                listing("ctx", &["create_project", "list_projects"]),
            ],
        );
        built.surface.expect("a surface")
    }

    #[test]
    fn a_call_is_decided_from_its_name_and_arguments_alone() {
        let surface = surface();
        let Decision::Forward(f) =
            decide(&surface, None, Kind::Tool, "pr_info", Arguments::Own(None))
        else {
            panic!("an alias resolves");
        };
        assert_eq!(
            (f.origin.server.as_str(), f.origin.name.as_str()),
            ("gh", "get_pr_info")
        );
        assert_eq!((f.via, f.arguments, f.action), (Via::Alias, None, None));

        let own = r#"{"action":"list","arguments":{"q":1}}"#;
        let Decision::Forward(f) = decide(
            &surface,
            None,
            Kind::Tool,
            "project",
            Arguments::Own(Some(own)),
        ) else {
            panic!("an action dispatches");
        };
        assert_eq!(f.origin.name, "list_projects");
        assert_eq!(f.action, Some(("list", "list_projects")));
        assert!(f.arguments.is_some());

        // `call_tool`'s arguments stand in for the request's own.
        let given = r#"{"action":"create"}"#;
        let Decision::Forward(f) = decide(
            &surface,
            None,
            Kind::Tool,
            "project",
            Arguments::Given(given),
        ) else {
            panic!("an action dispatches");
        };
        assert_eq!(f.origin.name, "create_project");

        let refused = decide(
            &surface,
            None,
            Kind::Tool,
            "project",
            Arguments::Own(Some(r#"{"action":"drop"}"#)),
        );
        assert!(
            matches!(refused, Decision::Refused { ref message, .. } if message.contains("drop")),
            "{refused:?}"
        );
        assert!(matches!(
            decide(&surface, None, Kind::Tool, "nope", Arguments::Own(None)),
            Decision::Unknown
        ));
        assert!(matches!(
            decide(
                &surface,
                None,
                Kind::Prompt,
                "pr_info",
                Arguments::Own(None)
            ),
            Decision::Unknown
        ));
    }

    /// `gh`'s `search` (`repository` renamed `repo`, `tenant` fixed) and `ctx`'s
    /// `create_project` (its `path` renamed `dir`) folded into the action tool `project`.
    fn shaped_surface() -> Surface {
        use moniker_surface::params::{Fixed, ParamRule};
        let mut rules = Rules::default();
        let rule = |pairs: Vec<(&str, ParamRule)>| Override {
            params: pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            ..Default::default()
        };
        rules.tools.insert(
            "search".into(),
            rule(vec![
                (
                    "repository",
                    ParamRule {
                        rename: Some("repo".into()),
                        ..Default::default()
                    },
                ),
                (
                    "tenant",
                    ParamRule {
                        fixed: Some(Fixed(json!("t-1"))),
                        ..Default::default()
                    },
                ),
            ]),
        );
        rules.tools.insert(
            "create_project".into(),
            rule(vec![(
                "path",
                ParamRule {
                    rename: Some("dir".into()),
                    ..Default::default()
                },
            )]),
        );
        let mut members = indexmap::IndexMap::new();
        members.insert(
            "create".to_owned(),
            "create_project".parse::<Name>().unwrap(),
        );
        rules.actions.insert(
            "project".into(),
            ActionRule {
                tools: members,
                ..Default::default()
            },
        );
        let schema = |props: &[&str]| {
            let props: serde_json::Map<String, serde_json::Value> = props
                .iter()
                .map(|p| ((*p).to_owned(), json!({"type": "string"})))
                .collect();
            json!({"type": "object", "properties": props, "required": [props.keys().next()]})
        };
        let listing = |server: &str, tool: &str, props: &[&str]| Listing {
            server: server.parse().unwrap(),
            tools: vec![
                RawValue::from_string(
                    json!({"name": tool, "inputSchema": schema(props)}).to_string(),
                )
                .unwrap(),
            ],
            prompts: vec![],
            version: None,
        };
        build(
            &rules,
            &[
                listing("gh", "search", &["repository", "tenant", "q"]),
                listing("ctx", "create_project", &["name", "path"]),
            ],
        )
        .surface
        .expect("a surface")
    }

    #[test]
    fn a_call_goes_back_through_its_tools_parameter_rules() {
        let surface = shaped_surface();
        let sent = |name: &str, args: &str| match decide(
            &surface,
            None,
            Kind::Tool,
            name,
            Arguments::Own(Some(args)),
        ) {
            Decision::Forward(f) => {
                serde_json::from_str::<serde_json::Value>(&f.arguments.expect("rewritten")).unwrap()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(
            sent("search", r#"{"repo":"a/b","q":"x"}"#),
            json!({"repository": "a/b", "q": "x", "tenant": "t-1"})
        );
        let refused = decide(
            &surface,
            None,
            Kind::Tool,
            "search",
            Arguments::Own(Some(r#"{"repo":"a/b","tenant":"mine"}"#)),
        );
        assert!(
            matches!(&refused, Decision::Refused { message, .. } if message.contains("`tenant` is set by the gateway") && !message.contains("t-1")),
            "{refused:?}"
        );
        // An action tool's member keeps its rules: the action's arguments go through them.
        assert_eq!(
            sent("project", r#"{"action":"create","name":"n","dir":"/p"}"#),
            json!({"name": "n", "path": "/p"})
        );
        // call_tool's arguments go through them too.
        let Decision::Forward(f) = decide(
            &surface,
            None,
            Kind::Tool,
            "search",
            Arguments::Given(r#"{"repo":"c/d"}"#),
        ) else {
            panic!("forwarded");
        };
        assert_eq!(
            f.arguments.as_deref(),
            Some(r#"{"repository":"c/d","tenant":"t-1"}"#)
        );
    }

    #[test]
    fn a_toolsets_rules_go_first_then_the_tools() {
        use moniker_surface::params::{Fixed, ParamRule};
        use moniker_surface::toolsets::{ToolsetRule, select};
        let surface = shaped_surface();
        let rule = ToolsetRule {
            tools: vec!["search".into()],
            params: [(
                "search".to_owned(),
                [(
                    "q".to_owned(),
                    ParamRule {
                        fixed: Some(Fixed(json!("pinned"))),
                        ..Default::default()
                    },
                )]
                .into(),
            )]
            .into(),
            ..Default::default()
        };
        let sets = [("t".to_owned(), rule)].into();
        let selection = select(&surface, "t", &sets).expect("a selection");
        let Decision::Forward(f) = decide(
            &surface,
            Some(&selection),
            Kind::Tool,
            "search",
            Arguments::Own(Some(r#"{"repo":"a/b"}"#)),
        ) else {
            panic!("forwarded");
        };
        assert_eq!(
            f.arguments.as_deref(),
            Some(r#"{"repository":"a/b","q":"pinned","tenant":"t-1"}"#)
        );
        let refused = decide(
            &surface,
            Some(&selection),
            Kind::Tool,
            "search",
            Arguments::Own(Some(r#"{"repo":"a/b","q":"mine"}"#)),
        );
        assert!(matches!(refused, Decision::Refused { .. }), "{refused:?}");
    }

    /// The attacker review, findings 2 and 3: a toolset that hides a renamed parameter (`repo`,
    /// the server's `repository`) was passed by its server name, which only the tool's rules
    /// know; a hidden or fixed parameter in another case or form (`TENANT`, a fullwidth `ｔ`) went to the
    /// server as it came, where a server that reads keys without regard to case takes it.
    #[test]
    fn a_withheld_parameter_is_refused_under_every_name_and_case() {
        use moniker_surface::params::ParamRule;
        use moniker_surface::toolsets::{ToolsetRule, select};
        let surface = shaped_surface();
        let hide_repo = ToolsetRule {
            tools: vec!["search".into()],
            params: [(
                "search".to_owned(),
                [(
                    "repo".to_owned(),
                    ParamRule {
                        hidden: true,
                        ..Default::default()
                    },
                )]
                .into(),
            )]
            .into(),
            ..Default::default()
        };
        let sets = [("t".to_owned(), hide_repo)].into();
        let selection = select(&surface, "t", &sets).expect("a selection");
        for args in [
            r#"{"repo":"x"}"#,
            r#"{"repository":"x"}"#,
            r#"{"REPOSITORY":"x"}"#,
            r#"{"Repo":"x"}"#,
        ] {
            let refused = decide(
                &surface,
                Some(&selection),
                Kind::Tool,
                "search",
                Arguments::Own(Some(args)),
            );
            assert!(
                matches!(refused, Decision::Refused { .. }),
                "{args}: {refused:?}"
            );
        }
        for args in [
            r#"{"repo":"a/b","TENANT":"mine"}"#,
            r#"{"repo":"a/b","Tenant":"mine"}"#,
            r#"{"repo":"a/b","\uff54enant":"mine"}"#,
            r#"{"repo":"a/b","tenan\u0074":"mine"}"#,
        ] {
            let refused = decide(
                &surface,
                None,
                Kind::Tool,
                "search",
                Arguments::Own(Some(args)),
            );
            assert!(
                matches!(&refused, Decision::Refused { message, .. } if message.contains("tenant")),
                "{args}: {refused:?}"
            );
        }
    }
}
