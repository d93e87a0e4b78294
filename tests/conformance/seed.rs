//! The seed network at a small size, through the trainer, on a device and on the CPU.

use tensorfit::core::{Backend, HostTensor};
use tensorfit::nn::{ModelDescription, ParamStore, Rng, SeedShape, TemporalOrder, Trainer};

use crate::common::{task_model, train_options};
use crate::{reference, Checks, CURVE_TOL, SEED_TOL};

use tensorfit_testing::Open;

fn trainer(backend: Box<dyn Backend>, cfg: &ModelDescription, tbptt: usize, lr: f32) -> Trainer {
    let params = ParamStore::init(cfg, 7).unwrap();
    Trainer::new(backend, cfg.clone(), &params, train_options(tbptt, lr)).unwrap()
}

fn compare_stores(checks: &mut Checks, what: &str, got: &ParamStore, want: &ParamStore) {
    assert_eq!(got.len(), want.len(), "{what}: tensor counts");
    for (name, w) in want.iter() {
        let g = got.require(name).unwrap();
        checks.close(&format!("{what} {name}"), &g.data, &w.data, SEED_TOL);
    }
}

/// F=10, H=8, 3 layers, dense 5, 6 classes, B=16, T=9, truncated BPTT 3 (the first six
/// steps only carry the state): two training steps and an evaluation.
pub fn small_network(open: Open, checks: &mut Checks) {
    let shape = SeedShape::SMALL_REFERENCE;
    let cfg = shape.description();
    let (batch, steps, tbptt) = (16, 9, 3);
    let mut cpu = trainer(reference(), &cfg, tbptt, 1e-2);
    let mut dev = trainer(open().unwrap(), &cfg, tbptt, 1e-2);
    let mut rng = Rng::new(11);
    let mut data = || {
        let x: Vec<f32> = (0..steps * batch * shape.features)
            .map(|_| rng.normal())
            .collect();
        let labels: Vec<f32> = (0..batch)
            .map(|_| rng.int_inclusive(0, shape.classes - 1) as f32)
            .collect();
        (
            HostTensor::new([steps, batch, shape.features], x).unwrap(),
            labels,
        )
    };
    for s in 1..=2 {
        let (x, labels) = data();
        let want = cpu.train_step(&x, &labels).unwrap();
        let got = dev.train_step(&x, &labels).unwrap();
        checks.close(
            &format!("step {s} loss"),
            &[got.loss],
            &[want.loss],
            SEED_TOL,
        );
        let what = format!("step {s} probs");
        checks.close(&what, &got.probs.data, &want.probs.data, SEED_TOL);
        let (want_h, want_c) = cpu.carried_state(batch).unwrap();
        let (got_h, got_c) = dev.carried_state(batch).unwrap();
        checks.close(
            &format!("step {s} carried h"),
            &got_h.data,
            &want_h.data,
            SEED_TOL,
        );
        checks.close(
            &format!("step {s} carried c"),
            &got_c.data,
            &want_c.data,
            SEED_TOL,
        );
        let what = format!("step {s} gradient");
        compare_stores(
            checks,
            &what,
            &dev.gradients().unwrap(),
            &cpu.gradients().unwrap(),
        );
        let what = format!("step {s} after Adam");
        compare_stores(
            checks,
            &what,
            &dev.parameters().unwrap(),
            &cpu.parameters().unwrap(),
        );
    }
    let (x, labels) = data();
    let want = cpu.evaluate(&x, &labels).unwrap();
    let got = dev.evaluate(&x, &labels).unwrap();
    checks.close("inference loss", &[got.loss], &[want.loss], SEED_TOL);
    checks.close(
        "inference probs",
        &got.probs.data,
        &want.probs.data,
        SEED_TOL,
    );
}

/// A scaled-down seed network (152 → 3 × LSTM 32 → BN → Dense 16 → BN → 6) on the
/// built-in task: 20 steps on both devices, the same loss at every step.
pub fn loss_curve(open: Open, checks: &mut Checks) {
    let cfg = task_model(32, 3, 16);
    let (batch, steps) = (32, 12);
    let mut cpu = trainer(reference(), &cfg, steps, 1e-2);
    let mut dev = trainer(open().unwrap(), &cfg, steps, 1e-2);
    let mut task = TemporalOrder::new(3);
    let (mut want, mut got) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        let b = task.batch(batch, steps).unwrap();
        want.push(cpu.train_step(&b.x, &b.labels).unwrap().loss);
        got.push(dev.train_step(&b.x, &b.labels).unwrap().loss);
    }
    println!("loss curve, cpu:    {want:.4?}");
    println!("loss curve, device: {got:.4?}");
    checks.close("loss curve", &got, &want, CURVE_TOL);
    assert!(
        want[19] < want[0],
        "the loss should fall over 20 steps: {want:?}"
    );
}
