//! BERT's forward pass (an encoder of sentence-transformers' kind, such as all-MiniLM-L6-v2),
//! and MPNet's (all-mpnet-base-v2: the same layers, with a learnt bias by relative position in
//! attention and no segments), on `ndarray`, its products by faer. Texts are not padded: their word
//! pieces are the rows of one matrix, each dense layer multiplies them all at once, and
//! attention looks only within a text's own rows, so no mask is needed.

mod eight_bit;
mod weights;

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use half::f16;
use std::borrow::Cow;
use std::ops::Range;

use eight_bit::EightBit;
use weights::Source;
use weights::Weights;

use ndarray::{
    Array1, Array2, ArrayBase, ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis, Ix2, RawData, Slice,
};

/// What of `config.json` the pass needs.
#[derive(Debug, serde::Deserialize)]
pub(super) struct Config {
    pub(super) vocab_size: usize,
    pub(super) hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    max_position_embeddings: usize,
    #[serde(default = "one")]
    type_vocab_size: usize,
    #[serde(default = "bert_eps")]
    layer_norm_eps: f32,
    #[serde(default = "bert_act")]
    hidden_act: String,
    /// `bert` (also when absent) or `mpnet`.
    #[serde(default)]
    model_type: Option<String>,
    /// MPNet's buckets of relative positions (32 when not said, as `transformers` has it).
    #[serde(default = "thirty_two")]
    relative_attention_num_buckets: usize,
}

impl Config {
    /// The word pieces that frame a text: BERT's `[CLS]` and `[SEP]`, MPNet's `<s>` and `</s>`;
    /// `Err` for a model of another kind.
    pub(super) fn frame(&self) -> Result<[&'static str; 2], String> {
        Ok(match Family::of(self)? {
            Family::Bert => ["[CLS]", "[SEP]"],
            Family::Mpnet => ["<s>", "</s>"],
        })
    }
}

/// The two families the pass runs: their tensors' names and what differs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Bert,
    Mpnet,
}

impl Family {
    fn of(config: &Config) -> Result<Self, String> {
        match config.model_type.as_deref() {
            None | Some("bert") => Ok(Self::Bert),
            Some("mpnet") if config.relative_attention_num_buckets >= 2 => Ok(Self::Mpnet),
            Some("mpnet") => Err("MPNet with no buckets of relative positions".to_owned()),
            Some(other) => Err(format!("a model of type {other}, not BERT's or MPNet's")),
        }
    }

    /// What the file's names may start with.
    fn prefix(self) -> &'static str {
        match self {
            Self::Bert => "bert.",
            Self::Mpnet => "mpnet.",
        }
    }

    /// The position of a text's first word piece: MPNet's start after its padding's.
    fn first_position(self) -> usize {
        match self {
            Self::Bert => 0,
            Self::Mpnet => 2,
        }
    }
}

fn one() -> usize {
    1
}

fn thirty_two() -> usize {
    32
}

fn bert_eps() -> f32 {
    1e-12
}

fn bert_act() -> String {
    "gelu".to_owned()
}

/// The model's weights, laid out for the pass: each dense layer's matrix as (in, out) at eight
/// bits a weight ([`EightBit`]), the word vectors (only ever looked up) at half precision.
pub(super) struct Bert {
    words: Array2<f16>,
    positions: Array2<f32>,
    segment: Array1<f32>,
    norm: Norm,
    layers: Vec<Layer>,
    attention: Attention,
}

/// What every layer's attention shares: its heads, and MPNet's bias by relative position,
/// (heads, offsets): at `max_tokens - 1 + j - i` for query `i` and key `j`.
struct Attention {
    heads: usize,
    relative: Option<Array2<f32>>,
}

struct Dense {
    weight: EightBit,
    bias: Array1<f32>,
}

struct Norm {
    weight: Array1<f32>,
    bias: Array1<f32>,
    eps: f32,
}

struct Layer {
    /// Query, key and value side by side: (hidden, 3 hidden).
    qkv: Dense,
    attended: Dense,
    attended_norm: Norm,
    up: Dense,
    down: Dense,
    down_norm: Norm,
}

impl Bert {
    /// The weights of `model.safetensors` (named as `transformers` saves a `BertModel` or an
    /// `MPNetModel`, with or without `bert.` or `mpnet.` before them), as `config` describes
    /// them, for texts of at most `max_tokens` word pieces.
    pub(super) fn load(
        file: &mut dyn Source,
        config: &Config,
        max_tokens: usize,
    ) -> Result<Self, String> {
        let family = Family::of(config)?;
        if config.hidden_act != "gelu" {
            return Err(format!(
                "activation {} is not BERT's gelu",
                config.hidden_act
            ));
        }
        // A width of 0 would make every other size free (a tensor of no bytes has any shape).
        if config.hidden_size == 0 || config.intermediate_size == 0 || config.vocab_size == 0 {
            return Err("a width or the vocabulary is 0".to_owned());
        }
        if config.num_attention_heads == 0 || config.hidden_size % config.num_attention_heads != 0 {
            return Err("the width is not a whole number of attention heads".to_owned());
        }
        if config.max_position_embeddings < max_tokens + family.first_position() {
            return Err(format!("it reads fewer than {max_tokens} word pieces"));
        }
        let weights = Weights::open(file, family.prefix(), config.layer_norm_eps)?;
        let (h, inner) = (config.hidden_size, config.intermediate_size);
        let positions = weights.matrix(
            "embeddings.position_embeddings.weight",
            (config.max_position_embeddings, h),
        )?;
        let segment = match family {
            Family::Bert => weights
                .matrix(
                    "embeddings.token_type_embeddings.weight",
                    (config.type_vocab_size.max(1), h),
                )?
                .row(0)
                .to_owned(),
            Family::Mpnet => Array1::zeros(h),
        };
        let relative = match family {
            Family::Bert => None,
            Family::Mpnet => Some(relative_bias(&weights, config, max_tokens)?),
        };
        let layers = (0..config.num_hidden_layers)
            .map(|i| Layer::load(&weights, family, &format!("encoder.layer.{i}."), h, inner))
            .collect::<Result<_, _>>()?;
        let first = family.first_position();
        Ok(Self {
            words: weights.words((config.vocab_size, h))?,
            positions: block(positions.view(), first..first + max_tokens, 0..h).to_owned(),
            segment,
            norm: weights.norm("embeddings.LayerNorm", h)?,
            layers,
            attention: Attention {
                heads: config.num_attention_heads,
                relative,
            },
        })
    }

    /// Each text's mean token vector (its word pieces as ids, `[CLS]` and `[SEP]` included),
    /// normalised; its products are shared among the process's cores when `shared`.
    pub(super) fn embed(&self, texts: &[&[u32]], shared: bool) -> Vec<Vec<f32>> {
        let mut x = self.input(texts);
        for layer in &self.layers {
            x = layer.forward(x, texts, &self.attention, shared);
        }
        let mut start = 0;
        texts
            .iter()
            .map(|text| {
                let rows = block(x.view(), start..start + text.len(), 0..x.ncols());
                start += text.len();
                let mean = rows.mean_axis(Axis(0)).unwrap_or_default();
                let norm = mean.dot(&mean).sqrt().max(f32::EPSILON);
                mean.iter().map(|v| v / norm).collect()
            })
            .collect()
    }

    /// The input layer: each word piece's vector, its position's and the segment's, normalised.
    fn input(&self, texts: &[&[u32]]) -> Array2<f32> {
        let rows: usize = texts.iter().map(|t| t.len()).sum();
        let mut x = Array2::zeros((rows, self.positions.ncols()));
        let pieces = texts.iter().flat_map(|text| text.iter().enumerate());
        for ((position, &id), mut row) in pieces.zip(x.rows_mut()) {
            let word = self.words.row(id as usize);
            let place = self.positions.row(position);
            for (j, v) in row.iter_mut().enumerate() {
                *v = word[j].to_f32() + place[j] + self.segment[j];
            }
        }
        self.norm.apply(x.view_mut());
        x
    }
}

/// MPNet's attention bias by relative position, per head: the learnt value of each offset's
/// bucket (as `transformers`' `MPNetEncoder` buckets them), for texts of `max_tokens`.
fn relative_bias(
    weights: &Weights,
    config: &Config,
    max_tokens: usize,
) -> Result<Array2<f32>, String> {
    let (buckets, heads) = (
        config.relative_attention_num_buckets,
        config.num_attention_heads,
    );
    let table = weights.matrix("encoder.relative_attention_bias.weight", (buckets, heads))?;
    let span = max_tokens.max(1);
    Ok(Array2::from_shape_fn(
        (heads, 2 * span - 1),
        |(head, at)| {
            // Key minus query.
            let offset = at as i64 - (span as i64 - 1);
            table[[bucket(offset, buckets), head]]
        },
    ))
}

/// The bucket of a key `offset` places after its query (T5's and MPNet's): half the buckets
/// for keys before, half for keys after; in each, one per place up to a quarter of them, then
/// by the logarithm of the distance up to 128 places, the last bucket beyond.
fn bucket(offset: i64, buckets: usize) -> usize {
    const FAR: f32 = 128.0;
    let half = buckets / 2;
    let exact = half / 2;
    let side = if offset > 0 { half } else { 0 };
    let distance = offset.unsigned_abs() as usize;
    if distance < exact {
        return side + distance;
    }
    let spread = (distance as f32 / exact as f32).ln() / (FAR / exact as f32).ln();
    // Truncated, as the reference casts it.
    let far = exact + (spread * (half - exact) as f32) as usize;
    side + far.min(half - 1)
}

impl Layer {
    fn load(
        weights: &Weights,
        family: Family,
        at: &str,
        h: usize,
        inner: usize,
    ) -> Result<Self, String> {
        let one = |name: &str| [format!("{at}{name}")];
        let (qkv, attended, attended_norm) = match family {
            Family::Bert => (
                ["query", "key", "value"].map(|part| format!("{at}attention.self.{part}")),
                "attention.output.dense",
                "attention.output.LayerNorm",
            ),
            Family::Mpnet => (
                ["q", "k", "v"].map(|part| format!("{at}attention.attn.{part}")),
                "attention.attn.o",
                "attention.LayerNorm",
            ),
        };
        Ok(Self {
            qkv: weights.dense(&qkv, h, h)?,
            attended: weights.dense(&one(attended), h, h)?,
            attended_norm: weights.norm(&format!("{at}{attended_norm}"), h)?,
            up: weights.dense(&one("intermediate.dense"), h, inner)?,
            down: weights.dense(&one("output.dense"), inner, h)?,
            down_norm: weights.norm(&format!("{at}output.LayerNorm"), h)?,
        })
    }

    /// One layer over every text's rows.
    fn forward(
        &self,
        x: Array2<f32>,
        texts: &[&[u32]],
        attention: &Attention,
        shared: bool,
    ) -> Array2<f32> {
        let qkv = self.qkv.apply(x.view(), shared);
        let context = attend(&qkv, texts, attention);
        let mut attended = self.attended.apply(context.view(), shared);
        attended += &x;
        self.attended_norm.apply(attended.view_mut());
        let mut up = self.up.apply(attended.view(), shared);
        match up.as_slice_mut() {
            Some(values) => gelu(values),
            None => up.mapv_inplace(|v| {
                let mut one = [v];
                gelu(&mut one);
                one[0]
            }),
        }
        let mut down = self.down.apply(up.view(), shared);
        down += &attended;
        self.down_norm.apply(down.view_mut());
        down
    }
}

/// BERT's GELU, `x Φ(x)`, in place. Its arithmetic has no branch and no call, so the
/// compiler runs it over several values at once: it is a fifth of the pass otherwise.
fn gelu(values: &mut [f32]) {
    for v in values {
        *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// The error function, to within 1.5e-7 (Abramowitz and Stegun, 7.1.26).
fn erf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [
        0.254_829_6,
        -0.284_496_72,
        1.421_413_8,
        -1.453_152_1,
        1.061_405_4,
    ];
    let t = 1.0 / (1.0 + P * x.abs());
    let poly = t * (A[0] + t * (A[1] + t * (A[2] + t * (A[3] + t * A[4]))));
    (1.0 - poly * exp(-x * x)).copysign(x)
}

/// `e^x` to about 2e-7 relative (and 0 below -87): `2^n 2^f`, `n` a whole number built
/// into the float's exponent, `2^f` (|f| <= 1/2) by its Taylor series to the sixth power.
fn exp(x: f32) -> f32 {
    /// Adding and taking away 1.5 * 2^23 rounds a float to a whole number.
    const ROUND: f32 = 12_582_912.0;
    const C: [f32; 6] = [
        std::f32::consts::LN_2,
        0.240_226_5,
        0.055_504_11,
        0.009_618_129,
        0.001_333_355_8,
        0.000_154_035_3,
    ];
    let y = x.clamp(-87.0, 88.0) * std::f32::consts::LOG2_E;
    let n = (y + ROUND) - ROUND;
    let f = y - n;
    let p = 1.0 + f * (C[0] + f * (C[1] + f * (C[2] + f * (C[3] + f * (C[4] + f * C[5])))));
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    let small = if x < -87.0 { 0.0 } else { 1.0 };
    p * scale * small
}

/// Self-attention, each text within its own rows and each head within its columns of
/// `qkv` (queries, keys, values side by side), with MPNet's bias by relative position when
/// there is one: the context vectors, (rows, hidden).
fn attend(qkv: &Array2<f32>, texts: &[&[u32]], attention: &Attention) -> Array2<f32> {
    let heads = attention.heads;
    let (rows, hidden) = (qkv.nrows(), qkv.ncols() / 3);
    let width = hidden / heads;
    let scale = 1.0 / (width as f32).sqrt();
    let mut context = vec![0.0; rows * hidden];
    let Some(qkv) = qkv.as_slice() else {
        return Array2::zeros((rows, hidden));
    };
    let mut start = 0;
    for text in texts {
        let n = text.len();
        let mut scores = vec![0.0; n * n];
        for (head, at) in (0..heads).map(|head| (head, head * width)) {
            // A head's block of queries, keys or values: `n` rows of `width` from column `col`.
            let columns = |col: usize| -> Vec<f32> {
                (start..start + n)
                    .flat_map(|row| &qkv[row * 3 * hidden + col..][..width])
                    .copied()
                    .collect()
            };
            let (q, k, v) = (columns(at), columns(hidden + at), columns(2 * hidden + at));
            let into = MatMut::from_row_major_slice_mut(&mut scores, n, n);
            let keys = MatRef::from_row_major_slice(&k, n, width).transpose();
            let queries = MatRef::from_row_major_slice(&q, n, width);
            matmul(into, Accum::Replace, queries, keys, scale, Par::Seq);
            if let Some(bias) = &attention.relative {
                add_relative(&mut scores, bias, head, n);
            }
            for row in scores.chunks_exact_mut(n) {
                let top = row.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
                // The pass's own `exp`, which the compiler runs over several scores at once:
                // libm's, a call a score, was a third of an index build (`perf`).
                row.iter_mut().for_each(|s| *s = exp(*s - top));
                let sum: f32 = row.iter().sum();
                row.iter_mut().for_each(|s| *s /= sum);
            }
            let mut out = vec![0.0; n * width];
            let into = MatMut::from_row_major_slice_mut(&mut out, n, width);
            let weights = MatRef::from_row_major_slice(&scores, n, n);
            let values = MatRef::from_row_major_slice(&v, n, width);
            matmul(into, Accum::Replace, weights, values, 1.0, Par::Seq);
            for (i, row) in out.chunks_exact(width).enumerate() {
                context[(start + i) * hidden + at..][..width].copy_from_slice(row);
            }
        }
        start += n;
    }
    Array2::from_shape_vec((rows, hidden), context).unwrap_or_default()
}

/// MPNet's bias by relative position added to a head's `n` by `n` scores: row `i` (a query)
/// takes the head's biases for keys from `-i` to `n - 1 - i` places after it.
fn add_relative(scores: &mut [f32], bias: &Array2<f32>, head: usize, n: usize) {
    let middle = bias.ncols().div_ceil(2) - 1;
    for (i, row) in scores.chunks_exact_mut(n).enumerate() {
        let offsets = block(bias.view(), head..head + 1, middle - i..middle - i + n);
        row.iter_mut().zip(offsets).for_each(|(s, b)| *s += b);
    }
}

/// The rows and columns of a view of a matrix (what `s![rows, cols]` is, without its macro).
fn block<S: RawData>(
    mut matrix: ArrayBase<S, Ix2>,
    rows: Range<usize>,
    cols: Range<usize>,
) -> ArrayBase<S, Ix2> {
    matrix.slice_axis_inplace(Axis(0), Slice::from(rows));
    matrix.slice_axis_inplace(Axis(1), Slice::from(cols));
    matrix
}

impl Dense {
    fn apply(&self, x: ArrayView2<f32>, shared: bool) -> Array2<f32> {
        let rows = x.nrows();
        let y = self.weight.times(&in_order(x), rows, shared);
        let mut y = Array2::from_shape_vec((rows, self.bias.len()), y).unwrap_or_default();
        y += &self.bias;
        y
    }
}

/// A matrix's values row by row: its own when they lie so, else a copy.
fn in_order(matrix: ArrayView2<f32>) -> Cow<[f32]> {
    match matrix.to_slice() {
        Some(values) => Cow::Borrowed(values),
        None => Cow::Owned(matrix.iter().copied().collect()),
    }
}

impl Norm {
    fn apply(&self, mut x: ArrayViewMut2<f32>) {
        for row in x.rows_mut() {
            self.normalize(row);
        }
    }

    /// One row, to mean 0 and variance 1, then scaled by the weights and moved by the bias.
    fn normalize(&self, mut row: ArrayViewMut1<f32>) {
        let n = row.len() as f32;
        let mean = row.sum() / n;
        let var = row.fold(0.0, |a, &v| a + (v - mean) * (v - mean)) / n;
        let inv = 1.0 / (var + self.eps).sqrt();
        row.zip_mut_with(&self.weight, |v, &w| *v = (*v - mean) * inv * w);
        row += &self.bias;
    }
}

#[cfg(test)]
mod tests {
    /// The buckets of `transformers`' `relative_position_bucket` (32 buckets, 128 places), worked
    /// by hand: keys before their query in the first half, after it in the second.
    #[test]
    fn relative_positions_fall_in_mpnets_buckets() {
        let cases = [
            (0, 0),
            (-1, 1),
            (-7, 7),
            (-8, 8),
            (-15, 9),
            (-16, 10),
            (-32, 12),
            (-64, 14),
            (-127, 15),
            (-500, 15),
            (1, 17),
            (7, 23),
            (8, 24),
            (16, 26),
            (127, 31),
        ];
        for (offset, bucket) in cases {
            assert_eq!(super::bucket(offset, 32), bucket, "offset {offset}");
        }
    }
}
