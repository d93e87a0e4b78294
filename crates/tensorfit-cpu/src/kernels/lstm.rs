//! The LSTM kernels, `lstm_forward` and `lstm_backward`: a whole layer over a whole
//! sequence per call, organised the way cuDNN organises it.
//!
//! This file is the reference every GPU LSTM kernel is tested against, so it keeps
//! cuDNN's structure visible, because that structure is where the speed comes from:
//! - **forward**: the input projection of *all* steps is one GEMM,
//!   `gates[T·B, 4H] = x[T·B, I] · w_ihᵀ`, plus both biases; then per step `t`, one GEMM
//!   accumulates the recurrent term, `gates[t] += h_{t-1} · w_hhᵀ`, and one fused pass
//!   over `[B, 4H]` applies the nonlinearities in place (storing the *activated* gates
//!   σ(i), σ(f), tanh(g), σ(o)) and updates the cell and hidden state.
//! - **backward**: per step, from `t = T-1` down to 0, one fused pass turns the
//!   gradient arriving at `h_t` and `c_t` into the pre-activation gate gradients
//!   `dgates[t]`, and one GEMM carries the gradient to `h_{t-1}`:
//!   `dh = dgates[t] · w_hh`. The weight gradients do not depend on the order of the
//!   steps, so they are formed after the loop with one GEMM each over all `T·B` rows.
//!
//! Gate order is PyTorch's (i, f, g, o): row `r` of `gates[t]` holds `[i | f | g | o]`,
//! each block `H` wide. Nothing is allocated inside the time loops (the forward keeps
//! one `4H` vector, the summed biases, per call).

use rayon::prelude::*;
use tensorfit_core::{sigmoid, LstmDims, Result};

use super::gemm::{gemm, mat, mat_mut};
use super::{check_len, PARALLEL_MIN_ELEMENTS};

/// The inputs of [`lstm_forward`], in the order of `Op::LstmForward`: `x` `[T, B, I]`,
/// `h0`, `c0` `[B, H]`, `w_ih` `[4H, I]`, `w_hh` `[4H, H]`, `b_ih`, `b_hh` `[4H]`.
#[derive(Debug, Clone, Copy)]
pub struct LstmForwardInputs<'a> {
    pub x: &'a [f32],
    pub h0: &'a [f32],
    pub c0: &'a [f32],
    pub w_ih: &'a [f32],
    pub w_hh: &'a [f32],
    pub b_ih: &'a [f32],
    pub b_hh: &'a [f32],
}

/// The outputs of [`lstm_forward`]: `y` `[T, B, H]`, `h_n`, `c_n` `[B, H]`, `gates`
/// `[T, B, 4H]` (activated), and `cells` `[T, B, H]` when kept for backward.
#[derive(Debug)]
pub struct LstmForwardOutputs<'a> {
    pub y: &'a mut [f32],
    pub h_n: &'a mut [f32],
    pub c_n: &'a mut [f32],
    pub gates: &'a mut [f32],
    pub cells: Option<&'a mut [f32]>,
}

/// The inputs of [`lstm_backward`], in the order of `Op::LstmBackward`: the forward's
/// `x`, `h0`, `c0`, `w_ih`, `w_hh`, its outputs `y`, `gates`, `cells`, and the gradients
/// arriving at `y`, `h_n` and `c_n`.
#[derive(Debug, Clone, Copy)]
pub struct LstmBackwardInputs<'a> {
    pub x: &'a [f32],
    pub h0: &'a [f32],
    pub c0: &'a [f32],
    pub w_ih: &'a [f32],
    pub w_hh: &'a [f32],
    pub y: &'a [f32],
    pub gates: &'a [f32],
    pub cells: &'a [f32],
    pub dy: &'a [f32],
    pub dh_n: &'a [f32],
    pub dc_n: &'a [f32],
}

/// The outputs of [`lstm_backward`]: `dgates` `[T, B, 4H]` (pre-activation), `dh0`,
/// `dc0` `[B, H]`, `dw_ih` `[4H, I]`, `dw_hh` `[4H, H]`, `db` `[4H]`, and `dx`
/// `[T, B, I]` when the input gradient is wanted.
#[derive(Debug)]
pub struct LstmBackwardOutputs<'a> {
    pub dgates: &'a mut [f32],
    pub dh0: &'a mut [f32],
    pub dc0: &'a mut [f32],
    pub dw_ih: &'a mut [f32],
    pub dw_hh: &'a mut [f32],
    pub db: &'a mut [f32],
    pub dx: Option<&'a mut [f32]>,
}

/// Runs an LSTM layer over a sequence (see the module documentation for the structure).
pub fn lstm_forward(
    d: LstmDims,
    inp: &LstmForwardInputs<'_>,
    out: LstmForwardOutputs<'_>,
) -> Result<()> {
    const K: &str = "lstm_forward";
    let LstmDims {
        steps,
        batch,
        input,
        hidden,
    } = d;
    let LstmForwardOutputs {
        y,
        h_n,
        c_n,
        gates,
        mut cells,
    } = out;
    // Rows of all steps together, elements of one step's state and one step's gates.
    let rows = steps * batch;
    let step_h = batch * hidden;
    let step_g = batch * 4 * hidden;
    for (what, slice, want) in [
        ("x", inp.x, rows * input),
        ("h0", inp.h0, step_h),
        ("c0", inp.c0, step_h),
        ("w_ih", inp.w_ih, 4 * hidden * input),
        ("w_hh", inp.w_hh, 4 * hidden * hidden),
        ("b_ih", inp.b_ih, 4 * hidden),
        ("b_hh", inp.b_hh, 4 * hidden),
    ] {
        check_len(K, what, slice, want)?;
    }
    check_len(K, "y", y, rows * hidden)?;
    check_len(K, "h_n", h_n, step_h)?;
    check_len(K, "c_n", c_n, step_h)?;
    check_len(K, "gates", gates, rows * 4 * hidden)?;
    if let Some(cells) = cells.as_deref() {
        check_len(K, "cells", cells, rows * hidden)?;
    }

    // c_n is the running cell state when the cells are not kept: on entry to step t it
    // holds c_{t-1}.
    h_n.copy_from_slice(inp.h0);
    c_n.copy_from_slice(inp.c0);
    if steps == 0 || step_h == 0 {
        return Ok(());
    }

    // 1. The input projection of every step at once, then both biases on every row.
    let w_ih_t = mat(inp.w_ih, 4 * hidden, input)?.reversed_axes();
    gemm(
        1.0,
        mat(inp.x, rows, input)?,
        w_ih_t,
        0.0,
        &mut mat_mut(gates, rows, 4 * hidden)?,
    )?;
    let bias: Vec<f32> = inp.b_ih.iter().zip(inp.b_hh).map(|(a, b)| a + b).collect();
    for row in gates.chunks_exact_mut(4 * hidden) {
        for (g, b) in row.iter_mut().zip(&bias) {
            *g += b;
        }
    }

    // 2. The recurrence: one GEMM and one fused pass per step.
    for t in 0..steps {
        let (y_before, y_from_t) = y.split_at_mut(t * step_h);
        let h_prev: &[f32] = if t == 0 {
            inp.h0
        } else {
            &y_before[(t - 1) * step_h..]
        };
        let h_t = &mut y_from_t[..step_h];
        let gates_t = &mut gates[t * step_g..(t + 1) * step_g];

        // gates[t] += h_{t-1} · w_hhᵀ
        let w_hh_t = mat(inp.w_hh, 4 * hidden, hidden)?.reversed_axes();
        gemm(
            1.0,
            mat(h_prev, batch, hidden)?,
            w_hh_t,
            1.0,
            &mut mat_mut(gates_t, batch, 4 * hidden)?,
        )?;

        // The cell state slice holds c_{t-1} on entry to the fused pass and c_t after it.
        let c_t: &mut [f32] = match cells.as_deref_mut() {
            Some(cells) => {
                let (c_before, c_from_t) = cells.split_at_mut(t * step_h);
                let c_t = &mut c_from_t[..step_h];
                c_t.copy_from_slice(if t == 0 {
                    inp.c0
                } else {
                    &c_before[(t - 1) * step_h..]
                });
                c_t
            }
            None => &mut *c_n,
        };
        cell_forward(gates_t, c_t, h_t, hidden);
    }

    // 3. The final state.
    let last = (steps - 1) * step_h..steps * step_h;
    h_n.copy_from_slice(&y[last.clone()]);
    if let Some(cells) = cells {
        c_n.copy_from_slice(&cells[last]);
    }
    Ok(())
}

/// One step's fused pass over `gates_t` `[B, 4H]` (pre-activations on entry, activated
/// gates on exit), `c` `[B, H]` (c_{t-1} on entry, c_t on exit) and `h` `[B, H]` (h_t).
/// Batch rows are independent, so a wide step is split across threads by rows.
fn cell_forward(gates_t: &mut [f32], c: &mut [f32], h: &mut [f32], hidden: usize) {
    let row =
        |(g, (c, h)): (&mut [f32], (&mut [f32], &mut [f32]))| cell_forward_row(g, c, h, hidden);
    if gates_t.len() >= PARALLEL_MIN_ELEMENTS {
        let states = c.par_chunks_mut(hidden).zip(h.par_chunks_mut(hidden));
        gates_t.par_chunks_mut(4 * hidden).zip(states).for_each(row);
    } else {
        let states = c.chunks_mut(hidden).zip(h.chunks_mut(hidden));
        gates_t.chunks_mut(4 * hidden).zip(states).for_each(row);
    }
}

/// One batch row of [`cell_forward`]:
/// `c = σ(f)·c + σ(i)·tanh(g)`, `h = σ(o)·tanh(c)`.
// why: the gate formulas read best indexed by the unit `j`, as in every LSTM paper.
#[allow(clippy::needless_range_loop)]
fn cell_forward_row(g: &mut [f32], c: &mut [f32], h: &mut [f32], hidden: usize) {
    let (gi, rest) = g.split_at_mut(hidden);
    let (gf, rest) = rest.split_at_mut(hidden);
    let (gg, go) = rest.split_at_mut(hidden);
    for j in 0..hidden {
        let i = sigmoid(gi[j]);
        let f = sigmoid(gf[j]);
        let g = gg[j].tanh();
        let o = sigmoid(go[j]);
        (gi[j], gf[j], gg[j], go[j]) = (i, f, g, o);
        c[j] = f * c[j] + i * g;
        h[j] = o * c[j].tanh();
    }
}

/// The gradient of [`lstm_forward`] (with its cells kept); see the module documentation.
pub fn lstm_backward(
    d: LstmDims,
    inp: &LstmBackwardInputs<'_>,
    out: LstmBackwardOutputs<'_>,
) -> Result<()> {
    const K: &str = "lstm_backward";
    let LstmDims {
        steps,
        batch,
        input,
        hidden,
    } = d;
    let LstmBackwardOutputs {
        dgates,
        dh0,
        dc0,
        dw_ih,
        dw_hh,
        db,
        dx,
    } = out;
    let rows = steps * batch;
    let step_h = batch * hidden;
    let step_g = batch * 4 * hidden;
    for (what, slice, want) in [
        ("x", inp.x, rows * input),
        ("h0", inp.h0, step_h),
        ("c0", inp.c0, step_h),
        ("w_ih", inp.w_ih, 4 * hidden * input),
        ("w_hh", inp.w_hh, 4 * hidden * hidden),
        ("y", inp.y, rows * hidden),
        ("gates", inp.gates, rows * 4 * hidden),
        ("cells", inp.cells, rows * hidden),
        ("dy", inp.dy, rows * hidden),
        ("dh_n", inp.dh_n, step_h),
        ("dc_n", inp.dc_n, step_h),
    ] {
        check_len(K, what, slice, want)?;
    }
    check_len(K, "dgates", dgates, rows * 4 * hidden)?;
    check_len(K, "dh0", dh0, step_h)?;
    check_len(K, "dc0", dc0, step_h)?;
    check_len(K, "dw_ih", dw_ih, 4 * hidden * input)?;
    check_len(K, "dw_hh", dw_hh, 4 * hidden * hidden)?;
    check_len(K, "db", db, 4 * hidden)?;
    if let Some(dx) = dx.as_deref() {
        check_len(K, "dx", dx, rows * input)?;
    }

    // dh0 and dc0 hold the running gradients: on entry to step t, those arriving at h_t
    // from step t+1 (or from h_n) and at c_t from step t+1 (or from c_n).
    let (dh, dc) = (dh0, dc0);
    dh.copy_from_slice(inp.dh_n);
    dc.copy_from_slice(inp.dc_n);
    if steps == 0 || step_h == 0 {
        // Nothing flows through the layer: the weights get no gradient.
        for g in [dw_ih, dw_hh, db] {
            g.fill(0.0);
        }
        if let Some(dx) = dx {
            dx.fill(0.0);
        }
        return Ok(());
    }

    // 1. Backwards through time: one fused pass and one GEMM per step.
    for t in (0..steps).rev() {
        let step = t * step_h..(t + 1) * step_h;
        let saved = StepSaved {
            gates: &inp.gates[t * step_g..(t + 1) * step_g],
            c: &inp.cells[step.clone()],
            c_prev: if t == 0 {
                inp.c0
            } else {
                &inp.cells[(t - 1) * step_h..t * step_h]
            },
            dy: &inp.dy[step],
            dh,
            hidden,
        };
        let dgates_t = &mut dgates[t * step_g..(t + 1) * step_g];
        cell_backward(&saved, dc, dgates_t);

        // dh = dgates[t] · w_hh: the gradient arriving at h_{t-1}.
        let w_hh = mat(inp.w_hh, 4 * hidden, hidden)?;
        gemm(
            1.0,
            mat(dgates_t, batch, 4 * hidden)?,
            w_hh,
            0.0,
            &mut mat_mut(dh, batch, hidden)?,
        )?;
    }

    // 2. Weight gradients over all steps at once.
    // dw_ih = dgatesᵀ · x over all T·B rows.
    let dgates_all_t = mat(dgates, rows, 4 * hidden)?.reversed_axes();
    gemm(
        1.0,
        dgates_all_t,
        mat(inp.x, rows, input)?,
        0.0,
        &mut mat_mut(dw_ih, 4 * hidden, input)?,
    )?;
    // dw_hh = Σ_t dgates[t]ᵀ · h_{t-1}: step 0 against h0, steps 1.. against y[0..T-1].
    let mut dw_hh = mat_mut(dw_hh, 4 * hidden, hidden)?;
    let dgates_0_t = mat(&dgates[..step_g], batch, 4 * hidden)?.reversed_axes();
    gemm(
        1.0,
        dgates_0_t,
        mat(inp.h0, batch, hidden)?,
        0.0,
        &mut dw_hh,
    )?;
    if steps > 1 {
        let later = (steps - 1) * batch;
        let dgates_rest_t = mat(&dgates[step_g..], later, 4 * hidden)?.reversed_axes();
        let h_prev = mat(&inp.y[..later * hidden], later, hidden)?;
        gemm(1.0, dgates_rest_t, h_prev, 1.0, &mut dw_hh)?;
    }
    // db = column sums of dgates (the gradient of b_ih and of b_hh alike).
    db.fill(0.0);
    for row in dgates.chunks_exact(4 * hidden) {
        for (b, &g) in db.iter_mut().zip(row) {
            *b += g;
        }
    }
    // dx = dgates · w_ih over all T·B rows.
    if let Some(dx) = dx {
        let w_ih = mat(inp.w_ih, 4 * hidden, input)?;
        gemm(
            1.0,
            mat(dgates, rows, 4 * hidden)?,
            w_ih,
            0.0,
            &mut mat_mut(dx, rows, input)?,
        )?;
    }
    Ok(())
}

/// What one backward step reads, each `[B, ·]` for step `t`: the activated `gates`,
/// the cell states `c` (c_t) and `c_prev` (c_{t-1}), the gradient `dy` arriving at y_t
/// from outside and `dh` arriving at h_t from step t+1.
struct StepSaved<'a> {
    gates: &'a [f32],
    c: &'a [f32],
    c_prev: &'a [f32],
    dy: &'a [f32],
    dh: &'a [f32],
    hidden: usize,
}

/// One step's fused backward pass: writes `dgates_t` `[B, 4H]` and replaces `dc` (the
/// gradient at c_t on entry) by the gradient at c_{t-1}. Split across threads by batch
/// rows when wide.
fn cell_backward(s: &StepSaved<'_>, dc: &mut [f32], dgates_t: &mut [f32]) {
    let h = s.hidden;
    let row = |(r, (dg, dc)): (usize, (&mut [f32], &mut [f32]))| cell_backward_row(s, r, dc, dg);
    if dgates_t.len() >= PARALLEL_MIN_ELEMENTS {
        dgates_t
            .par_chunks_mut(4 * h)
            .zip(dc.par_chunks_mut(h))
            .enumerate()
            .for_each(row);
    } else {
        dgates_t
            .chunks_mut(4 * h)
            .zip(dc.chunks_mut(h))
            .enumerate()
            .for_each(row);
    }
}

/// Batch row `r` of [`cell_backward`]. With the activated gates i, f, g, o and
/// `tc = tanh(c_t)`:
/// `dh_total = dy + dh`, `do = dh_total·tc`, `dc += dh_total·o·(1 - tc²)`,
/// `di = dc·g`, `df = dc·c_{t-1}`, `dg = dc·i`; the pre-activation gradients are those
/// times σ' or tanh' written with the outputs; finally `dc = dc·f` flows to c_{t-1}.
#[allow(clippy::needless_range_loop)] // why: as in the forward row, indexed by unit `j`
fn cell_backward_row(s: &StepSaved<'_>, r: usize, dc: &mut [f32], dgates: &mut [f32]) {
    let hidden = s.hidden;
    let state = r * hidden..(r + 1) * hidden;
    let (c, c_prev) = (&s.c[state.clone()], &s.c_prev[state.clone()]);
    let (dy, dh) = (&s.dy[state.clone()], &s.dh[state]);
    let g_row = &s.gates[r * 4 * hidden..(r + 1) * 4 * hidden];
    let (d_i, rest) = dgates.split_at_mut(hidden);
    let (d_f, rest) = rest.split_at_mut(hidden);
    let (d_g, d_o) = rest.split_at_mut(hidden);
    for j in 0..hidden {
        let (i, f, g, o) = (
            g_row[j],
            g_row[hidden + j],
            g_row[2 * hidden + j],
            g_row[3 * hidden + j],
        );
        let tc = c[j].tanh();
        let dh_total = dy[j] + dh[j];
        let dc_t = dc[j] + dh_total * o * (1.0 - tc * tc);
        d_i[j] = dc_t * g * i * (1.0 - i);
        d_f[j] = dc_t * c_prev[j] * f * (1.0 - f);
        d_g[j] = dc_t * i * (1.0 - g * g);
        d_o[j] = dh_total * tc * o * (1.0 - o);
        dc[j] = dc_t * f;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_util::{assert_close, Rng};

    fn sigmoid64(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    /// The LSTM equations one element at a time, in f64, with no GEMM and no fusion:
    /// returns (y, h_n, c_n, activated gates, cells).
    #[allow(clippy::type_complexity)]
    fn naive_forward(
        d: LstmDims,
        p: &LstmForwardInputs<'_>,
    ) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
        let (tt, b, n_in, h) = (d.steps, d.batch, d.input, d.hidden);
        let mut hs: Vec<f64> = p.h0.iter().map(|&v| v as f64).collect();
        let mut cs: Vec<f64> = p.c0.iter().map(|&v| v as f64).collect();
        let (mut y, mut gates, mut cells) = (Vec::new(), Vec::new(), Vec::new());
        for t in 0..tt {
            let mut h_new = vec![0.0; b * h];
            let mut c_new = vec![0.0; b * h];
            for r in 0..b {
                // pre[k] for the 4H gate units of row r.
                let pre: Vec<f64> = (0..4 * h)
                    .map(|k| {
                        let mut s = p.b_ih[k] as f64 + p.b_hh[k] as f64;
                        for q in 0..n_in {
                            s += p.x[(t * b + r) * n_in + q] as f64 * p.w_ih[k * n_in + q] as f64;
                        }
                        for q in 0..h {
                            s += hs[r * h + q] * p.w_hh[k * h + q] as f64;
                        }
                        s
                    })
                    .collect();
                let act: Vec<f64> = (0..4 * h)
                    .map(|k| {
                        if k / h == 2 {
                            pre[k].tanh()
                        } else {
                            sigmoid64(pre[k])
                        }
                    })
                    .collect();
                for j in 0..h {
                    let (i, f, g, o) = (act[j], act[h + j], act[2 * h + j], act[3 * h + j]);
                    c_new[r * h + j] = f * cs[r * h + j] + i * g;
                    h_new[r * h + j] = o * c_new[r * h + j].tanh();
                }
                gates.extend(act);
            }
            y.extend(&h_new);
            cells.extend(&c_new);
            (hs, cs) = (h_new, c_new);
        }
        (y, hs, cs, gates, cells)
    }

    #[test]
    fn forward_matches_naive_per_element_lstm() {
        let mut rng = Rng(11);
        for round in 0..8 {
            let d = LstmDims {
                steps: rng.range(1, 5),
                batch: rng.range(1, 4),
                input: rng.range(1, 6),
                hidden: rng.range(1, 7),
            };
            let (rows, bh, h4) = (d.steps * d.batch, d.batch * d.hidden, 4 * d.hidden);
            let x = rng.vec(rows * d.input);
            let (h0, c0) = (rng.vec(bh), rng.vec(bh));
            let (w_ih, w_hh) = (rng.vec(h4 * d.input), rng.vec(h4 * d.hidden));
            let (b_ih, b_hh) = (rng.vec(h4), rng.vec(h4));
            let inp = LstmForwardInputs {
                x: &x,
                h0: &h0,
                c0: &c0,
                w_ih: &w_ih,
                w_hh: &w_hh,
                b_ih: &b_ih,
                b_hh: &b_hh,
            };
            let (y0, hn0, cn0, g0, cells0) = naive_forward(d, &inp);
            for keep in [true, false] {
                let mut y = vec![f32::NAN; rows * d.hidden];
                let (mut h_n, mut c_n) = (vec![f32::NAN; bh], vec![f32::NAN; bh]);
                let mut gates = vec![f32::NAN; rows * h4];
                let mut cells = vec![f32::NAN; rows * d.hidden];
                let out = LstmForwardOutputs {
                    y: &mut y,
                    h_n: &mut h_n,
                    c_n: &mut c_n,
                    gates: &mut gates,
                    cells: keep.then_some(&mut cells[..]),
                };
                lstm_forward(d, &inp, out).unwrap();
                let what = |t: &str| format!("round {round} {d:?} keep {keep}: {t}");
                let (atol, rtol) = (1e-5, 1e-4);
                assert_close(&what("y"), &y, &y0, atol, rtol);
                assert_close(&what("h_n"), &h_n, &hn0, atol, rtol);
                assert_close(&what("c_n"), &c_n, &cn0, atol, rtol);
                assert_close(&what("gates"), &gates, &g0, atol, rtol);
                if keep {
                    assert_close(&what("cells"), &cells, &cells0, atol, rtol);
                }
            }
        }
    }

    #[test]
    fn wide_steps_take_the_parallel_path_and_agree() {
        // B·4H = 16·4·256 ≥ PARALLEL_MIN_ELEMENTS: the fused passes run on rayon.
        let mut rng = Rng(5);
        let d = LstmDims {
            steps: 2,
            batch: 16,
            input: 3,
            hidden: 256,
        };
        assert!(d.batch * 4 * d.hidden >= PARALLEL_MIN_ELEMENTS);
        let (rows, bh, h4) = (d.steps * d.batch, d.batch * d.hidden, 4 * d.hidden);
        let x = rng.vec(rows * d.input);
        let (h0, c0) = (rng.vec(bh), rng.vec(bh));
        let w_ih = rng.vec(h4 * d.input);
        let w_hh: Vec<f32> = rng.vec(h4 * d.hidden).iter().map(|v| v * 0.1).collect();
        let (b_ih, b_hh) = (rng.vec(h4), rng.vec(h4));
        let inp = LstmForwardInputs {
            x: &x,
            h0: &h0,
            c0: &c0,
            w_ih: &w_ih,
            w_hh: &w_hh,
            b_ih: &b_ih,
            b_hh: &b_hh,
        };
        let (y0, ..) = naive_forward(d, &inp);
        let mut y = vec![0.0; rows * d.hidden];
        let (mut h_n, mut c_n) = (vec![0.0; bh], vec![0.0; bh]);
        let mut gates = vec![0.0; rows * h4];
        let out = LstmForwardOutputs {
            y: &mut y,
            h_n: &mut h_n,
            c_n: &mut c_n,
            gates: &mut gates,
            cells: None,
        };
        lstm_forward(d, &inp, out).unwrap();
        assert_close("y", &y, &y0, 1e-5, 1e-4);
    }

    #[test]
    fn wrong_lengths_are_errors() {
        let d = LstmDims {
            steps: 2,
            batch: 1,
            input: 1,
            hidden: 1,
        };
        let v = [0.0f32; 8];
        let inp = LstmForwardInputs {
            x: &v[..1], // should be 2
            h0: &v[..1],
            c0: &v[..1],
            w_ih: &v[..4],
            w_hh: &v[..4],
            b_ih: &v[..4],
            b_hh: &v[..4],
        };
        let (mut y, mut hn, mut cn, mut g) = ([0.0; 2], [0.0], [0.0], [0.0; 8]);
        let out = LstmForwardOutputs {
            y: &mut y,
            h_n: &mut hn,
            c_n: &mut cn,
            gates: &mut g,
            cells: None,
        };
        assert!(lstm_forward(d, &inp, out).is_err());
    }
}
