//! Tasks (a tool run as a task: the result is fetched later) across servers. A task id
//! moniker gives a client names its server, `<server>/<the server's id>`, so `tasks/get`,
//! `tasks/result` and `tasks/cancel` find their server with no session (any replica, any
//! era); `tasks/list` gathers every server's. Server ids have no `/`.
//!
//! Here: the naming of task ids, and who owns each task.

use std::collections::{HashMap, VecDeque};

use moniker_surface::ServerId;

use crate::message::{self, Field, Message};

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
    pub(crate) fn insert(&mut self, id: String, owner: Owner) {
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
pub(crate) fn named_task(task: &str, server: &ServerId) -> Option<(String, String)> {
    let fields = message::fields(task)?;
    let id = namespaced(server, &message::str_field(&fields, "taskId")?);
    let task = message::with_fields(task, &[("taskId", &message::string(&id))])?;
    Some((task, id))
}

/// A result that holds a task (`{"task": {...}}`, the answer to a call run as a task) or is
/// one (`tasks/get`, `tasks/cancel`), with the task's id namespaced, and that id; else as it
/// is.
pub(crate) fn with_named_task(reply: Message, server: &ServerId) -> (Message, Option<String>) {
    let Some(result) = reply.result_text() else {
        return (reply, None);
    };
    let inner = reply.field(Field::ResultTask).map(str::to_owned);
    if inner.is_none() && reply.field(Field::ResultTaskId).is_none() {
        return (reply, None);
    }
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
