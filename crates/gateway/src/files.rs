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

/// Makes `dir` (and its parents) when missing, and makes it `0700`.
#[cfg(unix)]
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

#[cfg(not(unix))]
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
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
    let name = hex(&crate::random::bytes::<6>());
    let path = dir.join(format!(".tmp-{name}"));
    options.open(&path).map(|f| (path, f))
}

/// The bytes of `path` when it is a regular file (not a link, a pipe or a device: opened
/// without following links and without waiting) of at most `max` bytes; a file read is
/// marked as used now (its modification time), so a prune by age keeps it.
pub fn read_private(path: &Path, max: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut options = std::fs::File::options();
    options.read(true).write(true);
    #[cfg(unix)]
    {
        use nix::fcntl::OFlag;
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits());
    }
    let file = options.open(path).ok()?;
    let metadata = file.metadata().ok()?;
    if !metadata.is_file() || metadata.len() > max {
        return None;
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    (&file).take(metadata.len()).read_to_end(&mut bytes).ok()?;
    let _ = file.set_modified(std::time::SystemTime::now());
    Some(bytes)
}

/// Removes all but the `kept` last used files of `dir` named `*.{extension}` (a read by
/// [`read_private`] marks a file as used); files only: what else is there is not moniker's.
pub fn prune(dir: &Path, extension: &str, kept: usize) -> std::io::Result<()> {
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir)?.filter_map(Result::ok) {
        let path = entry.path();
        let Ok(metadata) = entry.metadata() else {
            continue;
        };
        if metadata.is_file() && path.extension().is_some_and(|e| e == extension) {
            files.push((metadata.modified()?, path));
        }
    }
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    for (_, path) in files.into_iter().skip(kept) {
        std::fs::remove_file(path)?;
    }
    Ok(())
}

/// `bytes` in lowercase hex: the names of files moniker keeps, and ids.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
