//! Where moniker keeps what an authorization gave it: one JSON file per server, readable by
//! the user only (mode 0600, in a 0700 directory), under the user data dir
//! (`$XDG_DATA_HOME/moniker/auth` on Linux). A file is named after the server and a hash of
//! its URL, so that the same name for another URL starts afresh. Files are written whole
//! (a temporary file, then a rename): a reader never sees half of one.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What moniker keeps for one server.
#[derive(Clone, Default, Serialize, Deserialize)]
pub(crate) struct Saved {
    /// The server's URL, for the reader of the file.
    pub server_url: String,
    /// The resource indicator tokens are asked for (RFC 8707).
    pub resource: String,
    pub issuer: Option<String>,
    pub token_endpoint: Option<String>,
    /// The client moniker is at the authorization server.
    pub client: Option<Client>,
    pub tokens: Option<Tokens>,
    /// The last challenge moniker could not answer by itself: what `moniker login` asks for.
    pub challenge: Option<Pending>,
}

#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct Client {
    pub client_id: String,
    pub client_secret: Option<String>,
    /// `none`, `client_secret_basic`, `client_secret_post` or `private_key_jwt`.
    pub auth_method: String,
    /// Registered by moniker (Dynamic Client Registration), rather than configured.
    #[serde(default)]
    pub registered: bool,
}

#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct Tokens {
    pub access_token: String,
    pub refresh_token: Option<String>,
    /// Seconds since the Unix epoch.
    pub expires_at: Option<u64>,
    /// Seconds the token was given for (`expires_in`).
    #[serde(default)]
    pub lifetime: Option<u64>,
    pub scope: Option<String>,
}

impl Tokens {
    /// Expired, or within `margin` seconds of it (at most half its lifetime: a short-lived
    /// token is not renewed before every use).
    pub fn expires_within(&self, margin: u64) -> bool {
        let margin = self.lifetime.map_or(margin, |l| margin.min(l / 2));
        self.expires_at.is_some_and(|at| at <= now() + margin)
    }
}

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub scope: Option<String>,
    pub resource_metadata: Option<String>,
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// The directory of the files.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// `<user data dir>/moniker/auth`, when the platform has a user data dir.
    pub fn default_dir() -> Option<PathBuf> {
        dirs::data_dir().map(|d| d.join("moniker").join("auth"))
    }

    /// The file of `server` at `url`.
    pub fn path(&self, server: &str, url: &str) -> PathBuf {
        let hash = Sha256::digest(url.as_bytes());
        let short = crate::files::hex(&hash[..4]);
        self.dir.join(format!("{server}-{short}.json"))
    }

    pub(crate) fn load(&self, server: &str, url: &str) -> Option<Saved> {
        let path = self.path(server, url);
        let text = std::fs::read_to_string(&path).ok()?;
        match serde_json::from_str(&text) {
            Ok(saved) => Some(saved),
            Err(e) => {
                tracing::warn!(server, path = %path.display(), error = %e, "the stored authorization is unreadable; ignored");
                None
            }
        }
    }

    pub(crate) fn save(&self, server: &str, url: &str, saved: &Saved) -> Result<(), String> {
        let path = self.path(server, url);
        write_private(&self.dir, &path, saved)
            .map_err(|e| format!("cannot store the authorization in {}: {e}", path.display()))
    }

    /// Whether `server` waits for a person to log in, and with which scope.
    pub fn pending(&self, server: &str, url: &str) -> Option<Option<String>> {
        self.load(server, url)?.challenge.map(|c| c.scope)
    }

    /// Forgets `server`'s authorization: whether there was one.
    pub fn remove(&self, server: &str, url: &str) -> Result<bool, String> {
        let path = self.path(server, url);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(format!("cannot remove {}: {e}", path.display())),
        }
    }
}

fn write_private(dir: &Path, path: &Path, saved: &Saved) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(saved).map_err(std::io::Error::other)?;
    crate::files::write_private(dir, path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_private_and_written_whole() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = Store::new(dir.path().join("auth"));
        let saved = Saved {
            server_url: "http://h/mcp".to_owned(),
            tokens: Some(Tokens {
                access_token: "at".to_owned(),
                refresh_token: None,
                expires_at: Some(now() + 100),
                lifetime: Some(100),
                scope: None,
            }),
            ..Saved::default()
        };
        store.save("remote", "http://h/mcp", &saved).expect("saved");
        let path = store.path("remote", "http://h/mcp");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path)
                .expect("the file")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
            let mode = std::fs::metadata(dir.path().join("auth"))
                .expect("the dir")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        let loaded = store.load("remote", "http://h/mcp").expect("loaded");
        assert!(!loaded.tokens.expect("tokens").expires_within(10));
        assert!(store.load("remote", "http://other/mcp").is_none());
        assert!(store.remove("remote", "http://h/mcp").expect("removed"));
        assert!(
            !store
                .remove("remote", "http://h/mcp")
                .expect("nothing to remove")
        );
        let left: Vec<_> = std::fs::read_dir(dir.path().join("auth"))
            .expect("dir")
            .collect();
        assert!(left.is_empty(), "no temporary file is left");
    }
}
