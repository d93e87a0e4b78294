//! `tensorfit generate`: text from a small character-level language model (initialised
//! weights, fixed seeds), streamed through the library's `Stream`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tensorfit::nn::{Checkpoint, HeadOn, ModelDescription};
use tensorfit::{DevicePolicy, Model};

use common::{refused, scratch, succeed, tensorfit_command};

const CHARS: &str = "abcdefghij";

/// Token input over the 10 characters and the unknown id 0, an LSTM, the next character.
fn language_model() -> ModelDescription {
    let vocab = CHARS.chars().count() + 1;
    let mut d = ModelDescription::lstm_language_model(vocab, 12, 2);
    d.head.on = HeadOn::LAST_STEP;
    d
}

/// A checkpoint of the language model with weights from seed 4, with the character
/// vocabulary (as training on a text file stores it) or without one.
fn checkpoint(name: &str, with_vocab: bool) -> PathBuf {
    checkpoint_of(language_model(), name, with_vocab)
}

/// [`checkpoint`] of `config`.
fn checkpoint_of(config: ModelDescription, name: &str, with_vocab: bool) -> PathBuf {
    let model = Model::new(config.clone(), 4).expect("model");
    let mut extra = HashMap::new();
    if with_vocab {
        let v = serde_json::json!({"chars": {"unknown_id": 0, "chars": CHARS}});
        extra.insert("data.vocabulary".to_string(), v.to_string());
    }
    let ck = Checkpoint {
        config,
        params: model.parameters().clone(),
        optimizer: Default::default(),
        step: 0,
        extra,
    };
    let path = scratch("generate").join(name);
    ck.save(&path).expect("save");
    path
}

fn generate(ck: &Path, extra: &[&str]) -> String {
    generate_with_notes(ck, extra).0
}

/// [`generate`]'s text and what it wrote to stderr.
fn generate_with_notes(ck: &Path, extra: &[&str]) -> (String, String) {
    let out = succeed(
        tensorfit_command()
            .args(["generate", "--device", "cpu", "--checkpoint"])
            .arg(ck)
            .args(extra),
        "generate",
    );
    let text = String::from_utf8(out.stdout)
        .expect("UTF-8 text")
        .trim_end_matches('\n')
        .to_string();
    (text, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_fixed_seed_writes_the_same_text_and_another_seed_other_text() {
    let ck = checkpoint("lm.safetensors", true);
    let args = ["--prime", "abc", "--length", "60", "--temperature", "1.5"];
    let first = generate(&ck, &[&args[..], &["--seed", "1"]].concat());
    let again = generate(&ck, &[&args[..], &["--seed", "1"]].concat());
    let other = generate(&ck, &[&args[..], &["--seed", "2"]].concat());
    assert_eq!(first.chars().count(), 60, "{first:?}");
    assert!(first.chars().all(|c| CHARS.contains(c)), "{first:?}");
    assert_eq!(first, again);
    assert_ne!(first, other);
}

#[test]
fn a_model_vocabulary_past_the_text_characters_still_writes_length_characters() {
    // `vocab` 40 over a text of 10 characters (ids 1..=10): ids 11..40 are no character,
    // and a flat draw would mostly pick them and print nothing.
    let mut wide = ModelDescription::lstm_language_model(40, 12, 2);
    wide.head.on = HeadOn::LAST_STEP;
    let ck = checkpoint_of(wide, "wide.safetensors", true);
    let (text, notes) = generate_with_notes(
        &ck,
        &[
            "--prime",
            "ab€cé€",
            "--length",
            "50",
            "--temperature",
            "1000",
        ],
    );
    assert_eq!(text.chars().count(), 50, "{text:?}");
    assert!(text.chars().all(|c| CHARS.contains(c)), "{text:?}");
    // The prime's characters outside the text are named once each.
    assert!(
        notes.contains("--prime: '€', 'é' are not among the characters"),
        "{notes}"
    );
}

#[test]
fn a_low_temperature_writes_the_most_probable_continuation() {
    let ck = checkpoint("greedy.safetensors", true);
    let text = generate(
        &ck,
        &["--prime", "jab", "--length", "25", "--temperature", "0.001"],
    );
    // The greedy continuation, computed through the library's stream.
    let model = Model::load(&ck).expect("load");
    let mut stream = model.stream(1, &DevicePolicy::only_cpu()).expect("stream");
    let id = |c: char| CHARS.find(c).expect("a character of the vocabulary") as f32 + 1.0;
    let mut probs = Vec::new();
    for c in "jab".chars() {
        probs = stream.step(&[id(c)]).expect("step");
    }
    let mut greedy = String::new();
    for _ in 0..25 {
        // Id 0, the unknown character, is never drawn.
        let best = 1 + tensorfit::nn::argmax(&probs[1..]);
        greedy.push(CHARS.chars().nth(best - 1).expect("in the vocabulary"));
        probs = stream.step(&[best as f32]).expect("step");
    }
    assert_eq!(text, greedy);
}

#[test]
fn without_a_vocabulary_the_prime_and_the_output_are_token_ids() {
    let ck = checkpoint("ids.safetensors", false);
    let text = generate(&ck, &["--prime", "3 1 4", "--length", "12", "--seed", "7"]);
    let ids: Vec<usize> = text
        .split_whitespace()
        .map(|w| w.parse().expect("an id"))
        .collect();
    assert_eq!(ids.len(), 12, "{text:?}");
    assert!(ids.iter().all(|&i| i < 11), "{ids:?}");
    let e = refused(&[
        "generate",
        "--checkpoint",
        ck.to_str().expect("UTF-8 path"),
        "--prime",
        "3 x",
    ]);
    assert!(e.contains("--prime") && e.contains("`x`"), "{e}");
}

#[test]
fn bad_flags_and_a_model_that_is_not_a_language_model_are_named() {
    let ck = checkpoint("flags.safetensors", true);
    let path = ck.to_str().expect("UTF-8 path");
    for t in ["0", "-1", "nan"] {
        let e = refused(&[
            "generate",
            "--checkpoint",
            path,
            &format!("--temperature={t}"),
        ]);
        assert!(e.contains("--temperature"), "{e}");
    }
    let e = refused(&["generate", "--checkpoint", path, "--length", "many"]);
    assert!(e.contains("--length"), "{e}");
    let classifier = scratch("generate").join("classifier.safetensors");
    Model::seed().save(&classifier).expect("save");
    let e = refused(&[
        "generate",
        "--checkpoint",
        classifier.to_str().expect("UTF-8 path"),
    ]);
    assert!(
        e.contains("--checkpoint") && e.contains("not a language model"),
        "{e}"
    );
}
