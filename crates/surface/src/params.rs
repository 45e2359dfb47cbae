//! Parameter rules (DESIGN "moniker owns the whole interface"): what a tool's override says of
//! its parameters, both ways. Towards the client, [`shape`] turns the server's input schema
//! into the one listed: parameters renamed, re-described, given a default, or taken out
//! (`hidden`, `fixed`). Towards the server, [`Params::arguments`] turns a call's arguments
//! back: names mapped to the server's, defaults filled, fixed values set, and a client's value
//! for a hidden or fixed parameter refused, never silently replaced.
//!
//! Pure, like the rest of the core. A fixed value never appears in a listing, a message or a
//! `Debug` print: only in the arguments sent to the server.

use std::collections::BTreeMap;
use std::fmt;

use indexmap::IndexMap;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::diagnostic::Diagnostic;

/// What an override says of one parameter, keyed by the server's name for it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParamRule {
    /// The name the client sees and sends; moniker sends the server's.
    pub rename: Option<String>,
    /// Other names a client may send it by (an old name the server has since renamed).
    pub aliases: Vec<String>,
    /// Sent when the client gives none; the listed schema says it and no longer requires it.
    pub default: Option<Value>,
    /// Always sent, never listed; a client that gives it is refused.
    pub fixed: Option<Fixed>,
    /// Not listed and not accepted from a client (its `default`, if any, is sent).
    pub hidden: bool,
    /// Replaces the parameter's description.
    pub description: Option<String>,
}

/// A fixed parameter's value: a tenant id, a project, a key. Its `Debug` says nothing of it.
#[derive(Clone, PartialEq)]
pub struct Fixed(pub Value);

impl fmt::Debug for Fixed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Fixed(..)")
    }
}

/// How one tool's arguments go back to its server: its rules, compiled against its schema.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params {
    /// A name a client may send (a new name or an alias) to the server's name.
    to_origin: BTreeMap<String, String>,
    /// Names a client may not send, each with whether it is fixed (else hidden).
    refused: BTreeMap<String, bool>,
    /// Server name and value, sent when the call has none.
    defaults: Vec<(String, Value)>,
    /// Server name and value, always sent.
    fixed: Vec<(String, Fixed)>,
}

/// Something a rule says that the schema does not bear out: [`shape`] reports it, the build
/// makes it a diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A rule for a parameter the schema does not have; with the closest one it has.
    Unknown {
        param: String,
        close: Option<String>,
    },
    /// Two parameters a client would send by one name.
    Collision { name: String },
    /// A required parameter that is hidden with no value to send in its place.
    RequiredHidden { param: String },
}

impl Problem {
    /// The diagnostic of this problem of tool `tool`'s rules, `at` the config path of its
    /// parameter's rule (`None`: of the rules as a whole).
    pub fn diagnostic(&self, tool: &str, at: impl Fn(Option<&str>) -> String) -> Diagnostic {
        match self {
            Self::Unknown { param, close } => {
                let d = Diagnostic::warning(
                    "params::unknown",
                    format!("tool `{tool}` has no parameter `{param}`: its rule does nothing"),
                )
                .at(at(Some(param)));
                match close {
                    Some(close) => d.help(format!("did you mean `{close}`?")),
                    None => d,
                }
            }
            Self::Collision { name } => Diagnostic::error(
                "params::collision",
                format!("two parameters of tool `{tool}` would both be called `{name}`"),
            )
            .at(at(None))
            .help("give one of them another `rename` or alias"),
            Self::RequiredHidden { param } => Diagnostic::warning(
                "params::required_hidden",
                format!(
                    "parameter `{param}` of tool `{tool}` is required but hidden with no value: its calls will fail"
                ),
            )
            .at(at(Some(param)))
            .help("give it a `default` or a `fixed` value"),
        }
    }
}

/// The listed schema and the compiled rules of one tool.
#[derive(Debug, Clone, Default)]
pub struct Shaped {
    /// The listed input schema; `None`: the server's, unchanged.
    pub schema: Option<String>,
    pub params: Params,
    pub problems: Vec<Problem>,
}

/// Applies `rules` to the input schema `schema` (the server's; `None` when it sent none).
pub fn shape(rules: &BTreeMap<String, ParamRule>, schema: Option<&RawValue>) -> Shaped {
    let mut out = Shaped::default();
    if rules.is_empty() {
        return out;
    }
    let mut schema: IndexMap<String, Value> = schema
        .and_then(|s| serde_json::from_str(s.get()).ok())
        .unwrap_or_default();
    let properties = match schema.get("properties") {
        Some(Value::Object(p)) => p.clone(),
        _ => serde_json::Map::new(),
    };
    for name in rules.keys().filter(|n| !properties.contains_key(*n)) {
        let close = crate::diagnostic::did_you_mean(name, properties.keys().map(String::as_str));
        out.problems.push(Problem::Unknown {
            param: name.clone(),
            close: close.map(str::to_owned),
        });
    }
    let required: Vec<String> = match schema.get("required") {
        Some(Value::Array(r)) => r
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    let mut listed = serde_json::Map::new();
    // Every name a client may send, to the server's name it stands for.
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut claim = |name: &str, origin: &str, problems: &mut Vec<Problem>| {
        if names.insert(name.to_owned(), origin.to_owned()).is_some() {
            problems.push(Problem::Collision {
                name: name.to_owned(),
            });
        }
    };
    for (name, property) in &properties {
        let Some(rule) = rules.get(name) else {
            claim(name, name, &mut out.problems);
            listed.insert(name.clone(), property.clone());
            continue;
        };
        if rule.fixed.is_some() || rule.hidden {
            compile_withheld(name, rule, &required, &mut out);
            continue;
        }
        let exposed = rule.rename.as_deref().unwrap_or(name);
        claim(exposed, name, &mut out.problems);
        for alias in &rule.aliases {
            claim(alias, name, &mut out.problems);
        }
        if exposed != name {
            out.params
                .to_origin
                .insert(exposed.to_owned(), name.clone());
        }
        for alias in &rule.aliases {
            out.params.to_origin.insert(alias.clone(), name.clone());
        }
        if let Some(default) = &rule.default {
            out.params.defaults.push((name.clone(), default.clone()));
        }
        listed.insert(exposed.to_owned(), described(property, rule));
    }
    let required: Vec<Value> = required
        .iter()
        .filter_map(|name| match rules.get(name) {
            None => Some(name.clone()),
            Some(rule) if rule.fixed.is_some() || rule.hidden || rule.default.is_some() => None,
            Some(rule) => Some(rule.rename.clone().unwrap_or_else(|| name.clone())),
        })
        .map(Value::String)
        .collect();
    schema.insert("properties".to_owned(), Value::Object(listed));
    if schema.contains_key("required") {
        schema.insert("required".to_owned(), Value::Array(required));
    }
    if !schema.contains_key("type") {
        schema.insert("type".to_owned(), Value::String("object".to_owned()));
    }
    out.schema = serde_json::to_string(&schema).ok();
    out
}

/// A hidden or fixed parameter: not listed; refused from a client; its value, if any, sent.
fn compile_withheld(name: &str, rule: &ParamRule, required: &[String], out: &mut Shaped) {
    out.params
        .refused
        .insert(name.to_owned(), rule.fixed.is_some());
    match (&rule.fixed, &rule.default) {
        (Some(fixed), _) => out.params.fixed.push((name.to_owned(), fixed.clone())),
        (None, Some(default)) => out
            .params
            .fixed
            .push((name.to_owned(), Fixed(default.clone()))),
        (None, None) if required.iter().any(|r| r == name) => {
            out.problems.push(Problem::RequiredHidden {
                param: name.to_owned(),
            });
        }
        (None, None) => {}
    }
}

/// The listed property: the server's, with the rule's description and default.
fn described(property: &Value, rule: &ParamRule) -> Value {
    let mut property = property.clone();
    if let Value::Object(fields) = &mut property {
        if let Some(description) = &rule.description {
            fields.insert("description".to_owned(), Value::String(description.clone()));
        }
        if let Some(default) = &rule.default {
            fields.insert("default".to_owned(), default.clone());
        }
    }
    property
}

/// `name` folded for a comparison without regard to case or compatibility forms (NFKC, then
/// lower case: `ſ` and `S` are `s`, the Kelvin sign is `k`).
fn folded(name: &str) -> String {
    use unicode_normalization::UnicodeNormalization as _;
    name.nfkc().flat_map(char::to_lowercase).collect()
}

impl Params {
    /// The refused name (hidden or fixed) that `name` is in another case or form, if any.
    fn refused_as(&self, name: &str) -> Option<&str> {
        if self.refused.is_empty() {
            return None;
        }
        let name = folded(name);
        self.refused
            .keys()
            .find(|r| folded(r) == name)
            .map(String::as_str)
    }

    /// The server's name a client's `name` stands for under these rules (itself when no rule
    /// renames or aliases it).
    pub fn origin_of<'n>(&'n self, name: &'n str) -> &'n str {
        self.to_origin.get(name).map_or(name, String::as_str)
    }

    /// Whether a client may not send `name` (hidden or fixed here, in any case or form).
    pub fn refuses(&self, name: &str) -> bool {
        self.refused.contains_key(name) || self.refused_as(name).is_some()
    }

    /// Why a client may not send `key` through `self` (a toolset's rules) and then `inner` (the
    /// tool's): `key` stands, under `inner`, for the same server parameter as one `self` hides
    /// or fixes (the server's own name of a renamed parameter, an alias of it, either in
    /// another case). `self` alone knows only the names `inner` lists.
    pub fn refused_through(&self, inner: &Params, key: &str) -> Option<String> {
        // Refused as it is, by `self`'s own rules, with their words.
        if self.refused.is_empty() || self.refused.contains_key(key) {
            return None;
        }
        let origin = folded(inner.origin_of(key));
        let (name, fixed) = self
            .refused
            .iter()
            .find(|(r, _)| folded(inner.origin_of(r)) == origin)?;
        Some(if *fixed {
            format!(
                "parameter `{key}` is `{name}`, which is set by the gateway: leave it out of the call"
            )
        } else {
            format!("parameter `{key}` is `{name}`, which this toolset does not accept")
        })
    }

    /// Whether these rules change nothing of a call.
    pub fn is_empty(&self) -> bool {
        self.to_origin.is_empty()
            && self.refused.is_empty()
            && self.defaults.is_empty()
            && self.fixed.is_empty()
    }

    /// The arguments to send the server for a call that gave `given` (`None`: no arguments),
    /// or the tool error to answer with. Arguments that are not an object go as they are (no
    /// parameter is in them; the server says what is wrong with them). An object these rules
    /// cannot read is refused, never sent as it came: it would skip every rule.
    pub fn arguments(&self, given: Option<&str>) -> Result<Option<String>, String> {
        let given = given.map(str::trim).filter(|g| *g != "null");
        let mut args: IndexMap<String, Box<RawValue>> = match given {
            None => IndexMap::new(),
            Some(text) => match serde_json::from_str(text) {
                Ok(args) => args,
                Err(_) if !text.starts_with('{') => return Ok(None),
                Err(e) => {
                    return Err(format!(
                        "the arguments cannot be read ({e}): the call is not sent"
                    ));
                }
            },
        };
        let mut out: IndexMap<String, Box<RawValue>> = IndexMap::with_capacity(args.len() + 2);
        for (name, value) in args.drain(..) {
            let origin = match self.to_origin.get(&name) {
                Some(origin) => origin.clone(),
                None => match self.refused.get(&name) {
                    Some(true) => {
                        return Err(format!(
                            "parameter `{name}` is set by the gateway: leave it out of the call"
                        ));
                    }
                    Some(false) => {
                        return Err(format!("parameter `{name}` is not accepted by this tool"));
                    }
                    None => match self.refused_as(&name) {
                        // `SECRET`, `ſecret`: a server that reads keys without regard to case
                        // (Go's encoding/json folds them so) would take it for the refused one.
                        Some(refused) => {
                            return Err(format!(
                                "parameter `{name}` is `{refused}` in another case, which this tool does not accept from a call"
                            ));
                        }
                        None => name,
                    },
                },
            };
            if out.contains_key(&origin) {
                return Err(format!(
                    "parameter `{origin}` is given twice, under two of its names"
                ));
            }
            out.insert(origin, value);
        }
        for (name, value) in &self.defaults {
            if !out.contains_key(name) {
                out.insert(name.clone(), raw(value));
            }
        }
        for (name, Fixed(value)) in &self.fixed {
            out.insert(name.clone(), raw(value));
        }
        Ok(serde_json::to_string(&out).ok())
    }
}

fn raw(value: &Value) -> Box<RawValue> {
    // A `Value` always serializes; `null` is the unreachable fallback.
    serde_json::value::to_raw_value(value).unwrap_or_default()
}

#[cfg(test)]
mod tests;
