//! A dense layer's matrix at eight bits a weight: a quarter of the memory of 32-bit floats.
//! A query takes as long as with floats (its pass reads every weight once; turning a panel
//! back costs about what the smaller reads save). Each column (the weights of one output) has
//! its own scale, its largest magnitude over 127, so `w = q * scale` within half a step.
//! The columns lie in panels of [`PANEL`], each panel row by row: a panel turned back into
//! floats is one small block that stays in a core's cache while faer multiplies by it.

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;

/// The columns of a panel: 64 columns of 3,072 inputs (MPNet's widest) are 768 KB as floats.
const PANEL: usize = 64;

/// The fewest multiplications a product shares among cores: below it, waking a second
/// thread costs more than it saves (measured on all-MiniLM-L6-v2's 384 by 384 matrices).
const SHARED_PRODUCT: usize = 4 << 20;

/// A matrix of (inputs, out) at eight bits a weight.
pub(super) struct EightBit {
    inputs: usize,
    out: usize,
    /// Panel after panel, each `inputs` rows of its columns.
    values: Vec<i8>,
    /// Each column's scale.
    scales: Vec<f32>,
}

impl EightBit {
    /// The matrix whose column `j` (output `j`'s `inputs` weights) `column(j, into)` writes.
    pub(super) fn new(
        inputs: usize,
        out: usize,
        mut column: impl FnMut(usize, &mut [f32]),
    ) -> Self {
        let mut values = vec![0; inputs * out];
        let mut scales = vec![0.0; out];
        let mut weights = vec![0.0; inputs];
        for (j, scale) in scales.iter_mut().enumerate() {
            column(j, &mut weights);
            let top = weights.iter().fold(0.0_f32, |m, w| m.max(w.abs()));
            *scale = top / 127.0;
            let (start, width) = panel(j / PANEL, out);
            let at = start * inputs + j - start;
            for (k, w) in weights.iter().enumerate() {
                // |w| <= top, so `w / scale` is within 127 (a NaN weight becomes 0).
                values[at + k * width] = if *scale > 0.0 {
                    (w / *scale).round() as i8
                } else {
                    0
                };
            }
        }
        Self {
            inputs,
            out,
            values,
            scales,
        }
    }

    /// `x` (`rows` by `inputs`, row by row) times the matrix: (`rows`, `out`), row by row. Its
    /// panels are shared among the process's cores when `shared` and the product is large.
    pub(super) fn times(&self, x: &[f32], rows: usize, shared: bool) -> Vec<f32> {
        let panels = self.out.div_ceil(PANEL);
        let one = |p: usize| self.panel_times(x, rows, p);
        let blocks: Vec<Vec<f32>> = if shared && rows * self.inputs * self.out >= SHARED_PRODUCT {
            (0..panels).into_par_iter().map(one).collect()
        } else {
            (0..panels).map(one).collect()
        };
        let mut y = vec![0.0; rows * self.out];
        for (p, block) in blocks.iter().enumerate() {
            let (start, width) = panel(p, self.out);
            for (row, values) in y.chunks_exact_mut(self.out).zip(block.chunks_exact(width)) {
                row[start..start + width].copy_from_slice(values);
            }
        }
        y
    }

    /// `x` times panel `p`, turned back into floats (in this thread's buffer, written over
    /// and never cleared first): (`rows`, the panel's width).
    fn panel_times(&self, x: &[f32], rows: usize, p: usize) -> Vec<f32> {
        thread_local! {
            static FLOATS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let (start, width) = panel(p, self.out);
        let scales = &self.scales[start..start + width];
        let values = &self.values[start * self.inputs..][..self.inputs * width];
        let mut out = vec![0.0; rows * width];
        FLOATS.with_borrow_mut(|floats| {
            floats.resize(values.len(), 0.0);
            for (row, values) in floats
                .chunks_exact_mut(width)
                .zip(values.chunks_exact(width))
            {
                for ((w, &q), &scale) in row.iter_mut().zip(values).zip(scales) {
                    *w = f32::from(q) * scale;
                }
            }
            matmul(
                MatMut::from_row_major_slice_mut(&mut out, rows, width),
                Accum::Replace,
                MatRef::from_row_major_slice(x, rows, self.inputs),
                MatRef::from_row_major_slice(&floats[..], self.inputs, width),
                1.0,
                Par::Seq,
            );
        });
        out
    }
}

/// Panel `p`'s first column and width, of a matrix of `out` columns.
fn panel(p: usize, out: usize) -> (usize, usize) {
    let start = p * PANEL;
    (start, PANEL.min(out - start))
}

#[cfg(test)]
mod tests {
    use super::{EightBit, PANEL};

    /// The product by eight-bit weights is the product by the floats they stand for, within
    /// half a step of each column's scale per weight; panels (a last one narrower) and
    /// shared cores give the same values.
    #[test]
    fn the_product_is_the_floats_product_within_half_a_step() {
        let (inputs, out, rows) = (300, 2 * PANEL + 7, 40);
        let weight = |k: usize, j: usize| ((k * 31 + j * 17) % 97) as f32 / 97.0 - 0.5;
        let matrix = EightBit::new(inputs, out, |j, into| {
            for (k, w) in into.iter_mut().enumerate() {
                *w = weight(k, j) * (1.0 + j as f32);
            }
        });
        let x: Vec<f32> = (0..rows * inputs)
            .map(|i| ((i * 13) % 29) as f32 / 29.0 - 0.5)
            .collect();
        let alone = matrix.times(&x, rows, false);
        assert_eq!(alone, matrix.times(&x, rows, true));
        for r in 0..rows {
            for j in 0..out {
                let exact: f32 = (0..inputs)
                    .map(|k| x[r * inputs + k] * weight(k, j) * (1.0 + j as f32))
                    .sum();
                let step = (1.0 + j as f32) * 0.5 / 127.0;
                let bound: f32 = (0..inputs).map(|k| x[r * inputs + k].abs() * step).sum();
                let got = alone[r * out + j];
                assert!(
                    (got - exact).abs() <= bound * 0.5 + 1e-4,
                    "{r},{j}: {got} {exact}"
                );
            }
        }
    }

    /// A column of zeros has no scale to divide by: it stays zeros.
    #[test]
    fn a_column_of_zeros_gives_zeros() {
        let matrix = EightBit::new(3, 2, |j, into| into.fill(j as f32));
        let y = matrix.times(&[1.0, 2.0, 3.0], 1, false);
        assert_eq!(y[0], 0.0);
        assert!((y[1] - 6.0).abs() < 1e-5, "{y:?}");
    }
}
