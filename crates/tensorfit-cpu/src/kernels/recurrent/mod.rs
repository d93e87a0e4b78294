//! What every recurrent cell's kernels share (the LSTM's and the GRU's, reference and
//! fast path): the checks of `x` and `lengths`, the reference's time loop
//! ([`forward_steps`]: the input projection of a run of steps, one GEMM over features or
//! on token input the gather of `w_ih`'s columns; per step the recurrent GEMM and the
//! cell's fused pass, the only part a cell writes), and the weight gradients
//! the backward forms after its time loop, one GEMM each over all `T·B` rows (on the fast
//! path with lengths, over the rows inside their sequences: [`SumOver`]): a cell hands
//! in the gradients at its input projections (`d_ih`) and at its recurrent projections
//! (`d_hh`; the same tensor for the LSTM) and forms its bias gradients itself.
//!
//! On token input (`x` `[T, B]` ids, `w_ih` `[G·H, V]`) the projection and `dw_ih` are
//! `gather.rs`'s gather and scatter-add over `w_ih`'s columns: the same sums as the
//! one-hot GEMMs, without the zeros.

use tensorfit_core::seq_lengths;
use tensorfit_core::tokens::check_ids;
use tensorfit_core::{RecurrentDims, Result};

use super::gather::{gather, scatter_add};
use super::gemm::{gemm, mat, mat_mut};
use super::gemm_fast::{MatRef, Token};
use crate::backend_error;

/// On token input, every id of `x` must name a column of `w_ih`; every sequence length,
/// if given, must be a whole number of steps in `0..=T` (see `tensorfit_core::tokens`,
/// `tensorfit_core::seq_lengths`).
pub(crate) fn check_inputs(
    d: &impl RecurrentDims,
    x: &[f32],
    lengths: Option<&[f32]>,
) -> Result<()> {
    let (steps, batch, _) = d.sizes();
    if let (vocab, true) = d.input() {
        check_ids("x", x, vocab, batch)?;
    }
    match lengths {
        Some(l) => seq_lengths::check_lengths("lengths", l, steps),
        None => Ok(()),
    }
}

/// `gates = x · w_ihᵀ` over the `rows` rows of `x` (`rows·I` features, or `rows` ids whose
/// projection is the gather of `w_ih`'s columns), without biases.
pub(crate) fn input_projection(
    d: &impl RecurrentDims,
    rows: usize,
    (x, w_ih): (&[f32], &[f32]),
    gates: &mut [f32],
) -> Result<()> {
    let ((input, tokens), width) = (d.input(), d.gate_width());
    if tokens {
        return gather(w_ih, d.token_table(), ("x", x, d.sizes().1), gates);
    }
    let w_ih = mat(w_ih, width, input)?;
    let x = mat(x, rows, input)?;
    gemm(1.0, x, w_ih.t(), 0.0, &mut mat_mut(gates, rows, width)?)
}

/// When nothing flows through the layer (no steps, or no units): zero weight gradients
/// `grads` and input gradient `dx`.
pub(crate) fn zero_gradients<const N: usize>(grads: [&mut [f32]; N], dx: Option<&mut [f32]>) {
    for g in grads.into_iter().chain(dx) {
        g.fill(0.0);
    }
}

/// What a recurrent forward's reference time loop reads besides the cell's own tensors:
/// `x`, `w_ih`, `w_hh`, `h0`, the bias added to every row of the input projections (the
/// LSTM's `b_ih + b_hh`, the GRU's `b_ih`), and how many steps of projections it holds
/// (step `t` in slot `t % held`, the inputs projected that many steps at a time).
pub(crate) struct ForwardLoop<'a> {
    pub x: &'a [f32],
    pub w_ih: &'a [f32],
    pub w_hh: &'a [f32],
    pub h0: &'a [f32],
    pub input_bias: &'a [f32],
    pub held: usize,
}

/// Where each step's recurrent projection `h_{t-1} · w_hhᵀ` goes.
pub(crate) enum RecurrentInto<'a> {
    /// Added to the step's input projections (the LSTM's gates).
    AddedToGates,
    /// Written, plus the bias, to a tensor of `held` steps of its own (the GRU's `hidden`
    /// with `b_hh`).
    Own(&'a mut [f32], &'a [f32]),
}

/// One step as the cell's fused pass gets it: its `gates` `[B, G·H]` (the input
/// projections, plus the recurrent one for [`RecurrentInto::AddedToGates`]), its recurrent
/// projections (for [`RecurrentInto::Own`]; empty otherwise), `h_prev` (h_{t-1}) and `h`
/// (h_t, to write).
pub(crate) struct Step<'a> {
    pub t: usize,
    pub gates: &'a mut [f32],
    pub recurrent: &'a mut [f32],
    pub h_prev: &'a [f32],
    pub h: &'a mut [f32],
}

/// The reference forward's time loop, over `gates` (`held` steps) and `y` `[T, B, H]`: per
/// run of `held` steps the input projection with its bias, per step the recurrent GEMM,
/// then `fused`, the cell's fused pass.
pub(crate) fn forward_steps(
    d: &impl RecurrentDims,
    f: &ForwardLoop<'_>,
    (gates, mut recurrent, y): (&mut [f32], RecurrentInto<'_>, &mut [f32]),
    mut fused: impl FnMut(Step<'_>),
) -> Result<()> {
    let (steps, batch, hidden) = d.sizes();
    let (width, x_row) = (d.gate_width(), d.x_row());
    let (step_h, step_g) = (d.step_state(), d.step_gates());
    let w_hh = mat(f.w_hh, width, hidden)?;
    for t in 0..steps {
        let slot = t % f.held;
        let at = slot * step_g..(slot + 1) * step_g;
        if slot == 0 {
            // The input projection of the run's steps, with its bias.
            let rows = f.held.min(steps - t) * batch;
            let x = &f.x[t * batch * x_row..][..rows * x_row];
            let g = &mut gates[..rows * width];
            input_projection(d, rows, (x, f.w_ih), g)?;
            add_rows(g, f.input_bias);
        }
        // The recurrence: per step one GEMM and one fused pass.
        let (y_before, y_from_t) = y.split_at_mut(t * step_h);
        let h_prev = match t {
            0 => f.h0,
            _ => &y_before[(t - 1) * step_h..],
        };
        let h_prev_m = mat(h_prev, batch, hidden)?;
        let gates_t = &mut gates[at.clone()];
        let own = match &mut recurrent {
            RecurrentInto::AddedToGates => {
                // gates[t] += h_{t-1} · w_hhᵀ
                gemm(
                    1.0,
                    h_prev_m,
                    w_hh.t(),
                    1.0,
                    &mut mat_mut(gates_t, batch, width)?,
                )?;
                &mut []
            }
            RecurrentInto::Own(own, bias) => {
                // own[t] = h_{t-1} · w_hhᵀ + bias
                let own_t = &mut own[at];
                gemm(
                    1.0,
                    h_prev_m,
                    w_hh.t(),
                    0.0,
                    &mut mat_mut(own_t, batch, width)?,
                )?;
                add_rows(own_t, bias);
                own_t
            }
        };
        fused(Step {
            t,
            gates: gates_t,
            recurrent: own,
            h_prev,
            h: &mut y_from_t[..step_h],
        });
    }
    Ok(())
}

/// Adds `bias` `[W]` to every row of `rows` `[·, W]`.
fn add_rows(rows: &mut [f32], bias: &[f32]) {
    for row in rows.chunks_exact_mut(bias.len().max(1)) {
        for (v, b) in row.iter_mut().zip(bias) {
            *v += b;
        }
    }
}

/// How the weight gradients are summed: over every row of `[T, B]`, or on the fast path
/// of a token over the rows inside their sequences only (`lengths`; the gradients of the
/// padded rows are zeros, see `fast::gemm_tn_kept`).
#[derive(Clone, Copy)]
pub(crate) enum SumOver<'a> {
    AllRows,
    RealSteps(Token, &'a [f32]),
}

impl<'a> SumOver<'a> {
    /// The real steps on `token`'s fast path when there are lengths, else all rows.
    pub(crate) fn new(token: Option<Token>, lengths: Option<&'a [f32]>) -> Self {
        match (token, lengths) {
            (Some(token), Some(lengths)) => SumOver::RealSteps(token, lengths),
            _ => SumOver::AllRows,
        }
    }
}

/// A row-major matrix's elements and its number of columns.
type Columns<'a> = (&'a [f32], usize);

/// `c = aᵀ · b` (`a` `[K, M]`, `b` `[K, N]`, `c` `[M, N]`, all row-major), summed as `sum`
/// says: row `k` of the product is step `first_step + k / B`, batch row `k % B`.
fn gemm_tn(
    sum: SumOver<'_>,
    ((a, m), (b, n)): (Columns<'_>, Columns<'_>),
    (first_step, batch): (usize, usize),
    beta: f32,
    c: &mut [f32],
) -> Result<()> {
    let k = a.len() / m.max(1);
    let (a_m, b_m) = (mat(a, k, m)?, mat(b, k, n)?);
    match sum {
        SumOver::AllRows => gemm(1.0, a_m.t(), b_m, beta, &mut mat_mut(c, m, n)?),
        SumOver::RealSteps(token, lengths) => {
            if lengths.len() != batch {
                return Err(backend_error(
                    "recurrent: lengths are not one per batch row",
                ));
            }
            let kept =
                |r: usize| !seq_lengths::past_end(first_step + r / batch, lengths[r % batch]);
            if c.len() != m * n {
                return Err(backend_error(
                    "recurrent: weight gradient of the wrong size",
                ));
            }
            // Summing over the kept rows only pays where the whole product wastes most:
            // `b` narrower than one panel of the micro-kernel (the input weights' few
            // features), with rows to drop. Otherwise its transposes and gathers cost
            // more than the dropped rows do (a 1024-wide layer trained 40% slower).
            if n >= crate::kernels::gemm_fast::NR || (0..k).all(kept) {
                return gemm(1.0, a_m.t(), b_m, beta, &mut mat_mut(c, m, n)?);
            }
            let operands = (MatRef::row_major(a, k, m), MatRef::row_major(b, k, n));
            fast::gemm_tn_kept(token, operands, kept, beta, c);
            Ok(())
        }
    }
}

/// `dw_hh = Σ_t d_hh[t]ᵀ · h_{t-1}` over `d_hh` `[T, B, G·H]`: step 0 against `h0`, steps
/// 1.. against `y[0..T-1]`.
pub(crate) fn hidden_weight_gradient(
    d: &impl RecurrentDims,
    sum: SumOver<'_>,
    d_hh: &[f32],
    (h0, y): (&[f32], &[f32]),
    dw_hh: &mut [f32],
) -> Result<()> {
    let (steps, batch, hidden) = d.sizes();
    let width = d.gate_width();
    let d_0 = &d_hh[..d.step_gates()];
    gemm_tn(sum, ((d_0, width), (h0, hidden)), (0, batch), 0.0, dw_hh)?;
    if steps > 1 {
        let later = (steps - 1) * batch;
        let d_rest = &d_hh[d.step_gates()..];
        let h_prev = &y[..later * hidden];
        gemm_tn(
            sum,
            ((d_rest, width), (h_prev, hidden)),
            (1, batch),
            1.0,
            dw_hh,
        )?;
    }
    Ok(())
}

/// `dw_ih = d_ihᵀ · x` and, if wanted, `dx = d_ih · w_ih`; on token input `dw_ih` is the
/// scatter-add of `d_ih` into the columns of the ids (and there is no `dx`).
pub(crate) fn input_gradients(
    d: &impl RecurrentDims,
    sum: SumOver<'_>,
    (d_ih, x, w_ih): (&[f32], &[f32], &[f32]),
    (dw_ih, dx): (&mut [f32], Option<&mut [f32]>),
) -> Result<()> {
    let (rows, width, (input, tokens)) = (d.rows(), d.gate_width(), d.input());
    if tokens {
        return scatter_add(d.token_table(), ("x", x, d.sizes().1), d_ih, dw_ih);
    }
    let batch = d.sizes().1;
    gemm_tn(sum, ((d_ih, width), (x, input)), (0, batch), 0.0, dw_ih)?;
    let d_ih = mat(d_ih, rows, width)?;
    if let Some(dx) = dx {
        let w_ih = mat(w_ih, width, input)?;
        gemm(1.0, d_ih, w_ih, 0.0, &mut mat_mut(dx, rows, input)?)?;
    }
    Ok(())
}

pub(crate) mod columns;
pub(crate) mod fast;
