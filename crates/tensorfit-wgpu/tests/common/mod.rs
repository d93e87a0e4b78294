//! Opening the device for this crate's tests: skipped with the reason printed when no
//! adapter exists, a failure when `TENSORFIT_REQUIRE` names wgpu.

#![allow(dead_code)]

use tensorfit_wgpu::WgpuBackend;

/// Whether `TENSORFIT_REQUIRE` (a comma list of device kinds) names wgpu.
pub fn required() -> bool {
    std::env::var("TENSORFIT_REQUIRE")
        .unwrap_or_default()
        .split(',')
        .any(|k| k.trim().eq_ignore_ascii_case("wgpu"))
}

/// The device, or `None` (with the reason printed) when there is none.
pub fn device(test: &str) -> Option<WgpuBackend> {
    match WgpuBackend::new() {
        Ok(b) => Some(b),
        Err(e) => {
            println!("wgpu: skipped — {e}");
            assert!(
                !required(),
                "{test}: wgpu is required (TENSORFIT_REQUIRE) but: {e}"
            );
            None
        }
    }
}

/// Deterministic values in [-scale, scale).
pub fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// Largest |a - b| / (atol + rtol·|b|) over the elements (≤ 1 passes).
pub fn worst(got: &[f32], want: &[f32], atol: f32, rtol: f32) -> f32 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(a, b)| {
            if a.is_nan() {
                f32::INFINITY
            } else {
                (a - b).abs() / (atol + rtol * b.abs())
            }
        })
        .fold(0.0, f32::max)
}
