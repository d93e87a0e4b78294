//! What the LSTM's and the GRU's column-schedule tests share: the shapes, the ways of
//! running the shares, and a layer's random inputs.

use tensorfit_testing::{Rng, TestRng};

use crate::kernels::gemm_fast::KC;

/// Steps of every case.
pub(crate) const STEPS: usize = 23;

/// (B, H, I or vocabulary, tokens, padded): one row and a few, H a multiple of the
/// vector width and not (250, 37), over two blocks of KC (KC + 44).
pub(crate) const SHAPES: [(usize, usize, usize, bool, bool); 6] = [
    (1, 250, 152, false, false),
    (1, 64, 7, false, false),
    (3, 37, 5, false, true),
    (4, KC + 44, 20, false, false),
    (2, 250, 11, true, false),
    (5, 48, 9, true, true),
];

/// Shares, and whether they run in turn on one thread (else at once).
pub(crate) const BY: [(usize, bool); 4] = [(2, false), (3, false), (2, true), (4, true)];

/// A layer's random inputs for `gates` gate blocks per unit.
pub(crate) struct Inputs {
    /// `[T, B, I]` features or `[T, B]` token ids.
    pub x: Vec<f32>,
    /// The first row whole, the others of 0 to T steps.
    pub lengths: Vec<f32>,
    pub h0: Vec<f32>,
    pub w_ih: Vec<f32>,
    /// Scaled by 0.2, so that the state stays away from saturation.
    pub w_hh: Vec<f32>,
    pub b_ih: Vec<f32>,
    pub b_hh: Vec<f32>,
}

pub(crate) fn inputs(
    rng: &mut Rng,
    gates: usize,
    (batch, hidden, input, tokens): (usize, usize, usize, bool),
) -> Inputs {
    let rows = STEPS * batch;
    let x = match tokens {
        true => (0..rows).map(|_| rng.range(0, input - 1) as f32).collect(),
        false => rng.signed_vec(rows * input),
    };
    let lengths = (0..batch)
        .map(|b| match b {
            0 => STEPS as f32,
            _ => rng.range(0, STEPS) as f32,
        })
        .collect();
    let g = gates * hidden;
    Inputs {
        x,
        lengths,
        h0: rng.signed_vec(batch * hidden),
        w_ih: rng.signed_vec(g * input),
        w_hh: rng.signed_vec(g * hidden).iter().map(|v| v * 0.2).collect(),
        b_ih: rng.signed_vec(g),
        b_hh: rng.signed_vec(g),
    }
}

/// Whether `a` and `b` hold the same bits.
pub(crate) fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.to_bits() == b.to_bits())
}
