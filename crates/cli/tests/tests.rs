//! The `moniker` binary's integration tests, in one binary (a 2-core CI links fewer of them).

mod actions;
mod boundary;
mod bounded;
mod calls;
mod check;
mod first_contact;
mod http;
mod install;
mod joining;
mod lock;
mod search_model;
mod serve;
mod shared;
mod stdio;
mod structure;
mod surfaces;
mod toolsets;
