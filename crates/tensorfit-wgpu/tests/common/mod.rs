//! Opening the device for this crate's tests: skipped with the reason printed when no
//! adapter exists, a failure when `TENSORFIT_REQUIRE` names wgpu.

#![allow(dead_code)]

use tensorfit_wgpu::WgpuBackend;

/// The device, or `None` (with the reason printed) when there is none.
pub fn device(test: &str) -> Option<WgpuBackend> {
    match WgpuBackend::new() {
        Ok(b) => Some(b),
        Err(e) => {
            tensorfit_testing::skip(test, "wgpu", &e.to_string());
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

/// Largest |a - b| / (atol + rtol·|b|) over the elements (≤ 1 passes): the project's
/// one closeness rule (`tensorfit_testing::ratio`).
pub fn worst(got: &[f32], want: &[f32], atol: f32, rtol: f32) -> f32 {
    assert_eq!(got.len(), want.len());
    tensorfit_testing::worst(got, want, atol as f64, rtol as f64).map_or(0.0, |(_, r)| r as f32)
}
