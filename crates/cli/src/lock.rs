//! `moniker lock`: writes `moniker.lock` beside the config, shows what would change, or
//! accepts what some tools are now.

use moniker_config::Config;
use moniker_surface::{Kind, Listing, Lock};

use crate::args::LockArgs;
use crate::exit::{Exit, Failure};
use crate::start::{Toolsets, report_failed_servers, start_with};
use crate::{lockdiff, lockfile, output};

/// `moniker lock`: starts the servers and writes `moniker.lock` beside the config (with
/// `--diff`, prints what would change instead; with `--accept`, writes only those tools
/// anew). Refuses when a server did not start: its names would be missing from the lock, and
/// reported as gone by every later check.
pub async fn lock(mut config: Config, args: LockArgs) -> Result<Exit, Failure> {
    let path = lockfile::path(&config);
    let old = lockfile::read(&path)?;
    let unsealed = Toolsets {
        unsealed: true,
        ..Toolsets::default()
    };
    let gateway = match start_with(&mut config, unsealed).await? {
        Ok(gateway) => gateway,
        Err(not) => return Ok(not.exit),
    };
    let failed = report_failed_servers(&gateway, "error");
    let listings = gateway.naming.listings();
    let listed: Vec<&Listing> = listings.iter().collect();
    let mut lock = Lock::of(&gateway.naming.view().surface, &listed);
    lock.sandboxes = lockfile::sandboxes(&config);
    gateway.shutdown().await;
    if failed > 0 {
        output::report(&format!(
            "error: `{}` not written: every server must be up to lock the surface",
            path.display()
        ));
        return Ok(Exit::Failure);
    }
    let old_or_empty = old.clone().unwrap_or_default();
    if !args.accept.is_empty() {
        let Some(old) = &old else {
            output::report(&format!(
                "error: there is no `{}` to accept into: `moniker lock` writes one",
                path.display()
            ));
            return Ok(Exit::Failure);
        };
        lock = match accepted(old, &lock, &args.accept) {
            Ok(lock) => lock,
            Err(message) => {
                output::report(&format!("error: {message}"));
                return Ok(Exit::Failure);
            }
        };
    }
    let (lines, [added, removed, changed]) = lockfile::diff(&old_or_empty, &lock);
    if args.diff {
        let drifted = lockdiff::integrity(&old_or_empty, &lock);
        let widened = lockfile::widened(&old_or_empty, &lock);
        for line in lines.iter().chain(&drifted).chain(&widened) {
            output::line(line)?;
        }
        output::line(
            &if lines.is_empty() && drifted.is_empty() && old.is_some() {
                format!("`{}` is up to date", path.display())
            } else {
                let drifted = drifted.iter().filter(|l| !l.starts_with(' ')).count();
                format!(
                    "{added} added, {removed} removed, {changed} changed, {drifted} changed by their server, {} sandboxes widened in `{}` (not written)",
                    widened.len(),
                    path.display()
                )
            },
        )?;
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

/// `old` with the entries of the tools and prompts named `accept` as they are in `new` (an
/// entry of the same server and origin is replaced too: it may have been renamed; a member of
/// an action tool is accepted with its action tool); every other entry as `old` has it.
fn accepted(old: &Lock, new: &Lock, accept: &[String]) -> Result<Lock, String> {
    let mut out = old.clone();
    for name in accept {
        let entry = new
            .entries
            .iter()
            .find(|e| e.names().any(|n| n == name))
            .or_else(|| {
                new.entries
                    .iter()
                    .find(|e| e.members.iter().any(|m| &m.name == name))
            })
            .ok_or_else(|| format!("no tool or prompt `{name}` is exposed now"))?;
        out.entries.retain(|e| {
            e.kind != entry.kind
                || (e.name != entry.name
                    && (entry.origin == "-"
                        || e.server != entry.server
                        || e.origin != entry.origin))
        });
        out.entries.push(entry.clone());
    }
    out.sort();
    Ok(out)
}
