//! The head of a message: where, in its text, lie the fields that routing and the two
//! protocol eras read. It is filled in the one serde pass that reads a message where it enters
//! (the envelope, the params or result, and the params' `_meta`, each visited once), and kept
//! up to date by the edits moniker makes ([`edit`]): a spliced message knows its parts without
//! being read again.
//!
//! Positions come from the parser's borrowed slices (a value's bytes) and from a short scan of
//! what the parser has just accepted (the whitespace, comma, key and colon before a value, the
//! brace after the last one), so they are exact whatever whitespace or escapes a sender uses.
//! A field the head records that appears twice in one object makes the message invalid: the
//! gateway and the server behind it must never read two different values of one field.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserializer as _;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// The 2026-07-28 envelope's keys in `params._meta`.
pub const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
pub const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
pub const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";
pub const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";

/// Where a part lies in a text: a byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn at(start: usize, len: usize) -> Self {
        Self {
            start: start as u32,
            end: (start + len) as u32,
        }
    }

    pub fn get(self, text: &str) -> &str {
        &text[self.start as usize..self.end as usize]
    }

    fn shifted(self, by: i64) -> Self {
        Self {
            start: (self.start as i64 + by) as u32,
            end: (self.end as i64 + by) as u32,
        }
    }
}

/// Where a position lies after the bytes at `cut` were replaced by `len` bytes: moved when it
/// is past the cut.
fn moved_at(x: usize, cut: Span, len: usize) -> usize {
    let (start, end) = (cut.start as usize, cut.end as usize);
    if start < x && end <= x {
        x + len - (end - start)
    } else {
        x
    }
}

/// [`moved_at`] of a span's two ends (a span equal to the cut becomes the new bytes').
pub(crate) fn moved(span: Span, cut: Span, len: usize) -> Span {
    Span {
        start: moved_at(span.start as usize, cut, len) as u32,
        end: moved_at(span.end as usize, cut, len) as u32,
    }
}

/// The objects whose fields the head records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Params,
    Meta,
    /// The 2026-07-28 envelope's client capabilities.
    Capabilities,
    Result,
    /// An error response's error object.
    Error,
}

/// A field the head records: its object and its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Field {
    // params
    Name,
    Uri,
    /// `params.progressToken` (of `notifications/progress`).
    ProgressToken,
    RequestId,
    Cursor,
    Arguments,
    RequestState,
    InputResponses,
    Task,
    TaskId,
    Ref,
    Notifications,
    Level,
    Meta,
    // params._meta
    MetaProgressToken,
    Version,
    Capabilities,
    ClientInfo,
    LogLevel,
    Traceparent,
    Tracestate,
    // params._meta[clientCapabilities]
    Sampling,
    Elicitation,
    Roots,
    // result
    ResultType,
    TtlMs,
    InputRequests,
    IsError,
    ResultRequestState,
    ResultTask,
    ResultTaskId,
    // error
    ErrorCode,
}

impl Field {
    pub(crate) fn scope(self) -> Scope {
        use Field::*;
        match self {
            MetaProgressToken | Version | Capabilities | ClientInfo | LogLevel | Traceparent
            | Tracestate => Scope::Meta,
            ResultType | TtlMs | InputRequests | IsError | ResultRequestState | ResultTask
            | ResultTaskId => Scope::Result,
            Sampling | Elicitation | Roots => Scope::Capabilities,
            ErrorCode => Scope::Error,
            _ => Scope::Params,
        }
    }

    pub fn key(self) -> &'static str {
        use Field::*;
        match self {
            Name => "name",
            Uri => "uri",
            ProgressToken | MetaProgressToken => "progressToken",
            RequestId => "requestId",
            Cursor => "cursor",
            Arguments => "arguments",
            RequestState | ResultRequestState => "requestState",
            InputResponses => "inputResponses",
            Task | ResultTask => "task",
            TaskId | ResultTaskId => "taskId",
            Ref => "ref",
            Notifications => "notifications",
            Level => "level",
            Meta => "_meta",
            Version => PROTOCOL_VERSION_KEY,
            Capabilities => CAPABILITIES_KEY,
            ClientInfo => CLIENT_INFO_KEY,
            LogLevel => LOG_LEVEL_KEY,
            Traceparent => "traceparent",
            Tracestate => "tracestate",
            Sampling => "sampling",
            Elicitation => "elicitation",
            Roots => "roots",
            ResultType => "resultType",
            TtlMs => "ttlMs",
            InputRequests => "inputRequests",
            IsError => "isError",
            ErrorCode => "code",
        }
    }

    /// The params field of that key.
    pub fn named(key: &str) -> Option<Self> {
        Self::of(Scope::Params, key)
    }

    fn at(level: Scope) -> &'static [Field] {
        match level {
            Scope::Params => &PARAMS,
            Scope::Meta => &META,
            Scope::Capabilities => &CAPABILITIES,
            Scope::Result => &RESULT,
            Scope::Error => &[Field::ErrorCode],
        }
    }

    fn of(level: Scope, key: &str) -> Option<Self> {
        Self::at(level).iter().copied().find(|f| f.key() == key)
    }

    /// The field a key that is not one of `level`'s own would be taken for by a server that
    /// matches keys without regard to case (Go's `encoding/json`, .NET with case-insensitive
    /// names): `NAME` beside `name` would be read by moniker one way and by it the other.
    fn folded(level: Scope, key: &str) -> Option<Self> {
        Self::at(level)
            .iter()
            .copied()
            .find(|f| folds_onto(key, f.key()))
    }

    /// The envelope's fields: what a 2025-era server never sees.
    pub const ENVELOPE: [Field; 4] = [
        Field::Version,
        Field::Capabilities,
        Field::ClientInfo,
        Field::LogLevel,
    ];
}

/// Whether `key`, not equal to `known`, is equal to it under the case folding of servers
/// that match keys without regard to case: ASCII case, and the letters Unicode folds onto
/// ASCII ones (`ſ` onto `s`, the Kelvin sign onto `k`, the dotless and dotted `i`s onto `i`).
pub(crate) fn folds_onto(key: &str, known: &str) -> bool {
    if key == known || key.len() < known.len() {
        return false;
    }
    let mut theirs = known.bytes();
    for c in key.chars() {
        let folded = match c {
            '\u{17F}' => b's',
            '\u{212A}' => b'k',
            '\u{130}' | '\u{131}' => b'i',
            c if c.is_ascii() => c.to_ascii_lowercase() as u8,
            _ => return false,
        };
        if theirs.next().map(|b| b.to_ascii_lowercase()) != Some(folded) {
            return false;
        }
    }
    theirs.next().is_none()
}

/// Where one field lies: its member (from its key's opening quote) and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    member: u32,
    value: Span,
}

/// The recorded fields of one message (or one params object): the few it has, in the order
/// they were met.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Head {
    slots: Vec<(Field, Slot)>,
}

impl fmt::Debug for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let present: Vec<&str> = self.slots.iter().map(|(f, _)| f.key()).collect();
        f.debug_tuple("Head").field(&present).finish()
    }
}

/// The fields each object records.
const PARAMS: [Field; 14] = {
    use Field::*;
    [
        Name,
        Uri,
        ProgressToken,
        RequestId,
        Cursor,
        Arguments,
        RequestState,
        InputResponses,
        Task,
        TaskId,
        Ref,
        Notifications,
        Level,
        Meta,
    ]
};
const META: [Field; 7] = {
    use Field::*;
    [
        MetaProgressToken,
        Version,
        Capabilities,
        ClientInfo,
        LogLevel,
        Traceparent,
        Tracestate,
    ]
};
const CAPABILITIES: [Field; 3] = [Field::Sampling, Field::Elicitation, Field::Roots];
const RESULT: [Field; 7] = {
    use Field::*;
    [
        ResultType,
        TtlMs,
        InputRequests,
        IsError,
        ResultRequestState,
        ResultTask,
        ResultTaskId,
    ]
};

impl Head {
    fn slot(&self, field: Field) -> Option<Slot> {
        self.slots
            .iter()
            .find(|(f, _)| *f == field)
            .map(|(_, s)| *s)
    }

    /// Records `field` at `slot`, in place of any it had.
    fn put(&mut self, field: Field, slot: Slot) {
        match self.slots.iter_mut().find(|(f, _)| *f == field) {
            Some(at) => at.1 = slot,
            None => self.slots.push((field, slot)),
        }
    }

    pub fn get(&self, field: Field) -> Option<Span> {
        self.slot(field).map(|s| s.value)
    }

    pub fn has(&self, field: Field) -> bool {
        self.slot(field).is_some()
    }

    /// Whether the object at `object` (in `text`) holds nothing but `fields`: every byte of it
    /// outside their members is a brace, a comma or whitespace. `false` when it is no object.
    pub(crate) fn holds_only(&self, text: &str, object: Field, fields: &[Field]) -> bool {
        let Some(object) = self.slot(object) else {
            return false;
        };
        let b = text.as_bytes();
        let (start, end) = (object.value.start as usize, object.value.end as usize);
        if b.get(start) != Some(&b'{') {
            return false;
        }
        let mut members: Vec<(usize, usize)> = fields
            .iter()
            .filter_map(|f| self.slot(*f))
            .map(|s| (s.member as usize, s.value.end as usize))
            .filter(|(member, value_end)| start < *member && *value_end < end)
            .collect();
        members.sort_unstable();
        let between = |from: usize, to: usize| {
            b[from..to]
                .iter()
                .all(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b','))
        };
        let mut at = start + 1;
        for (member, value_end) in members {
            // One inside a member met already is in it.
            if member >= at && !between(at, member) {
                return false;
            }
            at = at.max(value_end);
        }
        between(at, end - 1)
    }

    /// Every position moved by `by` (the object now lies elsewhere in a bigger text).
    pub fn shifted(&self, by: i64) -> Self {
        let mut out = self.clone();
        for (_, slot) in &mut out.slots {
            slot.member = (slot.member as i64 + by) as u32;
            slot.value = slot.value.shifted(by);
        }
        out
    }

    /// The head after the bytes at `span` were replaced by `len` bytes (a slot whose value
    /// that was gets the new place; slots inside it go).
    pub fn spliced(&self, span: Span, len: usize) -> Self {
        let slots = self
            .slots
            .iter()
            .filter(|(_, slot)| {
                let inside = span.start <= slot.value.start && slot.value.end <= span.end;
                !inside || slot.value == span
            })
            .map(|(field, slot)| {
                let slot = Slot {
                    member: moved_at(slot.member as usize, span, len) as u32,
                    value: moved(slot.value, span, len),
                };
                (*field, slot)
            })
            .collect();
        Self { slots }
    }

    fn set(&mut self, field: Field, slot: Slot) -> Result<(), String> {
        if self.has(field) {
            return Err(format!("duplicate key `{}`", field.key()));
        }
        self.slots.push((field, slot));
        Ok(())
    }
}

/// How many times a message's text has been run through serde, since the process started:
/// the parse where a message enters, and any later read of a part of it (which the head is
/// there to make unneeded). `/metrics` shows it.
static PASSES: AtomicU64 = AtomicU64::new(0);

pub fn passes() -> u64 {
    PASSES.load(Ordering::Relaxed)
}

/// Runs one serde pass over (part of) a message's text, counted.
pub(crate) fn counted<T>(pass: impl FnOnce() -> T) -> T {
    PASSES.fetch_add(1, Ordering::Relaxed);
    #[cfg(test)]
    THREAD_PASSES.with(|n| n.set(n.get() + 1));
    pass()
}

#[cfg(test)]
thread_local! {
    /// The passes of this thread (tests run side by side).
    static THREAD_PASSES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

// ---------------------------------------------------------------------------------------
// Reading: the one pass.

/// What the envelope of a message holds (positions in its text).
#[derive(Default)]
pub(super) struct Top<'a> {
    pub jsonrpc: Option<&'a str>,
    /// Present (`null` included).
    pub id: Option<&'a RawValue>,
    pub method: Option<&'a str>,
    pub params: Option<Span>,
    pub result: Option<Span>,
    pub error: Option<Span>,
    pub head: Head,
}

/// Reads a message's envelope, and its params or result with their recorded fields, in one
/// serde pass.
pub(super) fn read(text: &str) -> Result<Top<'_>, serde_json::Error> {
    counted(|| {
        let mut de = serde_json::Deserializer::from_str(text);
        let start = text.len() - text.trim_start().len();
        let top = de.deserialize_map(TopVisitor { text, start })?;
        de.end()?;
        Ok(top)
    })
}

fn ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// Past the string whose opening quote is at `i`.
fn past_string(b: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// From the end of the previous member (or just inside the brace): where the next member's
/// key begins, and where its value begins.
fn member_at(b: &[u8], cursor: usize) -> (usize, usize) {
    let member = past_separator(b, ws(b, cursor), b',');
    let value = past_separator(b, ws(b, past_string(b, member)), b':');
    (member, value)
}

/// Past `separator` and the whitespace after it when it is at `i`; else `i`.
fn past_separator(b: &[u8], i: usize, separator: u8) -> usize {
    match b.get(i) == Some(&separator) {
        true => ws(b, i + 1),
        false => i,
    }
}

fn end_of(text: &str, raw: &RawValue) -> usize {
    raw.get().as_ptr() as usize - text.as_ptr() as usize + raw.get().len()
}

/// A map key, borrowed when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

struct TopVisitor<'t> {
    text: &'t str,
    start: usize,
}

impl<'de> Visitor<'de> for TopVisitor<'de> {
    type Value = Top<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top<'de>, A::Error> {
        let b = self.text.as_bytes();
        let mut top = Top::default();
        let mut cursor = self.start + 1;
        let mut seen = [false; 6];
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let (_, value) = member_at(b, cursor);
            const ENVELOPE: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];
            let which = ENVELOPE.iter().position(|k| *k == key);
            let folded = || ENVELOPE.iter().find(|k| folds_onto(&key, k));
            if let Some(like) = which.is_none().then(folded).flatten() {
                return Err(de::Error::custom(format!(
                    "key `{key}` is `{like}` in another case (a server may read it as that)"
                )));
            }
            if let Some(i) = which {
                if std::mem::replace(&mut seen[i], true) {
                    return Err(de::Error::custom(format!("duplicate field `{key}`")));
                }
            }
            cursor = match which {
                Some(0) => {
                    let raw: &RawValue = map.next_value()?;
                    top.jsonrpc = serde_json::from_str::<&str>(raw.get()).ok();
                    end_of(self.text, raw)
                }
                Some(1) => {
                    let raw: &'de RawValue = map.next_value()?;
                    top.id = Some(raw);
                    end_of(self.text, raw)
                }
                Some(2) => {
                    // Borrowed: a method name with escapes in it is not one that exists.
                    let method: &'de str = map.next_value()?;
                    top.method = Some(method);
                    method.as_ptr() as usize - self.text.as_ptr() as usize + method.len() + 1
                }
                Some(i) => {
                    let level = match i {
                        3 => Scope::Params,
                        4 => Scope::Result,
                        _ => Scope::Error,
                    };
                    let end = map.next_value_seed(Value {
                        text: self.text,
                        start: value,
                        level: Some(level),
                        head: &mut top.head,
                    })?;
                    let span = Some(Span::at(value, end - value));
                    match i {
                        3 => top.params = span,
                        4 => top.result = span,
                        _ => top.error = span,
                    }
                    end
                }
                None => end_of(self.text, map.next_value::<&RawValue>()?),
            };
        }
        Ok(top)
    }
}

/// Any value, starting at `start`; an object at a recorded level has its fields recorded.
/// Gives the value's end.
struct Value<'t, 'h> {
    text: &'t str,
    start: usize,
    level: Option<Scope>,
    head: &'h mut Head,
}

impl<'de> DeserializeSeed<'de> for Value<'de, '_> {
    type Value = usize;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Value<'de, '_> {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<usize, A::Error> {
        let b = self.text.as_bytes();
        let mut cursor = self.start + 1;
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let (member, value) = member_at(b, cursor);
            let field = self.level.and_then(|level| Field::of(level, &key));
            if let Some(like) = self
                .level
                .filter(|_| field.is_none())
                .and_then(|level| Field::folded(level, &key))
            {
                return Err(de::Error::custom(format!(
                    "key `{key}` is `{}` in another case (a server may read it as that)",
                    like.key()
                )));
            }
            let nested = match field {
                Some(Field::Meta) => Some(Scope::Meta),
                Some(Field::Capabilities) => Some(Scope::Capabilities),
                _ => None,
            };
            cursor = match nested {
                Some(scope) => map.next_value_seed(Value {
                    text: self.text,
                    start: value,
                    level: Some(scope),
                    head: self.head,
                })?,
                _ => end_of(self.text, map.next_value::<&RawValue>()?),
            };
            if let Some(field) = field {
                let slot = Slot {
                    member: member as u32,
                    value: Span::at(value, cursor - value),
                };
                self.head.set(field, slot).map_err(de::Error::custom)?;
            }
        }
        Ok(ws(b, cursor) + 1)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let mut cursor = self.start + 1;
        while let Some(raw) = seq.next_element::<&RawValue>()? {
            cursor = end_of(self.text, raw);
        }
        Ok(ws(self.text.as_bytes(), cursor) + 1)
    }

    fn visit_unit<E: de::Error>(self) -> Result<usize, E> {
        Ok(self.start + 4)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<usize, E> {
        Ok(self.start + if v { 4 } else { 5 })
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<usize, E> {
        Ok(past_string(self.text.as_bytes(), self.start))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<usize, E> {
        Ok(self.past_number())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<usize, E> {
        Ok(self.past_number())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<usize, E> {
        Ok(self.past_number())
    }
}

impl Value<'_, '_> {
    fn past_number(&self) -> usize {
        let b = self.text.as_bytes();
        let mut i = self.start;
        while i < b.len() && matches!(b[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
            i += 1;
        }
        i
    }
}

// ---------------------------------------------------------------------------------------
// Editing: splices that keep the head.

/// One change to a message's recorded fields.
#[derive(Debug, Clone, Copy)]
pub enum Edit<'a> {
    /// The field's value replaced, or the field added (at the end of its object; a `_meta`
    /// made for it when there is none) when absent. The value is raw JSON.
    Set(Field, &'a str),
    /// The field's member removed, when present.
    Drop(Field),
}

/// Members to add to an object: each field, its value, and the fields written inside that
/// value (at places in it).
type Adds<'a> = Vec<(Field, Cow<'a, str>, Vec<(Field, Slot)>)>;

/// One splice of the text: `start..end` replaced by `with` (a value set is borrowed, not
/// copied).
struct Cut<'a> {
    start: usize,
    end: usize,
    with: Cow<'a, str>,
    /// The field whose value this is (its slot gets the new place).
    field: Option<Field>,
    /// The fields written in `with`, at their places in it.
    inserted: Vec<(Field, Slot)>,
    /// Where `with` went in the new text, once the cut is made ([`apply`]).
    written: usize,
}

impl Cut<'_> {
    /// The cuts that drop the members at `slots`: members side by side go in one cut, which
    /// takes one comma for them all (a cut each would share a comma between two of them).
    fn drops(b: &[u8], mut slots: Vec<Slot>) -> impl Iterator<Item = Self> {
        slots.sort_by_key(|slot| slot.member);
        // Each run: where its first member starts, where its last member's value ends.
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for slot in slots {
            let (member, end) = (slot.member as usize, slot.value.end as usize);
            match runs.last_mut() {
                // Inside a member dropped already (or that member again): it goes with it.
                Some(run) if member < run.1 => {}
                Some(run) if next_member(b, run.1) == Some(member) => run.1 = end,
                _ => runs.push((member, end)),
            }
        }
        runs.into_iter().map(move |(member, end)| {
            let (start, end) = member_range(b, member, end);
            Self {
                start,
                end,
                with: Cow::Borrowed(""),
                field: None,
                inserted: Vec::new(),
                written: 0,
            }
        })
    }
}

/// Where the member after the value that ends at `end` starts, when a comma follows it.
fn next_member(b: &[u8], end: usize) -> Option<usize> {
    let comma = ws(b, end);
    (b.get(comma) == Some(&b',')).then(|| ws(b, comma + 1))
}

/// A text after edits: its head, and where each old position went.
pub(crate) struct Edited {
    pub text: String,
    pub head: Head,
    /// `(start, end, growth)` of each cut, in order.
    moves: Vec<(usize, usize, i64)>,
}

impl Edited {
    /// Where a span that no cut touched (or that holds cuts inside it) lies now.
    fn map(&self, span: Span) -> Span {
        Span {
            start: self.position(span.start as usize) as u32,
            end: self.position(span.end as usize) as u32,
        }
    }

    fn position(&self, x: usize) -> usize {
        let by: i64 = self
            .moves
            .iter()
            .filter(|(start, end, _)| *start < x && *end <= x)
            .map(|m| m.2)
            .sum();
        (x as i64 + by) as usize
    }
}

/// `text` with `edits` made to the fields of its params (or result) object, which lies at
/// `object`. Members are dropped with one comma beside them; a field added goes at the end of
/// its object (a `_meta` is made for `_meta` fields when there is none).
pub(crate) fn edit(text: &str, object: Span, head: &Head, edits: &[Edit<'_>]) -> Edited {
    let dropping = |e: &&Edit<'_>| matches!(e, Edit::Drop(_));
    let drops: Vec<Edit<'_>> = edits.iter().filter(dropping).copied().collect();
    if !drops.is_empty() && drops.len() < edits.len() {
        // The drops first, all in one pass, then the rest on what they left: a field set
        // after it was dropped is added again, and an object they emptied is seen empty.
        let dropped = edit_once(text, object, head, &drops);
        let object = dropped.map(object);
        let rest: Vec<Edit<'_>> = edits.iter().filter(|e| !dropping(e)).copied().collect();
        return edit_once(&dropped.text, object, &dropped.head, &rest);
    }
    edit_once(text, object, head, edits)
}

fn edit_once(text: &str, object: Span, head: &Head, edits: &[Edit<'_>]) -> Edited {
    let b = text.as_bytes();
    let mut cuts: Vec<Cut> = Vec::new();
    let mut dropped: Vec<Slot> = Vec::new();
    let mut params_adds: Adds<'_> = Vec::new();
    let mut meta_adds: Adds<'_> = Vec::new();
    for edit in edits {
        match *edit {
            Edit::Set(field, value) => match head.slot(field) {
                Some(slot) => cuts.push(Cut {
                    start: slot.value.start as usize,
                    end: slot.value.end as usize,
                    with: Cow::Borrowed(value),
                    field: Some(field),
                    inserted: Vec::new(),
                    written: 0,
                }),
                None if field.scope() == Scope::Meta => {
                    meta_adds.push((field, value.into(), Vec::new()));
                }
                None => params_adds.push((field, value.into(), Vec::new())),
            },
            Edit::Drop(field) => dropped.extend(head.slot(field)),
        }
    }
    cuts.extend(Cut::drops(b, dropped));
    if !meta_adds.is_empty() {
        match head.slot(Field::Meta) {
            Some(meta) if b.get(meta.value.start as usize) == Some(&b'{') => {
                cuts.push(insertion(b, meta.value, &meta_adds));
            }
            other => {
                // A `_meta` of their own: added, or in place of one that is not an object.
                let inner = insertion(b"{}", Span::at(0, 2), &meta_adds);
                let text = format!("{{{}}}", inner.with);
                let nested = inner
                    .inserted
                    .into_iter()
                    .map(|(f, s)| {
                        let s = Slot {
                            member: s.member + 1,
                            value: s.value.shifted(1),
                        };
                        (f, s)
                    })
                    .collect();
                match other {
                    Some(meta) => cuts.push(Cut {
                        start: meta.value.start as usize,
                        end: meta.value.end as usize,
                        with: Cow::Owned(text),
                        field: Some(Field::Meta),
                        inserted: nested,
                        written: 0,
                    }),
                    None => params_adds.push((Field::Meta, text.into(), nested)),
                }
            }
        }
    }
    if !params_adds.is_empty() {
        cuts.push(insertion(b, object, &params_adds));
    }
    cuts.sort_by_key(|c| (c.start, c.end));
    apply(text, head, cuts)
}

/// The range a member takes when it is dropped: itself, and the comma after it (else the one
/// before it).
fn member_range(b: &[u8], member: usize, value_end: usize) -> (usize, usize) {
    let after = ws(b, value_end);
    if b.get(after) == Some(&b',') {
        return (member, ws(b, after + 1));
    }
    let mut before = member;
    while before > 0 && matches!(b[before - 1], b' ' | b'\t' | b'\n' | b'\r') {
        before -= 1;
    }
    if before > 0 && b[before - 1] == b',' {
        return (before - 1, value_end);
    }
    (member, value_end)
}

/// Members added at the end of the object at `object` (each with the fields written inside
/// its value, at places in that value).
fn insertion<'a>(b: &[u8], object: Span, adds: &Adds<'_>) -> Cut<'a> {
    let close = object.end as usize - 1;
    let empty = b[object.start as usize + 1..close]
        .iter()
        .all(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'));
    let mut with = String::new();
    let mut inserted = Vec::new();
    for (i, (field, value, nested)) in adds.iter().enumerate() {
        if i > 0 || !empty {
            with.push(',');
        }
        let member = with.len();
        with.push_str(&super::string(field.key()));
        with.push(':');
        let at = with.len();
        inserted.push((
            *field,
            Slot {
                member: member as u32,
                value: Span::at(at, value.len()),
            },
        ));
        for (f, s) in nested {
            inserted.push((
                *f,
                Slot {
                    member: s.member + at as u32,
                    value: s.value.shifted(at as i64),
                },
            ));
        }
        with.push_str(value);
    }
    Cut {
        start: close,
        end: close,
        with: Cow::Owned(with),
        field: None,
        inserted,
        written: 0,
    }
}

fn apply(text: &str, head: &Head, mut cuts: Vec<Cut<'_>>) -> Edited {
    let growth: i64 = cuts
        .iter()
        .map(|c| c.with.len() as i64 - (c.end - c.start) as i64)
        .sum();
    let mut out = String::with_capacity((text.len() as i64 + growth.max(0)) as usize);
    let mut at = 0;
    cuts.retain_mut(|cut| {
        if cut.start < at {
            // Overlaps one made already (a value set inside a member dropped): the drop wins.
            return false;
        }
        out.push_str(&text[at..cut.start]);
        cut.written = out.len();
        out.push_str(&cut.with);
        at = cut.end;
        true
    });
    out.push_str(&text[at..]);
    let moves: Vec<(usize, usize, i64)> = cuts
        .iter()
        .map(|c| {
            (
                c.start,
                c.end,
                c.with.len() as i64 - (c.end - c.start) as i64,
            )
        })
        .collect();
    let inserted: usize = cuts.iter().map(|c| c.inserted.len()).sum();
    let mut edited = Edited {
        text: out,
        head: Head {
            slots: Vec::with_capacity(head.slots.len() + inserted),
        },
        moves,
    };
    edited.head_after(head, &cuts);
    edited
}

impl Edited {
    /// Its head: each field of `head` (the text's before the cuts `made` were made) where it
    /// went (a value set in its new place; one inside a cut gone), and the fields the cuts
    /// wrote.
    fn head_after(&mut self, head: &Head, made: &[Cut<'_>]) {
        for (field, slot) in &head.slots {
            let (vs, ve) = (slot.value.start as usize, slot.value.end as usize);
            let mut gone = false;
            let mut new_value = None;
            for cut in made {
                if cut.field == Some(*field) {
                    new_value = Some(Span::at(cut.written, cut.with.len()));
                } else if cut.start < cut.end
                    && ((cut.start <= vs && ve <= cut.end)
                        || (cut.start..cut.end).contains(&(slot.member as usize)))
                {
                    gone = true;
                }
            }
            if gone {
                continue;
            }
            let slot = Slot {
                member: self.position(slot.member as usize) as u32,
                value: new_value.unwrap_or_else(|| self.map(slot.value)),
            };
            self.head.put(*field, slot);
        }
        for cut in made {
            for (field, slot) in &cut.inserted {
                let slot = Slot {
                    member: slot.member + cut.written as u32,
                    value: slot.value.shifted(cut.written as i64),
                };
                self.head.put(*field, slot);
            }
        }
    }
}

/// An object of `fields` (raw JSON values) as moniker writes it, with the head of its fields:
/// a params object's, or a result's (`result`).
pub(crate) fn object(fields: &[(&str, &str)], scope: Scope) -> (String, Head) {
    let mut out = String::from("{");
    let mut head = Head::default();
    for (i, (key, value)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let member = out.len();
        out.push_str(&super::string(key));
        out.push(':');
        if let Some(field) = Field::of(scope, key) {
            let slot = Slot {
                member: member as u32,
                value: Span::at(out.len(), value.len()),
            };
            head.put(field, slot);
        }
        out.push_str(value);
    }
    out.push('}');
    (out, head)
}

#[cfg(test)]
mod tests {
    use super::super::{Incoming, Message, Params, parse, parse_one};
    use super::*;

    fn request(params: &str) -> Message {
        parse_one(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#
        ))
        .expect("a request")
    }

    #[test]
    fn the_head_is_read_in_one_pass_whatever_the_spacing_and_escapes() {
        let mine = || THREAD_PASSES.with(|n| n.get());
        let before = mine();
        let m = request(
            r#" { "name" : "t" ,"arguments":{"name":"inner"}, "_m\u0065ta" : { "io.modelcontextprotocol\/protocolVersion" : "2026-07-28", "io.modelcontextprotocol/clientCapabilities":{"sampling":{}} , "progressToken" : 7 } , "task":{} } "#,
        );
        assert_eq!(mine() - before, 1);
        assert_eq!(m.name().as_deref(), Some("t"));
        assert_eq!(m.arguments(), Some(r#"{"name":"inner"}"#));
        assert_eq!(m.field(Field::Version), Some(r#""2026-07-28""#));
        assert_eq!(m.progress_token(), Some("7"));
        assert!(m.field(Field::Sampling).is_some() && m.field(Field::Roots).is_none());
        assert_eq!(m.field(Field::Task), Some("{}"));
        // An escaped envelope key is the envelope all the same: a 2025 server never sees it.
        let params = m.params_with(&[]).expect("params");
        let stripped = params.without(&Field::ENVELOPE);
        assert_eq!(
            stripped,
            r#"{ "name" : "t" ,"arguments":{"name":"inner"}, "_m\u0065ta" : { "progressToken" : 7 } , "task":{} }"#
        );
        assert_eq!(stripped.get(Field::MetaProgressToken), Some("7"));
    }

    #[test]
    fn a_field_named_twice_is_refused() {
        for params in [
            r#"{"name":"allowed","name":"hidden"}"#,
            r#"{"name":"a","n\u0061me":"b"}"#,
            r#"{"_meta":{"progressToken":1,"progressToken":2}}"#,
            r#"{"_meta":{},"_meta":{}}"#,
        ] {
            let text =
                format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#);
            let e = parse(text).expect_err(params);
            assert_eq!(e.code, super::super::INVALID_REQUEST, "{params}");
            assert!(e.message.contains("duplicate"), "{}", e.message);
        }
        // Keys the head does not record may repeat: they are the server's business.
        assert!(
            parse_one(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1,"a":2}}"#.into())
                .is_ok()
        );
        // Two envelope keys of one name in the envelope itself, too.
        assert!(parse(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#.into()).is_err());
    }

    #[test]
    fn a_key_a_server_may_fold_onto_a_recorded_one_is_refused() {
        for params in [
            r#"{"name":"allowed","NAME":"hidden"}"#,
            r#"{"NAME":"hidden","name":"allowed"}"#,
            r#"{"name":"allowed","Name":"hidden"}"#,
            r#"{"uri":"file:///ok","URI":"file:///secret"}"#,
            r#"{"taskId":"s/1","ta\u017fkId":"2"}"#,
            r#"{"taskId":"s/1","tas\u212aId":"2"}"#,
            r#"{"name":"t","_META":{"progressToken":"x"}}"#,
            r#"{"name":"t","_meta":{"progressToken":"x","PROGRESSTOKEN":"y"}}"#,
        ] {
            let text =
                format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#);
            let e = parse(text).expect_err(params);
            assert!(e.message.contains("another case"), "{}", e.message);
        }
        for line in [
            r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed","METHOD":"tools/call","Id":7,"Params":{"name":"h"}}"#,
            r#"{"jsonrpc":"2.0","id":5,"result":{},"Id":3}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"REQUESTID":3}}"#,
            r#"{"jsonrpc":"2.0","id":5,"result":{"isError":false,"ISERROR":true}}"#,
        ] {
            assert!(parse(line.into()).is_err(), "{line}");
        }
        // Other keys, and the recorded names inside values the head does not read, are free.
        assert!(
            parse_one(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"NAME":1,"name":2},"names":3,"nam":4}}"#
                    .into()
            )
            .is_ok()
        );
        assert!(!folds_onto("name", "name") && !folds_onto("names", "name"));
        assert!(folds_onto("N\u{212A}", "nk") && folds_onto("\u{17F}", "s"));
    }

    #[test]
    fn a_lone_meta_of_another_kind_is_replaced_by_valid_json() {
        for params in [
            r#"{"_meta":null}"#,
            r#"{ "_meta" : 5 }"#,
            r#"{"a":1,"_meta":[]}"#,
        ] {
            let p = request(params)
                .params_with(&[])
                .expect("params")
                .edit(&[Edit::Set(Field::Version, "\"2026-07-28\"")]);
            let v: serde_json::Value =
                serde_json::from_str(p.text()).unwrap_or_else(|e| panic!("{e}: {}", p.text()));
            assert_eq!(
                v["_meta"][PROTOCOL_VERSION_KEY],
                "2026-07-28",
                "{}",
                p.text()
            );
            assert_eq!(p.get(Field::Version), Some("\"2026-07-28\""));
            assert!(p.get(Field::Meta).is_some_and(|m| m.starts_with('{')));
        }
    }

    #[test]
    fn params_of_any_shape_are_read_and_kept() {
        for params in [
            "[1, {\"name\":\"x\"}]",
            "[]",
            "null",
            "\"s\"",
            "1.5e3",
            "true",
            "{}",
            "{ }",
        ] {
            let text =
                format!(r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{params},"z":1}}"#);
            let Ok(Incoming::One(m)) = parse(text) else {
                panic!("{params}")
            };
            assert_eq!(m.params(), Some(params));
            assert_eq!(m.name(), None, "{params}");
        }
    }

    #[test]
    fn edits_keep_the_head_and_the_other_bytes() {
        let m = request(r#"{"arguments":{"a":1.50},"_meta":{"traceparent":"old"}}"#);
        let p = m.call_params("\"o\"", None, None).expect("params").edit(&[
            Edit::Set(Field::Traceparent, "\"new\""),
            Edit::Set(Field::Version, "\"2026-07-28\""),
        ]);
        assert_eq!(
            p,
            r#"{"arguments":{"a":1.50},"_meta":{"traceparent":"new","io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"o"}"#
        );
        // Every recorded field is where the head says, as a fresh read finds it.
        let sent = Message::outgoing("9", "tools/call", Some(&p));
        let read = parse_one(sent.text().to_owned()).expect("valid");
        let every = PARAMS
            .iter()
            .chain(&META)
            .chain(&CAPABILITIES)
            .chain(&RESULT);
        for &field in every {
            assert_eq!(sent.field(field), read.field(field), "{field:?}");
        }
        // Without `_meta`: one is made.
        let bare = Params::object(&[("uri", "\"a://b\"")]).edit(&[
            Edit::Set(Field::Capabilities, "{}"),
            Edit::Set(Field::Version, "\"v\""),
        ]);
        assert_eq!(
            bare,
            r#"{"uri":"a://b","_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"v"}}"#
        );
        assert_eq!(bare.get(Field::Version), Some("\"v\""));
        // Dropping the last and the first members takes one comma each.
        let only = bare.without(&Field::ENVELOPE);
        assert_eq!(only, r#"{"uri":"a://b"}"#);
        let first = Params::object(&[("cursor", "\"c\""), ("uri", "\"u\"")])
            .edit(&[Edit::Drop(Field::Cursor)]);
        assert_eq!(first, r#"{"uri":"u"}"#);
        assert_eq!(first.get(Field::Uri), Some("\"u\""));
    }

    /// Members a `_meta` may hold, and members of params, each with a value.
    use proptest::strategy::Strategy as _;

    const META_MEMBERS: [(&str, &str); 6] = [
        (PROTOCOL_VERSION_KEY, r#""2026-07-28""#),
        (CAPABILITIES_KEY, "{}"),
        (CLIENT_INFO_KEY, r#"{"name":"c","version":"1"}"#),
        (LOG_LEVEL_KEY, r#""info""#),
        ("progressToken", "7"),
        ("other", "[1, {}]"),
    ];
    const PARAMS_MEMBERS: [(&str, &str); 4] = [
        ("name", r#""t""#),
        ("arguments", r#"{"a": {"name": 1}}"#),
        ("cursor", r#""c""#),
        ("x", "null"),
    ];

    /// An object of `members`, with `ws` around every token.
    fn object(members: &[(&str, String)], ws: &str) -> String {
        let inner: Vec<String> = members
            .iter()
            .map(|(k, v)| format!("{ws}{}{ws}:{ws}{v}{ws}", super::super::string(k)))
            .collect();
        format!("{{{}{ws}}}", inner.join(","))
    }

    proptest::proptest! {
        /// Any members dropped at once (side by side, first, last, every one of an object,
        /// in params and in `_meta` together), with fields set in the same edit, and any
        /// spacing: what is left is the object without them and with the sets, valid JSON,
        /// and its head is where a fresh read finds every field; `without` them, the same
        /// and no `_meta` they leave empty.
        #[test]
        fn drops_at_once_leave_the_rest_and_a_true_head(
            meta in proptest::sample::subsequence(META_MEMBERS.to_vec(), 0..=6).prop_shuffle(),
            members in proptest::sample::subsequence(PARAMS_MEMBERS.to_vec(), 0..=4).prop_shuffle(),
            with_meta in proptest::bool::ANY,
            meta_at in 0..5usize,
            drops in proptest::collection::vec(proptest::sample::select(vec![
                Field::Version, Field::Capabilities, Field::ClientInfo, Field::LogLevel,
                Field::MetaProgressToken, Field::Name, Field::Arguments, Field::Cursor, Field::Meta,
            ]), 0..7),
            sets in proptest::sample::subsequence(vec![
                Field::Version, Field::LogLevel, Field::MetaProgressToken, Field::Traceparent,
                Field::Name, Field::Cursor, Field::Uri,
            ], 0..3),
            ws in proptest::sample::select(vec!["", " ", "\n", " \t "]),
        ) {
            let meta: Vec<(&str, String)> = meta.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
            let mut all: Vec<(&str, String)> = members.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
            if with_meta {
                all.insert(meta_at.min(all.len()), ("_meta", object(&meta, ws)));
            }
            let text = object(&all, ws);
            let params = request(&text).params_with(&[]).expect("params");
            let edits: Vec<Edit<'_>> = drops
                .iter()
                .map(|f| Edit::Drop(*f))
                .chain(sets.iter().map(|f| Edit::Set(*f, "\"s\"")))
                .collect();
            let left = params.edit(&edits);
            let mut meant: serde_json::Value = serde_json::from_str(&text).expect("valid");
            for field in &drops {
                let (object, key) = match field.scope() {
                    Scope::Meta => (&mut meant["_meta"], field.key()),
                    _ => (&mut meant, field.key()),
                };
                if let Some(object) = object.as_object_mut() {
                    object.remove(key);
                }
            }
            if meant.get("_meta").is_some_and(serde_json::Value::is_null) {
                meant.as_object_mut().expect("an object").remove("_meta");
            }
            // `without` drops the same, and a `_meta` they leave empty (or that was).
            let mut bare = meant.clone();
            if bare.get("_meta").is_some_and(|m| m.as_object().is_some_and(serde_json::Map::is_empty)) {
                bare.as_object_mut().expect("an object").remove("_meta");
            }
            read_as(&params.without(&drops), &bare, &text)?;
            // Then the sets, on what the drops left: a field in `_meta` makes one if need be.
            for field in &sets {
                let object = match field.scope() {
                    Scope::Meta => {
                        let meta = &mut meant["_meta"];
                        if !meta.is_object() {
                            *meta = serde_json::json!({});
                        }
                        meta
                    }
                    _ => &mut meant,
                };
                object[field.key()] = serde_json::json!("s");
            }
            read_as(&left, &meant, &text)?;
        }
    }

    /// `edited` (from `text`) is valid JSON equal to `meant`, and its head is where a fresh
    /// read finds every field.
    fn read_as(
        edited: &Params,
        meant: &serde_json::Value,
        text: &str,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        let read: serde_json::Value = serde_json::from_str(edited.text()).map_err(|e| {
            proptest::test_runner::TestCaseError::fail(format!("{e}: {}", edited.text()))
        })?;
        proptest::prop_assert_eq!(&read, meant, "{} -> {}", text, edited.text());
        let fresh = request(edited.text()).params_with(&[]).expect("params");
        for &field in PARAMS.iter().chain(&META) {
            proptest::prop_assert_eq!(
                edited.get(field),
                fresh.get(field),
                "{:?} in {}",
                field,
                edited.text()
            );
        }
        Ok(())
    }

    #[test]
    fn a_relayed_answer_keeps_its_head() {
        let answer = parse_one(
            r#"{"result":{"content":[{"type":"text","text":"\"isError\":true"}],"isError":false},"id":"moniker-7","jsonrpc":"2.0"}"#.into(),
        )
        .expect("a result");
        let relayed = answer.with_id("12345");
        assert_eq!(relayed.field(Field::IsError), Some("false"));
        assert_eq!(relayed.id(), Some("12345"));
        let read = parse_one(relayed.text().to_owned()).expect("valid");
        assert_eq!(read.field(Field::IsError), Some("false"));
        assert_eq!(read.result_text(), relayed.result_text());
    }
}
