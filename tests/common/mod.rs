//! Helpers shared by the cross-crate tests: one closeness rule, and running the CLI.

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

/// A scratch directory for this test process (`name` below it).
pub fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir()
        .join(format!("tensorfit-test-{}", std::process::id()))
        .join(name);
    std::fs::create_dir_all(&d).expect("scratch directory");
    d
}

/// The `tensorfit` binary, with its throughput cache kept in the scratch directory.
pub fn tensorfit_command() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_tensorfit"));
    c.env("XDG_CACHE_HOME", scratch("cache"));
    c
}
