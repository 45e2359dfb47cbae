//! moniker's naming core: from the rules of the config and each server's origin listing, build
//! the surface a client sees (exposed tools and prompts, and the index that resolves every
//! exposed name and alias to a route), or the diagnostics that say why it cannot be built.
//!
//! Pure: no I/O, no async, no clock. The same rules and listings give the same surface,
//! whatever order the servers and their tools come in.

pub mod actions;
pub mod definition;
pub mod deprecation;
pub mod diagnostic;
pub mod discovery;
pub mod names;
pub mod params;
pub mod rules;

pub use diagnostic::{Contested, Diagnostic, Fix, Rename, Severity};
pub use discovery::Discovery;
pub use names::{InvalidName, Name, Profile, ProfileKind, ServerId, Tag};
pub use rules::{ActionRule, AliasRule, Legacy, Naming, Override, Rules, ServerRules};
pub use schedule::{Date, Deprecation};
pub use vocab::Kind;
pub mod listing;
pub mod lock;
pub mod management;
mod naming;
pub mod schedule;
pub mod search;
pub mod surface;
mod tag_expr;
pub mod toolsets;
pub mod uri;
pub mod vocab;
mod words;

pub use listing::Listing;
pub use lock::{Breaking, Lock};
pub use naming::{Built, build, check_rules};
pub use surface::{ActionMember, ActionRoute, Exposed, Origin, Resolved, Route, Surface, Via};
pub use toolsets::{Selection, TagExpr, ToolsetRule, Toolsets};
