//! What one client's work makes a server say reaches that client, not the others: two
//! sessions over one gateway and one fixture server process.

use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use moniker_fixture::{fixture_bin, fixture_file};
use moniker_gateway::connect::ServerSpec;
use moniker_gateway::message::Message;
use moniker_gateway::session::Session;

use crate::support::Reply as _;
use moniker_gateway::{Gateway, ServerEntry, Settings};
use moniker_surface::Rules;
use tokio::sync::mpsc;

async fn gateway(args: &[&str]) -> Arc<Gateway> {
    let entry = ServerEntry {
        id: "cg".parse().expect("id"),
        spec: ServerSpec::Stdio {
            command: fixture_bin().display().to_string(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: IndexMap::new(),
            pass_env: moniker_config::PassEnv::default(),
            cwd: None,
        },
        modern: false,
        sandbox: None,
        per_person: None,
    };
    let started = tokio::time::timeout(
        Duration::from_secs(20),
        Gateway::start(Rules::default(), vec![entry], Settings::default()),
    );
    match started.await {
        Ok(Ok(gateway)) => gateway,
        _ => panic!("the gateway did not start"),
    }
}

async fn session(gateway: &Arc<Gateway>) -> (Arc<Session>, mpsc::UnboundedReceiver<Message>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let session = Session::new(gateway.clone(), tx);
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    assert!(session.reply(init).await.is_some());
    assert!(
        session
            .reply(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await
            .is_none()
    );
    (session, rx)
}

fn drain(rx: &mut mpsc::UnboundedReceiver<Message>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(m) = rx.try_recv() {
        out.push(m.into_text());
    }
    out
}

#[tokio::test]
async fn a_log_message_of_one_clients_call_reaches_only_that_client() {
    let cg = fixture_file("contextgraph.json").display().to_string();
    let gateway = gateway(&[&cg, "--log-calls"]).await;
    let (a, mut a_rx) = session(&gateway).await;
    let (_b, mut b_rx) = session(&gateway).await;
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"store_memory","arguments":{}}}"#;
    // A client that never set a level takes `warning` and above: the fixture's `info` line
    // does not reach it ("Works the first time", item 6).
    let reply = tokio::time::timeout(Duration::from_secs(20), a.reply(call))
        .await
        .expect("answered");
    assert!(reply.is_some_and(|r| r.contains("\"result\"")));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let unasked = drain(&mut a_rx);
    assert!(
        unasked.iter().all(|m| !m.contains("notifications/message")),
        "a log line below warning reached a client that set no level: {unasked:?}"
    );
    // Once it asks for `info`, it gets them.
    let level = r#"{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"info"}}"#;
    assert!(a.reply(level).await.is_some());
    let call = call.replace("\"id\":1", "\"id\":3");
    let reply = tokio::time::timeout(Duration::from_secs(20), a.reply(&call))
        .await
        .expect("answered");
    assert!(reply.is_some_and(|r| r.contains("\"result\"")));
    // The log line was written before the answer: it has been routed by now.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let to_a = drain(&mut a_rx);
    let to_b = drain(&mut b_rx);
    assert!(
        to_a.iter()
            .any(|m| m.contains("notifications/message") && m.contains("call of store_memory")),
        "{to_a:?}"
    );
    assert!(
        to_b.iter().all(|m| !m.contains("notifications/message")),
        "leaked to another session: {to_b:?}"
    );
    gateway.shutdown().await;
}
