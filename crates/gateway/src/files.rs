//! Files only the user may read: a directory made `0700`, a file written whole under a fresh
//! name (`0600`, created new, so a link planted there cannot take what is written) and then
//! renamed into place.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` in `dir` (made if missing) whole, or not at all.
pub fn write_private(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    create_private_dir(dir)?;
    let (tmp, mut file) = tempfile_in(dir)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// A new file only the user can read or write, in `dir`, of a name no one could have made
/// ready (`create_new` refuses whatever is there, a planted link included).
pub fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let path = dir.join(format!(".tmp-{name}"));
    options.open(&path).map(|f| (path, f))
}
