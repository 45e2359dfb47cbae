//! The built surface: what clients see, and the index that resolves names to routes.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::value::RawValue;

use crate::actions::ActionSpec;
use crate::names::{ServerId, Tag};
use crate::params::Params;
use crate::vocab::Kind;

/// Where an origin tool or prompt lives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    pub server: ServerId,
    /// The name the server knows it by. Never shown to clients.
    pub name: String,
}

/// Where a call goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    Origin(Origin),
    /// An action tool: the `action` argument picks the member.
    Action(ActionRoute),
}

/// The members of an action tool, in config order, with what dispatch checks.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionRoute {
    pub members: Vec<ActionMember>,
    pub specs: Vec<ActionSpec>,
    /// The action tool's own description and tags (its rule's): with the members, what it is
    /// made of again when a toolset selects some of its members.
    pub description: Option<String>,
    pub rule_tags: Vec<Tag>,
}

#[derive(Debug, Clone)]
pub struct ActionMember {
    pub action: String,
    /// The member's exposed name.
    pub name: String,
    pub origin: Origin,
    /// The member's own tags: a toolset chosen by tag selects the members whose tags (with the
    /// action tool's own) match, not the action tool by the union of them.
    pub tags: Vec<Tag>,
    pub server_name: String,
    /// The member's exposed definition, as the action tool was merged from it.
    pub definition: Box<RawValue>,
    /// The member's parameter rules: its arguments go back through them.
    pub params: Option<Arc<Params>>,
    /// Why its calls are refused: it drifted from the lock under `integrity: block`.
    pub withheld: Option<Arc<str>>,
}

impl PartialEq for ActionMember {
    fn eq(&self, other: &Self) -> bool {
        (
            &self.action,
            &self.name,
            &self.origin,
            &self.tags,
            &self.server_name,
            &self.params,
        ) == (
            &other.action,
            &other.name,
            &other.origin,
            &other.tags,
            &other.server_name,
            &other.params,
        ) && self.definition.get() == other.definition.get()
    }
}

/// A tool or prompt as moniker exposes it.
#[derive(Debug, Clone)]
pub struct Exposed {
    pub name: String,
    /// Listed aliases, in config order.
    pub aliases: Vec<String>,
    /// Callable, never listed.
    pub hidden_aliases: Vec<String>,
    pub tags: Vec<Tag>,
    pub server_name: String,
    pub route: Route,
    /// In `tools/list`. A member of an action tool whose legacy names are hidden is callable
    /// by its old names but not listed.
    pub listed: bool,
    /// For a member of an action tool: (the action tool, the action). Its names resolve as
    /// [`Via::Legacy`].
    pub member_of: Option<(String, String)>,
    /// The names of this item on a deprecation schedule (aliases, legacy names), with it.
    pub deprecated: std::collections::BTreeMap<String, crate::Deprecation>,
    /// The listing entry: the origin definition with `name` (and `description`) rewritten and
    /// `aliases`, `tags`, `server_name` added.
    pub definition: Box<RawValue>,
    /// Its parameter rules (`None`: its arguments go as the client gave them).
    pub params: Option<Arc<Params>>,
    /// Why it is not listed and its calls are refused: it drifted from the lock under
    /// `integrity: block` ([`crate::lock::withhold`]).
    pub withheld: Option<Arc<str>>,
}

impl Exposed {
    /// The origin behind an exposed tool; `None` for an action tool.
    pub fn origin(&self) -> Option<&Origin> {
        match &self.route {
            Route::Origin(origin) => Some(origin),
            Route::Action(_) => None,
        }
    }

    /// The servers a call may go to.
    pub fn servers(&self) -> impl Iterator<Item = &ServerId> {
        let (one, many) = match &self.route {
            Route::Origin(origin) => (Some(&origin.server), None),
            Route::Action(route) => (None, Some(route.members.iter().map(|m| &m.origin.server))),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

/// How a client named what it called: metrics and logs tell these apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Via {
    Name,
    Alias,
    /// The old name (or alias) of a member of an action tool.
    Legacy,
    /// The name of an action tool.
    Action,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Name => "name",
            Self::Alias => "alias",
            Self::Legacy => "legacy",
            Self::Action => "action",
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    index: u32,
    via: Via,
}

/// A resolved name: what it names, and how it was named.
#[derive(Debug, Clone, Copy)]
pub struct Resolved<'a> {
    pub exposed: &'a Exposed,
    pub via: Via,
}

/// Everything a client sees, with one index per kind from every exposed name and alias.
#[derive(Debug, Clone, Default)]
pub struct Surface {
    tools: Vec<Exposed>,
    prompts: Vec<Exposed>,
    tool_index: HashMap<Box<str>, Entry>,
    prompt_index: HashMap<Box<str>, Entry>,
    /// The server every tool (`[0]`) or prompt (`[1]`) is of, when they are of one: said once by
    /// a listing ([`Surface::server`]).
    servers: [Option<String>; 2],
    /// How clients discover tools when no toolset says otherwise: the rules'.
    discovery: crate::rules::Discovery,
}

impl Surface {
    pub(crate) fn from_parts(
        tools: Vec<Exposed>,
        prompts: Vec<Exposed>,
        servers: [Option<String>; 2],
        discovery: crate::rules::Discovery,
    ) -> Self {
        fn index(items: &[Exposed]) -> HashMap<Box<str>, Entry> {
            let mut map = HashMap::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                // Validation has already proved every name and alias unique, and a surface
                // with more than u32::MAX tools cannot have been listed by any server.
                let index = i as u32;
                let (by_name, by_alias) = match (&item.route, &item.member_of) {
                    (_, Some(_)) => (Via::Legacy, Via::Legacy),
                    (Route::Action(_), None) => (Via::Action, Via::Alias),
                    (Route::Origin(_), None) => (Via::Name, Via::Alias),
                };
                map.insert(
                    item.name.as_str().into(),
                    Entry {
                        index,
                        via: by_name,
                    },
                );
                for alias in item.aliases.iter().chain(&item.hidden_aliases) {
                    map.insert(
                        alias.as_str().into(),
                        Entry {
                            index,
                            via: by_alias,
                        },
                    );
                }
            }
            map
        }
        Self {
            tool_index: index(&tools),
            prompt_index: index(&prompts),
            tools,
            prompts,
            servers,
            discovery,
        }
    }

    /// The server name every entry of `kind` has, when they have one. Then no entry says it
    /// in its `_meta`: a listing of them says it once, in its own (give it to
    /// [`listing::render`](crate::listing::render)). Several servers: each entry says its own.
    pub fn server(&self, kind: Kind) -> Option<&str> {
        self.servers[match kind {
            Kind::Tool => 0,
            Kind::Prompt => 1,
        }]
        .as_deref()
    }

    /// How clients discover tools when no toolset says otherwise.
    pub fn discovery(&self) -> &crate::rules::Discovery {
        &self.discovery
    }

    /// What `tools/list` or `prompts/list` shows, sorted by name.
    pub fn listed(&self, kind: Kind) -> impl Iterator<Item = &Exposed> {
        self.items(kind).iter().filter(|e| e.listed)
    }

    /// Every callable tool (listed or not), sorted by name.
    pub fn tools(&self) -> &[Exposed] {
        &self.tools
    }

    /// Every callable prompt, sorted by name.
    pub fn prompts(&self) -> &[Exposed] {
        &self.prompts
    }

    pub fn items(&self, kind: Kind) -> &[Exposed] {
        match kind {
            Kind::Tool => &self.tools,
            Kind::Prompt => &self.prompts,
        }
    }

    /// One hash lookup: an exposed name or alias (case-sensitive) to what it names.
    #[inline]
    pub fn resolve(&self, kind: Kind, name: &str) -> Option<Resolved<'_>> {
        let (index, items) = match kind {
            Kind::Tool => (&self.tool_index, &self.tools),
            Kind::Prompt => (&self.prompt_index, &self.prompts),
        };
        let entry = index.get(name)?;
        Some(Resolved {
            exposed: &items[entry.index as usize],
            via: entry.via,
        })
    }

    /// The tools or prompts, to change in place (the integrity seal withholds some).
    pub(crate) fn items_mut(&mut self, kind: Kind) -> &mut [Exposed] {
        match kind {
            Kind::Tool => &mut self.tools,
            Kind::Prompt => &mut self.prompts,
        }
    }

    pub fn resolve_tool(&self, name: &str) -> Option<Resolved<'_>> {
        self.resolve(Kind::Tool, name)
    }

    pub fn resolve_prompt(&self, name: &str) -> Option<Resolved<'_>> {
        self.resolve(Kind::Prompt, name)
    }
}
