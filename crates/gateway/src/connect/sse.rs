//! An incremental parser of `text/event-stream` (the WHATWG server-sent events format): bytes
//! in as they arrive, whole events out.
//!
//! Lines end with CRLF, LF or CR (a CRLF split across two chunks is one line end); a line
//! that starts with `:` is a comment; `field: value` loses one space after the colon; `data`
//! lines are joined with `\n`; `event` names the event (`message` when absent); `id` sets the
//! last event id (kept across events and across reconnections, not when it holds NUL);
//! `retry` (digits only) is the reconnection delay; a blank line ends the event, which is
//! dispatched only when it has data. A leading byte-order mark is skipped. What is left of an
//! event when the stream ends is dropped. An event whose data grows over the size limit is
//! dropped whole (and counted), never buffered past the limit.

use std::time::Duration;

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// The event's type: `message` unless the server named another.
    pub event: String,
    pub data: String,
}

#[derive(Debug)]
pub(crate) struct Parser {
    max: usize,
    /// The bytes of the line being read.
    line: Vec<u8>,
    /// The line being read is over the limit: skip to its end.
    skipping: bool,
    /// The last chunk ended with CR: an LF at the start of the next one ends nothing.
    after_cr: bool,
    /// Nothing read yet on this stream (a byte-order mark may come).
    at_start: bool,
    /// How many bytes of a byte-order mark were read at the start.
    bom: usize,
    data: String,
    event: String,
    /// The event being read went over the limit: drop it at its end.
    oversized: bool,
    last_id: String,
    retry: Option<Duration>,
    dropped: usize,
}

impl Parser {
    /// A parser that drops events whose data is longer than `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            line: Vec::new(),
            skipping: false,
            after_cr: false,
            at_start: true,
            bom: 0,
            data: String::new(),
            event: String::new(),
            oversized: false,
            last_id: String::new(),
            retry: None,
            dropped: 0,
        }
    }

    /// Starts on a new stream (a reconnection): what was half read is dropped; the last event
    /// id and the reconnection delay are kept.
    pub(crate) fn restart(&mut self) {
        self.line.clear();
        self.skipping = false;
        self.after_cr = false;
        self.at_start = true;
        self.bom = 0;
        self.data.clear();
        self.event.clear();
        self.oversized = false;
    }

    /// The id of the last event dispatched (or last seen), if any.
    pub(crate) fn last_id(&self) -> Option<&str> {
        Some(self.last_id.as_str()).filter(|id| !id.is_empty())
    }

    /// The reconnection delay the server asked for.
    pub(crate) fn retry(&self) -> Option<Duration> {
        self.retry
    }

    /// How many events were dropped for their size so far; resets the count.
    pub(crate) fn take_dropped(&mut self) -> usize {
        std::mem::take(&mut self.dropped)
    }

    /// Reads a chunk; the events it completes are pushed to `out`.
    pub(crate) fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) {
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while !chunk.is_empty() {
            if self.at_start {
                // A byte-order mark, matched byte by byte: it may be split across chunks.
                const BOM: &[u8] = b"\xEF\xBB\xBF";
                while self.bom < BOM.len() && chunk.first() == Some(&BOM[self.bom]) {
                    self.bom += 1;
                    chunk = &chunk[1..];
                }
                if self.bom == BOM.len() {
                    self.at_start = false;
                } else if !chunk.is_empty() {
                    // Not a byte-order mark after all: what matched is text.
                    self.at_start = false;
                    self.push_line_bytes(&BOM[..self.bom]);
                }
                continue;
            }
            match chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(i) => {
                    self.push_line_bytes(&chunk[..i]);
                    let cr = chunk[i] == b'\r';
                    chunk = &chunk[i + 1..];
                    if cr {
                        match chunk.first() {
                            Some(b'\n') => chunk = &chunk[1..],
                            Some(_) => {}
                            None => self.after_cr = true,
                        }
                    }
                    self.end_line(out);
                }
                None => {
                    self.push_line_bytes(chunk);
                    chunk = &[];
                }
            }
        }
    }

    fn push_line_bytes(&mut self, bytes: &[u8]) {
        if self.skipping {
            return;
        }
        // Room for the field name besides the data itself.
        if self.line.len() + bytes.len() > self.max.saturating_add(64) {
            self.skipping = true;
            self.oversized = true;
            self.line.clear();
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn end_line(&mut self, out: &mut Vec<Event>) {
        if std::mem::take(&mut self.skipping) {
            return;
        }
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(out);
        } else if line[0] != b':' {
            let text = String::from_utf8_lossy(&line);
            let (field, value) = match text.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (text.as_ref(), ""),
            };
            self.field(field, value);
        }
        // Keep the allocation for the next line.
        self.line = line;
        self.line.clear();
    }

    fn field(&mut self, field: &str, value: &str) {
        match field {
            "data" => {
                if self.oversized || self.data.len() + value.len() + 1 > self.max.saturating_add(1)
                {
                    self.oversized = true;
                    self.data.clear();
                } else {
                    self.data.push_str(value);
                    self.data.push('\n');
                }
            }
            "event" => value.clone_into(&mut self.event),
            "id" if !value.contains('\0') => value.clone_into(&mut self.last_id),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                if let Ok(ms) = value.parse::<u64>() {
                    self.retry = Some(Duration::from_millis(ms));
                }
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        let event = std::mem::take(&mut self.event);
        if std::mem::take(&mut self.oversized) {
            self.data.clear();
            self.dropped += 1;
            return;
        }
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        out.push(Event {
            event: if event.is_empty() {
                "message".to_owned()
            } else {
                event
            },
            data,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_chunks(max: usize, chunks: &[&[u8]]) -> (Vec<Event>, Parser) {
        let mut parser = Parser::new(max);
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out);
        }
        (out, parser)
    }

    fn message(data: &str) -> Event {
        Event {
            event: "message".to_owned(),
            data: data.to_owned(),
        }
    }

    #[test]
    fn reads_events_fields_and_comments() {
        let text = b": a comment\nid: 7\nretry: 1500\ndata: {\"a\":\ndata:1}\n\nevent: endpoint\ndata: /messages?s=1\n\ndata\n\nfoo: bar\n\n";
        let (events, parser) = parse_chunks(1024, &[text]);
        assert_eq!(
            events,
            vec![
                message("{\"a\":\n1}"),
                Event {
                    event: "endpoint".to_owned(),
                    data: "/messages?s=1".to_owned()
                },
                // `data` alone is one empty data line: an event whose data is empty.
                message(""),
            ]
        );
        assert_eq!(parser.last_id(), Some("7"));
        assert_eq!(parser.retry(), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn every_line_ending_and_every_split_works() {
        let text: &[u8] =
            b"\xEF\xBB\xBFid: 1\r\ndata: one\r\n\r\ndata: two\rdata: more\r\rdata: three\n\n";
        let expected = vec![message("one"), message("two\nmore"), message("three")];
        // Whole, and split at every byte position, and byte by byte.
        assert_eq!(parse_chunks(1024, &[text]).0, expected);
        for at in 0..text.len() {
            let (a, b) = text.split_at(at);
            assert_eq!(parse_chunks(1024, &[a, b]).0, expected, "split at {at}");
        }
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        let (events, parser) = parse_chunks(1024, &bytes);
        assert_eq!(events, expected);
        assert_eq!(parser.last_id(), Some("1"));
    }

    #[test]
    fn ids_persist_and_empty_events_still_set_them() {
        // A priming event: an id and an empty data line; an id alone dispatches nothing.
        let (events, mut parser) = parse_chunks(1024, &[b"id: p1\ndata:\n\nid: p1\n\n"]);
        assert_eq!(events, vec![message("")]);
        assert_eq!(parser.last_id(), Some("p1"));
        let mut out = Vec::new();
        parser.feed(b"data: x\n\nid: bad\0id\ndata: y\n\n", &mut out);
        assert_eq!(out, vec![message("x"), message("y")]);
        assert_eq!(parser.last_id(), Some("p1"));
        parser.feed(b"id\n\n", &mut out);
        assert_eq!(parser.last_id(), None, "an empty id resets it");
    }

    #[test]
    fn a_half_read_event_is_dropped_on_restart() {
        let (events, mut parser) = parse_chunks(1024, &[b"id: 3\ndata: half"]);
        assert!(events.is_empty());
        parser.restart();
        let mut out = Vec::new();
        parser.feed(b"data: whole\n\n", &mut out);
        assert_eq!(out, vec![message("whole")]);
        assert_eq!(parser.last_id(), Some("3"));
    }

    #[test]
    fn oversized_events_are_dropped_whole() {
        let big = "x".repeat(100);
        let text =
            format!("data: {big}\ndata: {big}\n\ndata: ok\n\ndata: {big}{big}\n\ndata: fine\n\n");
        let (events, mut parser) = parse_chunks(150, &[text.as_bytes()]);
        assert_eq!(events, vec![message("ok"), message("fine")]);
        assert_eq!(parser.take_dropped(), 2);
        // Split into small chunks, the same.
        let chunks: Vec<&[u8]> = text.as_bytes().chunks(7).collect();
        let (events, _) = parse_chunks(150, &chunks);
        assert_eq!(events, vec![message("ok"), message("fine")]);
    }

    #[test]
    fn retry_must_be_digits() {
        let (_, parser) = parse_chunks(64, &[b"retry: 12a\nretry: -5\n\n"]);
        assert_eq!(parser.retry(), None);
    }
}
