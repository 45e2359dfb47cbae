//! `servers.<id>.sandbox` (a stdio server's): `true` (what every sandbox gives), `false`,
//! `best-effort` (what the kernel can enforce, said), or a map: `read` and `write` (paths, `~`
//! and `${VAR}` allowed), `network` (`off`, `on` or a list of ports it may connect to),
//! `processes`, `open_files`, `memory` (megabytes of data), `best_effort`.

use moniker_surface::vocab::Seg;

use super::{Cx, Slot, join};
use crate::report::codes;
use crate::server::{Network, Sandbox};
use crate::shape::keys;
use crate::tree::{ScalarKind, Value, shorten};

const SANDBOX_HELP: &str = "write `true`, `false`, `best-effort`, or a map of `read`, `write`, `network`, `processes`, `open_files`, `memory` and `best_effort`";

impl Cx<'_> {
    /// `None`: no sandbox (`false`), or a value that is not one (reported).
    pub(super) fn sandbox<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Option<Sandbox> {
        if let Value::Scalar(_) = &slot.node.value {
            return match slot.scalar() {
                Some((_, ScalarKind::Bool(on))) => on.then(Sandbox::default),
                Some(("best-effort", ScalarKind::Str)) => Some(Sandbox {
                    best_effort: true,
                    ..Sandbox::default()
                }),
                Some((text, _)) => {
                    self.error(
                        codes::INVALID_VALUE,
                        format!("`{}` is not a sandbox", shorten(text)),
                        p,
                        slot.point(),
                        Some(SANDBOX_HELP.to_owned()),
                    );
                    None
                }
                None => None,
            };
        }
        let fields = self.fields(
            slot,
            p,
            Some(keys::SANDBOX_SETTINGS),
            "a map of sandbox settings",
        );
        let paths = |cx: &mut Self, at: &[Seg<'n>], s| cx.strings(at, s, false);
        let count = |cx: &mut Self, name: &'static str| {
            let read = cx.field(p, &fields, name, Self::count);
            read.flatten().map(u64::from)
        };
        let read = self.field(p, &fields, "read", paths);
        let write = self.field(p, &fields, "write", paths);
        let network = self.field(p, &fields, "network", Self::network);
        let processes = count(self, "processes");
        let open_files = count(self, "open_files");
        let memory_mb = count(self, "memory");
        let best_effort = self.field(p, &fields, "best_effort", Self::boolean);
        Some(Sandbox {
            read: read.unwrap_or_default(),
            write: write.unwrap_or_default(),
            network: network.flatten().unwrap_or_default(),
            processes,
            open_files,
            memory_mb,
            best_effort: best_effort.flatten().unwrap_or(false),
        })
    }

    /// `off`, `on`, or the ports a server may connect to.
    fn network<'n>(&mut self, p: &[Seg<'n>], slot: Slot<'n>) -> Option<Network> {
        match slot.scalar() {
            Some(("off", ScalarKind::Str) | (_, ScalarKind::Bool(false))) => Some(Network::Off),
            Some(("on", ScalarKind::Str) | (_, ScalarKind::Bool(true))) => Some(Network::On),
            Some(_) => {
                self.type_error("`off`, `on` or a list of ports", p, slot);
                None
            }
            None => {
                let items = self.items(slot, p, "`off`, `on` or a list of ports");
                let mut ports = Vec::new();
                for (i, item) in items.into_iter().enumerate() {
                    let ip = join(p, Seg::Index(i));
                    match self.count(&ip, item).map(u16::try_from) {
                        Some(Ok(port)) if port > 0 => ports.push(port),
                        Some(_) => self.error(
                            codes::INVALID_VALUE,
                            "a port is from 1 to 65535".to_owned(),
                            &ip,
                            item.point(),
                            None,
                        ),
                        None => {}
                    }
                }
                Some(Network::Ports(ports))
            }
        }
    }
}
