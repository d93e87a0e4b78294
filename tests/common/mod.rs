//! Helpers shared by the cross-crate tests: one closeness rule and a tiny PRNG.

#![allow(dead_code)]

/// The closeness rule of the whole project: |a - b| <= atol + rtol * |reference|.
pub fn assert_close(what: &str, got: &[f32], want: &[f32], atol: f32, rtol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    let mut worst = (0.0f32, 0usize);
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        let excess = (a - b).abs() - (atol + rtol * b.abs());
        if excess > worst.0 || !a.is_finite() {
            worst = (excess.max(f32::MIN_POSITIVE), i);
        }
    }
    if worst.0 > 0.0 {
        let i = worst.1;
        panic!(
            "{what}: element {i} is {} but the reference is {} (atol {atol}, rtol {rtol})",
            got[i], want[i]
        );
    }
}

/// Largest absolute value (the scale used for a tensor-relative tolerance).
pub fn max_abs(v: &[f32]) -> f32 {
    v.iter().fold(0.0f32, |m, x| m.max(x.abs()))
}
