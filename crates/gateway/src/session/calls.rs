//! Names: `tools/list` and `prompts/list` from the session's view, and `tools/call` and
//! `prompts/get` resolved (aliases, legacy names, actions, the equipped toolset) to the origin
//! they route to; the toolset management tools.

use std::sync::Arc;

use std::borrow::Cow;

use moniker_surface::toolsets::MANAGEMENT_TOOLS;
use moniker_surface::{Exposed, Kind, Via, discovery, listing, management};
use serde_json::value::RawValue;
use tracing::Instrument as _;

use super::{Answers, Reply, Session, Toolset, id_of};
use crate::call::Call;
use crate::errors::{self, Refusal};
use crate::message::{self, Field, Message};
use crate::metrics::Outcome;
use crate::route::{self, Decision};
use crate::sync::lock;
use crate::toolsets::{Effect, Equipped};
use crate::view::View;

/// A call to route: the name the client called, and the arguments to send instead of the
/// request's own (`call_tool` carries them inside its own).
#[derive(Clone, Copy)]
pub(super) struct Named<'a> {
    pub name: &'a str,
    pub arguments: Option<&'a str>,
}

impl Session {
    /// The session's toolset resolved against `view`; `None` when none is equipped.
    pub(super) fn equipped(&self, view: &Arc<View>) -> Option<Arc<Toolset>> {
        let name = lock(&self.toolset).clone()?;
        let mut cache = lock(&self.equipped);
        if let Some((at, toolset)) = cache.as_ref() {
            if Arc::ptr_eq(at, view) && toolset.equipped.name == name {
                return Some(toolset.clone());
            }
        }
        let equipped = Equipped::new(&name, &view.surface, &view.up, &self.gateway.catalog.sets());
        let extra = if self.manages() {
            management::definitions()
        } else {
            &[]
        };
        let toolset = Arc::new(Toolset {
            tools_result: equipped.render(&view.surface, Kind::Tool, extra),
            prompts_result: equipped.render(&view.surface, Kind::Prompt, &[]),
            equipped,
        });
        *cache = Some((view.clone(), toolset.clone()));
        Some(toolset)
    }

    /// Management tools are shown to this session.
    fn manages(&self) -> bool {
        self.gateway.settings.manage && !self.peer.is_bound()
    }

    /// Equips or unequips, and tells the client its listing changed.
    fn set_toolset(&self, toolset: Option<String>) {
        *lock(&self.toolset) = toolset;
        *lock(&self.equipped) = None;
        self.peer.list_changed(Kind::Tool);
        self.peer.list_changed(Kind::Prompt);
    }

    /// `tools/list` and `prompts/list`: the session's view (its toolset's, when one is
    /// equipped; with the management tools at the end when it manages toolsets), in one page
    /// rendered once per view, or in pages of `page_size` items when one is configured (the
    /// cursor names the offset of the next page).
    pub(super) fn list(&self, request: &Message, kind: Kind) -> Message {
        let id = id_of(request);
        let view = self.gateway.view();
        let equipped = self.equipped(&view);
        let page_size = self.gateway.settings.config.page_size;
        let Some(size) = page_size.map(|n| (n as usize).max(1)) else {
            if request.cursor().is_some() {
                return Refusal::invalid_params(
                    "Invalid cursor: moniker lists everything in one page",
                )
                .answer(id);
            }
            let result = match (kind, &equipped) {
                (Kind::Tool, Some(e)) => &e.tools_result,
                (Kind::Prompt, Some(e)) => &e.prompts_result,
                (Kind::Tool, None) => &view.tools_result,
                (Kind::Prompt, None) => &view.prompts_result,
            };
            return Message::result(id, result);
        };
        let Some(start) = request.cursor().map_or(Some(0), cursor_offset) else {
            return Refusal::invalid_params("Invalid cursor").answer(id);
        };
        let extra = if kind == Kind::Tool && self.manages() {
            management::definitions()
        } else {
            &[]
        };
        let (items, discovery): (Vec<Cow<'_, RawValue>>, _) = match &equipped {
            Some(e) => (
                e.equipped.entries(&view.surface, kind),
                &e.equipped.discovery,
            ),
            None => (view.entries(kind), view.surface.discovery()),
        };
        // The page holds (the first of) the entries from `start` on.
        let server = discovery.server(&view.surface, kind, items.len().saturating_sub(start));
        let all = items
            .iter()
            .map(|c| c.as_ref())
            .chain(extra.iter().map(|b| &**b));
        match page(kind, all, start, size, server) {
            Some(page) => Message::result(id, &page),
            None => Refusal::invalid_params("Invalid cursor").answer(id),
        }
    }

    /// `tools/call` and `prompts/get`: moniker's own tools are answered here; any other name
    /// is routed. The call is one [`Call`] from here to its end, where it is finished once.
    pub(super) async fn call(
        self: &Arc<Self>,
        request: &Message,
        kind: Kind,
        answers: &Answers,
    ) -> Reply {
        let id = id_of(request);
        let invalid = |why: &str| Some(Refusal::invalid_params(why).answer(id));
        let Some(params) = request.params() else {
            return invalid("missing params");
        };
        if !params.starts_with('{') {
            return invalid("params must be an object");
        }
        let Some(name) = request.name() else {
            return invalid("missing `name`");
        };
        let mut record = self.record(Some(kind), name.as_ref().to_owned(), request, answers);
        let reply = self
            .dispatch(request, kind, &name, answers, &mut record)
            .await;
        record.finish();
        reply
    }

    async fn dispatch(
        self: &Arc<Self>,
        request: &Message,
        kind: Kind,
        name: &str,
        answers: &Answers,
        record: &mut Call,
    ) -> Reply {
        let view = self.gateway.view();
        if kind == Kind::Tool && self.manages() && MANAGEMENT_TOOLS.contains(&name) {
            return Some(self.manage(request, name, &view));
        }
        let equipped = self.equipped(&view);
        if kind == Kind::Tool && self.searches(&view, equipped.as_deref()) {
            match name {
                discovery::SEARCH_TOOLS => {
                    record.via = Some(Via::Name);
                    return Some(self.search(request, &view, equipped.as_deref(), record));
                }
                discovery::CALL_TOOL => {
                    return self
                        .call_found(request, &view, equipped.as_deref(), answers, record)
                        .await;
                }
                _ => {}
            }
        }
        let call = Named {
            name,
            arguments: None,
        };
        self.route(request, call, &view, equipped.as_deref(), answers, record)
            .await
    }

    /// Resolves `call.name` (aliases, legacy names, actions, the equipped toolset), rewrites
    /// it to the origin name and forwards `request` so rewritten, under the limits of its
    /// server and its tool or prompt.
    pub(super) async fn route(
        self: &Arc<Self>,
        request: &Message,
        call: Named<'_>,
        view: &Arc<View>,
        equipped: Option<&Toolset>,
        answers: &Answers,
        record: &mut Call,
    ) -> Reply {
        let id = id_of(request);
        let kind = record.kind.unwrap_or(Kind::Tool);
        let name = call.name;
        let selection = equipped.map(|e| &e.equipped.selection);
        let decision = route::decide(
            &view.surface,
            selection,
            kind,
            name,
            call.arguments,
            request.arguments(),
        );
        let forward = match decision {
            Decision::Forward(forward) => forward,
            Decision::Unknown => {
                let refusal = Refusal::UnknownName {
                    kind,
                    name: name.to_owned(),
                };
                tracing::debug!(name = %name, "{} not found", kind.noun());
                record.refused(&refusal);
                return Some(refusal.answer(id));
            }
            Decision::Refused {
                exposed,
                via,
                message,
            } => {
                self.resolved(record, name, exposed, via, kind);
                tracing::debug!(action_tool = %exposed.name, %message, "action refused");
                record.outcome = Outcome::ToolError;
                return Some(Message::result(id, &errors::tool_error(&message)));
            }
        };
        let (exposed, origin, arguments) = (forward.exposed, forward.origin, forward.arguments);
        self.resolved(record, name, exposed, forward.via, kind);
        if let Some((action, member)) = forward.action {
            tracing::debug!(action_tool = %exposed.name, %action, %member, "action dispatched");
        }
        record.server = Some(origin.server.clone());
        record.origin = Some(origin.name.clone());
        let default = self.gateway.settings.config.call_timeout;
        let admitted =
            match self
                .gateway
                .limits
                .admit(&origin.server, Some((kind, &origin.name)), default)
            {
                Ok(admitted) => admitted,
                Err(refusal) => {
                    tracing::debug!(server = %origin.server, "{refusal}");
                    record.refused(&refusal);
                    return Some(refusal.answer(id));
                }
            };
        tracing::debug!(requested = %name, name = %exposed.name, via = forward.via.as_str(), server = %origin.server, origin = %origin.name, "{} call", kind.noun());
        let token = self.progress_route(request, answers, &origin.server);
        let rewritten = request.call_params(
            &message::string(&origin.name),
            arguments.as_deref(),
            token.as_deref(),
        );
        let method = record.method();
        let span = tracing::debug_span!("call", tool = %exposed.name, requested = %name, via = forward.via.as_str(), server = %origin.server, origin = %origin.name);
        let trace = record.sending(
            self.gateway.telemetry.as_ref(),
            &origin.server,
            &origin.name,
        );
        let mut rewritten = self.for_server(&origin.server, rewritten);
        if let (Some(trace), Some(params)) = (trace, &rewritten) {
            rewritten = Some(crate::telemetry::with_context(params, &trace));
        }
        let (reply, outcome) = self
            .forward_admitted(
                request,
                &origin.server,
                method,
                rewritten.as_ref(),
                admitted,
                answers.caller(),
            )
            .instrument(span)
            .await;
        let reply = self
            .input_for_server(
                request,
                &origin.server,
                method,
                rewritten.as_ref(),
                reply,
                answers.caller(),
            )
            .await;
        // A call run as a task answers with the task: its id names the server.
        let as_task = request.field(Field::Task).is_some();
        let reply = match reply {
            Some(reply) if as_task => Some(self.started_task(reply, &origin.server)),
            reply => reply,
        };
        record.ended(outcome, reply.as_ref());
        if let Some(token) = token {
            self.gateway.hub.forget_progress(&token);
        }
        reply
    }

    /// Notes what a name resolved to: on the call's record, in the log, and for an alias or
    /// a legacy name in the metrics (and a deprecation warning to the client).
    fn resolved(&self, record: &mut Call, name: &str, exposed: &Exposed, via: Via, kind: Kind) {
        record.exposed = Some(exposed.name.clone());
        record.via = Some(via);
        log_resolution(name, exposed, via, kind);
        if matches!(via, Via::Alias | Via::Legacy) {
            let deprecated = exposed.deprecated.get(name);
            if let Some(d) = deprecated {
                self.warn_deprecated(name, &exposed.name, d);
            }
            self.gateway
                .metrics
                .alias_call(name, &exposed.name, deprecated.is_some());
        }
    }

    /// A call of one of moniker's management tools.
    fn manage(&self, request: &Message, tool: &str, view: &Arc<View>) -> Message {
        let arguments: serde_json::Value = request
            .arguments()
            .and_then(message::read)
            .unwrap_or(serde_json::Value::Null);
        let active = self.equipped(view);
        let (result, effect) = crate::toolsets::call(
            &self.gateway.catalog,
            &view.surface,
            &view.up,
            active.as_deref().map(|t| &t.equipped),
            tool,
            &arguments,
        );
        tracing::info!(tool, "management tool call");
        match effect {
            Effect::None => {}
            Effect::Equip(name) => {
                tracing::info!(toolset = %name, "toolset equipped");
                self.set_toolset(Some(name));
            }
            Effect::Unequip => {
                tracing::info!("toolset unequipped");
                self.set_toolset(None);
            }
        }
        Message::result(id_of(request), &result)
    }
}

impl Session {
    /// The first call of a deprecated name in this session is logged as a warning.
    fn warn_deprecated(&self, name: &str, tool: &str, d: &moniker_surface::Deprecation) {
        if lock(&self.warned).insert(name.to_owned()) {
            let instead = d.use_instead.as_deref().unwrap_or(tool);
            tracing::warn!(
                name,
                tool,
                since = %d.since,
                remove_after = %d.remove_after,
                "a client called the deprecated name `{name}`: it stops working after {}; use `{instead}`",
                d.remove_after
            );
        }
    }
}

fn log_resolution(name: &str, exposed: &moniker_surface::Exposed, via: Via, kind: Kind) {
    let noun = if kind == Kind::Tool { "tool" } else { "prompt" };
    match via {
        Via::Alias => {
            tracing::debug!(alias = %name, canonical = %exposed.name, "Resolved {noun} alias to canonical name")
        }
        Via::Legacy => {
            let (tool, action) = exposed
                .member_of
                .as_ref()
                .map_or(("", ""), |(t, a)| (t.as_str(), a.as_str()));
            tracing::debug!(legacy = %name, canonical = %exposed.name, action_tool = tool, action, "Resolved legacy name to action tool member");
        }
        Via::Name | Via::Action => {}
    }
}

/// The offset a cursor of moniker's names (`"page-N"`); `None` for one moniker did not give.
fn cursor_offset(raw: &str) -> Option<usize> {
    message::unquote(raw)?
        .strip_prefix("page-")?
        .parse::<usize>()
        .ok()
}

/// One page of a listing: `size` items from `start`, with `nextCursor` when more follow;
/// `None` when `start` is past the end.
fn page<'a>(
    kind: Kind,
    items: impl Iterator<Item = &'a RawValue>,
    start: usize,
    size: usize,
    server: Option<&str>,
) -> Option<String> {
    let items: Vec<&RawValue> = items.collect();
    if start > items.len() {
        return None;
    }
    let end = items.len().min(start + size);
    let mut out = listing::render(kind, items[start..end].iter().copied(), &[], server);
    if end < items.len() {
        // Before the result's closing brace.
        out.pop();
        out.push_str(&format!(r#","nextCursor":"page-{end}"}}"#));
    }
    Some(out)
}
