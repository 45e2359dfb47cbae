//! What moniker knows of each server before it has started: its last listing and what it said
//! of itself in `initialize`, kept on disk (`<user cache dir>/moniker/listings`), one file per
//! server and launch line. `serve` answers at once and decides names from these, so a server
//! that answers late cannot take a name one it knew of already has: names never depend on the
//! order servers start in.
//!
//! A file is read only when it is a regular file of at most [`MAX_FILE`] bytes and parses; it
//! is only ever a guess about the server, replaced by what the server lists when it joins.

use std::path::PathBuf;

use moniker_surface::{Listing, ServerId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::connect::{InitInfo, ServerSpec};

/// The largest file read back: a listing moniker accepts at all, and its envelope.
pub const MAX_FILE: u64 = crate::budget::LISTING_BYTES as u64 + (1 << 20);

/// How many servers' listings are kept (the last used): a launch line no config has any more
/// goes in time.
pub const KEPT: usize = 256;

/// The directory of known listings.
#[derive(Debug, Clone)]
pub struct Known {
    dir: PathBuf,
}

/// One server's file.
#[derive(Serialize, Deserialize)]
struct Record {
    server: String,
    protocol_version: String,
    capabilities: Option<Box<RawValue>>,
    tools: Vec<Box<RawValue>>,
    prompts: Vec<Box<RawValue>>,
    #[serde(default)]
    version: Option<String>,
}

impl Known {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// `<user cache dir>/moniker/listings`, when the platform has one.
    pub fn default_dir() -> Option<PathBuf> {
        dirs::cache_dir().map(|d| d.join("moniker").join("listings"))
    }

    /// The file of a server: named by a digest of its id and how it is reached (command,
    /// arguments and directory, or URL; never the values of its environment or headers).
    fn path(&self, id: &ServerId, spec: &ServerSpec) -> PathBuf {
        let mut hash = Sha256::new();
        hash.update(id.as_str());
        match spec {
            ServerSpec::Stdio {
                command, args, cwd, ..
            } => {
                hash.update(b"\0stdio\0");
                hash.update(command);
                for arg in args {
                    hash.update(b"\0");
                    hash.update(arg);
                }
                hash.update(b"\0");
                hash.update(cwd.as_deref().unwrap_or_default());
            }
            ServerSpec::Http { url, .. } => {
                hash.update(b"\0http\0");
                hash.update(url);
            }
        }
        let digest = crate::files::hex(&hash.finalize()[..16]);
        self.dir.join(format!("{digest}.json"))
    }

    /// The server's last listing and what it said of itself, when a file of it is there.
    pub(crate) fn load(&self, id: &ServerId, spec: &ServerSpec) -> Option<(Listing, InitInfo)> {
        let bytes = crate::files::read_private(&self.path(id, spec), MAX_FILE)?;
        let record: Record = serde_json::from_slice(&bytes).ok()?;
        if record.server != id.as_str() {
            return None;
        }
        let mut info =
            crate::connect::info_of(record.protocol_version, record.capabilities.as_deref());
        info.server_version = record.version.clone();
        let listing = Listing {
            server: id.clone(),
            tools: record.tools,
            prompts: record.prompts,
            version: record.version,
        };
        Some((listing, info))
    }

    /// Forgets what is kept of the server (`moniker logout`: a server that waits for a person
    /// to log in is not listed from what it listed before).
    pub fn forget(&self, id: &ServerId, spec: &ServerSpec) {
        let _ = std::fs::remove_file(self.path(id, spec));
    }

    /// Keeps the server's listing and what it said of itself for the next start; a file
    /// that cannot be written is said at debug level and changes nothing else.
    pub(crate) fn save(&self, spec: &ServerSpec, listing: &Listing, info: &InitInfo) {
        let id = &listing.server;
        let record = Record {
            server: id.to_string(),
            protocol_version: info.protocol_version.clone(),
            capabilities: info.capabilities.clone(),
            tools: listing.tools.clone(),
            prompts: listing.prompts.clone(),
            version: listing.version.clone(),
        };
        let path = self.path(id, spec);
        let saved = serde_json::to_vec(&record)
            .map_err(std::io::Error::other)
            .and_then(|bytes| crate::files::write_private(&self.dir, &path, &bytes))
            .and_then(|()| crate::files::prune(&self.dir, "json", KEPT));
        if let Err(e) = saved {
            tracing::debug!(server = %id, path = %path.display(), error = %e, "the server's listing is not kept");
        }
    }
}
