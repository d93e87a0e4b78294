//! `tensorfit train --model` a GRU language model on token ids (no embedding: the ids are
//! the exact one-hot input, gathered from `gru.weight_ih_l0`'s columns): the example
//! `examples/models/gru_lm.toml`, with 32 hidden units instead of its 128 to keep the
//! test short, learns the built-in next-symbol task through the CLI, and its plan is what
//! it measured.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{ok_json, scratch};

#[test]
fn the_gru_language_model_example_learns_the_next_symbol_task_through_the_cli() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models/gru_lm.toml");
    let text = std::fs::read_to_string(&example).unwrap();
    assert!(text.contains("cell = \"gru\"") && !text.contains("\nembedding"));
    let small = text.replace("hidden = 128", "hidden = 32");
    assert_ne!(small, text, "the example sets hidden = 128");
    let path = scratch("gru-lm-cli").join("gru_lm.toml");
    std::fs::write(&path, small).unwrap();
    let f = path.to_str().unwrap();
    let v = ok_json(&[
        "train", "--model", f, "--device", "cpu", "--steps", "200", "--json",
    ]);
    let number = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
    // Uniform guessing over 65 symbols has perplexity 65; the chain's floor is
    // 2^1.2955 = 2.45, and the best accuracy 60%.
    let (perplexity, accuracy) = (number("perplexity"), number("accuracy"));
    println!("held out after 200 steps: perplexity {perplexity:.3}, accuracy {accuracy:.3}");
    assert!(perplexity < 2.75, "{v}");
    assert!(accuracy > 0.55, "{v}");
    assert_eq!(
        v["estimated_peak_bytes"], v["measured_peak_bytes"],
        "planned = measured: {v}"
    );
}
