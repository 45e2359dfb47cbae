//! Sets `MONIKER_COMMIT`, the commit `moniker --version` names: `$MONIKER_COMMIT` when the
//! build sets it (a package built from a tarball), else the work tree's `HEAD` (with `-dirty`
//! when files differ from it), else the commit `cargo publish` recorded in
//! `.cargo_vcs_info.json` (a `cargo install` from crates.io), else `unknown`.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=MONIKER_COMMIT");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let commit = std::env::var("MONIKER_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| from_git(Path::new(&manifest)))
        .or_else(|| from_vcs_info(Path::new(&manifest)))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=MONIKER_COMMIT={commit}");
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn from_git(dir: &Path) -> Option<String> {
    let head = git(dir, &["rev-parse", "--short=12", "HEAD"])?;
    // Rebuild when HEAD moves (a commit, a checkout) or the index changes.
    for file in ["HEAD", "index", "packed-refs"] {
        if let Some(path) = git(dir, &["rev-parse", "--git-path", file]) {
            let path = dir.join(path);
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        if let Some(path) = git(dir, &["rev-parse", "--git-path", &branch]) {
            println!("cargo:rerun-if-changed={}", dir.join(path).display());
        }
    }
    let dirty =
        git(dir, &["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}-dirty") } else { head })
}

fn from_vcs_info(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(".cargo_vcs_info.json")).ok()?;
    // `{"git": {"sha1": "<40 hex>"}, ...}`: the one value a build script needs, without a
    // JSON parser as a build dependency.
    let at = text.find("\"sha1\"")?;
    let rest = &text[at + 6..];
    let start = rest.find('"')? + 1;
    let sha: String = rest[start..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    (sha.len() >= 12).then(|| sha[..12].to_owned())
}
