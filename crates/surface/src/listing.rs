//! What a server lists, as it listed it: each item is kept as raw JSON so that every field
//! (`title`, `annotations`, `outputSchema`, `_meta`, unknown ones) reaches clients unchanged.

use serde_json::value::RawValue;

use crate::names::ServerId;

/// One server's tools and prompts, each a JSON object exactly as the server sent it.
#[derive(Debug, Clone)]
pub struct Listing {
    pub server: ServerId,
    pub tools: Vec<Box<RawValue>>,
    pub prompts: Vec<Box<RawValue>>,
}

impl Listing {
    pub fn new(server: ServerId) -> Self {
        Self {
            server,
            tools: Vec::new(),
            prompts: Vec::new(),
        }
    }
}
