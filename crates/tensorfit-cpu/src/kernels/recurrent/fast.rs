//! What the AVX-512 fast paths of every recurrent cell share (`lstm/fast.rs`,
//! `gru/fast.rs`): the split of the batch into rows per thread (the time loop runs on
//! every thread at once, each over its own rows for all steps: rows of a recurrent layer
//! never exchange data, so there is no barrier per step; [`PartRows`] says where a
//! thread's rows of a step lie) and the input projection with its bias, prepared once per
//! call, which each thread applies to its own rows.

use std::ops::Range;

use tensorfit_core::seq_lengths::RowLengths;
use tensorfit_core::tokens::{token_index, Table};
use tensorfit_core::RecurrentDims;

use crate::kernels::gemm_fast::{gemm_packed_serial, MatRef, PackedB, Token};
use crate::kernels::PARALLEL_MIN_ELEMENTS;

/// Batch rows per thread for a layer of `hidden` units. One part when the layer is too
/// small to be worth splitting (measured as four gate blocks, the LSTM's, for both cells).
pub(crate) fn rows_per_part(batch: usize, hidden: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    if batch * 4 * hidden < PARALLEL_MIN_ELEMENTS {
        batch.max(1)
    } else {
        batch.div_ceil(threads).max(1)
    }
}

/// One thread's batch rows, `start..end` of `batch`, as [`rows_per_part`] splits a batch,
/// with their sequences' lengths.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PartRows<'a> {
    batch: usize,
    start: usize,
    end: usize,
    /// The lengths of these rows only (row 0 is `start`).
    pub lengths: RowLengths<'a>,
}

impl<'a> PartRows<'a> {
    /// Part `p` of a batch of `batch` rows split into parts of `part` rows, holding `m`
    /// of them; `lengths`: every row's.
    pub fn new(
        batch: usize,
        (p, part): (usize, usize),
        m: usize,
        lengths: Option<&'a [f32]>,
    ) -> Self {
        let (start, end) = (p * part, p * part + m);
        PartRows {
            batch,
            start,
            end,
            lengths: RowLengths(lengths).rows(start..end),
        }
    }

    /// The part's elements of step `t` of a `[T, B, width]` tensor (with `t = 0`, of a
    /// `[B, width]` one: an initial state).
    #[inline(always)]
    pub fn at(&self, width: usize, t: usize) -> Range<usize> {
        (t * self.batch + self.start) * width..(t * self.batch + self.end) * width
    }

    /// The part's state before step `t`: its rows of step `t - 1` of `seq`
    /// `[T, B, width]`, or at `t = 0` of the initial state `init` `[B, width]`.
    #[inline(always)]
    pub fn before<'s>(
        &self,
        width: usize,
        t: usize,
        (init, seq): (&'s [f32], &'s [f32]),
    ) -> &'s [f32] {
        match t {
            0 => &init[self.at(width, 0)],
            _ => &seq[self.at(width, t - 1)],
        }
    }
}

/// `buf` `[T, B, width]` split into parts of `rows` batch rows: `out[p][t]` is part
/// `p`'s rows of step `t`.
pub(crate) fn split_steps(buf: &mut [f32], step: usize, part: usize) -> Vec<Vec<&mut [f32]>> {
    let parts = step.div_ceil(part.max(1));
    let mut out: Vec<Vec<&mut [f32]>> = (0..parts).map(|_| Vec::new()).collect();
    for step_slice in buf.chunks_mut(step.max(1)) {
        for (p, piece) in step_slice.chunks_mut(part.max(1)).enumerate() {
            out[p].push(piece);
        }
    }
    out
}

/// The input projection with its bias (the LSTM's `b_ih + b_hh`, the GRU's `b_ih`),
/// prepared once per call: `w_ihᵀ` packed for the GEMM of dense input; on token input
/// (the ids have been checked by `recurrent::check_inputs`) each row's gates are token
/// `v`'s column of `w_ih` plus the bias, read from a table `[V, G·H]` formed once when the
/// call has at least as many rows as there are tokens, and gathered from `w_ih` where they
/// are read otherwise: the table costs `V·G·H` values a call (800 MiB at V = 50,000 and
/// H = 1024), outside any plan, for a call that reads fewer rows than that. Both give the
/// same sums.
pub(crate) enum Projection<'w> {
    Dense {
        w_ih_t: PackedB,
        bias: Vec<f32>,
    },
    /// `[V, G·H]`: row `v` is `w_ih[:, v] + bias`.
    Table(Vec<f32>),
    /// Token `v`'s column of `w_ih`, where `columns` says, and the bias.
    Columns {
        w_ih: &'w [f32],
        columns: Table,
        bias: Vec<f32>,
    },
}

impl<'w> Projection<'w> {
    pub(crate) fn new(d: &impl RecurrentDims, w_ih: &'w [f32], bias: Vec<f32>) -> Self {
        let ((input, tokens), width) = (d.input(), d.gate_width());
        if !tokens {
            let w_ih_t = PackedB::new(MatRef::row_major(w_ih, width, input).t());
            return Projection::Dense { w_ih_t, bias };
        }
        let columns = d.token_table();
        if d.rows() < input {
            return Projection::Columns {
                w_ih,
                columns,
                bias,
            };
        }
        let mut table = vec![0.0; input * width];
        for (v, row) in table.chunks_exact_mut(width.max(1)).enumerate() {
            for (j, (t, b)) in row.iter_mut().zip(&bias).enumerate() {
                *t = w_ih[columns.at(v, j)] + b;
            }
        }
        Projection::Table(table)
    }

    /// `gates = x · w_ihᵀ + bias` for the `m` rows of `x` (`m·I` features or `m` ids).
    pub(crate) fn project(&self, token: Token, x: &[f32], m: usize, gates: &mut [f32]) {
        let width = (gates.len() / m.max(1)).max(1);
        match self {
            Projection::Dense { w_ih_t, bias } => {
                let x = MatRef::row_major(x, m, w_ih_t.k());
                gemm_packed_serial(token, x, w_ih_t, 0.0, Some(bias), gates);
            }
            Projection::Table(table) => {
                let vocab = table.len() / width;
                for (row, &id) in gates.chunks_exact_mut(width).zip(x) {
                    let v = token_index(id, vocab).unwrap_or_default();
                    row.copy_from_slice(&table[v * width..(v + 1) * width]);
                }
            }
            Projection::Columns {
                w_ih,
                columns,
                bias,
            } => {
                for (row, &id) in gates.chunks_exact_mut(width).zip(x) {
                    let v = token_index(id, columns.vocab).unwrap_or_default();
                    for (j, (g, b)) in row.iter_mut().zip(bias).enumerate() {
                        *g = w_ih[columns.at(v, j)] + b;
                    }
                }
            }
        }
    }
}
