//! The gateway's integration tests, in one binary (a 2-core CI links fewer of them).

mod http;
mod remote;
mod routing;
mod search;
mod store_crash;

mod support {
    use std::future::Future;
    use std::sync::Arc;

    use moniker_gateway::message::{self, Message};
    use moniker_gateway::session::{Answers, Session};
    use tokio::sync::mpsc;

    /// A line handed to a session, and the answer it gets (none for notifications and
    /// cancelled requests); the request's progress goes to the session's own stream.
    pub trait Reply {
        fn reply(&self, line: &str) -> impl Future<Output = Option<String>> + Send;
    }

    impl Reply for Arc<Session> {
        async fn reply(&self, line: &str) -> Option<String> {
            let (tx, mut rx) = mpsc::unbounded_channel();
            self.handle(
                message::parse(line.to_owned()),
                Some(Answers::new(tx, false)),
            );
            rx.recv().await.map(Message::into_text)
        }
    }
}
