//! Data files as other tools write them, through `train --data`: what used to be misread
//! (an extension in capitals read as a text corpus, class ids written `1.0` refused, a
//! file of one-step sequences refused as mixing layouts) trains, and what cannot be read
//! says what it is and what to do (a PyTorch file, a safetensors header Python refuses,
//! two inputs, a semicolon CSV, a directory without `features/`, a text too short).

// Helpers outside #[test] functions unwrap too: a failure is the test's failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{arg, example_data, refused, scratch, succeed, tensorfit_command};
use tensorfit_testing::files::{safetensors, stored_zip};

/// The example model (3 features, 3 classes, LSTM 16) with its head `on`, in `dir`.
fn model(dir: &Path, on: &str) -> PathBuf {
    let text = std::fs::read_to_string(example_data("classify_model.toml")).unwrap();
    let path = dir.join(format!("model_{on}.toml"));
    std::fs::write(
        &path,
        text.replace("on = \"last\"", &format!("on = \"{on}\"")),
    )
    .unwrap();
    path
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, bytes).unwrap();
    path
}

fn train_args<'a>(model: &'a Path, data: &'a Path) -> Vec<&'a str> {
    vec![
        "train",
        "--model",
        arg(model),
        "--data",
        arg(data),
        "--epochs",
        "1",
        "--batch",
        "2",
        "--device",
        "cpu",
    ]
}

fn trains(model: &Path, data: &Path) {
    succeed(
        tensorfit_command().args(train_args(model, data)),
        &format!("train --data {}", data.display()),
    );
}

fn train_refused(model: &Path, data: &Path) -> String {
    refused(&train_args(model, data))
}

#[test]
fn an_extension_in_capitals_is_read_as_its_format() {
    let dir = scratch("capitals");
    let npz = write(
        &dir,
        "cl.NPZ",
        &std::fs::read(example_data("classify.npz")).unwrap(),
    );
    trains(&model(&dir, "last"), &npz);
    // Per-step labels: read as a long CSV (as a text corpus the model would need tokens).
    let csv = write(
        &dir,
        "seq.CSV",
        &std::fs::read(example_data("sequences.csv")).unwrap(),
    );
    trains(&model(&dir, "every_step"), &csv);
}

#[test]
fn a_pytorch_file_is_refused_with_how_to_save_safetensors() {
    let dir = scratch("pytorch_file");
    let zip = stored_zip(&[
        ("data/data.pkl", b"\x80\x02}q\x00."),
        ("data/version", b"3\n"),
    ]);
    for name in ["x.pt", "x.safetensors"] {
        let e = train_refused(&model(&dir, "last"), &write(&dir, name, &zip));
        assert!(
            e.contains(&format!("{name}: is a PyTorch file"))
                && e.contains("from safetensors.torch import save_file"),
            "{e}"
        );
        assert!(!e.contains("header length"), "{e}");
    }
}

/// `input` [2, 1, 3] F32 at bytes 0..24, and `rest` of the header.
fn header(rest: &str) -> String {
    format!(r#"{{"input":{{"dtype":"F32","shape":[2,1,3],"data_offsets":[0,24]}},{rest}}}"#)
}

#[test]
fn a_safetensors_file_python_refuses_is_refused_and_a_huge_label_printed_exactly() {
    let dir = scratch("safetensors_checks");
    let m = model(&dir, "last");
    let labels = |dtype: &str, offsets: &str| {
        format!(r#""labels":{{"dtype":"{dtype}","shape":[2],"data_offsets":{offsets}}}"#)
    };
    // Overlapping bytes: `labels` starts inside `input`.
    let overlap = safetensors(&header(&labels("I64", "[8,24]")), &[0; 24]);
    let e = train_refused(&m, &write(&dir, "overlap.safetensors", &overlap));
    assert!(e.contains("invalid offset for tensor `labels`"), "{e}");
    let both = safetensors(
        &header(&format!(
            r#"{},"tokens":{{"dtype":"I64","shape":[2,1],"data_offsets":[40,56]}}"#,
            labels("I64", "[24,40]")
        )),
        &[0; 56],
    );
    let e = train_refused(&m, &write(&dir, "both.safetensors", &both));
    assert!(
        e.contains("has both `input` [N, T, F] and `tokens` [N, T]"),
        "{e}"
    );
    let mut data = vec![0; 32];
    data.extend(u64::MAX.to_le_bytes());
    let huge = safetensors(&header(&labels("U64", "[24,40]")), &data);
    let e = train_refused(&m, &write(&dir, "huge.safetensors", &huge));
    assert!(
        e.contains("label 18446744073709551615 at `labels`[1] is out of range"),
        "{e}"
    );
}

#[test]
fn class_ids_written_as_floats_train_and_a_fraction_is_refused_with_its_place() {
    let dir = scratch("float_ids");
    let m = model(&dir, "last");
    let rows = |last: &str| {
        format!("sequence,step,f1,f2,f3,label\na,0,1,2,3,\na,1,1,2,3,2.0\nb,0,1,2,3,\nb,1,1,2,3,{last}\n")
    };
    trains(&m, &write(&dir, "whole.csv", rows("1.0").as_bytes()));
    let e = train_refused(&m, &write(&dir, "half.csv", rows("1.5").as_bytes()));
    assert!(
        e.contains("half.csv:5:6: label `1.5` is not a class id"),
        "{e}"
    );
    // Float labels in a tensor file: whole ones are class ids.
    let mut data = vec![0; 24];
    data.extend([1.0f32, 2.0].map(f32::to_le_bytes).concat());
    let floats = safetensors(
        &header(r#""labels":{"dtype":"F32","shape":[2],"data_offsets":[24,32]}"#),
        &data,
    );
    trains(&m, &write(&dir, "floats.safetensors", &floats));
}

#[test]
fn labels_of_one_step_sequences_take_the_layout_of_the_models_head() {
    let dir = scratch("one_step");
    // DL4J's layout, every sequence one step with its one label.
    for i in 0..2 {
        write(&dir, &format!("dl4j/features/{i}.csv"), b"0.1,0.2,0.3\n");
        write(&dir, &format!("dl4j/labels/{i}.csv"), b"1\n");
    }
    let csv = write(&dir, "one.csv", b"a,0,1,2,3,1\nb,0,1,2,3,2\n");
    for on in ["last", "every_step"] {
        trains(&model(&dir, on), &dir.join("dl4j"));
        trains(&model(&dir, on), &csv);
    }
    // A one-step sequence among sequences labelled per step.
    let mixed = write(
        &dir,
        "mixed.csv",
        b"a,0,1,2,3,1\nb,0,1,2,3,2\nb,1,1,2,3,0\n",
    );
    trains(&model(&dir, "every_step"), &mixed);
}

#[test]
fn files_that_cannot_be_read_say_what_they_are_and_what_is_expected() {
    let dir = scratch("messages");
    let m = model(&dir, "last");
    let semi = write(
        &dir,
        "semi.csv",
        b"sequence;step;f1;f2;f3;label\na;0;0,1;0,2;0,3;1\n",
    );
    let e = train_refused(&m, &semi);
    assert!(e.contains("semi.csv:1: fields are separated by `;`"), "{e}");
    std::fs::create_dir_all(dir.join("nofeatures/labels")).unwrap();
    let e = train_refused(&m, &dir.join("nofeatures"));
    assert!(
        e.contains("nofeatures: has no features/ directory (a directory is read in DL4J's layout"),
        "{e}"
    );
    let lm = write(
        &dir,
        "lm.toml",
        b"[input]\nkind = \"tokens\"\nvocab = 4\nembedding = 2\n[recurrent]\ncell = \"gru\"\nhidden = 4\nlayers = 2\ndropout = 0.9999999999\n[head]\non = \"every_step\"\nlayers = []\n[loss]\nkind = \"cross_entropy\"\nclasses = 4\n",
    );
    let one = write(&dir, "one.txt", b"a");
    let e = train_refused(&lm, &one);
    assert!(
        e.contains("`recurrent.dropout` = 0.9999999999 rounds to 1 in single precision"),
        "{e}"
    );
    let text = std::fs::read_to_string(&lm).unwrap();
    std::fs::write(&lm, text.replace("dropout = 0.9999999999\n", "")).unwrap();
    let e = train_refused(&lm, &one);
    assert!(
        e.contains("one.txt: read as a text corpus for a character language model, and its 1 character is too short for any window"),
        "{e}"
    );
}

#[test]
fn hidden_files_in_a_dl4j_directory_are_skipped() {
    let dir = scratch("hidden");
    for i in 0..2 {
        write(
            &dir,
            &format!("d/features/{i}.csv"),
            b"0.1,0.2,0.3\n0,0,0\n",
        );
        write(&dir, &format!("d/labels/{i}.csv"), b"1\n");
    }
    write(&dir, "d/features/.DS_Store", b"\0\0\0\x01Bud1\0");
    trains(&model(&dir, "last"), &dir.join("d"));
}
