//! Tasks (a tool run as a task: the result is fetched later) across servers. A task id
//! moniker gives a client names its server, `<server>/<the server's id>`, so `tasks/get`,
//! `tasks/result` and `tasks/cancel` find their server with no session (any replica, any
//! era); `tasks/list` gathers every server's. Server ids have no `/`.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use moniker_surface::ServerId;

use super::{Reply, Session, id_of};
use crate::errors::Refusal;
use crate::message::{self, Message};
use crate::sync::lock;

/// The tasks moniker remembers of one principal, at most; its oldest are forgotten first
/// (their ids stop resolving). One client's tasks never push out another's.
const MAX_TASKS_EACH: usize = 1_000;
/// The tasks moniker remembers in all; past it, the principal with the most loses its oldest.
const MAX_TASKS: usize = 10_000;

/// Who may reach each task: the principal that started it (a session, or the token of a
/// stateless client), under the toolset it was started under.
#[derive(Default)]
pub(crate) struct Owners {
    by_id: HashMap<String, Owner>,
    /// Each principal's tasks, oldest first.
    order: HashMap<String, VecDeque<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub principal: String,
    pub toolset: Option<String>,
}

impl Owners {
    fn insert(&mut self, id: String, owner: Owner) {
        let principal = owner.principal.clone();
        if self.by_id.insert(id.clone(), owner).is_some() {
            return;
        }
        let own = self.order.entry(principal.clone()).or_default();
        own.push_back(id);
        if own.len() > MAX_TASKS_EACH {
            self.forget_oldest(&principal);
        }
        if self.by_id.len() > MAX_TASKS {
            let largest = self
                .order
                .iter()
                .max_by_key(|(_, ids)| ids.len())
                .map(|(p, _)| p.clone());
            if let Some(largest) = largest {
                self.forget_oldest(&largest);
            }
        }
    }

    fn forget_oldest(&mut self, principal: &str) {
        let Some(own) = self.order.get_mut(principal) else {
            return;
        };
        if let Some(old) = own.pop_front() {
            self.by_id.remove(&old);
        }
        if own.is_empty() {
            self.order.remove(principal);
        }
    }

    /// Who started task `id`, when moniker knows the task.
    pub(crate) fn of(&self, id: &str) -> Option<&Owner> {
        self.by_id.get(id)
    }
}

/// The id a client knows a server's task by.
fn namespaced(server: &ServerId, id: &str) -> String {
    format!("{server}/{id}")
}

/// A `Task` object (`{"taskId": ..., "status": ...}`) with its id namespaced, and that id;
/// `None` when it has no string `taskId`.
fn named_task(task: &str, server: &ServerId) -> Option<(String, String)> {
    let fields = message::fields(task)?;
    let id = namespaced(server, &message::str_field(&fields, "taskId")?);
    let task = message::with_fields(task, &[("taskId", &message::string(&id))])?;
    Some((task, id))
}

/// A result that holds a task (`{"task": {...}}`, the answer to a call run as a task) or is
/// one (`tasks/get`, `tasks/cancel`), with the task's id namespaced, and that id; else as it
/// is.
fn with_named_task(reply: Message, server: &ServerId) -> (Message, Option<String>) {
    let Some(result) = reply.result_text() else {
        return (reply, None);
    };
    if !result.contains("\"taskId\"") {
        return (reply, None);
    }
    let inner = message::fields(result).and_then(|f| f.get("task").map(|t| t.get().to_owned()));
    let renamed = match inner {
        Some(task) => named_task(&task, server)
            .and_then(|(task, id)| Some((message::with_fields(result, &[("task", &task)])?, id))),
        None => named_task(result, server),
    };
    match (renamed, reply.id()) {
        (Some((result, id)), Some(request)) => (Message::result(request, &result), Some(id)),
        _ => (reply, None),
    }
}

/// A server's `notifications/tasks/status` (its params a task) with the task's id named, and
/// the principal that started the task; `None` for a task moniker does not know: nobody
/// hears of it.
pub(crate) fn named_notification(
    message: &Message,
    server: &ServerId,
    owners: &Owners,
) -> Option<(Message, String)> {
    let (params, id) = named_task(message.params()?, server)?;
    let principal = owners.of(&id)?.principal.clone();
    Some((
        Message::notification(message.method()?, Some(&params)),
        principal,
    ))
}

impl Session {
    /// A call run as a task answered `reply`: its id named, and the task remembered as this
    /// session's principal's, under its toolset.
    pub(super) fn started_task(&self, reply: Message, server: &ServerId) -> Message {
        let (reply, id) = with_named_task(reply, server);
        if let Some(id) = id {
            let owner = self.task_owner();
            lock(&self.gateway.tasks).insert(id, owner);
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
        lock(&self.gateway.tasks).of(id) == Some(&owner)
    }

    /// `tasks/get`, `tasks/result`, `tasks/cancel`: to the server the task id names, with the
    /// server's own id; only for a task started under the session's toolset.
    pub(super) async fn task(self: &Arc<Self>, request: &Message) -> Reply {
        let id = id_of(request);
        let method = request.method().unwrap_or_default();
        let params = request.params().unwrap_or("{}");
        let named = message::fields(params)
            .and_then(|f| message::str_field(&f, "taskId").map(|t| t.into_owned()));
        let Some(named) = named else {
            return Some(Refusal::invalid_params("missing `taskId`").answer(id));
        };
        let target = named
            .split_once('/')
            .and_then(|(server, task)| Some((server.parse::<ServerId>().ok()?, task)));
        let reachable = self.owns_task(&named);
        let Some((server, task)) =
            target.filter(|(s, _)| reachable && self.gateway.connection(s).is_some())
        else {
            return Some(Refusal::invalid_params(format!("unknown task `{named}`")).answer(id));
        };
        let Some(rewritten) = message::with_fields(params, &[("taskId", &message::string(task))])
        else {
            return Some(Refusal::invalid_params("params must be an object").answer(id));
        };
        let (reply, _) = self
            .forward_call(request, &server, method, Some(&rewritten))
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
        for (conn, info) in self.gateway.connections() {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(principal: &str) -> Owner {
        Owner {
            principal: principal.to_owned(),
            toolset: None,
        }
    }

    #[test]
    fn one_principals_tasks_never_push_out_anothers() {
        let mut owners = Owners::default();
        owners.insert("s/b-0".to_owned(), owner("b"));
        for i in 0..MAX_TASKS_EACH + 50 {
            owners.insert(format!("s/a-{i}"), owner("a"));
        }
        assert_eq!(owners.of("s/b-0"), Some(&owner("b")));
        assert_eq!(owners.of("s/a-0"), None, "a's oldest went");
        assert_eq!(
            owners.of(&format!("s/a-{}", MAX_TASKS_EACH + 49)),
            Some(&owner("a"))
        );
        // Past the total, the principal with the most loses its oldest.
        let mut owners = Owners::default();
        owners.insert("s/small".to_owned(), owner("small"));
        for p in 0..MAX_TASKS / MAX_TASKS_EACH {
            for i in 0..MAX_TASKS_EACH {
                owners.insert(format!("s/{p}-{i}"), owner(&format!("p{p}")));
            }
        }
        assert_eq!(owners.of("s/small"), Some(&owner("small")));
        assert!(owners.by_id.len() <= MAX_TASKS);
    }
}
