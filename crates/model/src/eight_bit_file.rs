//! A model's weights at eight bits a value, for the packages that carry the model: each matrix
//! the pass multiplies by or looks words up in (a dense layer's weight, the word vectors) as
//! signed bytes with one scale a row (its largest magnitude over 127, the tensor
//! `<name>.scale`), everything else as it was. A dense layer reads back exactly as the pass
//! holds it from a file of floats (it keeps the same eight bits, row by row); the word vectors,
//! which it holds at sixteen bits, lose the rest. all-MiniLM-L6-v2: 87 MB become 23 MB.

use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};

use moniker_surface::search::ModelError;

/// Matrices kept as they are: small, and added rather than multiplied by.
const KEPT: [&str; 3] = [
    "position_embeddings",
    "token_type_embeddings",
    "relative_attention_bias",
];

/// `weights` (a `model.safetensors`) with its matrices at eight bits a value.
///
/// # Errors
/// When `weights` is not a safetensors file.
pub fn eight_bit_file(weights: &[u8]) -> Result<Vec<u8>, ModelError> {
    let bad =
        |e: safetensors::SafeTensorError| ModelError::Encoder(format!("model.safetensors: {e}"));
    let tensors = SafeTensors::deserialize(weights).map_err(bad)?;
    let mut out: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    let mut names = tensors.names();
    names.sort();
    for name in names {
        let tensor = tensors.tensor(name).map_err(bad)?;
        let shape = tensor.shape().to_vec();
        let floats = matches!(tensor.dtype(), Dtype::F32 | Dtype::F16 | Dtype::BF16);
        let eight = floats
            && shape.len() == 2
            && name.ends_with(".weight")
            && !KEPT.iter().any(|k| name.contains(k));
        if !eight {
            out.push((
                name.to_owned(),
                tensor.dtype(),
                shape,
                tensor.data().to_vec(),
            ));
            continue;
        }
        let values = floats_of(&tensor);
        let (rows, cols) = (shape[0], shape[1]);
        let mut bytes = Vec::with_capacity(rows * cols);
        let mut scales = Vec::with_capacity(rows * 4);
        for row in values.chunks_exact(cols.max(1)) {
            let top = row.iter().fold(0.0_f32, |m, w| m.max(w.abs()));
            let scale = top / 127.0;
            // |w| <= top, so `w / scale` is within 127 (a NaN weight becomes 0).
            bytes.extend(row.iter().map(|w| {
                let q = if scale > 0.0 {
                    (w / scale).round() as i8
                } else {
                    0
                };
                q.to_le_bytes()[0]
            }));
            scales.extend(scale.to_le_bytes());
        }
        out.push((name.to_owned(), Dtype::I8, shape, bytes));
        out.push((format!("{name}.scale"), Dtype::F32, vec![rows], scales));
    }
    let views = out
        .iter()
        .map(|(name, dtype, shape, data)| {
            TensorView::new(*dtype, shape.clone(), data).map(|view| (name.clone(), view))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    safetensors::serialize(views, None).map_err(bad)
}

/// A tensor's values as 32-bit floats.
fn floats_of(tensor: &TensorView<'_>) -> Vec<f32> {
    let data = tensor.data();
    match tensor.dtype() {
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Dtype::BF16 => data
            .chunks_exact(2)
            .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        _ => data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    }
}
