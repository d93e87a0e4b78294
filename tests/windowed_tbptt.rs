//! DL4J-style truncated BPTT (`TbpttMode::Windows`) agrees with PyTorch doing the same
//! loop: a sequence of T=10 cut into windows of L=4 (4, 4, 2), each a forward from the
//! carried (h, c), a backward and an Adam update, the state detached between windows;
//! a language model (one-hot ids -> 2-layer LSTM -> Linear on every step, cross-entropy).
//! Compared: the loss of the step (each window's loss weighted by its rows), the last
//! window's gradients, every parameter after the three updates and the state carried
//! into the last window.
//!
//! The reference file is made by `tools/make_reference.py` (`build_windows` in
//! `tools/every_step_reference.py`); this test needs no PyTorch. Tolerance as in
//! `mse_pytorch_agreement.rs`.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{check_reference as check, meta_usize, reference, train_options};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::{ModelDescription, TbpttMode, TrainOptions, Trainer};

const FILE: &str = "tests/data/windowed_tbptt_reference.safetensors";

#[test]
fn windowed_truncated_bptt_matches_pytorchs_loop_of_an_update_per_window() {
    let (r, meta) = reference(FILE, "");
    let (init, _) = reference(FILE, "init.");
    let n = |k: &str| meta_usize(&meta, k);
    let vocab = n("vocab");
    let cfg = ModelDescription::lstm_language_model(vocab, n("hidden"), n("layers"));
    let opts = TrainOptions {
        tbptt_mode: TbpttMode::Windows,
        ..train_options(n("tbptt"), meta["lr"].parse().unwrap())
    };
    let mut t = Trainer::new(Box::new(CpuBackend::new()), cfg, &init, opts).unwrap();
    let x = r.require("x").unwrap();
    let report = t.train_step(x, &r.require("labels").unwrap().data).unwrap();
    assert_eq!(report.step, 3, "one update per window: 4, 4 and 2 steps");
    assert_eq!(t.step(), 3);
    let loss = |w: usize| r.require(&format!("window{w}.loss")).unwrap().data[0] as f64;
    let want = (4.0 * loss(1) + 4.0 * loss(2) + 2.0 * loss(3)) / 10.0;
    check("loss", &[report.loss], &[want as f32]);
    assert_eq!(report.probs.shape.dims(), &[10, 3, vocab]);
    let mut compared = 0;
    for (name, g) in t.gradients().unwrap().iter() {
        let want = &r.require(&format!("window3.grad.{name}")).unwrap().data;
        check(&format!("window 3 grad {name}"), &g.data, want);
        compared += 1;
    }
    for (name, p) in t.parameters().unwrap().iter() {
        let want = &r.require(&format!("after.{name}")).unwrap().data;
        check(&format!("after {name}"), &p.data, want);
        compared += 1;
    }
    assert_eq!(
        compared,
        2 * 10,
        "8 LSTM tensors and out's 2, gradients and values"
    );
    let (h, c) = t.carried_state(n("batch")).unwrap();
    check("h", &h.data, &r.require("h").unwrap().data);
    check("c", &c.data, &r.require("c").unwrap().data);
}
