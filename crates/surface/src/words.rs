//! The words of identifiers and prose, as search and the action tools' descriptions compare
//! them: one room, used by both (neither reaches into the other for it).

use std::collections::HashSet;

use rust_stemmers::{Algorithm, Stemmer};

/// The words of identifiers and prose: text split at anything that is not a letter or a digit
/// and between the humps of camelCase, lowercased, without English stop words, each reduced
/// to its stem (Snowball), so that `listIssues`, `list_issues` and "listing the issues" meet.
pub struct Words {
    stemmer: Stemmer,
    stop: HashSet<&'static str>,
}

impl Default for Words {
    fn default() -> Self {
        Self {
            stemmer: Stemmer::create(Algorithm::English),
            stop: stop_words::get(stop_words::LANGUAGE::English)
                .iter()
                .copied()
                .collect(),
        }
    }
}

impl Words {
    /// The stems of `text`, in order.
    pub fn of(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for piece in text.split(|c: char| !c.is_alphanumeric()) {
            for word in humps(piece) {
                let word = word.to_lowercase();
                if self.stop.contains(word.as_str()) {
                    continue;
                }
                out.push(self.stemmer.stem(&word).into_owned());
            }
        }
        out
    }
}

/// `getPRInfo` → `get`, `PR`, `Info`; `v2` stays whole.
pub(crate) fn humps(piece: &str) -> impl Iterator<Item = &str> {
    let chars: Vec<(usize, char)> = piece.char_indices().collect();
    let mut cuts = vec![0];
    for i in 1..chars.len() {
        let (at, c) = chars[i];
        let before = chars[i - 1].1;
        let next_lower = chars.get(i + 1).is_some_and(|(_, n)| n.is_lowercase());
        // aB, or the B of ABc (the last capital of an acronym starts the next word).
        if c.is_uppercase() && (before.is_lowercase() || (before.is_uppercase() && next_lower)) {
            cuts.push(at);
        }
    }
    cuts.push(piece.len());
    cuts.windows(2)
        .map(move |w| &piece[w[0]..w[1]])
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .into_iter()
}
