//! `moniker lock`: writes `moniker.lock` beside the config, or shows what would change.

use moniker_config::Config;
use moniker_surface::Kind;

use crate::args::LockArgs;
use crate::exit::{Exit, Failure};
use crate::start::{report_failed_servers, start};
use crate::{lockfile, output};

/// `moniker lock`: starts the servers and writes `moniker.lock` beside the config (with
/// `--diff`, prints what would change instead). Refuses when a server did not start: its names
/// would be missing from the lock, and reported as gone by every later check.
pub async fn lock(mut config: Config, args: LockArgs) -> Result<Exit, Failure> {
    let path = lockfile::path(&config);
    let old = lockfile::read(&path)?;
    let gateway = match start(&mut config).await? {
        Ok(gateway) => gateway,
        Err(not) => return Ok(not.exit),
    };
    let failed = report_failed_servers(&gateway, "error");
    let lock = moniker_surface::Lock::of(&gateway.view().surface);
    gateway.shutdown().await;
    if failed > 0 {
        output::report(&format!(
            "error: `{}` not written: every server must be up to lock the surface",
            path.display()
        ));
        return Ok(Exit::Failure);
    }
    let (lines, [added, removed, changed]) =
        lockfile::diff(&old.clone().unwrap_or_default(), &lock);
    if args.diff {
        for line in &lines {
            output::line(line)?;
        }
        output::line(&if lines.is_empty() && old.is_some() {
            format!("`{}` is up to date", path.display())
        } else {
            format!(
                "{added} added, {removed} removed, {changed} changed in `{}` (not written)",
                path.display()
            )
        })?;
        return Ok(Exit::Ok);
    }
    lockfile::write(&path, &lock.render())?;
    let tools = lock.entries.iter().filter(|e| e.kind == Kind::Tool).count();
    output::line(&format!(
        "wrote `{}`: {} tools, {} prompts ({added} added, {removed} removed, {changed} changed)",
        path.display(),
        tools,
        lock.entries.len() - tools,
    ))?;
    Ok(Exit::Ok)
}
