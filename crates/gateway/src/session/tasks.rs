//! A session's task requests: `tasks/get`, `tasks/result` and `tasks/cancel` go to the server
//! a task id names, `tasks/list` gathers every server's; a task is reached only by the
//! principal that started it ([`crate::tasks`]).

use std::sync::Arc;

use moniker_surface::ServerId;

use super::{Reply, Session, id_of};
use crate::errors::Refusal;
use crate::identity::Caller;
use crate::message::{self, Edit, Field, Message};
use crate::sync::lock;
use crate::tasks::{Owner, named_task, with_named_task};

impl Session {
    /// A call run as a task answered `reply`: its id named, and the task remembered as this
    /// session's principal's, under its toolset.
    pub(super) fn started_task(&self, reply: Message, server: &ServerId) -> Message {
        let (reply, id) = with_named_task(reply, server);
        if let Some(id) = id {
            let owner = self.task_owner();
            lock(&self.gateway.services.tasks).insert(id, owner);
        }
        reply
    }

    fn task_owner(&self) -> Owner {
        Owner {
            principal: self.peer.principal.clone(),
            toolset: lock(&self.toolset).clone(),
        }
    }

    /// Whether this session may reach task `id`: its principal started it, under the same
    /// toolset.
    fn owns_task(&self, id: &str) -> bool {
        let owner = self.task_owner();
        lock(&self.gateway.services.tasks).of(id) == Some(&owner)
    }

    /// `tasks/get`, `tasks/result`, `tasks/cancel`: to the server the task id names, with the
    /// server's own id; only for a task started under the session's toolset.
    pub(super) async fn task(
        self: &Arc<Self>,
        request: &Message,
        caller: Option<&Caller>,
    ) -> Reply {
        let id = id_of(request);
        let method = request.method().unwrap_or_default();
        let named = request.str_of(Field::TaskId).map(|t| t.into_owned());
        let Some(named) = named else {
            return Some(Refusal::invalid_params("missing `taskId`").answer(id));
        };
        let target = named
            .split_once('/')
            .and_then(|(server, task)| Some((server.parse::<ServerId>().ok()?, task)));
        let reachable = self.owns_task(&named);
        let Some((server, task)) =
            target.filter(|(s, _)| reachable && self.gateway.servers.connection(s).is_some())
        else {
            return Some(Refusal::invalid_params(format!("unknown task `{named}`")).answer(id));
        };
        let Some(rewritten) =
            request.params_with(&[Edit::Set(Field::TaskId, &message::string(task))])
        else {
            return Some(Refusal::invalid_params("params must be an object").answer(id));
        };
        let (reply, _) = self
            .forward_call(super::relay::Outbound {
                request,
                server: &server,
                method,
                params: Some(&rewritten),
                caller,
                acted: None,
            })
            .await;
        match method {
            // The tool's own result: the server's ids in its `_meta` are the server's business.
            "tasks/result" => reply,
            _ => reply.map(|r| with_named_task(r, &server).0),
        }
    }

    /// `tasks/list`: every server's tasks (their first page), ids named, that were started
    /// under the session's toolset.
    pub(super) async fn list_tasks(&self, id: &str) -> Message {
        let mut tasks: Vec<String> = Vec::new();
        for (conn, info) in self.gateway.servers.connections() {
            if !info.has_tasks {
                continue;
            }
            let timeout = self.gateway.settings.config.call_timeout;
            match crate::connect::list_all(&conn, "tasks/list", "tasks", timeout).await {
                Ok(list) => tasks.extend(
                    list.iter()
                        .filter_map(|task| named_task(task.get(), &conn.server))
                        .filter(|(_, id)| self.owns_task(id))
                        .map(|(task, _)| task),
                ),
                Err(e) => tracing::warn!(server = %conn.server, error = %e, "tasks/list failed"),
            }
        }
        Message::result(id, &format!(r#"{{"tasks":[{}]}}"#, tasks.join(",")))
    }
}
