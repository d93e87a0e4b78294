//! The positions of a sequence, as a Transformer encoder adds them to its inputs: a
//! table added to each step ([`Op::AddTimeRows`], a learned positional embedding) with
//! its gradient at the table ([`Op::SumBatchToRows`]), and the sinusoidal table of
//! "Attention is all you need" ([`Op::Sinusoids`]): their shape rules, the autodiff rule
//! of `AddTimeRows`, their kernels' methods ([`PositionKernels`]), and the frequencies
//! every backend computes the sinusoids from. Kept beside `op.rs` so that file stays small.
//!
//! **The sinusoids' accuracy.** `table[p, 2i] = sin(p · w_i)` with `w_i = 10000^(-2i/dim)`
//! is computed in f32 as `sin(f32(p) · w_i)`: the argument is one f32 product, whose
//! rounding (half an ulp of `p · w_i`, up to 6e-5 for `p` in 1024..2048) bounds how close
//! any f32 table comes to a float64 one. `w_i` is the product of the exactly rounded
//! factors `10000^(-2·2^k/dim)` for the bits `k` of `i`, ascending
//! ([`sinusoid_frequency`]): multiplications alone, which every backend rounds the same
//! way, so `w_i` and the argument are the same bits on every backend (an `exp` in f32 is
//! not: one ulp of `w_i` apart moves `sin(p · w_i)` by up to 1.2e-4 at `p` = 2047). Each
//! backend then takes the sine and cosine of that argument (CPU in f64, CUDA `sinf`/
//! `cosf`, wgpu a Cody–Waite reduction and Cephes' polynomials, ~1e-7), so backends
//! agree to ~2e-7, and each is within ~2e-4 of a float64 table for `p < 2048` (as
//! PyTorch's f32 `PositionalEncoding` is; tested in the CPU's `kernels/positions.rs`).

use crate::args::*;
use crate::error::Result;
use crate::graph::{Graph, TensorId};
use crate::kernels::KernelTypes;
use crate::op::Op;
use crate::op_shapes::named;
use crate::shape::{rank, Shape};

/// The most steps of a sinusoidal table: every position is exact in f32.
pub const SINUSOID_MAX_STEPS: usize = 1 << 24;
/// The most frequency factors ([`sinusoid_factors`]), so the widest table has
/// `2 · 2^16` columns.
pub const SINUSOID_FACTORS: usize = 16;

/// The output shapes of the three ops, their inputs checked.
pub(crate) fn position_shapes(op: &Op, list: Vec<&Shape>) -> Result<Vec<Shape>, String> {
    match op {
        Op::AddTimeRows => {
            let AddTimeRowsInputs { x, table } = named(list)?;
            rank(x, 3, "x")?;
            rank(table, 2, "table")?;
            if table.dim(1) != x.dim(2) {
                return Err(format!(
                    "table {table} must have rows of the {} features of x {x}",
                    x.dim(2)
                ));
            }
            fits(x.dim(0), table.dim(0))?;
            Ok(AddTimeRowsOutputs { out: x.clone() }.into_vec())
        }
        &Op::SumBatchToRows { rows } => {
            let SumBatchToRowsInputs { dout } = named(list)?;
            rank(dout, 3, "dout")?;
            fits(dout.dim(0), rows)?;
            let dtable = Shape::from([rows, dout.dim(2)]);
            Ok(SumBatchToRowsOutputs { dtable }.into_vec())
        }
        &Op::Sinusoids { steps, dim } => {
            let SinusoidsInputs(_) = named(list)?;
            if steps > SINUSOID_MAX_STEPS {
                return Err(format!(
                    "{steps} steps: positions from 2^24 on are not exact in f32"
                ));
            }
            if dim > 2 << SINUSOID_FACTORS {
                return Err(format!(
                    "dim {dim} is wider than the {} columns a table may have",
                    2 << SINUSOID_FACTORS
                ));
            }
            Ok(SinusoidsOutputs {
                table: Shape::from([steps, dim]),
            }
            .into_vec())
        }
        other => Err(format!("{} is not a position op", other.name())),
    }
}

/// A sequence of `steps` steps reads rows `0..steps` of a table of `positions` rows.
fn fits(steps: usize, positions: usize) -> Result<(), String> {
    if steps > positions {
        return Err(format!(
            "the sequence of {steps} steps is longer than the table's {positions} positions"
        ));
    }
    Ok(())
}

/// The gradients of [`Op::AddTimeRows`] (node `node`, inputs `x`, which of them are
/// wanted `need`) from `dout`: `x` gets `dout` itself, `table` its sum over the batch
/// ([`Op::SumBatchToRows`], zero past the sequence's steps).
pub(crate) fn add_time_rows_vjp(
    graph: &mut Graph,
    node: &str,
    x: AddTimeRowsInputs<TensorId>,
    need: AddTimeRowsInputs<bool>,
    dout: TensorId,
) -> Result<Vec<Option<TensorId>>> {
    let table = match need.table {
        true => {
            let op = Op::SumBatchToRows {
                rows: graph.shape(x.table).dim(0),
            };
            let inputs = SumBatchToRowsInputs { dout };
            Some(
                graph
                    .apply(&format!("{node}.grad_table"), op, inputs)?
                    .dtable,
            )
        }
        false => None,
    };
    let x = need.x.then_some(dout);
    Ok(AddTimeRowsInputs { x, table }.into_vec())
}

/// The factors `10000^(-2·2^k/dim)`, each rounded once from f64, for the bits `k` of the
/// largest frequency index `i < ceil(dim / 2)`: at most [`SINUSOID_FACTORS`] (the shape
/// rule refuses a wider table). The GPU backends pass them to their kernels.
pub fn sinusoid_factors(dim: usize) -> Vec<f32> {
    let largest = dim.div_ceil(2).saturating_sub(1);
    let bits = (usize::BITS - largest.leading_zeros()) as usize;
    (0..bits.min(SINUSOID_FACTORS))
        .map(|k| {
            let two_i = 2.0 * (1u64 << k) as f64;
            (-two_i * 10000f64.ln() / dim as f64).exp() as f32
        })
        .collect()
}

/// `w_i = 10000^(-2i/dim)` in f32: the product of `factors[k]` ([`sinusoid_factors`]) for
/// the bits `k` of `i`, in ascending `k`, exactly as every backend's kernel multiplies them.
pub fn sinusoid_frequency(i: usize, factors: &[f32]) -> f32 {
    let mut w = 1.0f32;
    for (k, &f) in factors.iter().enumerate() {
        if (i >> k) & 1 == 1 {
            w *= f;
        }
    }
    w
}

/// The position ops' kernels (a supertrait of [`crate::OpKernels`]), which each backend
/// implements in its own `positions` file.
pub trait PositionKernels: KernelTypes {
    fn add_time_rows(
        &mut self,
        s: AddTimeRowsInputs<&Shape>,
        i: AddTimeRowsInputs<Self::In>,
        o: AddTimeRowsOutputs<Self::Out>,
    ) -> Result<()>;

    /// `rows` is the op's attribute: the rows of `dtable`.
    fn sum_batch_to_rows(
        &mut self,
        rows: usize,
        s: SumBatchToRowsInputs<&Shape>,
        i: SumBatchToRowsInputs<Self::In>,
        o: SumBatchToRowsOutputs<Self::Out>,
    ) -> Result<()>;

    /// `steps` and `dim` are the op's attributes; there are no inputs.
    fn sinusoids(&mut self, steps: usize, dim: usize, o: SinusoidsOutputs<Self::Out>)
        -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::shape::shapes_of as shapes;

    #[test]
    fn a_table_of_positions_adds_to_every_step_it_reaches() {
        let tbd = vec![Shape::from([5, 3, 4])];
        assert_eq!(
            shapes(Op::AddTimeRows, &[&[5, 3, 4], &[5, 4]]).unwrap(),
            tbd
        );
        assert_eq!(
            shapes(Op::AddTimeRows, &[&[5, 3, 4], &[9, 4]]).unwrap(),
            tbd
        );
        let err = shapes(Op::AddTimeRows, &[&[6, 3, 4], &[5, 4]]).unwrap_err();
        assert!(
            err.contains("6 steps is longer than the table's 5 positions"),
            "{err}"
        );
        assert!(shapes(Op::AddTimeRows, &[&[5, 3, 4], &[5, 3]]).is_err());
        assert!(shapes(Op::AddTimeRows, &[&[5, 4], &[5, 4]]).is_err());
        assert!(shapes(Op::AddTimeRows, &[&[5, 3, 4], &[5, 1, 4]]).is_err());
        assert!(shapes(Op::AddTimeRows, &[&[5, 3, 4]]).is_err());
    }

    #[test]
    fn the_tables_gradient_has_the_tables_rows() {
        let sum = |rows| Op::SumBatchToRows { rows };
        assert_eq!(
            shapes(sum(7), &[&[5, 3, 4]]).unwrap(),
            vec![Shape::from([7, 4])]
        );
        assert_eq!(
            shapes(sum(5), &[&[5, 3, 4]]).unwrap(),
            vec![Shape::from([5, 4])]
        );
        let err = shapes(sum(4), &[&[5, 3, 4]]).unwrap_err();
        assert!(err.contains("longer than the table's 4 positions"), "{err}");
        assert!(shapes(sum(5), &[&[5, 4]]).is_err());
    }

    #[test]
    fn sinusoids_take_no_inputs_and_positions_exact_in_f32() {
        let op = |steps, dim| Op::Sinusoids { steps, dim };
        assert_eq!(shapes(op(7, 5), &[]).unwrap(), vec![Shape::from([7, 5])]);
        assert_eq!(shapes(op(0, 0), &[]).unwrap(), vec![Shape::from([0, 0])]);
        assert!(shapes(op(7, 5), &[&[1]]).is_err());
        assert!(shapes(op(SINUSOID_MAX_STEPS, 4), &[]).is_ok());
        let err = shapes(op(SINUSOID_MAX_STEPS + 1, 4), &[]).unwrap_err();
        assert!(err.contains("not exact in f32"), "{err}");
        assert!(shapes(op(3, 2 << SINUSOID_FACTORS), &[]).is_ok());
        assert!(shapes(op(3, (2 << SINUSOID_FACTORS) + 1), &[]).is_err());
    }

    #[test]
    fn the_frequencies_are_products_of_exactly_rounded_factors() {
        // dim 9: i in 0..5, bits 0..3.
        let f = sinusoid_factors(9);
        assert_eq!(f.len(), 3);
        assert!(sinusoid_factors(1).is_empty() && sinusoid_factors(2).is_empty());
        assert_eq!(sinusoid_factors(3).len(), 1);
        assert_eq!(
            sinusoid_factors(2 << SINUSOID_FACTORS).len(),
            SINUSOID_FACTORS
        );
        assert_eq!(sinusoid_frequency(0, &f), 1.0);
        assert_eq!(sinusoid_frequency(1, &f), f[0]);
        assert_eq!(sinusoid_frequency(4, &f), f[2]);
        assert_eq!(sinusoid_frequency(3, &f), f[0] * f[1]);
        for i in 0..5 {
            let exact = (-2.0 * i as f64 * 10000f64.ln() / 9.0).exp();
            let w = f64::from(sinusoid_frequency(i, &f));
            assert!((w - exact).abs() <= 2e-7 * exact, "w_{i} = {w} vs {exact}");
        }
    }
}
