//! The examples without a recurrent layer learn the built-in temporal-order task through
//! the CLI with the default flags, and their plans are what they measured:
//! `examples/models/tcn_classifier.toml` (dilated causal convolutions) and
//! `examples/models/transformer_classifier.toml` (positions and two encoder layers).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::ok_json;

#[test]
fn the_tcn_example_learns_the_temporal_order_task_through_the_cli() {
    learns("tcn_classifier.toml");
}

#[test]
fn the_transformer_example_learns_the_temporal_order_task_through_the_cli() {
    learns("transformer_classifier.toml");
}

fn learns(name: &str) {
    let example = tensorfit_testing::repo_file(&format!("examples/models/{name}"));
    let f = example.to_str().unwrap();
    let v = ok_json(&["train", "--model", f, "--device", "cpu", "--json"]);
    let accuracy = v["accuracy"].as_f64().unwrap_or_else(|| panic!("{v}"));
    println!("{name}: held out after the default 200 steps: accuracy {accuracy:.3}");
    // Six classes: guessing is 1/6; each example reaches 100% by step 150 (docs/models.md).
    assert!(accuracy > 0.95, "{v}");
    assert_eq!(
        v["estimated_peak_bytes"], v["measured_peak_bytes"],
        "planned = measured: {v}"
    );
}
