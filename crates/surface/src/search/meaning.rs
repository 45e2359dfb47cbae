//! What a text means, as a vector ([`Meaning`]: the static table or a model run whole), and a
//! surface's documents as such vectors, ranked by their similarity to a query ([`Vectors`]).

use std::sync::Arc;

use super::semantic::{
    FITTED_WORDS, LEXICAL_SHARE, MIN_SIMILARITY, MODEL_LEXICAL_SHARE, MODEL_MIN_SIMILARITY,
    MODEL_NEAR_THE_BEST, Model, ModelError, NEAR_THE_BEST,
};

/// A sentence-embedding model run whole (the `moniker-model` crate's `Encoder`): what search
/// needs of it. The naming core builds no model code; it ranks with whatever encodes.
pub trait Encode: Send + Sync + std::fmt::Debug {
    /// The length of its vectors.
    fn dims(&self) -> usize;
    /// What names it in a cached index: the SHA-256 of its weights and its forward pass.
    fn fingerprint(&self) -> &[u8; 32];
    /// The unit vector of `text`, or `None` when it has no known word.
    fn embed(&self, text: &str) -> Option<Vec<f32>>;
    /// The unit vector of each text (`None` for one without a known word), in their order.
    ///
    /// # Errors
    /// When the model cannot run (a failure of one of its workers).
    fn embed_all(&self, texts: &[&str]) -> Result<Vec<Option<Vec<f32>>>, ModelError>;
}

/// What gives a text its meaning as a vector: the static table, or a model run whole.
#[derive(Debug, Clone)]
pub enum Meaning {
    Table(Arc<Model>),
    Encoder(Arc<dyn Encode>),
}

impl Meaning {
    /// The table moniker ships.
    pub fn shipped() -> Self {
        Self::Table(Model::shipped())
    }

    pub fn dims(&self) -> usize {
        match self {
            Self::Table(model) => model.dims(),
            Self::Encoder(encoder) => encoder.dims(),
        }
    }

    /// What names it in a cached index: the SHA-256 of its file (of the weights).
    pub fn fingerprint(&self) -> &[u8; 32] {
        match self {
            Self::Table(model) => model.fingerprint(),
            Self::Encoder(encoder) => encoder.fingerprint(),
        }
    }

    /// The unit vector of `text`, or `None` when no word of it is known.
    pub fn embed(&self, text: &str) -> Option<Vec<f32>> {
        match self {
            Self::Table(model) => model.embed(text),
            Self::Encoder(encoder) => encoder.embed(text),
        }
    }

    /// The most words of a tool's description it reads: the table, the longest sentence it
    /// was fitted to ([`FITTED_WORDS`]); a model, all of it (to its limit of word pieces).
    pub fn reads_words(&self) -> usize {
        match self {
            Self::Table(_) => FITTED_WORDS,
            Self::Encoder(_) => usize::MAX,
        }
    }

    /// The least cosine similarity of a document worth ranking ([`MIN_SIMILARITY`] for the
    /// table; a model's run lower).
    pub fn min_similarity(&self) -> f32 {
        match self {
            Self::Table(_) => MIN_SIMILARITY,
            Self::Encoder(_) => MODEL_MIN_SIMILARITY,
        }
    }

    /// The least share of the best document's similarity another one's must have.
    pub fn near_the_best(&self) -> f32 {
        match self {
            Self::Table(_) => NEAR_THE_BEST,
            Self::Encoder(_) => MODEL_NEAR_THE_BEST,
        }
    }

    /// What the lexical half weighs in the fusion, the semantic half the rest.
    pub fn lexical_share(&self) -> f32 {
        match self {
            Self::Table(_) => LEXICAL_SHARE,
            Self::Encoder(_) => MODEL_LEXICAL_SHARE,
        }
    }

    /// Each document's unit vector (zeros for one without a known word), one after another.
    fn embed_all<S: AsRef<str>>(&self, documents: &[S]) -> Result<Vec<f32>, ModelError> {
        let dims = self.dims();
        let vectors: Vec<Option<Vec<f32>>> = match self {
            Self::Table(model) => documents.iter().map(|d| model.embed(d.as_ref())).collect(),
            Self::Encoder(encoder) => {
                let texts: Vec<&str> = documents.iter().map(AsRef::as_ref).collect();
                encoder.embed_all(&texts)?
            }
        };
        let mut flat = Vec::with_capacity(documents.len() * dims);
        for vector in vectors {
            match vector {
                Some(v) => flat.extend(v),
                None => flat.extend(std::iter::repeat_n(0.0, dims)),
            }
        }
        Ok(flat)
    }
}

/// Documents as unit vectors, ranked by cosine similarity to a query.
pub struct Vectors {
    meaning: Meaning,
    /// Document `i` is `flat[i * dims..(i + 1) * dims]`; zeros when it had no known word.
    flat: Vec<f32>,
}

impl Vectors {
    /// The documents' vectors by `meaning` (an error only from a model that failed to run).
    pub fn new<S: AsRef<str>>(meaning: Meaning, documents: &[S]) -> Result<Self, ModelError> {
        let flat = meaning.embed_all(documents)?;
        Ok(Self { meaning, flat })
    }

    /// Vectors made before (by [`Vectors::new`] with the same meaning): `None` unless there
    /// are `documents` of its dimensions.
    pub fn of_flat(meaning: Meaning, flat: Vec<f32>, documents: usize) -> Option<Self> {
        (flat.len() == documents.checked_mul(meaning.dims())?).then_some(Self { meaning, flat })
    }

    /// What made them.
    pub fn meaning(&self) -> &Meaning {
        &self.meaning
    }

    /// The vectors, document after document.
    pub fn flat(&self) -> &[f32] {
        &self.flat
    }

    /// The documents similar enough to `query`, most similar first: (position, cosine).
    /// Equal scores are in position order. Similar enough: at least [`MIN_SIMILARITY`], and
    /// at least [`NEAR_THE_BEST`] of the best one's (texts unrelated in meaning come out
    /// low, and a query always has a nearest document, wanted or not).
    pub fn rank(&self, query: &str) -> Vec<(usize, f32)> {
        self.rank_of(self.meaning.embed(query).as_deref())
    }

    /// [`Vectors::rank`] for a query's vector already made (`None`: it had no known word).
    pub fn rank_of(&self, query: Option<&[f32]>) -> Vec<(usize, f32)> {
        let Some(q) = query else {
            return Vec::new();
        };
        let mut ranked: Vec<(usize, f32)> = self
            .flat
            .chunks_exact(self.meaning.dims())
            .map(|d| d.iter().zip(q).map(|(a, b)| a * b).sum())
            .enumerate()
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let floor = ranked.first().map_or(f32::INFINITY, |best| {
            (best.1 * self.meaning.near_the_best()).max(self.meaning.min_similarity())
        });
        ranked.retain(|(_, cosine)| *cosine >= floor);
        ranked
    }
}
