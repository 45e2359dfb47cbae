//! What clients see now, shared by every session until the next change of a listing or of
//! the rules.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use moniker_surface::search::{Index, Model};
use moniker_surface::{Exposed, Kind, ServerId, Surface, listing};
use serde_json::value::RawValue;

/// What clients see now: the surface built from every server's last valid listing, which
/// servers are up, the listings rendered once for every `tools/list` (in the surface's
/// discovery mode; with moniker's management tools at the end when sessions manage
/// toolsets), and the search index of its tools (built at the first search: a gateway that
/// never searches never builds it).
pub struct View {
    pub surface: Surface,
    pub up: BTreeSet<ServerId>,
    pub tools_result: String,
    pub prompts_result: String,
    index: std::sync::OnceLock<Index>,
    /// The table the index is built with (`None`: the shipped one).
    model: Option<Arc<Model>>,
}

impl View {
    pub(crate) fn new(
        surface: Surface,
        up: BTreeSet<ServerId>,
        manage: bool,
        model: Option<Arc<Model>>,
    ) -> Self {
        let mut view = Self {
            index: std::sync::OnceLock::new(),
            model,
            surface,
            up,
            tools_result: String::new(),
            prompts_result: String::new(),
        };
        let extra = if manage {
            moniker_surface::management::definitions()
        } else {
            &[]
        };
        view.tools_result = listing::render(Kind::Tool, view.entries(Kind::Tool), extra);
        view.prompts_result = listing::render(Kind::Prompt, view.entries(Kind::Prompt), &[]);
        view
    }

    /// The search index of the surface's tools.
    pub fn index(&self) -> &Index {
        self.index.get_or_init(|| {
            let model = self.model.clone().unwrap_or_else(Model::shipped);
            Index::with_model(&self.surface, model)
        })
    }

    /// Whether a session without a toolset may see `item`: a server that is up serves it.
    pub fn is_up(&self, item: &Exposed) -> bool {
        item.servers().any(|s| self.up.contains(s))
    }

    /// The listing entries of a session without a toolset: what a server that is up serves,
    /// tools as the surface's discovery mode shows them.
    pub fn entries(&self, kind: Kind) -> Vec<Cow<'_, RawValue>> {
        let items = self
            .surface
            .listed(kind)
            .filter(|e| self.is_up(e))
            .map(|e| (e, Cow::Borrowed(&*e.definition)));
        self.surface.discovery().entries(kind, items)
    }
}
