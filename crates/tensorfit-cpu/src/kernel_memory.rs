//! Host memory the CPU kernels hold besides the buffers of the memory plan: the packed
//! copies of matrix-product operands. The engine adds it to a CPU run's planned resident
//! memory, as it adds a software GPU's driver memory (`HostNeed` in tensorfit-engine): a
//! small run planned 6–13% under its measured peak without it (docs/host-memory.md).
//!
//! With AVX-512 (`gemm_fast`) a product packs its right operand `B`: whole for the
//! recurrent weights a layer keeps packed over its steps (`w_ihᵀ` and `w_hhᵀ` forward,
//! `w_hh` backward), in slices of at most [`gemm_fast::packed_b_rows`] rows for every
//! product through [`gemm`](crate::kernels::gemm::gemm) (one slice at a time). Each
//! thread keeps a packed block of `A` ([`gemm_fast::MC`] × [`gemm_fast::KC`]), and the
//! calling thread keeps the packed copies it freed for the next op (at most 4, each
//! taken again and grown, never more than twice what it held: `Vec`'s growth).
//! Elsewhere matrixmultiply packs a block of both operands per call on each thread, and
//! frees it when the call returns.
//!
//! Besides, the backend keeps the packed weights of every recurrent forward that keeps
//! nothing for a backward (inference: `kernels::packs`) until they are written: each such
//! weight once, however many programs read it, whole and in the column schedule's shares
//! ([`kept_bytes`]).

use tensorfit_core::args::{
    Args, GruBackwardInputs, GruForwardInputs, LstmBackwardInputs, LstmForwardInputs,
};
use tensorfit_core::{Graph, Node, Op, RecurrentDims, Shape, TensorId};

use crate::kernels::gemm_fast;
use crate::kernels::recurrent::columns::{self, Pass};
use std::ops::Range;

/// The most host bytes the CPU kernels hold at once outside the planned buffers while
/// running `graphs` (a job's programs, which run one at a time) on `threads` kernel
/// threads.
pub fn host_bytes<'g>(graphs: impl IntoIterator<Item = &'g Graph>, threads: usize) -> u64 {
    let graphs: Vec<&Graph> = graphs.into_iter().collect();
    let products = graphs
        .iter()
        .flat_map(|g| g.nodes().iter().map(move |n| node_products(g, n)));
    // The calling thread packs too (a product too small to split runs on it).
    let threads = threads as u64 + 1;
    if gemm_fast::simd().is_some() {
        let (packed, buffers) = products
            .map(|p| (p.packed_bytes(), p.padded + p.scratch))
            .fold((0, 0), |(a, b), (c, d)| (a.max(c), b.max(d)));
        let a_blocks = threads * (gemm_fast::MC * gemm_fast::KC * 4) as u64;
        // The packed copies an op holds, and those kept from the op before, grown; a
        // padded batch's buffers of the rows inside their sequences and the column
        // schedule's own; the weights kept packed across calls.
        2 * packed + a_blocks + buffers + kept_bytes(&graphs)
    } else {
        let block = products.map(|p| p.matrixmultiply_bytes()).max();
        threads * block.unwrap_or(0)
    }
}

/// Bytes of the packed weights the backend may keep across calls while running `graphs`
/// (`kernels::packs`, with AVX-512): `w_hhᵀ` and, for dense input, `w_ihᵀ` of every
/// recurrent forward that keeps nothing for a backward, each weight (by name: programs of
/// one model share their parameters) once.
pub fn kept_bytes(graphs: &[&Graph]) -> u64 {
    let mut seen = std::collections::HashSet::new();
    let mut bytes = 0;
    for g in graphs {
        // A weight `[G·H, K]` is kept packed transposed: `K` rows of `G·H` columns,
        // whole and, for the column schedule (`recurrent/columns.rs`: a batch too small
        // to split by rows; a layer run at batches on both sides of that keeps both), in
        // one share of columns per kernel thread.
        let mut keep = |w: TensorId, (hidden, gates): (usize, usize)| {
            let dims = g.shape(w).dims();
            let (rows, cols) = (dims.first().copied(), dims.last().copied());
            if seen.insert(g.tensor(w).name.clone()) {
                let (k, n) = (cols.unwrap_or(0), rows.unwrap_or(0));
                let threads = crate::threads::kernel_threads();
                bytes += packed_b(k, n) + columns::kept_share_bytes(k, hidden, gates, threads);
            }
        };
        for node in g.nodes() {
            let Some((w_ih, w_hh, tokens)) = kept_weights(g, node) else {
                continue;
            };
            let w_hh_rows = g.shape(w_hh).dims().first().copied().unwrap_or(0);
            let hidden = g.shape(w_hh).dims().last().copied().unwrap_or(0);
            let layer = (hidden, w_hh_rows / hidden.max(1));
            let (w_hh, w_ih) = ((w_hh, layer), (w_ih, layer));
            keep(w_hh.0, w_hh.1);
            // Token ids gather their gates from `w_ih` (`Projection`): nothing packed.
            if !tokens {
                keep(w_ih.0, w_ih.1);
            }
        }
    }
    bytes
}

/// `w_ih` and `w_hh` of `node` if it is a recurrent forward that keeps nothing for a
/// backward, and whether its input is token ids.
fn kept_weights(g: &Graph, node: &Node) -> Option<(TensorId, TensorId, bool)> {
    let shapes = || {
        node.inputs
            .iter()
            .map(|&t| g.shape(t))
            .collect::<Vec<&Shape>>()
    };
    match node.op {
        Op::LstmForward {
            keep_for_backward: false,
        } => {
            let t = LstmForwardInputs::from_vec("lstm", node.inputs.clone()).ok()?;
            let s = LstmForwardInputs::from_vec("lstm", shapes()).ok()?;
            Some((t.w_ih, t.w_hh, s.dims().input().1))
        }
        Op::GruForward {
            keep_for_backward: false,
        } => {
            let t = GruForwardInputs::from_vec("gru", node.inputs.clone()).ok()?;
            let s = GruForwardInputs::from_vec("gru", shapes()).ok()?;
            Some((t.w_ih, t.w_hh, s.dims().input().1))
        }
        _ => None,
    }
}

/// A product `[m, k] · [k, n]` a kernel computes.
#[derive(Debug, Clone, Copy)]
struct Product {
    m: usize,
    k: usize,
    n: usize,
}

/// The products of one op: `whole` ones keep `B` packed together for the op's duration,
/// `sliced` ones pack it a slice at a time, one product after another; `padded`: the
/// bytes a recurrent op over a padded batch holds besides (`padded_bytes`).
#[derive(Debug, Default)]
struct Products {
    whole: Vec<Product>,
    sliced: Vec<Product>,
    padded: u64,
    /// Bytes of the recurrent weights packed in one share of columns per kernel thread
    /// (a training pass in the column schedule, `recurrent/columns.rs`), instead of whole.
    shares: u64,
    /// Bytes of the column schedule's buffers besides its packs ([`column_scratch`]).
    scratch: u64,
}

impl Products {
    /// Bytes of `gemm_fast`'s packed copies the op holds at once.
    fn packed_bytes(&self) -> u64 {
        let whole: u64 = self.shares + self.whole.iter().map(|p| packed_b(p.k, p.n)).sum::<u64>();
        let slice = self.sliced.iter().map(|p| {
            let rows = p.k.min(gemm_fast::packed_b_rows(p.n));
            packed_b(rows, p.n)
        });
        whole + slice.max().unwrap_or(0)
    }

    /// Bytes of matrixmultiply's packing buffer for the op's largest product, per thread
    /// (its sgemm blocks: `KC` 256, `MC` 64, `NC` 1024; 8-wide panels).
    fn matrixmultiply_bytes(&self) -> u64 {
        let round = |v: usize| v.div_ceil(8) * 8;
        let block = |p: &Product| {
            let k = p.k.min(256);
            (k * (round(p.m.min(64)) + round(p.n.min(1024))) * 4) as u64
        };
        self.whole
            .iter()
            .chain(&self.sliced)
            .map(block)
            .max()
            .unwrap_or(0)
    }

    /// The buffers a recurrent op's `pass` of `d` holds besides the packed weights: in
    /// the column schedule, its own ([`column_scratch`]); over a padded batch (`padded`:
    /// the op has lengths), the rows inside their sequences gathered with their results
    /// (`recurrent::fast::LiveRows`, every thread's rows together: the batch's), for the
    /// step's product and, forward, the input projection; backward, a weight gradient
    /// summed over the real steps only (`gemm_tn_kept`: the gradient's transpose, one
    /// packed block of the kept rows of the gates and the same rows of the inputs).
    fn buffers(mut self, d: &impl RecurrentDims, pass: Pass, how: (bool, bool)) -> Products {
        let (padded, backward) = how;
        self.scratch = column_scratch(d, pass, how);
        if !padded {
            return self;
        }
        let ((_, batch, hidden), (input, _)) = (d.sizes(), d.input());
        let width = d.gate_width();
        let live = match backward {
            false => batch * (hidden + width) + batch * (input + width),
            true => batch * (width + hidden),
        };
        let kept = match backward {
            false => 0,
            true => {
                let (n, block) = (hidden.max(input), gemm_fast::KC.min(d.rows()));
                width * n + gemm_fast::packed_b_elements(block, width) + block * n
            }
        };
        self.padded = ((live + kept) * 4) as u64;
        self
    }
}

/// Bytes of a packed `B` of `k` rows and `n` columns (`gemm_fast::PackedB`).
fn packed_b(k: usize, n: usize) -> u64 {
    (gemm_fast::packed_b_elements(k, n) * 4) as u64
}

/// The products `node`'s kernel computes.
fn node_products(graph: &Graph, node: &Node) -> Products {
    let shapes: Vec<&Shape> = node.inputs.iter().map(|&t| graph.shape(t)).collect();
    let by_rows = |s: &Shape| {
        let last = if s.rank() == 0 {
            1
        } else {
            s.dim(s.rank() - 1)
        };
        (s.numel() / last.max(1), last)
    };
    match &node.op {
        Op::MatMul { trans_a, trans_b } if shapes.len() == 2 => {
            let (a_rows, a_last) = by_rows(shapes[0]);
            let (b_rows, b_last) = by_rows(shapes[1]);
            let (m, k) = if *trans_a {
                (a_last, a_rows)
            } else {
                (a_rows, a_last)
            };
            let n = if *trans_b { b_rows } else { b_last };
            Products {
                sliced: vec![Product { m, k, n }],
                ..Products::default()
            }
        }
        Op::LstmForward { keep_for_backward } => LstmForwardInputs::from_vec("lstm", shapes)
            .map(|i| {
                let (d, padded) = (i.dims(), i.lengths.is_some());
                let pass = Pass::forward(*keep_for_backward);
                forward(&d, *keep_for_backward).buffers(&d, pass, (padded, false))
            })
            .unwrap_or_default(),
        Op::GruForward { keep_for_backward } => GruForwardInputs::from_vec("gru", shapes)
            .map(|i| {
                let (d, padded) = (i.dims(), i.lengths.is_some());
                let pass = Pass::forward(*keep_for_backward);
                forward(&d, *keep_for_backward).buffers(&d, pass, (padded, false))
            })
            .unwrap_or_default(),
        Op::LstmBackward { input_grad } => LstmBackwardInputs::from_vec("lstm", shapes)
            .map(|i| {
                let d = i.dims();
                let padded = i.lengths.is_some();
                backward(&d, *input_grad).buffers(&d, Pass::Training, (padded, true))
            })
            .unwrap_or_default(),
        Op::GruBackward { input_grad } => GruBackwardInputs::from_vec("gru", shapes)
            .map(|i| {
                let d = i.dims();
                let padded = i.lengths.is_some();
                backward(&d, *input_grad).buffers(&d, Pass::Training, (padded, true))
            })
            .unwrap_or_default(),
        _ => Products::default(),
    }
}

/// A recurrent layer's forward: the input projection `[T·B, I] · w_ihᵀ` and the step's
/// `[B, H] · w_hhᵀ`, both weights packed for the whole layer. Token ids gather their
/// gate inputs instead: from `w_ih`'s columns, or where the batch has at least as many
/// ids as the vocabulary, from a table `[V, width]` made for the layer (counted as a
/// packed `[V, width]`, a few columns more). A forward for a backward in the column
/// schedule packs both weights in shares (the token table stays whole).
fn forward(d: &impl RecurrentDims, keep_for_backward: bool) -> Products {
    let ((steps, batch, hidden), (input, tokens)) = (d.sizes(), d.input());
    let width = d.gate_width();
    let mut whole = vec![Product {
        m: batch,
        k: hidden,
        n: width,
    }];
    if !tokens || d.rows() >= input {
        whole.push(Product {
            m: steps * batch,
            k: input,
            n: width,
        });
    }
    if !(keep_for_backward && by_columns(d)) {
        return Products {
            whole,
            ..Products::default()
        };
    }
    // The shares of `w_hhᵀ` and, for dense input, of `w_ihᵀ`; a token table (the input
    // product of `whole`, after `w_hhᵀ`'s) stays whole.
    let shares = |k| columns::kept_share_bytes(k, hidden, width / hidden.max(1), threads());
    let table = if tokens {
        whole.split_off(1)
    } else {
        Vec::new()
    };
    Products {
        shares: shares(hidden) + if tokens { 0 } else { shares(input) },
        whole: table,
        ..Products::default()
    }
}

/// Whether a training pass of `d` runs in the column schedule (`recurrent/columns.rs`).
fn by_columns(d: &impl RecurrentDims) -> bool {
    column_shares(d, Pass::Training).is_some()
}

/// The units of each share of a pass of `d` in the column schedule, or `None` where it
/// runs by rows.
fn column_shares(d: &impl RecurrentDims, pass: Pass) -> Option<Vec<Range<usize>>> {
    let (steps, batch, hidden) = d.sizes();
    let layer = (hidden, d.gate_width() / hidden.max(1));
    let shares = columns::shares_on_pool((steps, batch), layer, pass);
    // (One kernel thread gives one share.)
    let runs = gemm_fast::simd().is_some() && shares > 1;
    runs.then(|| columns::unit_shares(hidden, shares))
}

/// At most the bytes of the column schedule's buffers besides its packs, for a pass of
/// `d` (forward, or with `backward` the backward; over a padded batch with `padded`)
/// where it runs in that schedule:
/// what the shares exchange (two steps of `[B, H]` forward, of `[B, G·H]` backward), and
/// per share of `w` units its step's buffers (the LSTM's and the GRU's, at most: forward
/// `[B, G·w]` and three `[B, w]`, and a run of input projections; backward four
/// `[B, G·w]` and five `[B, w]`), and over a padded batch its rows gathered (`LiveRows`:
/// forward `[B, H + G·w]` and `[B, x_row + G·w]`, backward `[B, G·H + w]`).
fn column_scratch(d: &impl RecurrentDims, pass: Pass, (padded, backward): (bool, bool)) -> u64 {
    let Some(shares) = column_shares(d, pass) else {
        return 0;
    };
    let (steps, batch, hidden) = d.sizes();
    let width = d.gate_width();
    let gates = width / hidden.max(1);
    let per_share = |w: usize| {
        let own = match backward {
            false => {
                let run = columns::projection_run(batch, gates * w).min(steps);
                (run + 1) * gates * w + 3 * w
            }
            true => 4 * gates * w + 5 * w,
        };
        let gathered = match (padded, backward) {
            (false, _) => 0,
            (true, false) => hidden + d.x_row() + 2 * gates * w,
            (true, true) => width + w,
        };
        batch * (own + gathered)
    };
    let exchanged = 2 * batch * if backward { width } else { hidden };
    let elements = exchanged + shares.iter().map(|u| per_share(u.len())).sum::<usize>();
    (elements * 4) as u64
}

/// The kernel threads the column schedule runs its shares on.
fn threads() -> usize {
    crate::threads::kernel_threads()
}

/// A recurrent layer's backward: the step's `dgates · w_hh` with `w_hh` packed for the
/// layer, then the weight gradients `dgatesᵀ · h` and `dgatesᵀ · x` over all steps and
/// the input gradient `dgates · w_ih`, sliced.
fn backward(d: &impl RecurrentDims, input_grad: bool) -> Products {
    let ((_, batch, hidden), (input, tokens)) = (d.sizes(), d.input());
    let (rows, width) = (d.rows(), d.gate_width());
    let mut sliced = vec![Product {
        m: width,
        k: rows,
        n: hidden,
    }];
    if !tokens {
        sliced.push(Product {
            m: width,
            k: rows,
            n: input,
        });
    }
    if input_grad {
        sliced.push(Product {
            m: rows,
            k: width,
            n: input,
        });
    }
    // `w_hh` `[G·H, H]` whole, or its columns of each share's units.
    let w_hh = Product {
        m: batch,
        k: width,
        n: hidden,
    };
    let (whole, shares) = match by_columns(d) {
        true => (
            vec![],
            columns::kept_share_bytes(width, hidden, 1, threads()),
        ),
        false => (vec![w_hh], 0),
    };
    Products {
        whole,
        sliced,
        padded: 0,
        shares,
        scratch: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_training_layer_in_the_column_schedule_counts_its_shares_not_whole_weights() {
        let d = tensorfit_core::LstmDims {
            steps: 50,
            batch: 4,
            input: 152,
            hidden: 512,
            tokens: false,
        };
        if !by_columns(&d) {
            eprintln!("skipped: no AVX-512 or one kernel thread: the layer runs by rows");
            return;
        }
        let shares = |k, gates| columns::kept_share_bytes(k, 512, gates, threads());
        let fwd = forward(&d, true);
        assert!(fwd.whole.is_empty());
        assert_eq!(fwd.packed_bytes(), shares(512, 4) + shares(152, 4));
        let bwd = backward(&d, false);
        assert_eq!(bwd.shares, shares(2048, 1));
        assert!(bwd.whole.is_empty());
        // Besides: the exchange (two steps of h forward, of dgates backward) and each
        // share's buffers, a run of 16 steps' gate inputs forward (projection_run).
        let fwd = fwd.buffers(&d, Pass::Training, (false, false));
        let bwd = bwd.buffers(&d, Pass::Training, (false, true));
        assert!(fwd.scratch >= ((2 * 4 * 512 + 16 * 4 * 2048) * 4) as u64);
        assert!(bwd.scratch >= ((2 * 4 * 2048 + 4 * 4 * 2048) * 4) as u64);
        let padded = backward(&d, false).buffers(&d, Pass::Training, (true, true));
        assert!(padded.scratch > bwd.scratch);
        // Small beside the shares' packs (4.9 MiB here).
        assert!(fwd.scratch.max(padded.scratch) < 1 << 20);
        let inference = forward(&d, false).buffers(&d, Pass::Inference, (false, false));
        let by_columns = column_shares(&d, Pass::Inference).is_some();
        assert_eq!(inference.scratch > 0, by_columns);
        // Inference keeps its packs whole per op (and in shares across calls: kept_bytes).
        let inference = forward(&d, false);
        assert_eq!(
            inference.packed_bytes(),
            packed_b(512, 2048) + packed_b(152, 2048)
        );
    }

    #[test]
    fn a_packed_operand_is_whole_panels_and_a_cache_line() {
        assert_eq!(packed_b(250, 1000), ((250 * 1024 + 16) * 4) as u64);
        assert_eq!(packed_b(3, 1), ((3 * 32 + 16) * 4) as u64);
    }

    #[test]
    fn a_slice_is_at_most_the_rows_a_thread_keeps() {
        let huge = Products {
            sliced: vec![Product {
                m: 64,
                k: 1 << 20,
                n: 1000,
            }],
            ..Products::default()
        };
        let rows = gemm_fast::packed_b_rows(1000);
        assert_eq!(huge.packed_bytes(), packed_b(rows, 1000));
        assert!(huge.packed_bytes() <= (4 << 20) + 4096);
    }

    /// The seed network's first LSTM layer (152 → 250) over 50 steps of 8 sequences,
    /// forward, with each sequence's length as an input when `padded`.
    fn lstm_layer(padded: bool) -> Graph {
        let mut g = Graph::new();
        let x = g.input("x", [50, 8, 152]);
        let h0 = g.input("h0", [8, 250]);
        let c0 = g.input("c0", [8, 250]);
        let lengths = padded.then(|| g.input("lengths", [8]));
        let w_ih = g.parameter("w_ih", [1000, 152]);
        let w_hh = g.parameter("w_hh", [1000, 250]);
        let b_ih = g.parameter("b_ih", [1000]);
        let b_hh = g.parameter("b_hh", [1000]);
        let inputs = LstmForwardInputs {
            x,
            h0,
            c0,
            w_ih,
            w_hh,
            b_ih,
            b_hh,
            lengths,
        };
        let op = Op::LstmForward {
            keep_for_backward: false,
        };
        g.apply("lstm", op, inputs).unwrap();
        g
    }

    #[test]
    fn a_layer_holds_both_weights_packed_forward() {
        let g = lstm_layer(false);
        let p = node_products(&g, &g.nodes()[0]);
        assert_eq!(p.packed_bytes(), packed_b(152, 1000) + packed_b(250, 1000));
        assert!(host_bytes([&g], 2) >= 2 * p.packed_bytes() || gemm_fast::simd().is_none());
        assert_eq!(p.padded, 0, "no lengths: nothing gathered");
    }

    #[test]
    fn a_padded_layer_counts_the_rows_it_gathers() {
        let g = lstm_layer(true);
        let p = node_products(&g, &g.nodes()[0]);
        // The step's rows (8 × (250 + 1000)) and the projection's (8 × (152 + 1000)).
        assert_eq!(p.padded, ((8 * 1250 + 8 * 1152) * 4) as u64);
        let packed_and_blocks =
            2 * p.packed_bytes() + 3 * (gemm_fast::MC * gemm_fast::KC * 4) as u64;
        if gemm_fast::simd().is_some() {
            let kept = kept_bytes(&[&g]);
            // (With two kernel threads, 8 rows run by columns: their buffers besides.)
            let buffers = p.padded + p.scratch;
            assert_eq!(host_bytes([&g], 2), packed_and_blocks + buffers + kept);
        }
    }

    #[test]
    fn an_inference_layers_weights_are_kept_packed_once_whatever_the_programs() {
        let (g, again) = (lstm_layer(false), lstm_layer(true));
        let threads = crate::threads::kernel_threads();
        let shares = |k| columns::kept_share_bytes(k, 250, 4, threads);
        let both = packed_b(152, 1000) + packed_b(250, 1000) + shares(152) + shares(250);
        assert_eq!(kept_bytes(&[&g]), both);
        // Two programs reading the same weights keep them once.
        assert_eq!(kept_bytes(&[&g, &again]), both);
        // A training forward keeps its cells, and nothing packed.
        let mut train = Graph::new();
        let x = train.input("x", [50, 8, 152]);
        let h0 = train.input("h0", [8, 250]);
        let c0 = train.input("c0", [8, 250]);
        let inputs = LstmForwardInputs {
            x,
            h0,
            c0,
            w_ih: train.parameter("w_ih", [1000, 152]),
            w_hh: train.parameter("w_hh", [1000, 250]),
            b_ih: train.parameter("b_ih", [1000]),
            b_hh: train.parameter("b_hh", [1000]),
            lengths: None,
        };
        let op = Op::LstmForward {
            keep_for_backward: true,
        };
        train.apply("lstm", op, inputs).unwrap();
        assert_eq!(kept_bytes(&[&train]), 0);
    }
}
