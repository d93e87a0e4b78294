//! tensorfit-testing: what every crate's tests share, written once (candle's
//! `test_utils.rs` is the model). A dev-dependency only; nothing here runs in a program.
//!
//! - [`TestRng`]: test data from the project's one generator ([`Rng`], SplitMix64), so a
//!   test needs no `rand` and its inputs are the same on every machine;
//! - the one closeness rule ([`ratio`], [`assert_close`], and [`Checks`], which counts and
//!   reports many comparisons at once): `|got − want| ≤ atol + rtol·|want|`;
//! - devices: which kinds `TENSORFIT_REQUIRE` demands ([`required`]), the skip rule
//!   ([`skip`]: print why, or fail when the kind is required), and [`present`], which
//!   opens each [`Device`] of a suite's list once to see that it can be;
//! - [`scratch_dir`]: a test process's scratch directory, swept once the process ended;
//!   [`repo_file`]: a file of the repository (example data, reference files) by its path;
//! - [`mpirun`]: MPI ranks launched from a test, bounded in time;
//! - [`files`]: zip, `.npy` and safetensors files written byte for byte, as Python does.

pub mod files;
pub mod mpirun;

pub use tensorfit_core::Rng;

use std::fmt;
use std::sync::Arc;

use tensorfit_core::Backend;

mod scratch;
pub use scratch::{repo_file, scratch_dir};

/// Test data drawn from [`Rng`].
pub trait TestRng {
    /// Uniform in [-1, 1), from the top 24 bits of one draw.
    fn signed(&mut self) -> f32;

    /// `n` values of [`TestRng::signed`].
    fn signed_vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.signed()).collect()
    }

    /// Uniform integer in [lo, hi] (`hi >= lo`).
    fn range(&mut self, lo: usize, hi: usize) -> usize;

    /// Uniform in the open interval (0, 1), from the top 53 bits of one draw.
    fn open_unit(&mut self) -> f64;
}

impl TestRng for Rng {
    fn signed(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    fn open_unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
}

/// The closeness rule of the whole project for one element: how far `got` is from `want`
/// as a fraction of what `|got − want| ≤ atol + rtol·|want|` allows (≤ 1 passes). NaN
/// matches only NaN; an infinity only the same infinity.
pub fn ratio(got: f64, want: f64, atol: f64, rtol: f64) -> f64 {
    if got.is_nan() || want.is_nan() {
        return if got.is_nan() && want.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if got == want {
        return 0.0;
    }
    (got - want).abs() / (atol + rtol * want.abs())
}

/// The worst element of `got` against `want` under the rule: its index and [`ratio`]
/// (`None` for empty slices).
pub fn worst<W: Copy + Into<f64>>(
    got: &[f32],
    want: &[W],
    atol: f64,
    rtol: f64,
) -> Option<(usize, f64)> {
    got.iter()
        .zip(want)
        .map(|(&g, &w)| ratio(g as f64, w.into(), atol, rtol))
        .enumerate()
        .fold(None, |best, (i, r)| match best {
            Some((_, b)) if b >= r => best,
            _ => Some((i, r)),
        })
}

/// Asserts the rule for every element, naming `what` and the worst element on failure.
pub fn assert_close<W: Copy + Into<f64> + std::fmt::Display>(
    what: &str,
    got: &[f32],
    want: &[W],
    atol: f64,
    rtol: f64,
) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    if let Some((i, r)) = worst(got, want, atol, rtol).filter(|&(_, r)| r > 1.0) {
        panic!(
            "{what}: element {i} is {} but the reference is {} ({r:.1}× the tolerance: atol {atol}, rtol {rtol})",
            got[i], want[i]
        );
    }
}

/// A tolerance of [`Checks`]: `abs` is a fraction of the tensor's scale (its largest
/// |reference|, at least 1), so near-zero elements are judged on the tensor's own scale.
#[derive(Debug, Clone, Copy)]
pub struct Tol {
    pub abs: f32,
    pub rel: f32,
}

/// Counts and judges the comparisons of one device in one test, and reports them all.
#[derive(Debug)]
pub struct Checks {
    device: String,
    test: String,
    count: usize,
    values: usize,
    start: std::time::Instant,
    /// Largest [`ratio`] seen (≤ 1 passes).
    worst: f64,
    failures: Vec<String>,
}

impl Checks {
    pub fn new(test: &str, device: &str) -> Self {
        Checks {
            device: device.to_string(),
            test: test.to_string(),
            count: 0,
            values: 0,
            start: std::time::Instant::now(),
            worst: 0.0,
            failures: Vec::new(),
        }
    }

    /// One check: `got` (the device) against `want` (the reference) under `tol`.
    pub fn close(&mut self, what: &str, got: &[f32], want: &[f32], tol: Tol) {
        self.count += 1;
        self.values += want.len();
        if got.len() != want.len() {
            self.failures.push(format!(
                "{what}: {} values, the reference has {}",
                got.len(),
                want.len()
            ));
            return;
        }
        let scale = want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
        let (atol, rtol) = ((tol.abs * scale) as f64, tol.rel as f64);
        let Some((i, r)) = worst(got, want, atol, rtol) else {
            return;
        };
        self.worst = self.worst.max(r);
        if r > 1.0 {
            self.failures.push(format!(
                "{what}: element {i} is {}, the reference has {} ({r:.1}× the tolerance)",
                got[i], want[i]
            ));
        }
    }

    /// Prints the count and fails with every failure found.
    pub fn finish(self) {
        println!(
            "{}: {} — {} checks, {} values, worst error {:.3} of the tolerance ({:.1} s)",
            self.device,
            self.test,
            self.count,
            self.values,
            self.worst,
            self.start.elapsed().as_secs_f64()
        );
        assert!(
            self.failures.is_empty(),
            "{} on {}: {} of {} checks failed:\n{}",
            self.test,
            self.device,
            self.failures.len(),
            self.count,
            self.failures.join("\n")
        );
        assert!(
            self.count > 0,
            "{} on {}: nothing was checked",
            self.test,
            self.device
        );
    }
}

/// The device kinds `TENSORFIT_REQUIRE` names (a comma list: `wgpu,cuda`), lower case.
pub fn required_kinds() -> Vec<String> {
    std::env::var("TENSORFIT_REQUIRE")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Whether `TENSORFIT_REQUIRE` names `kind`.
pub fn required(kind: &str) -> bool {
    required_kinds().iter().any(|k| k == kind)
}

/// The skip rule: prints why `test` cannot run on a device of `kind`, or fails when
/// `TENSORFIT_REQUIRE` names the kind (so a CI machine with a driver cannot skip).
pub fn skip(test: &str, kind: &str, why: &str) {
    assert!(
        !required(kind),
        "{test}: {kind} is required (TENSORFIT_REQUIRE) but unavailable: {why}"
    );
    println!("{kind}: skipped {test} — {why}");
}

/// Opens a device under test, or says why it cannot be opened.
pub type Open = Arc<dyn Fn() -> Result<Box<dyn Backend>, String> + Send + Sync>;

/// A device under test in a suite that runs on every device present.
#[derive(Clone)]
pub struct Device {
    /// As printed.
    pub name: &'static str,
    /// The kind `TENSORFIT_REQUIRE` names.
    pub kind: &'static str,
    pub open: Open,
    /// Whether the suite's longest test runs on it (a variant that only exercises a
    /// special path may skip it).
    pub curve: bool,
}

impl Device {
    /// The device `open` gives, printed as `name`, of the kind named `kind`; the suite's
    /// longest test runs on it.
    pub fn new(
        name: &'static str,
        kind: &'static str,
        open: impl Fn() -> Result<Box<dyn Backend>, String> + Send + Sync + 'static,
    ) -> Device {
        Device {
            name,
            kind,
            open: Arc::new(open),
            curve: true,
        }
    }

    /// The same device, without the suite's longest test.
    pub fn without_curve(self) -> Device {
        Device {
            curve: false,
            ..self
        }
    }
}

impl fmt::Debug for Device {
    // why: `open` is a closure, which has no Debug.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("curve", &self.curve)
            .finish()
    }
}

/// An opened backend as a suite holds it, or why it did not open.
pub fn boxed<B: Backend + 'static>(
    opened: Result<B, impl std::fmt::Display>,
) -> Result<Box<dyn Backend>, String> {
    opened
        .map(|b| Box::new(b) as Box<dyn Backend>)
        .map_err(|e| e.to_string())
}

/// The devices of `all` that open, each opened once to see that it can be; absent ones
/// are printed with the reason, and fail `test` when required. A required kind that no
/// device of the list has fails too.
pub fn present(test: &str, all: Vec<Device>) -> Vec<Device> {
    for kind in required_kinds() {
        assert!(
            all.iter().any(|d| d.kind == kind.as_str()),
            "{test}: TENSORFIT_REQUIRE names `{kind}`, which this suite has no device for"
        );
    }
    let mut found = Vec::new();
    for d in all {
        match (d.open)() {
            Ok(_) => found.push(d),
            Err(why) => {
                println!("{}: skipped — {why}", d.name);
                assert!(
                    !required(d.kind),
                    "{test}: {} is required (TENSORFIT_REQUIRE) but cannot be opened: {why}",
                    d.name
                );
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_allows_atol_plus_rtol_times_the_reference() {
        assert_eq!(ratio(1.5, 1.0, 0.25, 0.25), 1.0);
        assert!(ratio(1.6, 1.0, 0.25, 0.25) > 1.0);
        assert_eq!(ratio(f64::NAN, f64::NAN, 0.0, 0.0), 0.0);
        assert_eq!(ratio(f64::NAN, 1.0, 1.0, 1.0), f64::INFINITY);
        assert_eq!(ratio(0.0, 0.0, 0.0, 0.0), 0.0);
        assert_eq!(ratio(1e-9, 0.0, 0.0, 0.0), f64::INFINITY);
        assert_eq!(
            worst(&[1.0, 3.0, 2.0], &[1.0f32, 1.0, 1.0], 1.0, 0.0),
            Some((1, 2.0))
        );
        assert_eq!(worst::<f32>(&[], &[], 1.0, 0.0), None);
    }

    #[test]
    fn a_tensors_scale_sets_its_absolute_tolerance() {
        let tol = Tol {
            abs: 1e-3,
            rel: 0.0,
        };
        let mut checks = Checks::new("scale", "test");
        // Scale 100: an error of 0.05 on a near-zero element is within 0.1.
        checks.close("big", &[100.0, 0.05], &[100.0, 0.0], tol);
        assert!(checks.failures.is_empty());
        checks.close("small", &[1.0, 0.05], &[1.0, 0.0], tol);
        assert_eq!(checks.failures.len(), 1);
    }

    #[test]
    fn test_values_keep_their_streams() {
        let mut r = Rng::new(7);
        let v = r.signed_vec(1000);
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        assert_eq!(Rng::new(7).signed_vec(1000), v);
        let mut r = Rng::new(3);
        assert!((0..100).all(|_| (2..=5).contains(&r.range(2, 5))));
        assert!((0..100).all(|_| (0.0..1.0).contains(&r.open_unit())));
    }
}
