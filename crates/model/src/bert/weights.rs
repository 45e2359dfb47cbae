//! The tensors of a `model.safetensors`, read from the file one at a time: the whole file is
//! never in memory (all-mpnet-base-v2's is 420 MB), only its header and the tensor being
//! turned into the pass's form.

use std::cell::RefCell;
use std::io::{Read, Seek, SeekFrom};

use half::{bf16, f16};
use ndarray::{Array1, Array2};
use safetensors::Dtype;
use safetensors::tensor::Metadata;

use super::eight_bit::EightBit;
use super::{Dense, Norm};

/// What the weights are read from: a file, or bytes in memory.
pub(crate) trait Source: Read + Seek {}

impl<T: Read + Seek> Source for T {}

/// The longest header read (safetensors' own limit).
const MAX_HEADER: u64 = 100_000_000;
/// The bytes of word vectors read at a time.
const CHUNK: usize = 1 << 20;

/// The tensors of the file, read as 32-bit floats.
pub(super) struct Weights<'a> {
    file: RefCell<&'a mut dyn Source>,
    header: Metadata,
    /// Where the tensors' bytes start in the file.
    start: u64,
    prefix: &'static str,
    eps: f32,
}

impl<'a> Weights<'a> {
    /// The file's header, checked against the file's length; its tensors named with `prefix`
    /// before them when any is, else as they are.
    pub(super) fn open(
        file: &'a mut dyn Source,
        prefix: &'static str,
        eps: f32,
    ) -> Result<Self, String> {
        let io = |e: std::io::Error| e.to_string();
        let length = file.seek(SeekFrom::End(0)).map_err(io)?;
        file.rewind().map_err(io)?;
        let mut size = [0; 8];
        file.read_exact(&mut size).map_err(io)?;
        let size = u64::from_le_bytes(size);
        if size > MAX_HEADER || size > length - 8 {
            return Err(format!("a header of {size} bytes"));
        }
        let mut header = vec![0; size as usize];
        file.read_exact(&mut header).map_err(io)?;
        let header: Metadata = serde_json::from_slice(&header).map_err(|e| e.to_string())?;
        let end = header
            .offset_keys()
            .iter()
            .filter_map(|name| header.info(name))
            .map(|info| info.data_offsets.1 as u64)
            .max()
            .unwrap_or(0);
        let start = 8 + size;
        if start + end != length {
            return Err(format!(
                "{length} bytes, not the {} its header says",
                start + end
            ));
        }
        let prefix = if header.offset_keys().iter().any(|n| n.starts_with(prefix)) {
            prefix
        } else {
            ""
        };
        Ok(Self {
            file: RefCell::new(file),
            header,
            start,
            prefix,
            eps,
        })
    }

    /// The bytes of the tensor `name` and how they hold its values, when it has `shape` and is
    /// of floats, or of eight bits a value with a scale a row (the tensor `<name>.scale`, as
    /// [`crate::eight_bit_file()`] writes it); `rows` of its first dimension only, when given.
    fn raw(
        &self,
        name: &str,
        shape: &[usize],
        rows: Option<std::ops::Range<usize>>,
    ) -> Result<(Vec<u8>, Stored), String> {
        let full = format!("{}{name}", self.prefix);
        let info = self
            .header
            .info(&full)
            .ok_or_else(|| format!("no tensor {full}"))?;
        if info.shape != shape {
            return Err(format!("{full} is {:?}, not {shape:?}", info.shape));
        }
        let rows = rows.unwrap_or(0..shape.first().copied().unwrap_or(1));
        let stored = match info.dtype {
            dtype @ (Dtype::F32 | Dtype::F16 | Dtype::BF16) => Stored::Float(dtype),
            Dtype::I8 if shape.len() == 2 => {
                let scale = format!("{name}.scale");
                let (bytes, stored) = self.raw(&scale, &shape[..1], Some(rows.clone()))?;
                if !matches!(stored, Stored::Float(_)) {
                    return Err(format!("{full}.scale is not of floats"));
                }
                Stored::Eight {
                    scales: (0..rows.len()).map(|i| stored.value(&bytes, i)).collect(),
                    row: shape[1],
                }
            }
            other => return Err(format!("{full} is {other:?}, not floats")),
        };
        let (mut from, mut to) = info.data_offsets;
        let row = (to - from) / shape.first().copied().unwrap_or(1).max(1);
        (from, to) = (from + rows.start * row, from + rows.end * row);
        let mut bytes = vec![0; to - from];
        let mut file = self.file.borrow_mut();
        let io = |e: std::io::Error| format!("{full}: {e}");
        file.seek(SeekFrom::Start(self.start + from as u64))
            .map_err(io)?;
        file.read_exact(&mut bytes).map_err(io)?;
        Ok((bytes, stored))
    }

    /// A matrix of `shape`, as the file holds it.
    pub(super) fn matrix(
        &self,
        name: &str,
        (rows, cols): (usize, usize),
    ) -> Result<Array2<f32>, String> {
        let (bytes, stored) = self.raw(name, &[rows, cols], None)?;
        Ok(Array2::from_shape_fn((rows, cols), |(r, c)| {
            stored.value(&bytes, r * cols + c)
        }))
    }

    pub(super) fn vector(&self, name: &str, len: usize) -> Result<Array1<f32>, String> {
        let (bytes, stored) = self.raw(name, &[len], None)?;
        Ok(Array1::from_shape_fn(len, |i| stored.value(&bytes, i)))
    }

    /// The word vectors, (vocabulary, hidden), at half precision, read a megabyte at a time.
    pub(super) fn words(&self, (rows, cols): (usize, usize)) -> Result<Array2<f16>, String> {
        let name = "embeddings.word_embeddings.weight";
        let chunk = (CHUNK / (4 * cols)).max(1);
        let mut words = Vec::with_capacity(rows * cols);
        for first in (0..rows).step_by(chunk) {
            let last = (first + chunk).min(rows);
            let (bytes, stored) = self.raw(name, &[rows, cols], Some(first..last))?;
            words
                .extend((0..(last - first) * cols).map(|i| f16::from_f32(stored.value(&bytes, i))));
        }
        Array2::from_shape_vec((rows, cols), words).map_err(|e| e.to_string())
    }

    /// The dense layers `names`, each from `inputs` to `out`, side by side: one matrix of
    /// (inputs, names × out), built turned (the file holds each as (out, inputs)).
    pub(super) fn dense(
        &self,
        names: &[String],
        inputs: usize,
        out: usize,
    ) -> Result<Dense, String> {
        let parts = names
            .iter()
            .map(|name| self.raw(&format!("{name}.weight"), &[out, inputs], None))
            .collect::<Result<Vec<_>, _>>()?;
        // The file's rows are the matrix's columns: output `j`'s weights lie side by side.
        let weight = EightBit::new(inputs, out * parts.len(), |j, into| {
            let (bytes, stored) = &parts[j / out];
            let at = (j % out) * inputs;
            for (i, w) in into.iter_mut().enumerate() {
                *w = stored.value(bytes, at + i);
            }
        });
        let biases = names
            .iter()
            .map(|name| self.vector(&format!("{name}.bias"), out))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Dense {
            weight,
            bias: biases.iter().flatten().copied().collect(),
        })
    }

    pub(super) fn norm(&self, name: &str, len: usize) -> Result<Norm, String> {
        Ok(Norm {
            weight: self.vector(&format!("{name}.weight"), len)?,
            bias: self.vector(&format!("{name}.bias"), len)?,
            eps: self.eps,
        })
    }
}

/// How a tensor's bytes hold its values: floats (32, 16 or bfloat16 bits, little-endian), or
/// eight bits a value, each row (of `row` values) with its scale.
enum Stored {
    Float(Dtype),
    Eight { scales: Vec<f32>, row: usize },
}

impl Stored {
    /// The `index`th value of `bytes`.
    fn value(&self, bytes: &[u8], index: usize) -> f32 {
        match self {
            Self::Float(Dtype::F16) => {
                f16::from_le_bytes([bytes[2 * index], bytes[2 * index + 1]]).to_f32()
            }
            Self::Float(Dtype::BF16) => {
                bf16::from_le_bytes([bytes[2 * index], bytes[2 * index + 1]]).to_f32()
            }
            Self::Float(_) => {
                let at = 4 * index;
                f32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
            }
            Self::Eight { scales, row } => {
                f32::from(i8::from_le_bytes([bytes[index]])) * scales[index / (*row).max(1)]
            }
        }
    }
}
