//! Where the messages a session sends on its own go: progress notifications of a request
//! whose POST is answered as an SSE stream go on that stream (before its response); everything
//! else goes to the session's [`Outbox`], for its GET stream.

use std::collections::HashMap;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;

use tokio::sync::mpsc;

use super::outbox::Outbox;
use crate::jsonrpc::{self, Message, Parsed};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a panic elsewhere; the maps are still consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) struct Dispatch {
    /// What the session sends. Messages are taken from it and routed under this lock only, so
    /// that they are routed in the order they were sent, whoever takes them.
    inbox: Mutex<mpsc::UnboundedReceiver<String>>,
    outbox: Arc<Outbox>,
    /// Progress tokens (raw JSON, as the client wrote them) followed by a POST stream.
    posts: Mutex<HashMap<String, mpsc::UnboundedSender<String>>>,
}

impl Dispatch {
    pub(super) fn new(inbox: mpsc::UnboundedReceiver<String>, outbox: Arc<Outbox>) -> Arc<Self> {
        Arc::new(Self {
            inbox: Mutex::new(inbox),
            outbox,
            posts: Mutex::new(HashMap::new()),
        })
    }

    /// Routes messages as they come, until the session is gone.
    pub(super) async fn run(self: Arc<Self>) {
        poll_fn(|cx| {
            let mut inbox = lock(&self.inbox);
            loop {
                match inbox.poll_recv(cx) {
                    Poll::Ready(Some(message)) => self.route(message),
                    Poll::Ready(None) => return Poll::Ready(()),
                    Poll::Pending => return Poll::Pending,
                }
            }
        })
        .await;
    }

    /// Routes every message sent so far. A request's progress is sent before its answer, so
    /// after this it has reached the request's stream.
    pub(super) fn flush(&self) {
        let mut inbox = lock(&self.inbox);
        while let Ok(message) = inbox.try_recv() {
            self.route(message);
        }
    }

    fn route(&self, message: String) {
        let message = {
            let posts = lock(&self.posts);
            match (posts.is_empty(), progress_token(&message)) {
                (false, Some(token)) => match posts.get(&token) {
                    Some(tx) => match tx.send(message) {
                        Ok(()) => return,
                        Err(e) => e.0,
                    },
                    None => message,
                },
                _ => message,
            }
        };
        self.outbox.push(message);
    }

    /// Sends the progress of `token` to the returned receiver until the guard is dropped.
    /// `None` when another request already follows that token.
    pub(super) fn follow(
        self: &Arc<Self>,
        token: String,
    ) -> Option<(mpsc::UnboundedReceiver<String>, Following)> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut posts = lock(&self.posts);
        if posts.contains_key(&token) {
            return None;
        }
        posts.insert(token.clone(), tx);
        Some((
            rx,
            Following {
                dispatch: self.clone(),
                token,
            },
        ))
    }
}

/// A POST stream following a progress token.
pub(super) struct Following {
    dispatch: Arc<Dispatch>,
    token: String,
}

impl Following {
    pub(super) fn dispatch(&self) -> &Dispatch {
        &self.dispatch
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        lock(&self.dispatch.posts).remove(&self.token);
    }
}

/// The progress token of a `notifications/progress`, as raw JSON.
fn progress_token(message: &str) -> Option<String> {
    let Ok(Parsed::One(Message::Notification {
        method: "notifications/progress",
        params: Some(params),
    })) = jsonrpc::parse(message)
    else {
        return None;
    };
    let fields = jsonrpc::fields(params)?;
    fields.get("progressToken").map(|t| t.get().to_owned())
}

/// The `params._meta.progressToken` of a request, as raw JSON.
pub(super) fn request_progress_token(
    params: Option<&serde_json::value::RawValue>,
) -> Option<String> {
    let fields = jsonrpc::fields(params?)?;
    let meta = jsonrpc::fields(fields.get("_meta")?)?;
    meta.get("progressToken").map(|t| t.get().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_of_a_followed_token_goes_to_its_post() {
        let outbox = Outbox::new();
        let (tx, rx) = mpsc::unbounded_channel();
        let dispatch = Dispatch::new(rx, outbox.clone());
        let (mut followed, guard) = dispatch.follow("\"t1\"".into()).expect("follow");
        assert!(dispatch.follow("\"t1\"".into()).is_none());
        let progress = |token: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{token},"progress":1}}}}"#
            )
        };
        tx.send(progress("\"t1\"")).expect("send");
        tx.send(progress("\"t2\"")).expect("send");
        tx.send(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#.into())
            .expect("send");
        dispatch.flush();
        assert_eq!(followed.try_recv().ok(), Some(progress("\"t1\"")));
        assert!(followed.try_recv().is_err());
        drop(guard);
        tx.send(progress("\"t1\"")).expect("send");
        dispatch.flush();
        assert!(followed.try_recv().is_err());
        assert_eq!(outbox.len(), 3);
    }

    #[test]
    fn tokens_of_requests() {
        let raw = |s: &str| serde_json::value::RawValue::from_string(s.to_owned()).expect("raw");
        assert_eq!(
            request_progress_token(Some(&raw(r#"{"name":"x","_meta":{"progressToken": 7}}"#))),
            Some("7".to_owned())
        );
        assert_eq!(request_progress_token(Some(&raw(r#"{"name":"x"}"#))), None);
        assert_eq!(request_progress_token(None), None);
    }
}
