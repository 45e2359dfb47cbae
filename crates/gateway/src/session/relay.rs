//! Relay: a request forwarded to a server under moniker's id and its answer relayed under the
//! client's, with the call timeout; the client's cancellations passed on; the client's
//! progress token swapped for one unique across sessions.

use std::sync::Arc;

use moniker_surface::ServerId;

use super::{Answers, Reply, Session, id_of};
use crate::connect::Connection;
use crate::errors::Refusal;
use crate::identity::Caller;
use crate::limits::Admitted;
use crate::message::{Field, Message, Params};
use crate::metrics::Outcome;
use crate::sync::lock;

/// A client's request on its way to one server: the request as the client sent it (its id
/// answers it), the server, the method and the params that go (rewritten for the server), and
/// who sent it (over HTTP: for the headers the server's `forward` makes).
#[derive(Clone, Copy)]
pub(super) struct Outbound<'a> {
    pub(super) request: &'a Message,
    pub(super) server: &'a ServerId,
    pub(super) method: &'a str,
    pub(super) params: Option<&'a Params>,
    pub(super) caller: Option<&'a Caller>,
    /// Where the identity the call went with upstream is noted, when it was the caller's own
    /// (`auth.exchange`, `auth.per_person`), for the call's audit line.
    pub(super) acted: Option<&'a std::sync::OnceLock<String>>,
}

impl Session {
    /// The client's progress token, swapped for one unique across sessions (raw JSON), whose
    /// progress goes where the request's answer goes (when that stream carries progress) or
    /// to the session's stream. `None` when the request asked for no progress.
    pub(super) fn progress_route(
        &self,
        request: &Message,
        answers: &Answers,
        server: &ServerId,
    ) -> Option<String> {
        let token = request.progress_token()?;
        // Through `Answers`: a stream its client does not read holds what its budget allows.
        let to = if answers.with_progress {
            answers.clone()
        } else {
            Answers::new(self.peer.out().clone(), false)
        };
        Some(
            self.gateway
                .services
                .hub
                .register_progress(&self.peer, server, token, to),
        )
    }

    /// Sends a request to a server and relays its answer with the client's id.
    pub(super) async fn forward(self: &Arc<Self>, out: Outbound<'_>) -> Reply {
        self.forward_call(out).await.0
    }

    /// [`Self::forward`], with how the call ended (for metrics), under the server's limits.
    pub(super) async fn forward_call(self: &Arc<Self>, out: Outbound<'_>) -> (Reply, Outcome) {
        let default = self.gateway.settings.config.call_timeout;
        match self
            .gateway
            .services
            .limits
            .admit(out.server, None, default)
        {
            Ok(admitted) => self.forward_admitted(out, admitted).await,
            Err(refusal) => {
                let outcome = refusal.outcome();
                (Some(refusal.answer(id_of(out.request))), outcome)
            }
        }
    }

    /// [`Self::forward_call`] of a call let through by the limits: it may take as long as
    /// they say, and holds its places under their caps until it ends.
    pub(super) async fn forward_admitted(
        self: &Arc<Self>,
        out: Outbound<'_>,
        admitted: Admitted,
    ) -> (Reply, Outcome) {
        let Outbound {
            request, server, ..
        } = out;
        let id = id_of(request);
        let refused = |refusal: Refusal| {
            let outcome = refusal.outcome();
            (Some(refusal.answer(id)), outcome)
        };
        let conn = match self
            .gateway
            .connection_for(server, admitted.timeout, out.caller)
            .await
        {
            Ok(conn) => conn,
            Err(refusal) => return refused(refusal),
        };
        let (ours, rx) = match self.send_marked(&out, &conn).await {
            Ok(Some(started)) => started,
            Ok(None) => return (None, Outcome::Cancelled),
            // A client that takes URL-mode elicitation sends its person to the link itself;
            // else a tool call's person reads it as the tool's error, the model too.
            Err(Refusal::SignIn { server, link }) if self.takes_url_elicitation() => {
                let text =
                    format!("Sign in to `{server}` (it acts as each person), then try again.");
                let answer = crate::errors::url_elicitation_required(id, &text, &link);
                return (Some(answer), Outcome::Error);
            }
            Err(refusal @ Refusal::SignIn { .. }) if out.method == "tools/call" => {
                let text = crate::errors::tool_error(&refusal.to_string());
                return (Some(Message::result(id, &text)), Outcome::Error);
            }
            Err(refusal) => return refused(refusal),
        };
        let timeout = admitted.timeout;
        // Given up before its answer (a parked call abandoned, its task aborted): the server is
        // told, and its waiter goes.
        let abandoned = Abandoned {
            conn: Some(conn.clone()),
            id: ours,
        };
        let answer = tokio::time::timeout(timeout, rx).await;
        abandoned.disarm();
        self.peer.era.forwarded(id, server);
        // The entry may be gone: the call's client was answered already (an input-required
        // result) while its server still worked.
        let cancelled = lock(&self.peer.in_flight)
            .get_mut(id)
            .is_some_and(|flight| {
                flight.server = None;
                flight.cancelled
            });
        match answer {
            _ if cancelled => (None, Outcome::Cancelled),
            Ok(Ok(response)) => relay(id, &response),
            Ok(Err(_)) => refused(Refusal::Disconnected(server.clone())),
            Err(_) => {
                conn.cancel(ours, "moniker: call timeout");
                refused(Refusal::Timeout {
                    server: server.clone(),
                    timeout,
                    at: admitted.timeout_at,
                })
            }
        }
    }

    /// The client's request `id` is on `server` (over `conn`) before it is sent there: a
    /// stdio server's request is written as it is sent, and the server's reader may run on
    /// another thread, so a request the server makes while it works on it (sampling,
    /// elicitation) finds the call it is for. Its id there is not known yet: 0, not sent,
    /// which a cancellation only marks. `false`: the client cancelled it already.
    fn on_its_way(&self, id: &str, server: &ServerId, conn: &Arc<Connection>) -> bool {
        let mut in_flight = lock(&self.peer.in_flight);
        // Gone: its client was answered already (an input-required result); nothing to mark.
        let Some(flight) = in_flight.get_mut(id) else {
            return true;
        };
        flight.server = Some(server.clone());
        flight.conn = Arc::downgrade(conn);
        // Not the id it had at a server before (a read tried on one server, then the next).
        flight.id = 0;
        !flight.cancelled
    }

    /// [`Self::on_its_way`] undone: the request was not sent.
    fn not_sent(&self, id: &str) {
        if let Some(flight) = lock(&self.peer.in_flight).get_mut(id) {
            flight.server = None;
            flight.conn = std::sync::Weak::new();
        }
    }

    /// Sends the request ([`start`]), the call marked on its server while it goes
    /// ([`Self::on_its_way`]): `Ok(None)` when its client cancelled it (at the server too,
    /// when it went before the cancellation was seen).
    async fn send_marked(
        self: &Arc<Self>,
        out: &Outbound<'_>,
        conn: &Arc<Connection>,
    ) -> Result<Option<(u64, tokio::sync::oneshot::Receiver<Message>)>, Refusal> {
        let id = id_of(out.request);
        if !self.on_its_way(id, out.server, conn) {
            self.not_sent(id);
            return Ok(None);
        }
        let (ours, rx) = start(conn, out, || self.signin_base())
            .await
            .inspect_err(|_| self.not_sent(id))?;
        if !self.sent_as(id, ours) {
            conn.cancel(ours, "moniker: the client cancelled the request");
            return Ok(None);
        }
        Ok(Some((ours, rx)))
    }

    /// The client's request `id`, marked on its server as it went ([`Self::on_its_way`]: its
    /// server and connection), went there as moniker's `ours`; `false` when the client
    /// cancelled it meanwhile.
    fn sent_as(&self, id: &str, ours: u64) -> bool {
        let mut in_flight = lock(&self.peer.in_flight);
        // Gone: its client was answered already (an input-required result). Not made again:
        // nothing would remove it, and its id would stay taken for the client's later requests.
        let Some(flight) = in_flight.get_mut(id) else {
            return true;
        };
        if flight.cancelled {
            return false;
        }
        flight.id = ours;
        true
    }

    /// Whether the client said it takes URL-mode elicitation (`elicitation.url` in its
    /// `initialize` capabilities).
    fn takes_url_elicitation(&self) -> bool {
        self.client_capabilities
            .get()
            .and_then(|caps| serde_json::from_str::<serde_json::Value>(caps).ok())
            .is_some_and(|caps| caps.pointer("/elicitation/url").is_some())
    }

    /// Where people sign in to servers that act as each of them: moniker's public URL
    /// (`http.auth.resource`).
    fn signin_base(&self) -> Option<String> {
        self.gateway
            .control
            .http()
            .auth
            .as_ref()
            .map(|auth| auth.resource.clone())
    }

    /// The client of request `id` (raw JSON) went away before its answer (a stateless HTTP
    /// client closed its connection): the request is cancelled as if the client had said so,
    /// at its server too, and stops counting at once. Nothing happens for a request already
    /// answered.
    pub fn client_gone(&self, id: &str) {
        let Some((conn, ours)) = self.cancelled(id) else {
            return;
        };
        conn.forget(ours);
        let _ = conn.send(Message::cancellation(ours, "moniker: the client went away"));
    }

    /// Marks request `id` cancelled: the server connection and moniker's id it went under,
    /// when it is in flight at a server.
    fn cancelled(&self, id: &str) -> Option<(Arc<crate::connect::Connection>, u64)> {
        let mut in_flight = lock(&self.peer.in_flight);
        let flight = in_flight.get_mut(id)?;
        flight.cancelled = true;
        // Id 0: on its way to its server, not sent yet: the server is told once it is
        // (`send_marked`).
        let conn = flight.conn.upgrade().filter(|_| flight.id != 0)?;
        Some((conn, flight.id))
    }

    /// A client's `notifications/cancelled`: passed to the server, and the answer dropped.
    pub(super) fn cancel(&self, cancel: &Message) {
        let Some(request_id) = cancel.request_id() else {
            return;
        };
        if let Some(listen) = lock(&self.peer.era.listen)
            .as_ref()
            .filter(|l| l.id == request_id)
        {
            listen.ended.notify_one();
        }
        let Some((conn, ours)) = self.cancelled(request_id) else {
            return;
        };
        conn.forget(ours);
        if let Some(message) = cancel.with_request_id(&ours.to_string()) {
            let _ = conn.send(message);
        }
    }
}

/// The server's answer under the client's id, result or error bytes unchanged, and how the
/// call ended.
fn relay(id: &str, response: &Message) -> (Reply, Outcome) {
    if response.kind() == crate::message::Kind::Result {
        // Only a tool's result says `isError` (recorded where the answer was read).
        let outcome = match response.field(Field::IsError) {
            Some("true") => Outcome::ToolError,
            _ => Outcome::Ok,
        };
        return (Some(response.with_id(id)), outcome);
    }
    if response.kind() == crate::message::Kind::Error {
        return (Some(response.with_id(id)), Outcome::Error);
    }
    (Some(Refusal::Unreadable.answer(id)), Outcome::Error)
}

/// A tool's error `reply` with moniker's note that the server's sandbox likely refused it,
/// and the `setting` that would allow it, as a last text item of its content: the model and its
/// person read which setting to change. The note is put in before the content's closing
/// bracket; every other byte is where the server put it, and the message's index of its
/// fields follows. A result that cannot be read so (a field twice, a content that is no list)
/// is answered as it is.
pub(super) fn with_note(reply: Message, setting: &str) -> Message {
    use serde_json::value::RawValue;
    let place = || -> Option<(usize, bool)> {
        let Fields(fields) = serde_json::from_str(reply.result_text()?).ok()?;
        let content = fields.get("content")?.get();
        let items: Vec<&RawValue> = serde_json::from_str(content).ok()?;
        // `content` is a slice of the reply's own text: its closing bracket's place there.
        let start = (content.as_ptr() as usize).checked_sub(reply.text().as_ptr() as usize)?;
        let close = start + content.len().checked_sub(1)?;
        (reply.text().as_bytes().get(close) == Some(&b']')).then_some((close, items.is_empty()))
    };
    let Some((close, empty)) = place() else {
        return reply;
    };
    let text = format!(
        "moniker: this server runs in a sandbox, which likely refused what it tried: {setting} would allow it."
    );
    let item = serde_json::json!({"type": "text", "text": text}).to_string();
    let with = if empty { item } else { format!(",{item}") };
    reply.inserted(close, &with)
}

/// An object's fields as raw JSON, in order; refused when a key comes twice (a map would keep
/// one of them and lose the other's bytes).
struct Fields<'a>(indexmap::IndexMap<&'a str, &'a serde_json::value::RawValue>);

impl<'de> serde::Deserialize<'de> for Fields<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut fields = indexmap::IndexMap::new();
                while let Some((key, value)) = map.next_entry()? {
                    if fields.insert(key, value).is_some() {
                        return Err(serde::de::Error::custom(format!("`{key}` twice")));
                    }
                }
                Ok(Fields(fields))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// A request to a server that is cancelled there when dropped before [`Abandoned::disarm`].
struct Abandoned {
    conn: Option<Arc<crate::connect::Connection>>,
    id: u64,
}

impl Abandoned {
    fn disarm(mut self) {
        self.conn = None;
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.cancel(self.id, "moniker: the call was given up");
        }
    }
}

/// Sends `out` on `conn` as its caller: with the caller's own token for the server when it
/// takes them (`auth.exchange`, `auth.per_person`: noted in `out.acted`; a person who has not
/// signed in gets a link under `signin_base`), and the headers its `forward` makes.
async fn start(
    conn: &crate::connect::Connection,
    out: &Outbound<'_>,
    signin_base: impl FnOnce() -> Option<String>,
) -> Result<(u64, tokio::sync::oneshot::Receiver<Message>), Refusal> {
    use crate::auth::personal::{Unsigned, link};
    let server = out.server;
    let upstream = conn.upstream_for(out.caller).await.map_err(|e| match e {
        Unsigned::Refused(why) => Refusal::Upstream(why),
        Unsigned::SignIn(ticket) => match signin_base().and_then(|b| link(&b, server, &ticket)) {
            Some(link) => Refusal::SignIn {
                server: server.clone(),
                link,
            },
            None => Refusal::Upstream(format!(
                "Server `{server}` acts as each person, who signs in at moniker's public URL: `http.auth.resource` names none"
            )),
        },
    })?;
    if let (Some(upstream), Some(acted)) = (&upstream, out.acted) {
        let _ = acted.set(upstream.subject.clone());
    }
    conn.start_for(out.method, out.params, out.caller, upstream.as_ref())
        .map_err(|e| match e {
            crate::connect::CallError::Unforwardable(header) => Refusal::Unforwardable {
                server: server.clone(),
                header,
            },
            crate::connect::CallError::Behind(bytes) => Refusal::Behind {
                server: server.clone(),
                bytes,
            },
            _ => Refusal::ServerGone(server.clone()),
        })
}

#[cfg(test)]
mod tests {
    use super::with_note;
    use crate::message::{Field, Message, parse_one};

    /// A server's answer to request 7, read as moniker reads one.
    fn answer(result: &str) -> Message {
        parse_one(format!(r#"{{"jsonrpc":"2.0","id":7,"result":{result}}}"#)).expect("an answer")
    }

    /// The note is a last text item; the server's fields, their order, their bytes (a number
    /// no `f64` holds) and its spaces are as it sent them, and the message's index follows.
    #[test]
    fn a_note_is_added_and_nothing_of_the_server_s_is_lost() {
        let result = r#"{"content":[{"type":"text","text":"Failed: ConnectError('All connection attempts failed')"}],"isError":true,"n":1.00000000000000000001}"#;
        let note = r#"{"type":"text","text":"moniker: this server runs in a sandbox, which likely refused what it tried: `sandbox.network` would allow it."}"#;
        let noted = with_note(answer(result), "`sandbox.network`");
        let expected = result.replacen("}],", &format!("}},{note}],"), 1);
        assert_eq!(noted.result_text(), Some(expected.as_str()));
        assert_eq!(noted.id(), Some("7"));
        assert_eq!(noted.field(Field::IsError), Some("true"));
        // An empty content gets the note alone.
        let spaced = r#"{ "content" : [ ] , "isError" : true }"#;
        let noted = with_note(answer(spaced), "`sandbox.read`");
        let text = noted.result_text().expect("a result");
        assert!(
            text.starts_with(r#"{ "content" : [ {"type":"text""#),
            "{text}"
        );
        assert!(
            text.ends_with(r#"would allow it."}] , "isError" : true }"#),
            "{text}"
        );
        assert_eq!(noted.field(Field::IsError), Some("true"));
    }

    /// A result that cannot be carried whole is answered as the server sent it.
    #[test]
    fn a_result_read_two_ways_is_left_as_it_is() {
        for result in [
            r#"{"content":[],"isError":true,"x":1,"x":2}"#,
            r#"{"content":"not a list","isError":true}"#,
            r#"{"isError":true}"#,
        ] {
            let reply = answer(result);
            assert_eq!(
                with_note(reply, "note").result_text(),
                Some(result),
                "{result}"
            );
        }
    }
}
