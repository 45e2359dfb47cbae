//! Fan-out across servers: resources listed from every server that has them, resource
//! requests routed by URI, completions by prompt or resource, the log level to every server.
//! A session with a toolset reaches only the resources its toolset names (by server, or by
//! URI prefix): a toolset is a boundary for resources as for tools and prompts.

use super::relay::Outbound;
use std::sync::Arc;

use moniker_surface::{Kind, ServerId};
use serde_json::value::RawValue;

use super::{Answers, Reply, Session, id_of};
use crate::call::Call;
use crate::connect::Connection;
use crate::errors::Refusal;
use crate::identity::Caller;
use crate::message::{self, Edit, Field, Message};

/// Resources one session may follow at once (`resources/subscribe`, a listen's
/// `resourceSubscriptions`).
pub const MAX_SUBSCRIPTIONS_EACH: usize = 1024;
/// The longest resource URI a client may follow (what moniker follows is sent again to a
/// modern server with every change of the set).
pub const MAX_FOLLOWED_URI: usize = 2048;

impl Session {
    /// `resources/list` and `resources/templates/list`: every server's items, merged.
    pub(super) async fn gather(&self, id: &str, method: &'static str, key: &str) -> Message {
        let bounds = self.resource_bounds();
        let mut items: Vec<Box<RawValue>> = Vec::new();
        for (conn, info) in self.gateway.servers.connections() {
            if !info.has_resources {
                continue;
            }
            let timeout = self.gateway.settings.config.call_timeout;
            match crate::connect::list_all(&conn, method, key, timeout).await {
                Ok(list) => items.extend(list.into_iter().filter(|item| {
                    bounds.as_ref().is_none_or(|rule| {
                        rule.reaches(conn.server.as_str(), &item_uri(item).unwrap_or_default())
                    })
                })),
                Err(e) => tracing::warn!(server = %conn.server, error = %e, "{method} failed"),
            }
        }
        let joined: Vec<&str> = items.iter().map(|r| r.get()).collect();
        Message::result(
            id,
            &format!(r#"{{{}:[{}]}}"#, message::string(key), joined.join(",")),
        )
    }

    /// What of the resources the session reaches: `None`, all (no toolset); else its
    /// toolset's bound, includes' `resources` with its own (a toolset without any reaches
    /// none).
    fn resource_bounds(&self) -> Option<moniker_surface::ToolsetRule> {
        let name = crate::sync::lock(&self.toolset).clone()?;
        Some(moniker_surface::toolsets::resource_bound(
            &name,
            &self.gateway.naming.catalog.sets(),
        ))
    }

    /// The servers whose capabilities pass `has` and through which the session reaches the
    /// resource `uri`.
    fn reaching(
        &self,
        has: impl Fn(&crate::connect::InitInfo) -> bool,
        uri: &str,
    ) -> Vec<ServerId> {
        let bounds = self.resource_bounds();
        self.servers_with(has)
            .into_iter()
            .filter(|s| {
                bounds
                    .as_ref()
                    .is_none_or(|rule| rule.reaches(s.as_str(), uri))
            })
            .collect()
    }

    /// The servers the session reaches: every one without a toolset; with one, those that
    /// serve its tools and prompts and those its resource bound names. What a client says to
    /// servers in general (its roots changed, the log level it wants) goes to these only.
    pub(super) fn reached(&self) -> Vec<std::sync::Arc<Connection>> {
        let view = self.gateway.naming.view();
        let all = self
            .gateway
            .servers
            .connections()
            .into_iter()
            .map(|(conn, _)| conn);
        let Some(toolset) = self.equipped(&view) else {
            return all.collect();
        };
        let selection = &toolset.equipped.selection;
        let mut servers = selection.servers(&view.surface);
        let bounds = self.resource_bounds();
        let named: Vec<ServerId> = bounds
            .iter()
            .flat_map(|rule| rule.resources.iter())
            .filter(|r| !r.contains(':'))
            .filter_map(|r| r.parse().ok())
            .collect();
        servers.extend(named.iter());
        all.filter(|conn| servers.contains(&conn.server)).collect()
    }

    /// The servers whose capabilities pass `has`.
    fn servers_with(&self, has: impl Fn(&crate::connect::InitInfo) -> bool) -> Vec<ServerId> {
        self.gateway
            .servers
            .connections()
            .into_iter()
            .filter(|(_, info)| has(info))
            .map(|(conn, _)| conn.server.clone())
            .collect()
    }

    /// Resource requests go to each server with resources until one answers without an
    /// error (with one server, its answer whatever it is). A subscription goes to every one
    /// of them: a server may accept one for a URI it does not serve.
    pub(super) async fn by_uri(self: &Arc<Self>, request: &Message, answers: &Answers) -> Reply {
        let id = id_of(request);
        let method = request.method().unwrap_or_default();
        let Some(uri) = request.uri().map(|u| u.into_owned()) else {
            return Some(Refusal::invalid_params("missing `uri`").answer(id));
        };
        let servers = self.reaching(|info| info.has_resources, &uri);
        if matches!(method, "resources/subscribe" | "resources/unsubscribe") {
            return self
                .subscription(request, &servers, &uri, answers.caller())
                .await;
        }
        let mut record = self.record(None, &uri, request, answers);
        let reach = Reach {
            uri,
            servers: &servers,
        };
        let reply = self
            .read(request, reach, &mut record, answers.caller())
            .await;
        record.finish();
        reply
    }

    /// `resources/read` at every server that may serve its URI, in turn: the first that
    /// serves it answers (else the last refusal).
    async fn read(
        self: &Arc<Self>,
        request: &Message,
        reach: Reach<'_>,
        record: &mut Call,
        caller: Option<&Caller>,
    ) -> Reply {
        let Reach { uri, servers } = reach;
        let id = id_of(request);
        let mut last = None;
        for server in servers {
            let mut params = self.for_server(server, request.params_with(&[]));
            let trace = record.sending(self.gateway.services.telemetry.as_ref(), server, &uri);
            if let (Some(trace), Some(p)) = (trace, &params) {
                params = Some(crate::telemetry::with_context(p, &trace));
            }
            let out = Outbound {
                request,
                server,
                method: "resources/read",
                params: params.as_ref(),
                caller,
                acted: None,
            };
            let (reply, outcome) = self.forward_call(out).await;
            let reply = self.input_for_server(out, reply).await;
            record.ended(outcome, reply.as_ref());
            let ok = reply.as_ref().is_some_and(|r| !is_error(r));
            match reply {
                Some(_) if ok || servers.len() == 1 => return reply,
                None => return None,
                _ => last = reply,
            }
        }
        if last.is_none() {
            record.routed_nowhere();
            let refusal = Refusal::ResourceNotFound(uri);
            record.refused(&refusal);
            return Some(refusal.answer(id));
        }
        last
    }

    /// `resources/subscribe` or `unsubscribe` at every server that may serve `uri` (a
    /// 2026-07-28 one has no such request: moniker's listen to it follows the resource); the
    /// first success is the answer, else the last refusal.
    async fn subscription(
        self: &Arc<Self>,
        request: &Message,
        servers: &[ServerId],
        uri: &str,
        caller: Option<&Caller>,
    ) -> Reply {
        let id = id_of(request);
        let method = request.method().unwrap_or_default();
        let on = method == "resources/subscribe";
        if on && uri.len() > MAX_FOLLOWED_URI {
            return Some(
                Refusal::invalid_params(format!(
                    "a resource URI to follow is at most {MAX_FOLLOWED_URI} bytes"
                ))
                .answer(id),
            );
        }
        if on && self.peer.subscription_count() >= MAX_SUBSCRIPTIONS_EACH {
            return Some(
                Refusal::limit(format!(
                    "this session follows {MAX_SUBSCRIPTIONS_EACH} resources, the most it may: unsubscribe from some first"
                ))
                .answer(id),
            );
        }
        let mut answer: Reply = None;
        let mut last = None;
        for server in servers {
            let modern = self
                .gateway
                .servers
                .connection(server)
                .filter(|c| c.is_modern());
            let reply = match modern {
                Some(conn) if self.follow_at(&conn, server, uri, on) => {
                    Some(Message::result(id, "{}"))
                }
                // Not counted, so not this session's: a later unsubscribe cannot take another
                // client's follow away.
                Some(_) => Some(
                    Refusal::limit(format!(
                        "moniker follows as many resources of server `{server}` as it may: this one is not followed"
                    ))
                    .answer(id),
                ),
                // Another client still follows it there: the server keeps it.
                None if !on && self.followed_by_others(server, uri) => {
                    Some(Message::result(id, "{}"))
                }
                None => {
                    let params = request.params_with(&[]);
                    self.forward(Outbound {
                        request,
                        server,
                        method,
                        params: params.as_ref(),
                        caller,
                        acted: None,
                    })
                    .await
                }
            };
            match reply {
                Some(reply) if !is_error(&reply) => {
                    self.peer.subscribe(server, uri, on);
                    answer.get_or_insert(reply);
                }
                Some(reply) => last = Some(reply),
                None => return None,
            }
        }
        answer
            .or(last)
            .or_else(|| Some(Refusal::ResourceNotFound(uri.to_owned()).answer(id)))
    }

    /// Subscribes to each of `uris` at the servers that serve it (and that the session
    /// reaches): the (server, URI) pairs a server accepted, now this peer's. URIs longer than
    /// [`MAX_FOLLOWED_URI`] are not followed.
    pub(super) async fn subscribe_all(&self, uris: &[String]) -> Vec<(ServerId, String)> {
        let timeout = self.gateway.settings.config.call_timeout;
        let mut subscribed = Vec::new();
        let room = MAX_SUBSCRIPTIONS_EACH.saturating_sub(self.peer.subscription_count());
        for uri in uris
            .iter()
            .filter(|u| u.len() <= MAX_FOLLOWED_URI)
            .take(room)
        {
            for server in self.reaching(|info| info.resources_subscribe, uri) {
                let Some(conn) = self.gateway.servers.connection(&server) else {
                    continue;
                };
                if conn.is_modern() {
                    if !self.follow_at(&conn, &server, uri, true) {
                        continue;
                    }
                } else {
                    match conn.subscribe(uri, true, timeout).await {
                        Ok(reply) if !is_error(&reply) => {}
                        Ok(reply) => {
                            tracing::debug!(server = %server, uri, error = reply.error_text().unwrap_or_default(), "resources/subscribe refused");
                            continue;
                        }
                        Err(e) => {
                            tracing::debug!(server = %server, uri, error = %e, "resources/subscribe failed");
                            continue;
                        }
                    }
                }
                self.peer.subscribe(&server, uri, true);
                subscribed.push((server, uri.clone()));
            }
        }
        subscribed
    }

    /// A 2026-07-28 server has no `resources/subscribe`: moniker's listen to it follows
    /// `uri` for each client that follows it (call before this peer's own record changes).
    /// False when it cannot be followed (as many are as may be): the peer must not record it.
    fn follow_at(&self, conn: &Connection, server: &ServerId, uri: &str, on: bool) -> bool {
        if on != self.peer.subscribed(server, uri) {
            return conn.follow(uri, on);
        }
        true
    }

    /// Whether a client other than this one follows `uri` at `server`.
    fn followed_by_others(&self, server: &ServerId, uri: &str) -> bool {
        self.gateway
            .services
            .hub
            .peers()
            .iter()
            .any(|p| !Arc::ptr_eq(p, &self.peer) && p.subscribed(server, uri))
    }

    /// Ends this peer's subscriptions; a server is told when no other client subscribes to
    /// that resource there.
    pub(super) fn unsubscribe_all(&self, subscribed: Vec<(ServerId, String)>) {
        for (server, uri) in subscribed {
            let conn = self.gateway.servers.connection(&server);
            if let Some(conn) = conn.as_ref().filter(|c| c.is_modern()) {
                self.follow_at(conn, &server, &uri, false);
                self.peer.subscribe(&server, &uri, false);
                continue;
            }
            self.peer.subscribe(&server, &uri, false);
            if self.followed_by_others(&server, &uri) {
                continue;
            }
            // Also called from a session's drop, which may be outside the runtime.
            let runtime = tokio::runtime::Handle::try_current();
            if let (Some(conn), Ok(runtime)) = (conn, runtime) {
                let timeout = self.gateway.settings.config.call_timeout;
                runtime.spawn(async move {
                    let _ = conn.subscribe(&uri, false, timeout).await;
                });
            }
        }
    }

    /// The origin of prompt `name` as this session sees it (through its toolset, when one is
    /// equipped).
    fn prompt_origin(&self, name: &str) -> Option<moniker_surface::Origin> {
        let view = self.gateway.naming.view();
        let resolved = match self.equipped(&view) {
            Some(e) => moniker_surface::toolsets::resolve(
                &view.surface,
                &e.equipped.selection,
                Kind::Prompt,
                name,
            ),
            None => view.surface.resolve_prompt(name),
        }?;
        resolved.exposed.origin().cloned()
    }

    /// `completion/complete`: by the prompt's name (resolved like a call) or the resource's URI.
    pub(super) async fn complete(
        self: &Arc<Self>,
        request: &Message,
        caller: Option<&Caller>,
    ) -> Reply {
        let id = id_of(request);
        let invalid = |why: &str| Some(Refusal::invalid_params(why).answer(id));
        let Some(params) = request.params_with(&[]) else {
            return invalid("missing params, or params not an object");
        };
        let Some(reference) = request.field(Field::Ref) else {
            return invalid("missing `ref`");
        };
        let Some(ref_fields) = message::fields(reference) else {
            return invalid("`ref` must be an object");
        };
        match message::str_field(&ref_fields, "type").as_deref() {
            Some("ref/prompt") => {
                let Some(name) = message::str_field(&ref_fields, "name") else {
                    return invalid("missing `ref.name`");
                };
                let Some(origin) = self.prompt_origin(&name) else {
                    let refusal = Refusal::UnknownName {
                        kind: Kind::Prompt,
                        name: name.into_owned(),
                    };
                    return Some(refusal.answer(id));
                };
                let origin_name = message::string(&origin.name);
                let reference =
                    message::with_fields(reference, &[("name", &origin_name)]).unwrap_or_default();
                let params = params.edit(&[Edit::Set(Field::Ref, &reference)]);
                let server = origin.server.clone();
                self.forward(Outbound {
                    request,
                    server: &server,
                    method: "completion/complete",
                    params: Some(&params),
                    caller,
                    acted: None,
                })
                .await
            }
            Some("ref/resource") => {
                let uri = message::str_field(&ref_fields, "uri").unwrap_or_default();
                let servers = self.reaching(|info| info.has_completions, &uri);
                let mut last = None;
                for server in &servers {
                    let reply = self
                        .forward(Outbound {
                            request,
                            server,
                            method: "completion/complete",
                            params: Some(&params),
                            caller,
                            acted: None,
                        })
                        .await;
                    match &reply {
                        Some(answer) if !is_error(answer) => return reply,
                        None => return None,
                        _ => last = reply,
                    }
                }
                last.or_else(|| {
                    Some(Message::result(
                        id,
                        r#"{"completion":{"values":[],"hasMore":false}}"#,
                    ))
                })
            }
            _ => invalid("`ref.type` must be `ref/prompt` or `ref/resource`"),
        }
    }

    pub(super) fn set_level(&self, request: &Message) -> Message {
        self.peer
            .set_log_level(Some(&request.str_of(Field::Level).unwrap_or_default()));
        let params = request.params_with(&[]);
        for conn in self.reached() {
            if conn.info().has_logging {
                // Fire and forget: the level is advice, and a slow server must not hold the client.
                if let Ok((ours, _)) = conn.start("logging/setLevel", params.as_ref()) {
                    conn.forget(ours);
                }
            }
        }
        Message::result(id_of(request), "{}")
    }
}

/// The URI (or URI template) of a listed resource.
fn item_uri(item: &RawValue) -> Option<String> {
    let fields = message::fields(item.get())?;
    message::str_field(&fields, "uri")
        .or_else(|| message::str_field(&fields, "uriTemplate"))
        .map(|u| u.into_owned())
}

fn is_error(answer: &Message) -> bool {
    answer.error_text().is_some()
}

/// A resource's URI and the servers that may serve it, asked in turn.
struct Reach<'a> {
    uri: String,
    servers: &'a [ServerId],
}
