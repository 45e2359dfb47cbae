//! The legacy HTTP+SSE transport (protocol 2024-11-05), for servers that refuse Streamable
//! HTTP's first POST: the URL is opened with GET as an event stream whose first `endpoint`
//! event gives the URL (same origin) to POST messages to, in order; every message from the
//! server, responses included, comes on that stream, for the connection's life.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, StatusCode, Url};

use super::link::{Link, Pending, cause, content_type, is_event_stream, on_event, read_stream};
use super::sse::Parser;
use crate::headers::{EVENT_STREAM, JSON};
use crate::message::Message;

/// Opens the legacy transport's event stream and waits for its endpoint; its reader then
/// runs for the connection's life.
pub(super) async fn open_legacy(link: &Arc<Link>) -> Result<Url, String> {
    let mut response = link
        .send(
            Method::GET,
            &link.url,
            &[(ACCEPT, HeaderValue::from_static(EVENT_STREAM))],
            None,
        )
        .await
        .map_err(|e| format!("GET: {}", e.cause()))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("GET: HTTP {status}"));
    }
    if !is_event_stream(&response) {
        return Err(format!(
            "GET: content type `{}`, not an event stream",
            content_type(&response)
        ));
    }
    let mut parser = Parser::new(link.max_message);
    let mut events = Vec::new();
    let endpoint = loop {
        let chunk = response
            .chunk()
            .await
            .map_err(|e| format!("GET: {}", cause(&e)))?
            .ok_or_else(|| "GET: the stream ended before its `endpoint` event".to_owned())?;
        parser.feed(&chunk, &mut events);
        let mut found = None;
        for event in events.drain(..) {
            if found.is_none() && event.event == "endpoint" {
                found = Some(event.data);
            } else {
                on_event(link, &event, None);
            }
        }
        if let Some(found) = found {
            break found;
        }
    };
    let endpoint = link
        .url
        .join(endpoint.trim())
        .map_err(|e| format!("the `endpoint` event is not a URL: {e}"))?;
    if endpoint.origin() != link.url.origin() {
        return Err("the `endpoint` event names another origin".to_owned());
    }
    let reader = link.clone();
    tokio::spawn(async move {
        tokio::select! {
            r = read_stream(&reader, response, &mut parser, None) => {
                let why = match r {
                    Ok(_) => "the server ended its event stream".to_owned(),
                    Err(e) => format!("the server's event stream broke: {}", cause(&e)),
                };
                reader.close(&why);
            }
            () = reader.stopped() => {}
        }
    });
    Ok(endpoint)
}

/// Sends one line over the legacy transport, in order: the server acknowledges each at once
/// (its answers come on the event stream), so one that does not is not waited for long.
pub(super) async fn legacy_send(link: &Link, endpoint: &Url, line: &Message, wait: Duration) {
    tokio::select! {
        r = tokio::time::timeout(wait, legacy_post(link, endpoint, line)) => {
            if r.is_err() {
                tracing::warn!(server = %link.server, url = %link.shown, "the server did not acknowledge a message in time");
            }
        }
        () = link.stopped() => {}
    }
}

/// POSTs one line to the legacy endpoint; what answers it comes on the event stream.
async fn legacy_post(link: &Link, endpoint: &Url, line: &Message) {
    let mut pending = Pending::of(line);
    let mut headers = vec![(CONTENT_TYPE, HeaderValue::from_static(JSON))];
    if let Some(conn) = link.conn.upgrade() {
        match conn.forwarded(line) {
            Some(forwarded) => headers.extend(forwarded),
            // Given up before it was sent: it is not sent.
            None => return,
        }
    }
    let sent = link
        .send(Method::POST, endpoint, &headers, Some(line.text()))
        .await;
    match sent {
        Ok(response) if response.status().is_success() => {}
        Ok(response) if response.status() == StatusCode::NOT_FOUND => {
            link.close("the server forgot the session (HTTP 404)");
        }
        Ok(response) => {
            let status = response.status();
            let why = format!("the server answered HTTP {status}");
            if pending.is_done() {
                tracing::warn!(server = %link.server, url = %link.shown, %status, "the server refused a message");
            }
            link.fail(&mut pending, &why);
        }
        Err(e) => {
            let why = format!("cannot reach the server: {}", e.cause());
            if e.is_connect() {
                link.close(&why);
            } else {
                link.fail(&mut pending, &why);
            }
        }
    }
}
