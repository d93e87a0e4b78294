//! The error function and the exact GELU built on it (PyTorch's `nn.GELU()`, whose
//! default `approximate="none"` is `0.5 · x · (1 + erf(x / √2))`), as the CPU reference
//! computes them: in f64, rounded once to f32, so each result is within about one f32
//! rounding (~6e-8 relative) of the true value.
//!
//! `erf(z)` below 2.5 is the series `(2/√π) e^{-z²} Σ_n 2^n z^{2n+1} / (2n+1)!!`, whose
//! terms are all positive (no cancellation; at most ~40 of them); from 2.5 on `erfc(z)`
//! is Laplace's continued fraction, 40 levels evaluated from the tail (relative error
//! below 1e-14 there). GELU is written with `erfc` so that its left tail, where
//! `1 + erf` cancels, keeps its relative accuracy: `gelu(x) = 0.5 · x · erfc(-x/√2)`.
//! The GPU backends compute the same functions in f32 (wgpu with its own `erfc`, CUDA
//! with `erfcf`), within the conformance tolerance of these.

use std::f64::consts::{FRAC_1_SQRT_2, FRAC_2_SQRT_PI, PI};

/// Where the series stops and the continued fraction takes over.
const SPLIT: f64 = 2.5;
/// Levels of the continued fraction.
const LEVELS: u32 = 40;

/// `erf(z)` for `0 <= z < SPLIT` by the positive series.
fn erf_series(z: f64) -> f64 {
    let (mut term, mut sum, mut n) = (z, z, 0.0);
    // Each term is the last times 2z²/(2n+1) < 1 once n > z², so this ends (and a NaN
    // fails the comparison at once).
    while term > 1e-17 * sum {
        n += 1.0;
        term *= 2.0 * z * z / (2.0 * n + 1.0);
        sum += term;
    }
    FRAC_2_SQRT_PI * (-z * z).exp() * sum
}

/// `erfc(z)` for `z >= SPLIT` by Laplace's continued fraction
/// `e^{-z²}/√π · 1/(z + (1/2)/(z + 1/(z + (3/2)/(z + …))))`.
fn erfc_fraction(z: f64) -> f64 {
    let mut f = z;
    for k in (1..=LEVELS).rev() {
        f = z + f64::from(k) / 2.0 / f;
    }
    (-z * z).exp() / PI.sqrt() / f
}

/// `erfc(z)` in f64, for every `z`.
fn erfc64(z: f64) -> f64 {
    let a = z.abs();
    let tail = if a < SPLIT {
        1.0 - erf_series(a)
    } else {
        erfc_fraction(a)
    };
    if z >= 0.0 || z.is_nan() {
        tail
    } else {
        2.0 - tail
    }
}

/// The error function, `(2/√π) ∫_0^x e^{-t²} dt`.
pub fn erf(x: f32) -> f32 {
    let z = f64::from(x);
    let a = z.abs();
    let e = if a < SPLIT {
        erf_series(a)
    } else {
        1.0 - erfc_fraction(a)
    };
    e.copysign(z) as f32
}

/// The complementary error function, `1 - erf(x)`, accurate in its tail too.
pub fn erfc(x: f32) -> f32 {
    erfc64(f64::from(x)) as f32
}

/// The standard normal distribution function `Φ(x) = 0.5 · erfc(-x/√2)` in f64.
fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc64(-x * FRAC_1_SQRT_2)
}

/// GELU, `x · Φ(x)`.
pub fn gelu(x: f32) -> f32 {
    let x = f64::from(x);
    (x * normal_cdf(x)) as f32
}

/// GELU's derivative, `Φ(x) + x · φ(x)` with `φ(x) = e^{-x²/2} / √(2π)`.
pub fn gelu_derivative(x: f32) -> f32 {
    let x = f64::from(x);
    let density = (-0.5 * x * x).exp() / (2.0 * PI).sqrt();
    (normal_cdf(x) + x * density) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Produced in float64 at the f32 inputs by PyTorch 2.15 (`/work/torch-venv`):
    /// `x = torch.tensor(X).double().requires_grad_(); y = F.gelu(x); y.sum().backward();
    /// print(torch.erf(x).tolist(), y.tolist(), x.grad.tolist())`.
    const X: [f32; 12] = [
        -6.0, -3.0, -1.5, -0.5, -1e-3, 0.0, 1e-3, 0.5, 1.0, 2.5, 4.0, 10.0,
    ];
    const ERF: [f64; 12] = [
        -1.0,
        -0.9999779095030014,
        -0.9661051464753108,
        -0.5204998778130465,
        -0.0011283788445643173,
        0.0,
        0.0011283788445643173,
        0.5204998778130465,
        0.8427007929497149,
        0.999593047982555,
        0.9999999845827421,
        1.0,
    ];
    const GELU: [f64; 12] = [
        -5.919525869479969e-09,
        -0.00404969409489031,
        -0.10021080190328704,
        -0.15426876936299344,
        -0.0004996010814969171,
        0.0,
        0.0005003989660005341,
        0.34573123063700656,
        0.841344746068543,
        2.4844758366855597,
        3.9998733150326675,
        10.0,
    ];
    const GELU_GRAD: [f64; 12] = [
        -3.546870945402639e-08,
        -0.01194564720418392,
        -0.1274691922299796,
        0.13250487534383712,
        0.49920211566726114,
        0.5,
        0.5007978843327388,
        0.8674951246561629,
        1.0833154705876864,
        1.037611085908145,
        1.0005036496612265,
        1.0,
    ];

    /// Within one f32 rounding (2^-24 relative) of PyTorch's float64 value, and a hair.
    fn assert_f32_of(what: &str, x: f32, got: f32, want: f64) {
        let err = (f64::from(got) - want).abs();
        assert!(
            err <= 6.1e-8 * want.abs(),
            "{what}({x}) = {got:e}, PyTorch {want:e} (relative {:e})",
            err / want.abs()
        );
    }

    #[test]
    fn erf_gelu_and_its_derivative_match_pytorch_in_float64() {
        for k in 0..X.len() {
            assert_f32_of("erf", X[k], erf(X[k]), ERF[k]);
            assert_f32_of("gelu", X[k], gelu(X[k]), GELU[k]);
            assert_f32_of("gelu'", X[k], gelu_derivative(X[k]), GELU_GRAD[k]);
        }
    }

    #[test]
    fn erf_is_odd_and_erfc_keeps_its_tail() {
        for x in [0.1f32, 0.7, 2.49, 2.5, 3.3, 9.0] {
            assert_eq!(erf(-x), -erf(x));
            assert_eq!(erfc(x) + erfc(-x), 2.0, "{x}");
        }
        // erfc(5) = 1.5374597944280349e-12 (math.erfc), which 1 - erf cannot reach in f32.
        let tail = f64::from(erfc(5.0));
        assert!(
            (tail - 1.537_459_794_428_035e-12).abs() <= 1.2e-7 * tail,
            "{tail:e}"
        );
        assert_eq!((erf(f32::INFINITY), erf(f32::NEG_INFINITY)), (1.0, -1.0));
        assert!(erf(f32::NAN).is_nan() && gelu(f32::NAN).is_nan());
        assert_eq!(gelu(-40.0), 0.0);
        assert_eq!(gelu_derivative(-40.0), 0.0);
    }

    #[test]
    fn the_derivative_is_the_difference_quotient() {
        for x in [-4.0f64, -1.3, -0.2, 0.0, 0.6, 2.0, 3.7] {
            let h = 1e-3;
            let q = (f64::from(gelu((x + h) as f32)) - f64::from(gelu((x - h) as f32))) / (2.0 * h);
            let d = f64::from(gelu_derivative(x as f32));
            assert!((q - d).abs() < 1e-4, "{x}: {q} vs {d}");
        }
    }
}
