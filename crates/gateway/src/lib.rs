//! moniker's async shell around the pure naming core (`moniker-surface`): what clients connect
//! to (`serve`: stdio, Streamable HTTP, `/metrics`), how moniker reaches servers (`connect`:
//! stdio, Streamable HTTP, legacy HTTP+SSE), the sessions that answer clients (`session`), the
//! gateway that keeps the servers and the surface (`gateway`, `supervise`), and the hub through
//! which servers' messages reach clients (`hub`). A message is parsed once where it enters
//! (`message`) and carried as that type; what moniker does not own keeps the bytes its server
//! wrote.

mod answers;
mod audit;
pub mod auth;
pub mod awake;
pub mod budget;
mod call;
pub mod connect;
mod deliver;
pub mod errors;
pub mod files;
pub mod framing;
pub mod gateway;
pub mod guard;
mod headers;
pub mod hub;
pub mod identity;
pub(crate) mod instances;
pub mod known;
pub mod learned;
mod limits;
pub mod message;
pub mod metrics;
pub mod modern;
mod parked;
pub mod random;
mod route;
pub mod sandbox;
pub mod serve;
pub mod session;
pub mod store;
mod supervise;
mod sync;
mod tasks;
pub mod telemetry;
mod tls;
pub mod toolsets;
pub mod view;

pub use gateway::{Gateway, ServerEntry, Settings, StartError};
pub use view::View;
