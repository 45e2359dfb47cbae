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

/// The tasks moniker remembers, at most; the oldest are forgotten first (their ids stop
/// resolving).
const MAX_TASKS: usize = 10_000;

/// Who may reach each task: the toolset it was started under.
#[derive(Default)]
pub(crate) struct Owners {
    by_id: HashMap<String, Option<String>>,
    order: VecDeque<String>,
}

impl Owners {
    fn insert(&mut self, id: String, toolset: Option<String>) {
        if self.by_id.insert(id.clone(), toolset).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > MAX_TASKS {
            if let Some(old) = self.order.pop_front() {
                self.by_id.remove(&old);
            }
        }
    }

    /// The toolset of task `id`, when moniker knows the task.
    pub(crate) fn of(&self, id: &str) -> Option<&Option<String>> {
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
/// the toolset of the task (`None` inside: started without one); `None` for a task moniker
/// does not know: nobody hears of it.
pub(crate) fn named_notification(
    message: &Message,
    server: &ServerId,
    owners: &Owners,
) -> Option<(Message, Option<String>)> {
    let (params, id) = named_task(message.params()?, server)?;
    let toolset = owners.of(&id)?.clone();
    Some((
        Message::notification(message.method()?, Some(&params)),
        toolset,
    ))
}

impl Session {
    /// A call run as a task answered `reply`: its id named, and the task remembered as this
    /// session's toolset's.
    pub(super) fn started_task(&self, reply: Message, server: &ServerId) -> Message {
        let (reply, id) = with_named_task(reply, server);
        if let Some(id) = id {
            let toolset = lock(&self.toolset).clone();
            lock(&self.gateway.tasks).insert(id, toolset);
        }
        reply
    }

    /// Whether this session may reach task `id`: it was started under the same toolset.
    fn owns_task(&self, id: &str) -> bool {
        let toolset = lock(&self.toolset).clone();
        lock(&self.gateway.tasks).of(id) == Some(&toolset)
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
