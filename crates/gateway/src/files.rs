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

/// Makes `dir` (and its parents) when missing, and makes it `0700`: checked and changed
/// through a descriptor opened without following a link, never by path (a link planted in a
/// shared place such as `/tmp` would have the mode set on its target). A directory that is not
/// the user's own, or a link, is refused.
#[cfg(unix)]
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use nix::fcntl::OFlag;
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW).bits())
        .open(dir)
        .map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("{} is not a directory (a link?): {e}", dir.display()),
            )
        })?;
    let metadata = opened.metadata()?;
    if metadata.uid() != nix::unistd::getuid().as_raw() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} belongs to another user", dir.display()),
        ));
    }
    if metadata.permissions().mode() & 0o777 != 0o700 {
        opened.set_permissions(std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

#[cfg(not(unix))]
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// How a file is made that only the user can read or write: new, or not at all.
fn new_private_file() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// A new file only the user can read or write, in `dir`, of a name no one could have made
/// ready (`create_new` refuses whatever is there, a planted link included).
pub fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    let options = new_private_file();
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

#[cfg(all(test, unix))]
mod private_dir_tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A link planted where the directory goes is refused, and its target's mode is left as
    /// it was (it used to be `chmod`ed through the link); a directory of the user's that
    /// others may enter is made `0700` through its descriptor.
    #[test]
    fn a_planted_link_is_refused_and_its_target_untouched() {
        let root = tempfile::tempdir().expect("a temp dir");
        let target = root.path().join("victim");
        std::fs::create_dir(&target).expect("target");
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).expect("755");
        let planted = root.path().join("moniker-0");
        std::os::unix::fs::symlink(&target, &planted).expect("link");
        let refused = create_private_dir(&planted).expect_err("a link is no private dir");
        assert!(refused.to_string().contains("not a directory"), "{refused}");
        let mode = std::fs::metadata(&target)
            .expect("target")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755, "the link's target is not changed");

        let open = root.path().join("open");
        std::fs::create_dir(&open).expect("dir");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).expect("755");
        create_private_dir(&open).expect("ours");
        let mode = std::fs::metadata(&open).expect("dir").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        create_private_dir(&root.path().join("a/b/c")).expect("made with its parents");
    }
}
