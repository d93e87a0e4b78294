//! [`DescriptionFile`]: a description file with its `[training]` table, and a model the
//! build refuses reported at the line of the field at fault.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use tensorfit_nn::{DescriptionFile, ModelDescription, TrainingEntry, TrainingValue};

/// The seed network's description followed by `extra`, written to a scratch file.
fn file_with(name: &str, extra: &str) -> PathBuf {
    let dir = tensorfit_testing::scratch_dir("description-file");
    let path = dir.join(name);
    std::fs::write(&path, ModelDescription::seed().to_toml() + extra).unwrap();
    path
}

fn seed_lines() -> usize {
    ModelDescription::seed().to_toml().lines().count()
}

#[test]
fn a_training_table_is_read_as_entries_with_their_values_and_lines() {
    let path = file_with(
        "training.toml",
        "\n[training]\noptimizer = \"sgd\"\nlr = 0.05\nbatch = 0x10\nnesterov = true\n",
    );
    let f = DescriptionFile::load(&path).unwrap();
    assert_eq!(f.model, ModelDescription::seed());
    let first = seed_lines() + 3;
    let want = [
        ("optimizer", TrainingValue::Text("sgd".into())),
        ("lr", TrainingValue::Text("0.05".into())),
        ("batch", TrainingValue::Text("16".into())),
        ("nesterov", TrainingValue::Bool(true)),
    ];
    let got: Vec<(&str, &TrainingValue, usize)> = f
        .training
        .iter()
        .map(|e: &TrainingEntry| (e.key.as_str(), &e.value, e.line))
        .collect();
    for (i, ((key, value), (got_key, got_value, line))) in want.iter().zip(&got).enumerate() {
        assert_eq!((*key, value, first + i), (*got_key, *got_value, *line));
    }
    assert_eq!(got.len(), want.len());
}

#[test]
fn a_file_without_a_training_table_has_no_entries() {
    let f = DescriptionFile::load(&file_with("plain.toml", "")).unwrap();
    assert!(f.training.is_empty());
}

#[test]
fn a_training_value_that_is_neither_number_string_nor_switch_is_refused_at_its_line() {
    let path = file_with("array.toml", "\n[training]\nlr = [0.1]\n");
    let e = DescriptionFile::load(&path).unwrap_err();
    assert_eq!(
        (e.line, e.key.as_str()),
        (seed_lines() + 3, "training.lr"),
        "{e}"
    );
    assert!(
        e.message
            .contains("must be a number, a string or true/false, not array"),
        "{e}"
    );
}

#[test]
fn a_model_the_checks_refuse_is_an_error_at_the_line_of_its_field() {
    let path = file_with("huge.toml", "");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("hidden = 250", "hidden = 100000000")).unwrap();
    let e = DescriptionFile::load(&path).unwrap_err();
    let line = text.lines().position(|l| l.starts_with("hidden")).unwrap() + 1;
    assert_eq!(
        (e.line, e.column, e.key.as_str()),
        (line, 1, "recurrent.hidden"),
        "{e}"
    );
    assert!(
        e.to_string().starts_with(&format!(
            "{}:{line}:1: `recurrent.hidden` = 100000000",
            path.display()
        )),
        "{e}"
    );
}
