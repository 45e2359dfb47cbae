//! Where a server's message goes: a request or a log message only to the client it concerns
//! (the request it came with, else the one client with a call there), a resource update to
//! its subscribers, a task's status to the principal that started the task, a change of the
//! server's listing to the gateway.

use std::sync::{Arc, Weak};

use crate::connect::{Connection, Sink};
use crate::gateway::Gateway;
use crate::hub::Peer;
use crate::message::Message;
use crate::sync::lock;

/// Server messages reach the gateway through this, so that server tasks do not keep the
/// gateway alive.
pub(crate) struct WeakSink(pub(crate) Weak<Gateway>);

impl Sink for WeakSink {
    fn server_message(&self, conn: &Arc<Connection>, message: Message, related: Option<u64>) {
        if let Some(gateway) = self.0.upgrade() {
            gateway.server_message(conn, message, related);
        }
    }

    fn server_said(&self, server: &moniker_surface::ServerId, line: &str) {
        let slot = self.0.upgrade().and_then(|g| g.servers.slot(server));
        if let Some(slot) = slot {
            slot.said(line);
        }
    }
}

impl Gateway {
    pub(crate) fn server_message(
        self: &Arc<Self>,
        conn: &Arc<Connection>,
        message: Message,
        related: Option<u64>,
    ) {
        let Some(method) = message.method() else {
            return;
        };
        if message.is_request() {
            match self.services.hub.concerned(conn, related) {
                Some(peer) => peer.forward_server_request(conn, &message),
                None => {
                    tracing::debug!(server = %conn.server, method, "a server's request concerns no one client; refused");
                    let _ = conn.send(Message::error(
                        message.id(),
                        crate::message::METHOD_NOT_FOUND,
                        "moniker cannot tell which of its clients this request is for (none, or several, have a call in progress on this server)",
                    ));
                }
            }
            return;
        }
        match method {
            "notifications/tools/list_changed" | "notifications/prompts/list_changed" => {
                let gateway = self.clone();
                let conn = conn.clone();
                tokio::spawn(async move { gateway.relist(&conn).await });
            }
            "notifications/progress" => self.services.hub.route_progress(&conn.server, &message),
            // moniker's own `subscriptions/listen` on a modern server began: nobody else's.
            "notifications/subscriptions/acknowledged" => {}
            "notifications/cancelled" => {
                for peer in self.services.hub.peers() {
                    peer.server_cancelled(conn, &message);
                }
            }
            "notifications/tasks/status" => {
                // Only to the clients of the toolset the task was started under.
                let named = crate::tasks::named_notification(
                    &message,
                    &conn.server,
                    &lock(&self.services.tasks),
                );
                if let Some((message, principal)) = named {
                    for peer in self.services.hub.peers() {
                        if peer.principal == principal {
                            peer.send_if_ready(message.clone());
                        }
                    }
                }
            }
            _ => {
                for peer in self.recipients(conn, method, &message, related) {
                    peer.deliver(message.clone());
                }
            }
        }
    }

    /// Who hears a server's notification: a resource update its subscribers, a change of the
    /// resource list everyone; anything else (a log message) may be about one client's work,
    /// and goes only to the client it concerns ([`crate::hub::Hub::concerned`]), or to nobody.
    fn recipients(
        &self,
        conn: &Connection,
        method: &str,
        message: &Message,
        related: Option<u64>,
    ) -> Vec<Arc<Peer>> {
        match method {
            "notifications/resources/list_changed" => self.services.hub.peers(),
            "notifications/resources/updated" => match message.uri() {
                Some(uri) => self
                    .services
                    .hub
                    .peers()
                    .into_iter()
                    .filter(|p| p.subscribed(&conn.server, &uri))
                    .collect(),
                None => Vec::new(),
            },
            _ => self
                .services
                .hub
                .concerned(conn, related)
                .into_iter()
                .collect(),
        }
    }
}
