//! Generated from the types of `crates/config/src/shape.rs` by `keys_source` (a test holds
//! this file to them: `cargo test -p moniker-config -- --ignored write_the_keys` writes
//! it again). Do not edit.

pub(crate) const FILE: &[&str] = &["servers", "mcpServers", "naming", "server_tags", "tools", "prompts", "actions", "toolsets", "gateway", "http", "discovery", "audit", "telemetry", "integrity"];

pub(crate) const SERVER: &[&str] = &["command", "args", "env", "pass_env", "cwd", "sandbox", "per_person", "url", "headers", "tls", "auth", "tags", "prefix", "call_timeout", "max_in_flight", "type", "disabled", "protocol", "forward"];

pub(crate) const TLS: &[&str] = &["ca_file", "client_cert", "client_key"];

pub(crate) const AUTH: &[&str] = &["client_id", "client_secret", "client_metadata_url", "grant", "issuer", "private_key", "scope", "exchange", "per_person"];

pub(crate) const EXCHANGE: &[&str] = &["resource", "audience", "actor", "cache"];

pub(crate) const NAMING: &[&str] = &["strip_prefixes", "split", "separator", "profile"];

pub(crate) const BUDGETED_PROFILE: &[&str] = &["base", "prefix_budget"];

pub(crate) const OVERRIDE: &[&str] = &["name", "tags", "aliases", "description", "hidden", "call_timeout", "max_in_flight", "params"];

pub(crate) const ALIAS_SETTINGS: &[&str] = &["name", "hidden", "deprecated"];

pub(crate) const DEPRECATED: &[&str] = &["since", "remove_after", "use"];

pub(crate) const ACTION: &[&str] = &["description", "tools", "legacy", "aliases", "tags"];

pub(crate) const LEGACY_SETTINGS: &[&str] = &["keep", "deprecated"];

pub(crate) const TOOLSET: &[&str] = &["description", "tools", "prompts", "tags", "include", "aliases", "resources", "discovery", "params"];

pub(crate) const GATEWAY: &[&str] = &["call_timeout", "start_timeout", "list_wait", "idle_stop", "restart", "page_size", "pass_env", "sandbox"];

pub(crate) const RESTART: &[&str] = &["initial_delay", "max_delay", "max_attempts"];

pub(crate) const AUDIT_SETTINGS: &[&str] = &["to", "max_bytes", "keep"];

pub(crate) const TELEMETRY_SETTINGS: &[&str] = &["endpoint", "service_name"];

pub(crate) const HTTP: &[&str] = &["tokens", "allowed_origins", "allowed_hosts", "max_body", "session_idle", "max_sessions_per_token", "max_connections", "auth", "console"];

pub(crate) const RESOURCE_AUTH: &[&str] = &["resource", "issuer", "scopes", "algorithms", "leeway", "keys_ttl", "introspection", "toolsets", "default_toolset", "admins", "console_client"];

pub(crate) const BOUND_TOKEN: &[&str] = &["token", "toolset", "name"];

pub(crate) const CLIENT: &[&str] = &["client_id", "client_secret"];

pub(crate) const TOOLSET_RULE: &[&str] = &["claim", "value", "scope", "toolset"];

pub(crate) const IDENTITY: &[&str] = &["claim", "value", "scope"];

pub(crate) const DISCOVERY_SETTINGS: &[&str] = &["mode", "pin", "pin_tags", "model", "learn"];

pub(crate) const SANDBOX_SETTINGS: &[&str] = &["read", "write", "network", "processes", "open_files", "memory", "best_effort"];

pub(crate) const PER_PERSON_SETTINGS: &[&str] = &["secrets", "instances", "idle"];

pub(crate) const FORWARD: &[&str] = &["claim", "header", "access_token"];

pub(crate) const PARAM: &[&str] = &["rename", "aliases", "default", "fixed", "hidden", "description"];
