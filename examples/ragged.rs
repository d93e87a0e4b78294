//! Variable-length sequence classification from an app's own `Vec`s: plan under a memory
//! cap, train with validation and early stopping, save the best model, load it, predict,
//! and stream one sequence a step at a time. `cargo run --release --example ragged`

use tensorfit::{Control, DeviceKind, DevicePolicy, Event, FitOptions, Model, ModelDescription};
use tensorfit::{OptimConfig, Sequences, Training};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 300 sequences of 10 to 40 steps of 2 features: a sine whose frequency is the class
    // (3 classes), at a phase of its own, beside a second, noise-like feature.
    let (mut inputs, mut labels) = (Vec::new(), Vec::new());
    for i in 0..300 {
        let (class, steps, phase) = (i % 3, 10 + i * 13 % 31, (i * 7 % 10) as f32 * 0.6);
        let wave = |t: usize| (t as f32 * 0.5 * (class + 1) as f32 + phase).sin();
        let noise = |t: usize| ((i + t) * 37 % 11) as f32 * 0.02;
        inputs.push((0..steps).flat_map(|t| [wave(t), noise(t)]).collect());
        labels.push(class as f32);
    }
    let (train, val) = Sequences::new(inputs, labels, 2)?.split(0.2, 1)?;

    let description = ModelDescription::lstm_classifier(2, 32, 1, 3);
    let training = Training {
        optim: OptimConfig::adam(0.005),
        ..Training::default()
    };
    let model = Model::new(description, 1)?.with_training(training);
    let devices = DevicePolicy::auto().cap(DeviceKind::Cpu, 64 << 20);
    let plan = model.plan(train.shapes(16).holding(&val, 32), &devices)?;
    println!("{}", plan.table());
    let mut run = plan.start(&model)?;

    let best = std::env::temp_dir().join(format!("ragged-{}.safetensors", std::process::id()));
    let options = FitOptions {
        epochs: 30,
        batch: 16,
        patience: Some(5),
        best_checkpoint: Some(best.clone()),
        ..FitOptions::default()
    };
    let report = run.train(&train, Some(&val), &options, |event| {
        if let Event::Validated(v) = event {
            let (loss, accuracy) = (v.scores.loss, v.scores.accuracy.unwrap_or(0.0));
            let mark = if v.best { "  (best)" } else { "" };
            println!(
                "epoch {:2}  loss {loss:.3}  accuracy {accuracy:.2}{mark}",
                v.epoch
            );
        }
        Control::Continue
    })?;
    let (loss, step) = report.best.ok_or("no validation ran")?;
    let (stopped, epochs) = (report.stopped, report.epochs);
    println!("{stopped:?} after {epochs} epochs; best loss {loss:.3} at step {step}");

    // The best model, loaded as a deployed app would, on sequences of any length.
    let model = Model::load(&best)?;
    let mut predictor = model.open(val.shapes(32), &DevicePolicy::only_cpu())?;
    let new = predictor.predict_sequences(&[vec![0.0, 0.0, 1.0, 0.0], vec![0.3; 50]])?;
    println!("two new sequences (2 and 25 steps): {new:.2?}");
    let accuracy = predictor.evaluate_sequences(&val)?.accuracy.unwrap_or(0.0);
    println!("validation accuracy of the loaded model: {accuracy:.2}");

    // One sequence fed a step at a time ends where predicting it whole does.
    let sequence: Vec<f32> = (0..12).flat_map(|t| [(t as f32).sin(), 0.1]).collect();
    let mut stream = model.stream(1, &DevicePolicy::only_cpu())?;
    let mut last = Vec::new();
    for step in sequence.chunks(2) {
        last = stream.step(step)?;
    }
    let whole = &predictor.predict_sequences(&[sequence])?[0];
    println!("streamed {last:.3?}, whole {whole:.3?}");
    assert!(last.iter().zip(whole).all(|(a, b)| (a - b).abs() < 1e-4));
    std::fs::remove_file(&best)?;
    Ok(())
}
