//! `tensorfit train --model examples/models/tcn_classifier.toml`: a TCN of dilated causal
//! convolutions (no recurrent layer) learns the built-in temporal-order task through the
//! CLI with the default flags, and its plan is what it measured.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::ok_json;

#[test]
fn the_tcn_example_learns_the_temporal_order_task_through_the_cli() {
    let example = tensorfit_testing::repo_file("examples/models/tcn_classifier.toml");
    let f = example.to_str().unwrap();
    let v = ok_json(&["train", "--model", f, "--device", "cpu", "--json"]);
    let accuracy = v["accuracy"].as_f64().unwrap_or_else(|| panic!("{v}"));
    println!("held out after the default 200 steps: accuracy {accuracy:.3}");
    // Six classes: guessing is 1/6; the example reaches 100% from step 150 (docs/models.md).
    assert!(accuracy > 0.95, "{v}");
    assert_eq!(
        v["estimated_peak_bytes"], v["measured_peak_bytes"],
        "planned = measured: {v}"
    );
}
