//! The semantic half of search: what a text means, as a vector, so that "file a bug" meets
//! `create_issue`. A [`Model`] is a static embedding table (model2vec's approach): one vector
//! per token of a WordPiece vocabulary, distilled once from a sentence-embedding model and
//! fitted to its embeddings of whole sentences (`model/distill.py`, from all-MiniLM-L6-v2 for
//! the table moniker ships); a text's vector is the normalised sum of its tokens' vectors. No
//! network runs and no model is evaluated at search time: a lookup and an addition per word.
//!
//! The file format (little-endian), written by `model/distill.py`:
//! `moniker-static-embeddings 1\n`, u32 dims, u32 count, count f32 scales, count x dims i8
//! (row i is scale\[i\] times its values), then the count tokens, each ended by `\n`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use sha2::Digest;
use unicode_normalization::UnicodeNormalization;

const MAGIC: &[u8] = b"moniker-static-embeddings 1\n";
/// Longer words are not split into pieces (BERT's own limit); they say nothing.
const MAX_WORD: usize = 100;

/// The table moniker ships (see `model/README.md`: what it was distilled from, its licence,
/// and how to make it again).
static SHIPPED: &[u8] = include_bytes!("../../model/minilm-l6-v2.256.bin");

/// Why a model file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(
        "not a moniker static embedding table (one begins with `moniker-static-embeddings 1`; `model/distill.py` makes them)"
    )]
    Magic,
    #[error("the table is cut short: {0}")]
    Short(&'static str),
    #[error("the table's {0} is not what its header says")]
    Mismatch(&'static str),
    #[error("the model cannot be used: {0}")]
    Encoder(String),
}

/// A static embedding table and its vocabulary.
pub struct Model {
    dims: usize,
    scales: Vec<f32>,
    /// The table's file; its `values` range holds `count x dims` i8 values.
    bytes: Cow<'static, [u8]>,
    values: std::ops::Range<usize>,
    pieces: WordPiece,
    /// The SHA-256 of the file, made when a cached index first asks for it.
    fingerprint: OnceLock<[u8; 32]>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("dims", &self.dims)
            .field("tokens", &self.pieces.vocab.len())
            .finish()
    }
}

impl Model {
    /// The table moniker ships, read once.
    pub fn shipped() -> Arc<Self> {
        static MODEL: OnceLock<Arc<Model>> = OnceLock::new();
        MODEL
            .get_or_init(|| {
                Arc::new(Self::parse(Cow::Borrowed(SHIPPED)).expect("the shipped table"))
            })
            .clone()
    }

    /// A table from its file's bytes.
    pub fn parse(bytes: Cow<'static, [u8]>) -> Result<Self, ModelError> {
        let rest = bytes.strip_prefix(MAGIC).ok_or(ModelError::Magic)?;
        let word = |at: usize| -> Result<usize, ModelError> {
            let b = rest.get(at..at + 4).ok_or(ModelError::Short("header"))?;
            Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        };
        let (dims, count) = (word(0)?, word(4)?);
        if dims == 0 || dims > 4096 || count > 10_000_000 {
            return Err(ModelError::Mismatch("header"));
        }
        let scales_at = MAGIC.len() + 8;
        let values_at = scales_at + 4 * count;
        let tokens_at = values_at + dims * count;
        let scales = bytes
            .get(scales_at..values_at)
            .ok_or(ModelError::Short("scales"))?
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let tokens = bytes.get(tokens_at..).ok_or(ModelError::Short("vectors"))?;
        let tokens = std::str::from_utf8(tokens).map_err(|_| ModelError::Mismatch("vocabulary"))?;
        let vocab: HashMap<Box<str>, u32> = tokens
            .split_terminator('\n')
            .enumerate()
            .map(|(i, t)| (t.into(), i as u32))
            .collect();
        if vocab.len() != count {
            return Err(ModelError::Mismatch("vocabulary"));
        }
        Ok(Self {
            dims,
            scales,
            bytes,
            values: values_at..tokens_at,
            pieces: WordPiece { vocab },
            fingerprint: OnceLock::new(),
        })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The SHA-256 of the table's file.
    pub fn fingerprint(&self) -> &[u8; 32] {
        self.fingerprint
            .get_or_init(|| sha2::Sha256::digest(&self.bytes).into())
    }

    /// The unit vector of `text`, or `None` when no word of it is in the vocabulary.
    pub fn embed(&self, text: &str) -> Option<Vec<f32>> {
        let mut sum = vec![0.0f32; self.dims];
        let mut any = false;
        let values = &self.bytes[self.values.clone()];
        self.pieces.each_token(text, |id| {
            any = true;
            let row = id as usize * self.dims;
            let scale = self.scales[id as usize];
            for (s, v) in sum.iter_mut().zip(&values[row..row + self.dims]) {
                *s += scale * f32::from(*v as i8);
            }
        });
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
        (any && norm > 0.0).then(|| sum.into_iter().map(|x| x / norm).collect())
    }
}

/// A WordPiece vocabulary (BERT's, uncased) and how a text is cut into its pieces.
pub struct WordPiece {
    vocab: HashMap<Box<str>, u32>,
}

impl WordPiece {
    /// The vocabulary of a `tokenizer.json`.
    pub fn of_tokenizer(tokenizer: &[u8]) -> Result<Self, ModelError> {
        Ok(Self {
            vocab: vocab_of(tokenizer)?,
        })
    }

    /// The largest id of the vocabulary.
    pub fn largest_id(&self) -> Option<u32> {
        self.vocab.values().max().copied()
    }

    /// The id of `token`, when the vocabulary has it.
    pub fn id(&self, token: &str) -> Option<u32> {
        self.vocab.get(token).copied()
    }

    /// The vocabulary ids of `text`'s words: split into words (letters and digits; between
    /// the humps of camelCase; each CJK character alone), lowercased without accents, each
    /// cut into the longest pieces the vocabulary has (WordPiece; a word with a piece it
    /// lacks is left out).
    pub fn each_token(&self, text: &str, mut emit: impl FnMut(u32)) {
        let mut piece = String::new();
        let mut ids = Vec::new();
        for run in text.split(|c: char| !c.is_alphanumeric()) {
            for word in super::humps(run) {
                for word in cjk_apart(word) {
                    let word: String = word
                        .nfd()
                        .filter(|c| !unicode_normalization::char::is_combining_mark(*c))
                        .flat_map(char::to_lowercase)
                        .collect();
                    if self.word_pieces(&word, &mut piece, &mut ids) {
                        ids.drain(..).for_each(&mut emit);
                    }
                    ids.clear();
                }
            }
        }
    }

    /// WordPiece, greedy longest match first: false when a part of `word` has no piece.
    fn word_pieces(&self, word: &str, piece: &mut String, ids: &mut Vec<u32>) -> bool {
        if word.is_empty() || word.chars().count() > MAX_WORD {
            return false;
        }
        let mut start = 0;
        while start < word.len() {
            let mut end = word.len();
            let found = loop {
                piece.clear();
                if start > 0 {
                    piece.push_str("##");
                }
                piece.push_str(&word[start..end]);
                if let Some(id) = self.vocab.get(piece.as_str()) {
                    break Some(*id);
                }
                match word[start..end].char_indices().next_back() {
                    Some((0, _)) | None => break None,
                    Some((last, _)) => end = start + last,
                }
            };
            match found {
                Some(id) => ids.push(id),
                None => return false,
            }
            start = end;
        }
        true
    }
}

/// The vocabulary of a `tokenizer.json` (Hugging Face's tokenizers): its WordPiece model's
/// `vocab`, token to id.
fn vocab_of(tokenizer: &[u8]) -> Result<HashMap<Box<str>, u32>, ModelError> {
    #[derive(serde::Deserialize)]
    struct Tokenizer {
        model: Pieces,
    }
    #[derive(serde::Deserialize)]
    struct Pieces {
        vocab: HashMap<Box<str>, u32>,
    }
    let tokenizer: Tokenizer = serde_json::from_slice(tokenizer)
        .map_err(|e| ModelError::Encoder(format!("tokenizer.json: {e}")))?;
    Ok(tokenizer.model.vocab)
}

/// `word` with each CJK ideograph a word of its own (BERT's vocabularies hold them one by one).
fn cjk_apart(word: &str) -> Vec<&str> {
    if word.is_ascii() {
        return vec![word];
    }
    let mut out = Vec::new();
    let mut from = 0;
    for (at, c) in word.char_indices() {
        if is_cjk(c) {
            if from < at {
                out.push(&word[from..at]);
            }
            out.push(&word[at..at + c.len_utf8()]);
            from = at + c.len_utf8();
        }
    }
    if from < word.len() {
        out.push(&word[from..]);
    }
    out
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// The least cosine similarity of a document worth ranking. The shipped table's right tools
/// are above it for 97% of the findability benchmark's requests (its similarities run lower
/// than an unfitted table's, whose floor was 0.2). A request unrelated to every tool mostly
/// comes out below it, but not always: "zebra quantum" finds ContextGraph's neuromodulation
/// tools.
pub const MIN_SIMILARITY: f32 = 0.15;
/// The most words of a tool's description the semantic ranking reads: the longest sentence the
/// shipped table was fitted to (`model/corpus.py` keeps sentences of 4 to 40 words). Measured
/// on the three task sets, reading whole descriptions found fewer: mean recall@1 / @5 62.7 /
/// 90.4 against 64.9 / 91.0 (cuts at 20 to 60 words all came within a point of it).
pub const FITTED_WORDS: usize = 40;
/// The least share of the best document's similarity that another one's must have.
pub const NEAR_THE_BEST: f32 = 0.5;
/// What the lexical half's score weighs in the fusion with the table, the semantic half's the
/// rest. Chosen on `tasks.json` alone (0.3 to 0.7 by tenths; 0.4 found the most at ranks 1
/// and 5 together), then measured on the held-out task sets (`BENCHMARKS.md`).
pub const LEXICAL_SHARE: f32 = 0.4;
/// With a model run whole, the lexical half is a signal, not a veto: its share is small, so
/// a partial match on a tool's name ("chart" in a request for a chart of something else) no
/// longer pushes out what the model finds. Chosen on `tasks.json` alone (shares 0.05 to 0.4,
/// floors 0.05 to 0.15, near 0.3 to 0.7; recall@1 / @5 over its three surfaces 71.4 / 90.1
/// at 0.1, 65.6 / 89.6 at the table's 0.4), then measured on the held-out sets
/// (`crates/surface/model/README.md`).
pub const MODEL_LEXICAL_SHARE: f32 = 0.1;
/// The least cosine similarity of a document worth ranking with a model.
pub const MODEL_MIN_SIMILARITY: f32 = 0.1;
/// The least share of the best document's similarity that another one's must have, with a
/// model.
pub const MODEL_NEAR_THE_BEST: f32 = 0.5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_reads_and_means_something() {
        let model = Model::shipped();
        assert_eq!(model.dims(), 256);
        let v = model.embed("file a bug").expect("known words");
        assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-4);
        let cos = |a: &str, b: &str| -> f32 {
            let (a, b) = (model.embed(a).unwrap(), model.embed(b).unwrap());
            a.iter().zip(&b).map(|(x, y)| x * y).sum()
        };
        // Words that share no letters, near in meaning; and far.
        assert!(cos("report a bug", "create issue") > cos("report a bug", "resize window"));
        assert!(
            cos("take a picture of the page", "screenshot")
                > cos("take a picture of the page", "delete branch")
        );
        assert_eq!(model.embed("%%% ---"), None);
    }

    #[test]
    fn words_are_cut_as_the_vocabulary_has_them() {
        let model = Model::shipped();
        let ids = |text: &str| {
            let mut out = Vec::new();
            model.pieces.each_token(text, |id| out.push(id));
            out
        };
        // Identifiers split where a person would read them, case and accents gone.
        assert_eq!(ids("getPullRequest"), ids("get pull request"));
        assert_eq!(ids("create_issue"), ids("Create Issue"));
        assert_eq!(ids("Zürich"), ids("zurich"));
        // A word outside the vocabulary is pieced (`##`), a CJK ideograph stands alone.
        assert!(ids("kubectl").len() > 1);
        assert_eq!(ids("中文").len(), 2);
        // Nothing a text holds makes it fail: long words, control bytes, lone marks.
        assert!(ids(&"x".repeat(10_000)).is_empty());
        let _ = ids("\u{0}\u{301}\u{feff}a\u{200d}b");
    }

    #[test]
    fn a_table_that_is_not_one_is_refused() {
        assert!(matches!(
            Model::parse(Cow::Borrowed(b"nope")),
            Err(ModelError::Magic)
        ));
        let mut cut = SHIPPED[..MAGIC.len() + 8 + 100].to_vec();
        assert!(Model::parse(Cow::Owned(cut.clone())).is_err());
        cut.truncate(MAGIC.len() + 3);
        assert!(Model::parse(Cow::Owned(cut)).is_err());
        let mut huge = MAGIC.to_vec();
        huge.extend(u32::MAX.to_le_bytes());
        huge.extend(u32::MAX.to_le_bytes());
        assert!(Model::parse(Cow::Owned(huge)).is_err());
    }
}
