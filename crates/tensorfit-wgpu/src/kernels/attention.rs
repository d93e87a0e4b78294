//! Multi-head scaled dot-product self-attention: `attention_scores`, its gradient
//! `attention_scores_backward`, `attention_mix` and its gradient `attention_mix_backward`
//! (shaders/attention.wgsl), as the CPU's `kernels/attention.rs` computes them.
//!
//! Four kernels, one invocation per element written and no atomics: `attention_dot`
//! (the raw scores `q·kᵀ` per pair, and the weights' gradient `dout·vᵀ`),
//! `attention_softmax` (each row of scores in place, masked), `attention_mix` (a weighted
//! sum of a `[T, B, D]` tensor's steps: the mix `p·v`, its gradient `pᵀ·dout`, and the
//! scores' gradients `ds·k`, `dsᵀ·q` with `ds = p ∘ (dp − r)` formed on the fly) and
//! `attention_rowsum` (each query row's `r = Σ_j p·dp`, kept in `dq`'s first feature of
//! the head until `dk` is done; `dq`'s own kernel then recomputes it for its row). A
//! launch covers a block of pairs, a window of steps and a window of summed steps
//! ([`Part`]); everything is one launch when it fits a binding, otherwise [`parts`] finds
//! the block sizes that fit with the fewest launches, and a mix adds its windows of
//! summed steps in order. A row of weights must fit a binding (`T` within the binding's
//! span) and `T`, `Dh` at most [`MAX_STEPS`] (each invocation's loops stay within the
//! loop budget).

use std::cmp::Reverse;
use std::ops::Range;

use tensorfit_core::args::*;
use tensorfit_core::{AttentionDims, AttentionKernels, Result};

use super::elementwise::check_len;
use super::{bits, word, Launches};
use crate::backend_error;
use crate::shaders::{ATTENTION_DOT, ATTENTION_MIX, ATTENTION_ROWSUM, ATTENTION_SOFTMAX};
use crate::window::{chunks, Operand, Region, LOOP_BUDGET};

/// The most steps, and features per head, the kernels take: a softmax loops three times
/// over a row, a gradient twice, within [`LOOP_BUDGET`].
pub(crate) const MAX_STEPS: usize = LOOP_BUDGET / 4;

/// The sizes of one call: `T`, `P = B·heads` pairs, `heads`, `Dh`.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    steps: usize,
    pairs: usize,
    heads: usize,
    dh: usize,
}

impl Geometry {
    /// The sizes of `d`, checked against the kernels' limits (an error naming `kernel`).
    fn new(kernel: &str, d: &AttentionDims) -> Result<Self> {
        if d.heads == 0 || d.head_dim == 0 {
            return Err(backend_error(format!(
                "{kernel}: {} heads of {} features each",
                d.heads, d.head_dim
            )));
        }
        if d.steps > MAX_STEPS || d.head_dim > MAX_STEPS {
            return Err(backend_error(format!(
                "{kernel}: {} steps of {} features per head exceed the kernels' limit of {MAX_STEPS} each",
                d.steps, d.head_dim
            )));
        }
        Ok(Geometry {
            steps: d.steps,
            pairs: d.pairs(),
            heads: d.heads,
            dh: d.head_dim,
        })
    }

    /// The elements of a `[T, P, Dh]` tensor at steps `ts` of pairs `ps`.
    fn seq(&self, ts: &Range<usize>, ps: &Range<usize>) -> Range<usize> {
        if ts.is_empty() || ps.is_empty() {
            return 0..0;
        }
        let at = |t: usize, p: usize| (t * self.pairs + p) * self.dh;
        at(ts.start, ps.start)..at(ts.end - 1, ps.end)
    }

    /// The elements of the `[P, T, T]` weights at rows `rows`, columns `cols` of pairs `ps`.
    fn block(&self, ps: &Range<usize>, rows: &Range<usize>, cols: &Range<usize>) -> Range<usize> {
        if ps.is_empty() || rows.is_empty() || cols.is_empty() {
            return 0..0;
        }
        let at = |p: usize, i: usize, j: usize| (p * self.steps + i) * self.steps + j;
        at(ps.start, rows.start, cols.start)..at(ps.end - 1, rows.end - 1, cols.end - 1) + 1
    }

    /// The batch rows of pairs `ps` (their lengths).
    fn rows(&self, ps: &Range<usize>) -> Range<usize> {
        if ps.is_empty() {
            return 0..0;
        }
        ps.start / self.heads..(ps.end - 1) / self.heads + 1
    }

    /// `n` pairs or steps from the first (where a block of `n` is widest).
    fn first(n: usize) -> Range<usize> {
        0..n
    }
}

/// What one launch covers: pairs `ps`, steps `ts` (rows of weights, or a `[T, P, Dh]`
/// tensor's steps written) and steps `ss` (columns of weights, or the steps summed).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    ps: Range<usize>,
    ts: Range<usize>,
    ss: Range<usize>,
}

/// Block sizes tried along a dimension of `n`: `n`, then the powers of two below it.
fn sizes(n: usize) -> impl Iterator<Item = usize> {
    let below = (0..usize::BITS)
        .map(|b| 1usize << b)
        .take_while(move |&s| s < n);
    std::iter::once(n.max(1)).chain(below.collect::<Vec<_>>().into_iter().rev())
}

/// The parts of `P` pairs, `T` steps and `inner` summed steps (1 for a kernel over whole
/// rows), none touching more than a binding's span (`fits` judges a block of `(np, nt,
/// ns)` at its widest): the fewest launches (ties: the widest sums, then the most pairs),
/// pair blocks outermost and each block's summed windows innermost, in order. An error
/// naming `kernel` when not even one row fits.
fn parts(
    kernel: &str,
    g: &Geometry,
    inner: usize,
    fits: impl Fn(usize, usize, usize) -> bool,
) -> Result<Vec<Part>> {
    if g.pairs == 0 || g.steps == 0 {
        return Ok(Vec::new());
    }
    let mut best = None;
    for np in sizes(g.pairs) {
        for nt in sizes(g.steps) {
            for ns in sizes(inner).filter(|&ns| fits(np, nt, ns)) {
                let launches = g.pairs.div_ceil(np) * g.steps.div_ceil(nt) * inner.div_ceil(ns);
                let key = (launches, Reverse(ns), Reverse(np));
                if best.as_ref().is_none_or(|(k, _)| key < *k) {
                    best = Some((key, [np, nt, ns]));
                }
            }
        }
    }
    let Some((_, [np, nt, ns])) = best else {
        return Err(backend_error(format!(
            "{kernel}: a row of {} weights (or a head of {} features) is more than one storage binding holds",
            g.steps, g.dh
        )));
    };
    let mut list = Vec::new();
    for ps in chunks(g.pairs, np) {
        for ts in chunks(g.steps, nt) {
            for ss in chunks(inner, ns) {
                list.push(Part {
                    ps: ps.clone(),
                    ts: ts.clone(),
                    ss,
                });
            }
        }
    }
    Ok(list)
}

/// `out[p, i, j] = Σ_f a[i, p, f] · b[j, p, f]` for `a`, `b` `[T, P, Dh]` and `out`
/// `[P, T, T]`.
fn dot(l: &mut Launches, kernel: &str, g: &Geometry, [a, b, out]: [Region; 3]) -> Result<()> {
    let span = l.span();
    let f = Geometry::first;
    let fits = |np, ni, nj| {
        g.seq(&f(ni), &f(np)).len() <= span
            && g.seq(&f(nj), &f(np)).len() <= span
            && g.block(&f(np), &f(ni), &f(nj)).len() <= span
    };
    for p in parts(kernel, g, g.steps, fits)? {
        let ops = vec![
            Operand::part(a, g.seq(&p.ts, &p.ps)),
            Operand::part(b, g.seq(&p.ss, &p.ps)),
            Operand::part(out, g.block(&p.ps, &p.ts, &p.ss)),
        ];
        let values = vec![
            word(p.ps.start),
            word(p.ps.len()),
            word(p.ts.start),
            word(p.ts.len()),
            word(p.ss.start),
            word(p.ss.len()),
            word(g.pairs),
            word(g.steps),
            word(g.dh),
        ];
        let threads = p.ps.len() * p.ts.len() * p.ss.len();
        l.push(&ATTENTION_DOT, ops, values, threads);
    }
    Ok(())
}

/// How [`mix`] weighs the summed steps: the weights or the scores' gradient `ds`
/// (`grad`), read transposed or not, times `alpha`.
#[derive(Debug, Clone, Copy)]
struct Weighing {
    grad: bool,
    transposed: bool,
    alpha: f32,
}

/// `out[t, p] = alpha · Σ_s w(p, t, s) · x[s, p]` (see attention.wgsl's `attention_mix`):
/// `weights` = `[probs, dprobs, rsum]`, the last two only for a gradient.
fn mix(
    l: &mut Launches,
    kernel: &str,
    g: &Geometry,
    w: Weighing,
    (probs, grads): (Region, Option<(Region, Region)>),
    [x, out]: [Region; 2],
) -> Result<()> {
    let span = l.span();
    let f = Geometry::first;
    let all = 0..g.steps;
    // The weights a part reads: its rows `ts` and summed columns `ss`, transposed, or
    // (the scores' gradient of query rows `ts`) whole rows for their rowsums.
    let weights = |ps: &Range<usize>, ts: &Range<usize>, ss: &Range<usize>| match w {
        Weighing {
            transposed: true, ..
        } => g.block(ps, ss, ts),
        Weighing { grad: true, .. } => g.block(ps, ts, &all),
        _ => g.block(ps, ts, ss),
    };
    let fits = |np, nt, ns| {
        g.seq(&f(nt), &f(np)).len() <= span
            && g.seq(&f(ns), &f(np)).len() <= span
            && weights(&f(np), &f(nt), &f(ns)).len() <= span
    };
    for p in parts(kernel, g, g.steps, fits)? {
        let read = weights(&p.ps, &p.ts, &p.ss);
        let (dprobs, rsum) = match grads {
            Some((dprobs, rsum)) => (
                Operand::part(dprobs, read.clone()),
                Operand::part(rsum, g.seq(&p.ss, &p.ps)),
            ),
            // Not read; every binding needs a buffer.
            None => (Operand::part(probs, 0..1), Operand::part(probs, 0..1)),
        };
        let ops = vec![
            Operand::part(probs, read),
            dprobs,
            rsum,
            Operand::part(x, g.seq(&p.ss, &p.ps)),
            Operand::part(out, g.seq(&p.ts, &p.ps)),
        ];
        let values = vec![
            word(p.ps.start),
            word(p.ps.len()),
            word(p.ts.start),
            word(p.ts.len()),
            word(p.ss.start),
            word(p.ss.len()),
            word(g.pairs),
            word(g.steps),
            word(g.dh),
            u32::from(w.grad),
            u32::from(w.transposed),
            bits(w.alpha),
            u32::from(p.ss.start > 0),
        ];
        let threads = p.ps.len() * p.ts.len() * g.dh;
        l.push(&ATTENTION_MIX, ops, values, threads);
    }
    Ok(())
}

/// Checks the `[T, B, D]` regions `seqs` and `[B, heads, T, T]` regions `blocks` (each
/// named) against `d`.
fn check_sizes(
    kernel: &str,
    d: &AttentionDims,
    seqs: &[(&str, Region)],
    blocks: &[(&str, Region)],
) -> Result<()> {
    for &(what, r) in seqs {
        check_len(kernel, what, r, d.sequence().numel())?;
    }
    for &(what, r) in blocks {
        check_len(kernel, what, r, d.probs().numel())?;
    }
    Ok(())
}

/// `probs` = the masked softmax of `q·kᵀ / sqrt(Dh)` per pair (see the CPU's
/// `attention_scores`): the raw scores, then each row's softmax in place.
pub(crate) fn attention_scores(
    l: &mut Launches,
    d: &AttentionDims,
    causal: bool,
    [q, k, probs]: [Region; 3],
    lengths: Option<Region>,
) -> Result<()> {
    const K: &str = "attention_scores";
    let g = Geometry::new(K, d)?;
    check_sizes(K, d, &[("q", q), ("k", k)], &[("probs", probs)])?;
    if let Some(lengths) = lengths {
        check_len(K, "lengths", lengths, d.batch)?;
    }
    dot(l, K, &g, [q, k, probs])?;
    let span = l.span();
    let f = Geometry::first;
    let all = 0..g.steps;
    let fits =
        |np, ni, _| g.rows(&f(np)).len() <= span && g.block(&f(np), &f(ni), &all).len() <= span;
    for p in parts(K, &g, 1, fits)? {
        let lengths_op = match lengths {
            Some(lengths) => Operand::part(lengths, g.rows(&p.ps)),
            None => Operand::part(probs, 0..1),
        };
        let ops = vec![
            lengths_op,
            Operand::part(probs, g.block(&p.ps, &p.ts, &all)),
        ];
        let values = vec![
            word(p.ps.start),
            word(p.ps.len()),
            word(p.ts.start),
            word(p.ts.len()),
            word(g.steps),
            word(g.heads),
            bits(d.scale()),
            u32::from(causal),
            u32::from(lengths.is_some()),
        ];
        l.push(&ATTENTION_SOFTMAX, ops, values, p.ps.len() * p.ts.len());
    }
    Ok(())
}

/// `dq`, `dk` of the weights' gradient `dprobs` (see the CPU's
/// `attention_scores_backward`): each query row's `r = Σ_j p·dp` into `dq` (its first
/// feature of the head), `dk = dsᵀ·q / sqrt(Dh)` reading it, then `dq = ds·k / sqrt(Dh)`
/// recomputing it.
pub(crate) fn attention_scores_backward(
    l: &mut Launches,
    d: &AttentionDims,
    [q, k, probs, dprobs]: [Region; 4],
    [dq, dk]: [Region; 2],
) -> Result<()> {
    const K: &str = "attention_scores_backward";
    let g = Geometry::new(K, d)?;
    let seqs = [("q", q), ("k", k), ("dq", dq), ("dk", dk)];
    check_sizes(K, d, &seqs, &[("probs", probs), ("dprobs", dprobs)])?;
    let span = l.span();
    let f = Geometry::first;
    let all = 0..g.steps;
    let fits = |np, ni, _| {
        g.block(&f(np), &f(ni), &all).len() <= span && g.seq(&f(ni), &f(np)).len() <= span
    };
    for p in parts(K, &g, 1, fits)? {
        let rows = g.block(&p.ps, &p.ts, &all);
        let ops = vec![
            Operand::part(probs, rows.clone()),
            Operand::part(dprobs, rows),
            Operand::part(dq, g.seq(&p.ts, &p.ps)),
        ];
        let values = vec![
            word(p.ps.start),
            word(p.ps.len()),
            word(p.ts.start),
            word(p.ts.len()),
            word(g.pairs),
            word(g.steps),
            word(g.dh),
        ];
        l.push(&ATTENTION_ROWSUM, ops, values, p.ps.len() * p.ts.len());
    }
    let grads = Some((dprobs, dq));
    let ds = |transposed| Weighing {
        grad: true,
        transposed,
        alpha: d.scale(),
    };
    mix(l, K, &g, ds(true), (probs, grads), [q, dk])?;
    mix(l, K, &g, ds(false), (probs, grads), [k, dq])
}

/// `out = probs · v` per pair.
pub(crate) fn attention_mix(
    l: &mut Launches,
    d: &AttentionDims,
    [probs, v, out]: [Region; 3],
) -> Result<()> {
    const K: &str = "attention_mix";
    let g = Geometry::new(K, d)?;
    check_sizes(K, d, &[("v", v), ("out", out)], &[("probs", probs)])?;
    let plain = Weighing {
        grad: false,
        transposed: false,
        alpha: 1.0,
    };
    mix(l, K, &g, plain, (probs, None), [v, out])
}

/// `dprobs = dout · vᵀ` and `dv = probsᵀ · dout` per pair.
pub(crate) fn attention_mix_backward(
    l: &mut Launches,
    d: &AttentionDims,
    [probs, v, dout]: [Region; 3],
    [dprobs, dv]: [Region; 2],
) -> Result<()> {
    const K: &str = "attention_mix_backward";
    let g = Geometry::new(K, d)?;
    let seqs = [("v", v), ("dout", dout), ("dv", dv)];
    check_sizes(K, d, &seqs, &[("probs", probs), ("dprobs", dprobs)])?;
    dot(l, K, &g, [dout, v, dprobs])?;
    let transposed = Weighing {
        grad: false,
        transposed: true,
        alpha: 1.0,
    };
    mix(l, K, &g, transposed, (probs, None), [dout, dv])
}

impl AttentionKernels for Launches {
    fn attention_scores(
        &mut self,
        d: AttentionDims,
        causal: bool,
        i: AttentionScoresInputs<Region>,
        o: AttentionScoresOutputs<Region>,
    ) -> Result<()> {
        attention_scores(self, &d, causal, [i.q, i.k, o.probs], i.lengths)
    }

    fn attention_scores_backward(
        &mut self,
        d: AttentionDims,
        i: AttentionScoresBackwardInputs<Region>,
        o: AttentionScoresBackwardOutputs<Region>,
    ) -> Result<()> {
        let inputs = [i.q, i.k, i.probs, i.dprobs];
        attention_scores_backward(self, &d, inputs, [o.dq, o.dk])
    }

    fn attention_mix(
        &mut self,
        d: AttentionDims,
        i: AttentionMixInputs<Region>,
        o: AttentionMixOutputs<Region>,
    ) -> Result<()> {
        attention_mix(self, &d, [i.probs, i.v, o.out])
    }

    fn attention_mix_backward(
        &mut self,
        d: AttentionDims,
        i: AttentionMixBackwardInputs<Region>,
        o: AttentionMixBackwardOutputs<Region>,
    ) -> Result<()> {
        attention_mix_backward(self, &d, [i.probs, i.v, i.dout], [o.dprobs, o.dv])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfit_core::Shape;

    fn geometry(t: usize, b: usize, features: usize, heads: usize) -> Geometry {
        let d = AttentionDims::of(heads, &Shape::from([t, b, features])).unwrap();
        Geometry::new("test", &d).unwrap()
    }

    /// Whether `list` covers every `(pair, step, inner step)` of `g` once, with each
    /// output block's inner windows consecutive and in order.
    fn covers_once(g: &Geometry, inner: usize, list: &[Part]) -> bool {
        let mut seen = vec![0u32; g.pairs * g.steps * inner];
        for (n, p) in list.iter().enumerate() {
            if p.ss.start > 0 {
                let before = &list[n - 1];
                if (&before.ps, &before.ts, before.ss.end) != (&p.ps, &p.ts, p.ss.start) {
                    return false;
                }
            }
            for pair in p.ps.clone() {
                for t in p.ts.clone() {
                    for s in p.ss.clone() {
                        seen[(pair * g.steps + t) * inner + s] += 1;
                    }
                }
            }
        }
        seen.iter().all(|&n| n == 1)
    }

    #[test]
    fn a_call_that_fits_is_one_launch_and_one_that_does_not_is_cut_to_fit() {
        let g = geometry(12, 2, 6, 3);
        let f = Geometry::first;
        for span in [10_000, 200, 40, 12] {
            let fits = |np, nt, ns| {
                g.seq(&f(nt), &f(np)).len() <= span
                    && g.seq(&f(ns), &f(np)).len() <= span
                    && g.block(&f(np), &f(nt), &f(ns)).len() <= span
            };
            let list = parts("test", &g, g.steps, fits).unwrap();
            assert!(covers_once(&g, g.steps, &list), "{span}");
            if span == 10_000 {
                assert_eq!(list.len(), 1);
            }
            for p in &list {
                assert!(g.seq(&p.ts, &p.ps).len() <= span && g.seq(&p.ss, &p.ps).len() <= span);
                assert!(g.block(&p.ps, &p.ts, &p.ss).len() <= span, "{p:?} {span}");
            }
        }
        // Whole rows of 12 weights do not fit 11 elements.
        let all = 0..12;
        let rows = |np, ni, _| g.block(&f(np), &f(ni), &all).len() <= 11;
        let err = parts("attention_scores", &g, 1, rows).unwrap_err();
        assert!(err.to_string().contains("attention_scores"), "{err}");
        let rows = |np, ni, _| g.block(&f(np), &f(ni), &all).len() <= 30;
        let list = parts("test", &g, 1, rows).unwrap();
        assert!(
            covers_once(&g, 1, &list) && list.len() == 6 * 6,
            "{}",
            list.len()
        );
    }

    #[test]
    fn the_ranges_hold_the_first_and_last_element_of_a_block() {
        let g = geometry(5, 3, 8, 2);
        // Steps 1..3 of pairs 2..5 (Dh 4, P 6): from (1·6 + 2)·4 to (2·6 + 5)·4.
        assert_eq!(g.seq(&(1..3), &(2..5)), 32..68);
        // Pairs 1..3, rows 2..4, columns 1..3 of [6, 5, 5].
        assert_eq!(g.block(&(1..3), &(2..4), &(1..3)), 36..68);
        assert_eq!(g.rows(&(1..5)), 0..3);
        assert_eq!(g.seq(&(0..0), &(0..3)), 0..0);
        let d = AttentionDims::of(1, &Shape::from([MAX_STEPS + 1, 1, 2])).unwrap();
        assert!(Geometry::new("attention_mix", &d).is_err());
    }
}
