//! The positions of a sequence: `add_time_rows` (a table of positions added to each
//! step), its gradient at the table `sum_batch_to_rows`, and `sinusoids` (the table of
//! "Attention is all you need").
//!
//! Sequences are `[T, B, D]`, tables `[N, D]` with `N >= T`. Each kernel is one plain
//! pass, the reference the GPU kernels are tested against; every size is checked against
//! the slices before anything is written.

use tensorfit_core::args::*;
use tensorfit_core::positions_ops::{sinusoid_factors, sinusoid_frequency};
use tensorfit_core::{PositionKernels, Result, Shape};

use super::{check_len, HostKernels};
use crate::backend_error;

/// `(T, B, D)`: the steps, batch rows and features of a sequence.
type Dims = (usize, usize, usize);

/// A sequence of `steps` steps and a table of `positions` rows, or an error naming the
/// kernel.
fn check_fits(kernel: &str, steps: usize, positions: usize) -> Result<()> {
    if steps > positions {
        return Err(backend_error(format!(
            "{kernel}: the sequence of {steps} steps is longer than the table's {positions} positions"
        )));
    }
    Ok(())
}

/// `out[t, b] = x[t, b] + table[t]` for `x`, `out` `[T, B, D]` (`dims`) and `table`
/// `[N, D]`, `N >= T` (rows `T..N` are not read).
pub fn add_time_rows(
    (steps, batch, width): Dims,
    x: &[f32],
    table: &[f32],
    out: &mut [f32],
) -> Result<()> {
    const K: &str = "add_time_rows";
    let step = batch.saturating_mul(width);
    check_len(K, "x", x, steps.saturating_mul(step))?;
    check_len(K, "out", out, x.len())?;
    let positions = match table.len().checked_div(width) {
        Some(n) if n * width == table.len() => n,
        None if table.is_empty() => steps,
        _ => {
            return Err(backend_error(format!(
                "{K}: `table` has {} elements, not rows of {width}",
                table.len()
            )))
        }
    };
    check_fits(K, steps, positions)?;
    if step == 0 {
        return Ok(());
    }
    for (t, (x, out)) in x
        .chunks_exact(step)
        .zip(out.chunks_exact_mut(step))
        .enumerate()
    {
        let row = &table[t * width..][..width];
        for (x, out) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
            for ((o, &v), &p) in out.iter_mut().zip(x).zip(row) {
                *o = v + p;
            }
        }
    }
    Ok(())
}

/// `dtable[t] = Σ_b dout[t, b]` for `dout` `[T, B, D]` (`dims`) and `dtable` `[rows, D]`,
/// summed in `b` order in f32 (as the GPU kernels sum); rows `T..rows` zero.
pub fn sum_batch_to_rows(
    (steps, batch, width): Dims,
    rows: usize,
    dout: &[f32],
    dtable: &mut [f32],
) -> Result<()> {
    const K: &str = "sum_batch_to_rows";
    check_len(K, "dout", dout, steps * batch * width)?;
    check_len(K, "dtable", dtable, rows.saturating_mul(width))?;
    check_fits(K, steps, rows)?;
    dtable.fill(0.0);
    if width == 0 {
        return Ok(());
    }
    for (t, sum) in dtable.chunks_exact_mut(width).take(steps).enumerate() {
        for b in 0..batch {
            let row = &dout[(t * batch + b) * width..][..width];
            sum.iter_mut().zip(row).for_each(|(s, &v)| *s += v);
        }
    }
    Ok(())
}

/// `table[p, 2i] = sin(p · w_i)`, `table[p, 2i + 1] = cos(p · w_i)` for `table`
/// `[steps, dim]`, the argument the f32 product `f32(p) · w_i` of every backend
/// ([`sinusoid_frequency`]), its sine and cosine taken in f64 and rounded once.
pub fn sinusoids(steps: usize, dim: usize, table: &mut [f32]) -> Result<()> {
    check_len("sinusoids", "table", table, steps.saturating_mul(dim))?;
    if dim == 0 {
        return Ok(());
    }
    let factors = sinusoid_factors(dim);
    let w: Vec<f32> = (0..dim.div_ceil(2))
        .map(|i| sinusoid_frequency(i, &factors))
        .collect();
    for (p, row) in table.chunks_exact_mut(dim).enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            let arg = f64::from(p as f32 * w[j / 2]);
            *v = if j % 2 == 0 { arg.sin() } else { arg.cos() } as f32;
        }
    }
    Ok(())
}

impl<'a> PositionKernels for HostKernels<'a> {
    fn add_time_rows(
        &mut self,
        s: AddTimeRowsInputs<&Shape>,
        i: AddTimeRowsInputs<Self::In>,
        o: AddTimeRowsOutputs<Self::Out>,
    ) -> Result<()> {
        let dims = (s.x.dim(0), s.x.dim(1), s.x.dim(2));
        add_time_rows(dims, i.x, i.table, o.out)
    }

    fn sum_batch_to_rows(
        &mut self,
        rows: usize,
        s: SumBatchToRowsInputs<&Shape>,
        i: SumBatchToRowsInputs<Self::In>,
        o: SumBatchToRowsOutputs<Self::Out>,
    ) -> Result<()> {
        let dims = (s.dout.dim(0), s.dout.dim(1), s.dout.dim(2));
        sum_batch_to_rows(dims, rows, i.dout, o.dtable)
    }

    fn sinusoids(
        &mut self,
        steps: usize,
        dim: usize,
        o: SinusoidsOutputs<Self::Out>,
    ) -> Result<()> {
        sinusoids(steps, dim, o.table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_step_gets_its_own_row_of_the_table() {
        // x [2, 3, 2], table [4, 2]: rows 2 and 3 unread.
        let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let table = [
            100.0,
            200.0,
            300.0,
            400.0,
            f32::NAN,
            f32::NAN,
            f32::NAN,
            f32::NAN,
        ];
        let mut out = [0.0; 12];
        add_time_rows((2, 3, 2), &x, &table, &mut out).unwrap();
        let want = [
            100.0, 201.0, 102.0, 203.0, 104.0, 205.0, 306.0, 407.0, 308.0, 409.0, 310.0, 411.0,
        ];
        assert_eq!(out, want);
        // A table of fewer rows than steps, or of other widths, leaves out untouched.
        let mut out = [7.0; 12];
        let err = add_time_rows((2, 3, 2), &x, &table[..2], &mut out).unwrap_err();
        assert!(
            err.to_string()
                .contains("longer than the table's 1 positions"),
            "{err}"
        );
        assert!(add_time_rows((2, 3, 2), &x, &table[..5], &mut out).is_err());
        assert!(add_time_rows((2, 3, 2), &x[..11], &table, &mut out).is_err());
        assert_eq!(out, [7.0; 12]);
        // No steps or no features.
        add_time_rows((0, 3, 2), &[], &table, &mut []).unwrap();
        add_time_rows((2, 3, 0), &[], &[], &mut []).unwrap();
    }

    #[test]
    fn the_tables_gradient_sums_the_batch_and_zeroes_the_rows_past_the_steps() {
        let dout: Vec<f32> = (0..12).map(|v| v as f32).collect(); // [2, 3, 2]
        let mut dtable = [f32::NAN; 8];
        sum_batch_to_rows((2, 3, 2), 4, &dout, &mut dtable).unwrap();
        assert_eq!(dtable, [6.0, 9.0, 24.0, 27.0, 0.0, 0.0, 0.0, 0.0]);
        assert!(sum_batch_to_rows((2, 3, 2), 1, &dout, &mut dtable[..2]).is_err());
        assert!(sum_batch_to_rows((2, 3, 2), 4, &dout, &mut dtable[..6]).is_err());
        let mut empty = [f32::NAN; 4];
        sum_batch_to_rows((0, 3, 2), 2, &[], &mut empty).unwrap();
        assert_eq!(empty, [0.0; 4]);
    }

    /// `np.where(j % 2 == 0, sin(a), cos(a))` with `a = p · exp(-ln(10000) · 2(j // 2) / 7)`
    /// in float64, `p` in 0, 1, 50, 2047 (numpy 2, `/work/torch-venv`):
    /// `a = p[:, None] * np.exp(-np.log(10000.0) * (2 * (np.arange(7) // 2)) / 7)[None, :]`.
    const GOLDEN: [[f64; 7]; 4] = [
        [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0],
        [
            0.8414709848078965,
            0.5403023058681398,
            0.0719064568252737,
            0.9974113802573314,
            0.005179451521004034,
            0.9999865865510105,
            0.00037275936339903603,
        ],
        [
            -0.26237485370392877,
            0.9649660284921133,
            -0.44111052044584087,
            -0.8974527891493789,
            0.256088643470368,
            0.9666533022162117,
            0.01863688956309151,
        ],
        [
            -0.9683193119086263,
            0.24971525821383958,
            0.328955642364347,
            -0.9443453739795943,
            -0.92369170079736,
            -0.3831365838419511,
            0.6911206284107694,
        ],
    ];

    #[test]
    fn sinusoids_match_numpys_float64_table_to_the_f32_arguments_rounding() {
        let mut table = vec![0.0; 2048 * 7];
        sinusoids(2048, 7, &mut table).unwrap();
        for (row, p) in GOLDEN.iter().zip([0, 1, 50, 2047]) {
            for (j, &want) in row.iter().enumerate() {
                let got = f64::from(table[p * 7 + j]);
                // Position 2047: half an ulp of the argument (6e-5) and w_i's rounding.
                let tol = if p < 64 { 1e-6 } else { 2e-4 };
                assert!((got - want).abs() <= tol, "[{p}, {j}]: {got} vs {want}");
            }
        }
    }

    #[test]
    fn every_position_below_2048_is_within_2e_4_of_the_float64_table() {
        for dim in [1, 2, 64, 512, 1023] {
            let steps = 2048;
            let mut table = vec![0.0; steps * dim];
            sinusoids(steps, dim, &mut table).unwrap();
            let mut worst = 0.0f64;
            for p in 0..steps {
                for j in 0..dim {
                    let w = (-10000f64.ln() * (2 * (j / 2)) as f64 / dim as f64).exp();
                    let a = p as f64 * w;
                    let want = if j % 2 == 0 { a.sin() } else { a.cos() };
                    worst = worst.max((f64::from(table[p * dim + j]) - want).abs());
                }
            }
            assert!(worst <= 2e-4, "dim {dim}: {worst:e}");
        }
        assert!(sinusoids(3, 4, &mut [0.0; 11]).is_err());
        sinusoids(0, 4, &mut []).unwrap();
        sinusoids(4, 0, &mut []).unwrap();
    }
}
