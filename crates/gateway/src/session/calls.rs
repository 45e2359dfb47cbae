//! Names: `tools/list` and `prompts/list` from the session's view, and `tools/call` and
//! `prompts/get` resolved (aliases, legacy names, actions, the equipped toolset) to the origin
//! they route to; the toolset management tools.

use std::sync::Arc;

use std::borrow::Cow;

use moniker_surface::toolsets::MANAGEMENT_TOOLS;
use moniker_surface::{Exposed, Kind, Via, discovery, listing, management};
use serde_json::value::RawValue;
use tracing::Instrument as _;

use super::relay::Outbound;
use super::{Answers, Reply, Session, Toolset, id_of};
use crate::call::Call;
use crate::errors::{self, Refusal};
use crate::message::{self, Field, Message, Params};
use crate::metrics::Outcome;
use crate::route::{self, Decision};
use crate::sync::lock;
use crate::toolsets::{Effect, Equipped};
use crate::view::View;

/// What a session sees a call in: the view, and its toolset when one is equipped.
#[derive(Clone, Copy)]
pub(super) struct Seen<'a> {
    pub view: &'a Arc<View>,
    pub equipped: Option<&'a Toolset>,
}

/// A call to route: the name the client called, the arguments to send instead of the
/// request's own (`call_tool` carries them inside its own), and what the session sees it in.
#[derive(Clone, Copy)]
pub(super) struct Named<'a> {
    pub name: &'a str,
    pub arguments: Option<&'a str>,
    pub seen: Seen<'a>,
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
        let equipped = Equipped::new(
            &name,
            &view.surface,
            &view.serving,
            &self.gateway.naming.catalog.sets(),
        );
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
        let view = self.gateway.naming.view();
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
        let mut record = self.record(Some(kind), &name, request, answers);
        let reply = self.dispatch(request, &name, answers, &mut record).await;
        record.finish();
        reply
    }

    /// moniker's own tools (management, search mode) answered here, any other name routed.
    async fn dispatch(
        self: &Arc<Self>,
        request: &Message,
        name: &str,
        answers: &Answers,
        record: &mut Call,
    ) -> Reply {
        let kind = record.kind().unwrap_or(Kind::Tool);
        let view = self.gateway.naming.view();
        if kind == Kind::Tool && self.manages() && MANAGEMENT_TOOLS.contains(&name) {
            return Some(self.manage(request, name, &view));
        }
        let equipped = self.equipped(&view);
        let seen = Seen {
            view: &view,
            equipped: equipped.as_deref(),
        };
        if kind == Kind::Tool && self.searches(&view, seen.equipped) {
            match name {
                discovery::SEARCH_TOOLS => {
                    record.resolved(None, Via::Name, false);
                    return Some(self.search(request, &view, equipped.clone(), record).await);
                }
                discovery::CALL_TOOL => {
                    return self.call_found(request, seen, answers, record).await;
                }
                _ => {}
            }
        }
        let call = Named {
            name,
            arguments: None,
            seen,
        };
        self.route(request, call, answers, record).await
    }

    /// Routes a call: the pure decision ([`route::decide`]), then the call travels through
    /// named steps, each taking it as it is: resolved (or refused), admitted under the limits,
    /// rewritten for its server, sent (with the era's input rounds), ended.
    pub(super) async fn route(
        self: &Arc<Self>,
        request: &Message,
        call: Named<'_>,
        answers: &Answers,
        record: &mut Call,
    ) -> Reply {
        let forward = match self.resolve(request, call, record) {
            Ok(forward) => forward,
            Err(refused) => return refused,
        };
        let server = &forward.origin.server;
        let admitted = match self.admit(&forward, record) {
            Ok(admitted) => admitted,
            Err(refusal) => return Some(refusal.answer(id_of(request))),
        };
        let token = self.progress_route(request, answers, server);
        let params = self.rewrite(request, &forward, token.as_deref(), record);
        let acted = std::sync::OnceLock::new();
        let out = Outbound {
            request,
            server,
            method: record.method(),
            params: params.as_ref(),
            caller: answers.caller(),
            acted: Some(&acted),
        };
        let span = record.log_span();
        let (reply, outcome) = self.exchange(out, admitted).instrument(span).await;
        if let Some(subject) = acted.get() {
            record.acted_as(subject);
        }
        // A tool's error that reads as a refusal of its server's sandbox says which setting
        // would allow it (the reply as answered, after any input rounds).
        let refused_by_sandbox = record.ended(outcome, reply.as_ref());
        let reply = match (refused_by_sandbox, reply) {
            (Some(setting), Some(reply))
                if record.method() == "tools/call"
                    && reply.field(crate::message::Field::IsError) == Some("true") =>
            {
                Some(super::relay::with_note(reply, setting))
            }
            (_, reply) => reply,
        };
        if let Some(token) = token {
            self.gateway.services.hub.forget_progress(&token);
        }
        reply
    }

    /// The decision on `call`: where it goes, or the answer that refuses it (an unknown name;
    /// an action tool's call without its action), noted on the record.
    fn resolve<'v>(
        &self,
        request: &Message,
        call: Named<'v>,
        record: &mut Call,
    ) -> Result<route::Forward<'v>, Reply> {
        let id = id_of(request);
        let kind = record.kind().unwrap_or(Kind::Tool);
        let selection = call.seen.equipped.map(|e| &e.equipped.selection);
        let decision = route::decide(
            &call.seen.view.surface,
            selection,
            kind,
            call.name,
            call.arguments.map_or(
                route::Arguments::Own(request.arguments()),
                route::Arguments::Given,
            ),
        );
        match decision {
            Decision::Forward(forward) => {
                self.resolved(record, call.name, forward.exposed, forward.via);
                if let Some((action, member)) = &forward.action {
                    tracing::debug!(action_tool = %forward.exposed.name, %action, %member, "action dispatched");
                }
                record.routed(&forward.origin.server, &forward.origin.name);
                Ok(forward)
            }
            Decision::Unknown => {
                let refusal = Refusal::UnknownName {
                    kind,
                    name: call.name.to_owned(),
                };
                tracing::debug!(name = %call.name, "{} not found", kind.noun());
                record.refused(&refusal);
                Err(Some(refusal.answer(id)))
            }
            Decision::Refused {
                exposed,
                via,
                message,
            } => {
                self.resolved(record, call.name, exposed, via);
                tracing::debug!(action_tool = %exposed.name, %message, "action refused");
                record.tool_error();
                Err(Some(Message::result(id, &errors::tool_error(&message))))
            }
        }
    }

    /// Lets the call through under the limits of its server and its tool or prompt, or says
    /// which refused it (noted on the record).
    fn admit(
        &self,
        forward: &route::Forward<'_>,
        record: &mut Call,
    ) -> Result<crate::limits::Admitted, Refusal> {
        let kind = record.kind().unwrap_or(Kind::Tool);
        let origin = forward.origin;
        let default = self.gateway.settings.config.call_timeout;
        self.gateway
            .services
            .limits
            .admit(&origin.server, Some((kind, &origin.name)), default)
            .inspect_err(|refusal| {
                tracing::debug!(server = %origin.server, "{refusal}");
                record.refused(refusal);
            })
    }

    /// The params the server gets: its own name for the tool, the arguments (an action's
    /// own), moniker's progress token, the era's envelope, and the trace context.
    fn rewrite(
        &self,
        request: &Message,
        forward: &route::Forward<'_>,
        token: Option<&str>,
        record: &mut Call,
    ) -> Option<Params> {
        let origin = forward.origin;
        let rewritten = request.call_params(
            &message::string(&origin.name),
            forward.arguments.as_deref(),
            token,
        );
        let trace = record.sending(
            self.gateway.services.telemetry.as_ref(),
            &origin.server,
            &origin.name,
        );
        let rewritten = self.for_server(&origin.server, rewritten);
        match (trace, rewritten) {
            (Some(trace), Some(params)) => Some(crate::telemetry::with_context(&params, &trace)),
            (_, rewritten) => rewritten,
        }
    }

    /// Sends the call, asks the client what a 2026-07-28 server asks of it, and answers a call
    /// run as a task with the task (its id names the server).
    async fn exchange(
        self: &Arc<Self>,
        out: Outbound<'_>,
        admitted: crate::limits::Admitted,
    ) -> (Reply, Outcome) {
        let (reply, outcome) = self.forward_admitted(out, admitted).await;
        let reply = self.input_for_server(out, reply).await;
        let reply = match reply {
            Some(reply) if out.request.field(Field::Task).is_some() => {
                Some(self.started_task(reply, out.server))
            }
            reply => reply,
        };
        (reply, outcome)
    }

    /// Notes what a name resolved to: on the call's record (which counts an alias or a legacy
    /// name in the metrics when it ends), in the log, and for a deprecated name in a warning
    /// to the client.
    fn resolved(&self, record: &mut Call, name: &str, exposed: &Exposed, via: Via) {
        log_resolution(name, exposed, via, record.kind().unwrap_or(Kind::Tool));
        let deprecated = exposed.deprecated.get(name);
        if let (Via::Alias | Via::Legacy, Some(d)) = (via, deprecated) {
            self.warn_deprecated(name, &exposed.name, d);
        }
        record.resolved(Some(&exposed.name), via, deprecated.is_some());
        if record.kind() != Some(Kind::Prompt) {
            self.called_after_search(&exposed.name, record);
        }
    }

    /// A call of one of moniker's management tools.
    fn manage(&self, request: &Message, tool: &str, view: &Arc<View>) -> Message {
        let arguments: serde_json::Value = request
            .arguments()
            .and_then(message::read)
            .unwrap_or(serde_json::Value::Null);
        let active = self.equipped(view);
        let management = crate::toolsets::Management {
            catalog: &self.gateway.naming.catalog,
            surface: &view.surface,
            up: &view.serving,
            active: active.as_deref().map(|t| &t.equipped),
        };
        let (result, effect) = management.call(tool, &arguments);
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
