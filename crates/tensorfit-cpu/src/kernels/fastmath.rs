//! `exp`, `sigmoid` and `tanh` written as straight-line float arithmetic, for the LSTM's
//! fused gate pass.
//!
//! Why: the standard library's `f32::exp`/`tanh` are calls into libm, one element at a
//! time, and the gate pass makes five of them per unit per step — at the seed network's
//! sizes that was a large share of a training step. These versions have no calls and no
//! data-dependent branches (the `if`s become selects), so a loop over a slice of them is
//! vectorised by the compiler: with AVX-512 when the loop runs inside
//! `gemm_fast::vectorize`, with SSE2 otherwise.
//!
//! Every `a·b + c` goes through [`MulAdd`]: the AVX-512 fast path uses [`Fused`]
//! (fused multiply-adds: one rounding, and half the latency of a multiply then an add,
//! which is what bounds the gate pass; see docs/cpu-performance.md), the portable path
//! and the reference [`Separate`]. Each gives the same bits on every CPU that runs it; the two differ
//! from each other in the last bits.
//!
//! Accuracy: `exp` is Cephes' `expf` (range reduction by ln 2 in two parts, a degree-6
//! polynomial), within 2 ulp of the true value; `sigmoid` and `tanh` built on it are
//! within a few 1e-8 absolute (the unit tests check both kinds against f64 on dense
//! grids).

/// How the functions of this module compute `a·b + c`.
pub trait MulAdd {
    fn mul_add(a: f32, b: f32, c: f32) -> f32;
}

/// One rounding, an FMA instruction: for code compiled with FMA (the AVX-512 fast
/// path). Elsewhere `f32::mul_add` is a slow library call.
#[derive(Debug)]
pub struct Fused;

/// A multiply, then an add: for the portable path, compiled without FMA.
#[derive(Debug)]
pub struct Separate;

impl MulAdd for Fused {
    #[inline(always)]
    fn mul_add(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

impl MulAdd for Separate {
    #[inline(always)]
    fn mul_add(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// `1.5 · 2^23`: adding and subtracting it rounds an `f32` of magnitude < 2^22 to the
/// nearest integer, and the sum's low mantissa bits hold that integer.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// e^x, for any finite x (clamped to the range where e^x is a normal `f32`).
#[inline(always)]
pub fn exp<M: MulAdd>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = x.clamp(-87.3, 88.3);
    // x = n·ln2 + r with |r| <= ln2/2.
    let shifted = M::mul_add(x, LOG2E, ROUND_MAGIC);
    let n = shifted - ROUND_MAGIC;
    let r = M::mul_add(n, -LN2_HI, x);
    let r = M::mul_add(n, -LN2_LO, r);
    let r2 = r * r;
    let p = 1.987_569_1e-4;
    let p = M::mul_add(p, r, 1.398_2e-3);
    let p = M::mul_add(p, r, 8.333_452e-3);
    let p = M::mul_add(p, r, 4.166_579_6e-2);
    let p = M::mul_add(p, r, 1.666_666_5e-1);
    let p = M::mul_add(p, r, 0.5);
    let e_r = M::mul_add(p, r2, r) + 1.0;
    // 2^n from the integer in the low bits of `shifted` (n in [-126, 128)).
    let n_int = shifted.to_bits().wrapping_sub(ROUND_MAGIC.to_bits()) as i32;
    let two_n = f32::from_bits(((n_int + 127) as u32) << 23);
    e_r * two_n
}

/// σ(x) = 1 / (1 + e^-x).
#[inline(always)]
pub fn sigmoid<M: MulAdd>(x: f32) -> f32 {
    1.0 / (1.0 + exp::<M>(-x))
}

/// tanh(x): (1 - e^-2|x|) / (1 + e^-2|x|) with the sign of x; near 0, where that
/// difference would cancel, the Taylor series x - x³/3 + 2x⁵/15.
#[inline(always)]
pub fn tanh<M: MulAdd>(x: f32) -> f32 {
    let a = x.abs();
    let e = exp::<M>(-2.0 * a);
    let big = (1.0 - e) / (1.0 + e);
    let t = if a < 0.0625 { tanh_small::<M>(a) } else { big };
    t.copysign(x)
}

/// `(σ(a), tanh(b))` with one division instead of two — division is the slowest
/// vector operation of the gate pass. With `da = 1 + e^-a` and `e = e^-2|b|`,
/// `db = 1 + e` lies in (1, 2], so `r = 1 / (da · db)` gives `σ(a) = db · r` and
/// `tanh(b) = ±(1 - e) · da · r`. `a` is clamped to ≥ -80 so that `da · db` cannot
/// overflow: below that σ(a) is returned as σ(-80) ≈ 1.8e-35 instead of a smaller
/// number, a difference no f32 computation downstream can see.
#[inline(always)]
pub fn sigmoid_and_tanh<M: MulAdd>(a: f32, b: f32) -> (f32, f32) {
    let da = 1.0 + exp::<M>(-a.max(-80.0));
    let abs_b = b.abs();
    let e = exp::<M>(-2.0 * abs_b);
    let db = 1.0 + e;
    let r = 1.0 / (da * db);
    let big = (1.0 - e) * da * r;
    let t = if abs_b < 0.0625 {
        tanh_small::<M>(abs_b)
    } else {
        big
    };
    (db * r, t.copysign(b))
}

/// tanh(a) for 0 ≤ a < 0.0625 by its Taylor series, where `(1 - e)/(1 + e)` would
/// cancel.
#[inline(always)]
fn tanh_small<M: MulAdd>(a: f32) -> f32 {
    let a2 = a * a;
    M::mul_add(a * a2, M::mul_add(a2, 2.0 / 15.0, -1.0 / 3.0), a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_to_f64_on_a_dense_grid() {
        close_to_f64::<Fused>();
        close_to_f64::<Separate>();
    }

    fn close_to_f64<M: MulAdd>() {
        let (mut worst_exp, mut worst_sig, mut worst_tanh) = (0.0f64, 0.0f64, 0.0f64);
        let mut x = -95.0f32;
        while x < 95.0 {
            let xd = x as f64;
            if (-87.0..88.0).contains(&x) {
                let rel = ((exp::<M>(x) as f64 - xd.exp()) / xd.exp()).abs();
                worst_exp = worst_exp.max(rel);
            }
            let s = 1.0 / (1.0 + (-xd).exp());
            worst_sig = worst_sig.max((sigmoid::<M>(x) as f64 - s).abs() / s.clamp(1e-30, 1.0));
            worst_tanh = worst_tanh.max((tanh::<M>(x) as f64 - xd.tanh()).abs());
            x += if x.abs() < 1.0 { 1.0e-4 } else { 3.7e-3 };
        }
        let kind = std::any::type_name::<M>();
        assert!(worst_exp < 3e-7, "{kind} exp: relative error {worst_exp:e}");
        assert!(
            worst_sig < 1e-6,
            "{kind} sigmoid: relative error {worst_sig:e}"
        );
        assert!(
            worst_tanh < 2e-7,
            "{kind} tanh: absolute error {worst_tanh:e}"
        );
        assert_eq!(tanh::<M>(0.0), 0.0);
        assert!(sigmoid::<M>(-100.0) >= 0.0 && sigmoid::<M>(100.0) == 1.0);
        assert!(tanh::<M>(-30.0) == -1.0 && tanh::<M>(30.0) == 1.0);
    }

    #[test]
    fn paired_sigmoid_and_tanh_match_f64_everywhere() {
        paired_close_to_f64::<Fused>();
        paired_close_to_f64::<Separate>();
    }

    fn paired_close_to_f64<M: MulAdd>() {
        let grid: Vec<f32> = (-400..=400)
            .map(|k| k as f32 * 0.25)
            .chain([-1e30, -1e-3, 0.0, 1e-3, 0.05, 1e30])
            .collect();
        let (mut worst_sig, mut worst_tanh) = (0.0f64, 0.0f64);
        for &a in &grid {
            for &b in &grid {
                let (s, t) = sigmoid_and_tanh::<M>(a, b);
                let s64 = 1.0 / (1.0 + (-(a as f64)).exp());
                worst_sig = worst_sig.max((s as f64 - s64).abs() / (s64 + 1e-28));
                worst_tanh = worst_tanh.max((t as f64 - (b as f64).tanh()).abs());
            }
        }
        // (relative to σ + 1e-28: the clamp at -80 returns 1.8e-35 for smaller σ.)
        let kind = std::any::type_name::<M>();
        assert!(
            worst_sig < 1e-6,
            "{kind} sigmoid: relative error {worst_sig:e}"
        );
        assert!(
            worst_tanh < 3e-7,
            "{kind} tanh: absolute error {worst_tanh:e}"
        );
    }
}
