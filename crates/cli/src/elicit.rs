//! `moniker call` answers a server's `elicitation/create` (form mode) the way a person at a
//! terminal would: each field of the requested schema is asked on stderr and read from
//! stdin, an empty line takes the field's default; then the answer is sent. A field that
//! cannot be read (stdin at its end) declines the request: nothing is accepted in a person's
//! name without them.

use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};

use crate::output;

pub struct Terminal {
    lines: Lines<BufReader<Stdin>>,
}

impl Terminal {
    pub fn new() -> Self {
        Self {
            lines: BufReader::new(tokio::io::stdin()).lines(),
        }
    }

    /// The result of an `elicitation/create` with these params.
    pub async fn answer(&mut self, params: &Value) -> Value {
        if params
            .get("mode")
            .and_then(Value::as_str)
            .is_some_and(|m| m != "form")
        {
            output::report("the server asks to open a URL; `moniker call` declines");
            return json!({"action": "decline"});
        }
        let message = params.get("message").and_then(Value::as_str).unwrap_or("");
        output::report(&format!("The server asks: {message}"));
        let schema = params
            .get("requestedSchema")
            .cloned()
            .unwrap_or(Value::Null);
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut content = Map::new();
        let properties = schema.get("properties").and_then(Value::as_object);
        for (name, field) in properties.into_iter().flatten() {
            loop {
                output::prompt(&prompt(name, field));
                let Ok(Some(line)) = self.lines.next_line().await else {
                    output::report("\n(no answer: declined)");
                    return json!({"action": "decline"});
                };
                match value(field, line.trim()) {
                    Ok(Some(v)) => {
                        content.insert(name.clone(), v);
                        break;
                    }
                    Ok(None) if !required.contains(&name.as_str()) => break,
                    Ok(None) => output::report(&format!("`{name}` is required")),
                    Err(why) => output::report(&why),
                }
            }
        }
        json!({"action": "accept", "content": content})
    }
}

fn prompt(name: &str, field: &Value) -> String {
    let mut text = name.to_owned();
    if let Some(d) = field
        .get("description")
        .or_else(|| field.get("title"))
        .and_then(Value::as_str)
    {
        text.push_str(&format!(" ({d})"));
    }
    if let Some(options) = field.get("enum").and_then(Value::as_array) {
        let shown: Vec<String> = options.iter().map(plain).collect();
        text.push_str(&format!(" {{{}}}", shown.join(", ")));
    }
    if let Some(d) = field.get("default") {
        text.push_str(&format!(" [{}]", plain(d)));
    }
    text.push_str(": ");
    text
}

fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What a line means for `field`: `None` for nothing (no default either).
fn value(field: &Value, line: &str) -> Result<Option<Value>, String> {
    if line.is_empty() {
        return Ok(field.get("default").cloned());
    }
    let kind = field
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string");
    let parsed = match kind {
        "integer" => line
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("`{line}` is not an integer"))?,
        "number" => line
            .parse::<f64>()
            .ok()
            .and_then(|n| serde_json::Number::from_f64(n).map(Value::Number))
            .ok_or_else(|| format!("`{line}` is not a number"))?,
        "boolean" => match line.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Value::Bool(true),
            "n" | "no" | "false" => Value::Bool(false),
            _ => return Err(format!("`{line}`: answer yes or no")),
        },
        _ => Value::String(line.to_owned()),
    };
    if let Some(options) = field.get("enum").and_then(Value::as_array) {
        if !options.contains(&parsed) {
            return Err(format!("`{line}` is not one of the choices"));
        }
    }
    Ok(Some(parsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_line_takes_the_default_and_text_is_typed() {
        let age = json!({"type": "integer", "default": 30});
        assert_eq!(value(&age, ""), Ok(Some(json!(30))));
        assert_eq!(value(&age, "41"), Ok(Some(json!(41))));
        assert!(value(&age, "old").is_err());
        let status = json!({"type": "string", "enum": ["active", "inactive"]});
        assert_eq!(value(&status, ""), Ok(None));
        assert!(value(&status, "gone").is_err());
        assert_eq!(
            value(&json!({"type": "boolean"}), "yes"),
            Ok(Some(json!(true)))
        );
        assert_eq!(
            prompt("age", &json!({"description": "User age", "default": 30})),
            "age (User age) [30]: "
        );
    }
}
