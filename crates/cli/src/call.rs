//! `moniker call`: one call through the gateway, its result on stdout.

use moniker_config::Config;
use moniker_gateway::message::{self, Message, Params};
use moniker_gateway::session::Session;
use serde_json::Value;

use crate::args::CallArgs;
use crate::exit::{Exit, Failure};
use crate::output;
use crate::start::{report_failed_servers, start};

/// `moniker call`: one call through the whole pipeline (resolution, routing, the server),
/// as a client session would make it.
pub async fn call(mut config: Config, args: CallArgs) -> Result<Exit, Failure> {
    let gateway = match start(&mut config).await? {
        Ok(gateway) => gateway,
        Err(not) => return Ok(not.exit),
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let session = Session::new(gateway.clone(), tx);
    session.identify("cli");
    let initialize = Params::object(&[
        ("protocolVersion", r#""2025-06-18""#),
        ("capabilities", r#"{"elicitation":{"form":{}}}"#),
        ("clientInfo", r#"{"name":"moniker call","version":"0"}"#),
    ]);
    let initialize = Message::outgoing("0", "initialize", Some(&initialize));
    session.handle(Ok(message::Incoming::One(initialize)), None);
    let initialized = Message::notification("notifications/initialized", None);
    session.handle(Ok(message::Incoming::One(initialized)), None);
    let arguments = args.arguments.as_ref().map_or("{}", |a| a.get());
    let name = serde_json::to_string(&args.name)?;
    let params = Params::object(&[("name", &name), ("arguments", arguments)]);
    let call = Message::outgoing("1", "tools/call", Some(&params));
    session.handle(Ok(message::Incoming::One(call)), None);
    let mut answer = None;
    let mut terminal = None;
    while let Some(message) = rx.recv().await {
        let value: Value = serde_json::from_str(message.text())?;
        if let (Some(method), Some(id)) = (message.method(), message.id()) {
            // A request of the server's, through the gateway: a person answers elicitations.
            let reply = if method == "elicitation/create" {
                let params = value.get("params").cloned().unwrap_or(Value::Null);
                let result = terminal
                    .get_or_insert_with(crate::elicit::Terminal::new)
                    .answer(&params)
                    .await;
                Message::result(id, &result.to_string())
            } else {
                Message::error(
                    Some(id),
                    message::METHOD_NOT_FOUND,
                    &format!("`moniker call` does not answer `{method}`"),
                )
            };
            session.handle(Ok(message::Incoming::One(reply)), None);
            continue;
        }
        if value.get("id") == Some(&Value::from(1)) && value.get("method").is_none() {
            answer = Some(value);
            break;
        }
    }
    drop(session);
    let failed = answer.as_ref().is_none_or(|a| a.get("error").is_some());
    // A failed call may be a server that did not start; a call that worked did not need it.
    report_failed_servers(&gateway, if failed { "error" } else { "warning" });
    gateway.shutdown().await;
    let Some(answer) = answer else {
        return Err("no answer to the call".into());
    };
    if let Some(error) = answer.get("error") {
        let code = error
            .get("code")
            .and_then(Value::as_i64)
            .unwrap_or_default();
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        output::report(&format!("error {code}: {message}"));
        return Ok(if crate::login::needs_login(&config) {
            Exit::NeedsLogin
        } else {
            Exit::Failure
        });
    }
    let result = &answer["result"];
    output::line(&serde_json::to_string_pretty(result)?)?;
    Ok(if result.get("isError") == Some(&Value::Bool(true)) {
        Exit::Failure
    } else {
        Exit::Ok
    })
}
