//! Every kind of bad data fails with a typed error whose message names the place: the
//! file, and the line and column (text) or the byte offset and element (tensors).

// Helpers outside #[test] functions unwrap too: a failure is the test's failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use tempfile::TempDir;
use tensorfit_data::{
    CharCorpus, CsvSequenceDir, DataError, LongCsv, ReadSettings, Source, TensorData, TooLong,
    TsvData, Values,
};

/// A DL4J-style directory with the given feature and label files.
fn dl4j(features: &[(&str, &str)], labels: &[(&str, &str)]) -> (TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (f, l) = (dir.path().join("features"), dir.path().join("labels"));
    std::fs::create_dir_all(&f).unwrap();
    std::fs::create_dir_all(&l).unwrap();
    for (name, text) in features {
        std::fs::write(f.join(name), text).unwrap();
    }
    for (name, text) in labels {
        std::fs::write(l.join(name), text).unwrap();
    }
    (dir, f, l)
}

fn dl4j_error(
    features: &[(&str, &str)],
    labels: &[(&str, &str)],
    settings: &ReadSettings,
) -> (DataError, String) {
    let (_dir, f, l) = dl4j(features, labels);
    let err = CsvSequenceDir::open(&f, &l, settings).unwrap_err();
    let message = err.to_string();
    (err, message)
}

fn file(dir: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A safetensors file of F32 `input` [n, t, f] and I64 `labels` [n].
fn safetensors(path: &Path, input: &[f32], shape: [usize; 3], labels: &[i64], label_dtype: &str) {
    let ib: Vec<u8> = input.iter().flat_map(|v| v.to_le_bytes()).collect();
    let lb: Vec<u8> = if label_dtype == "F32" {
        labels
            .iter()
            .flat_map(|&v| (v as f32).to_le_bytes())
            .collect()
    } else {
        labels.iter().flat_map(|v| v.to_le_bytes()).collect()
    };
    let header = format!(
        r#"{{"input":{{"dtype":"F32","shape":{:?},"data_offsets":[0,{}]}},"labels":{{"dtype":"{label_dtype}","shape":[{}],"data_offsets":[{},{}]}}}}"#,
        shape,
        ib.len(),
        labels.len(),
        ib.len(),
        ib.len() + lb.len()
    );
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend(ib);
    bytes.extend(lb);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_ragged_row_names_its_file_and_line() {
    let (err, m) = dl4j_error(
        &[("0.csv", "1,2,3\n4,5,6\n7,8\n")],
        &[("0.csv", "1\n")],
        &ReadSettings::default(),
    );
    assert!(
        matches!(
            err,
            DataError::Ragged {
                found: 2,
                expected: 3,
                ..
            }
        ),
        "{m}"
    );
    assert!(m.contains("features/0.csv:3:"), "{m}");
}

#[test]
fn a_non_number_names_its_file_line_and_column() {
    let (err, m) = dl4j_error(
        &[("0.csv", "1,2,3\n4,abc,6\n")],
        &[("0.csv", "1\n")],
        &ReadSettings::default(),
    );
    assert!(matches!(err, DataError::NotANumber { .. }), "{m}");
    assert!(
        m.contains("features/0.csv:2:2: `abc` is not a number"),
        "{m}"
    );
}

#[test]
fn a_label_out_of_range_names_its_file_line_and_column() {
    let settings = ReadSettings {
        classes: Some(3),
        ..ReadSettings::default()
    };
    let (err, m) = dl4j_error(&[("0.csv", "1,2\n")], &[("0.csv", "5\n")], &settings);
    assert!(matches!(err, DataError::LabelOutOfRange { .. }), "{m}");
    assert!(
        m.contains("labels/0.csv:1:1: label 5 is out of range (3 classes: ids 0 to 2)"),
        "{m}"
    );
    let (_, m) = dl4j_error(
        &[("0.csv", "1,2\n")],
        &[("0.csv", "-1\n")],
        &ReadSettings::default(),
    );
    assert!(
        m.contains("labels/0.csv:1:1: label -1 is out of range"),
        "{m}"
    );
}

#[test]
fn a_fractional_label_for_a_classifier_is_of_the_wrong_kind() {
    let (err, m) = dl4j_error(
        &[("0.csv", "1,2\n")],
        &[("0.csv", "2.5\n")],
        &ReadSettings::default(),
    );
    assert!(matches!(err, DataError::LabelKind { .. }), "{m}");
    assert!(
        m.contains("labels/0.csv:1:1: label `2.5` is not a class id"),
        "{m}"
    );
}

#[test]
fn float_labels_in_a_tensor_file_are_class_ids_when_whole_and_the_wrong_kind_when_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.safetensors");
    safetensors(&path, &[0.0; 4], [2, 2, 1], &[0, 1], "F32");
    let read = TensorData::open(&path, &ReadSettings::default()).unwrap();
    assert_eq!(
        read.reader().unwrap().read(1).unwrap().labels,
        Values::Ids(vec![1])
    );
    let regression = ReadSettings {
        regression: true,
        ..ReadSettings::default()
    };
    assert!(TensorData::open(&path, &regression).is_ok());
    // 1.5 (0x3FC00000) in place of the second label.
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - 4;
    bytes[at..].copy_from_slice(&1.5f32.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    let e = TensorData::open(&path, &ReadSettings::default()).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, DataError::LabelKind { .. }), "{m}");
    assert!(
        m.contains("d.safetensors (byte ")
            && m.contains("label 1.5 at `labels`[1] is not a class id"),
        "{m}"
    );
}

#[test]
fn a_label_per_step_and_a_label_per_sequence_cannot_be_mixed() {
    let (_, m) = dl4j_error(
        &[("0.csv", "1\n2\n"), ("1.csv", "1\n2\n")],
        &[("0.csv", "0\n"), ("1.csv", "0\n1\n")],
        &ReadSettings::default(),
    );
    assert!(
        m.contains("labels/1.csv: 2 labels (one per step) where"),
        "{m}"
    );
    let (_, m) = dl4j_error(
        &[("0.csv", "1\n2\n3\n")],
        &[("0.csv", "0\n1\n")],
        &ReadSettings::default(),
    );
    assert!(m.contains("2 labels for a sequence of 3 steps"), "{m}");
}

#[test]
fn an_empty_feature_file_is_named() {
    let (err, m) = dl4j_error(
        &[("0.csv", "")],
        &[("0.csv", "1\n")],
        &ReadSettings::default(),
    );
    assert!(matches!(err, DataError::Empty { .. }), "{m}");
    assert!(m.contains("features/0.csv: is empty (no steps)"), "{m}");
}

#[test]
fn an_empty_directory_is_named() {
    let (err, m) = dl4j_error(&[], &[("0.csv", "1\n")], &ReadSettings::default());
    assert!(matches!(err, DataError::Empty { .. }), "{m}");
    assert!(
        m.contains("features: is empty (no files in the directory)"),
        "{m}"
    );
}

#[test]
fn an_empty_text_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "empty.txt", b"");
    let m = CharCorpus::open(&path).unwrap_err().to_string();
    assert!(m.contains("empty.txt: is empty (no characters)"), "{m}");
}

#[test]
fn a_feature_file_without_a_label_file_names_both() {
    let (err, m) = dl4j_error(
        &[("0.csv", "1\n"), ("1.csv", "1\n")],
        &[("0.csv", "1\n")],
        &ReadSettings::default(),
    );
    assert!(matches!(err, DataError::MissingLabels { .. }), "{m}");
    assert!(
        m.contains("features/1.csv: has no matching label file") && m.contains("labels/1.csv"),
        "{m}"
    );
}

#[test]
fn a_label_file_without_a_feature_file_names_both() {
    let (err, m) = dl4j_error(
        &[("0.csv", "1\n")],
        &[("0.csv", "1\n"), ("7.csv", "1\n")],
        &ReadSettings::default(),
    );
    assert!(matches!(err, DataError::MissingFeatures { .. }), "{m}");
    assert!(
        m.contains("labels/7.csv: has no matching feature file") && m.contains("features/7.csv"),
        "{m}"
    );
}

#[test]
fn files_with_different_feature_counts_name_the_file_that_differs_and_the_first() {
    let (err, m) = dl4j_error(
        &[("0.csv", "1,2,3\n"), ("1.csv", "1,2,3,4\n")],
        &[("0.csv", "1\n"), ("1.csv", "1\n")],
        &ReadSettings::default(),
    );
    assert!(
        matches!(
            err,
            DataError::FeatureCount {
                found: 4,
                expected: 3,
                ..
            }
        ),
        "{m}"
    );
    assert!(
        m.contains("features/1.csv:1: 4 features per step where")
            && m.contains("features/0.csv has 3"),
        "{m}"
    );
}

#[test]
fn invalid_utf8_in_a_corpus_names_the_byte_offset_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "bad.txt", b"ab\ncd\xffef");
    let err = CharCorpus::open(&path).unwrap_err();
    let m = err.to_string();
    assert!(matches!(err, DataError::InvalidUtf8 { .. }), "{m}");
    assert!(m.contains("bad.txt:2 (byte 5): invalid UTF-8"), "{m}");
}

#[test]
fn invalid_utf8_across_a_block_boundary_is_found_at_its_offset() {
    // A 3-byte character split by the scan's 64 KiB block, then a bad byte further on.
    let mut bytes = vec![b'a'; 65_535];
    bytes.extend_from_slice("€".as_bytes());
    bytes.extend_from_slice(b"xy\xc3(");
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "long.txt", &bytes);
    let m = CharCorpus::open(&path).unwrap_err().to_string();
    assert!(m.contains(&format!("(byte {})", 65_535 + 3 + 2)), "{m}");
}

#[test]
fn invalid_utf8_in_a_csv_names_the_line_and_byte() {
    let (_, m) = dl4j_error(
        &[("0.csv", "1,2\n3,\u{e9}\n")],
        &[("0.csv", "1\n")],
        &ReadSettings::default(),
    );
    assert!(
        m.contains("not a number"),
        "valid UTF-8 is a non-number: {m}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "s.csv", b"a,0,1.0,0\na,1,\xfe,0\n");
    let m = LongCsv::open(&path, &ReadSettings::default())
        .unwrap_err()
        .to_string();
    assert!(m.contains("s.csv:2 (byte 14): invalid UTF-8"), "{m}");
}

#[test]
fn nan_or_infinity_in_a_csv_names_its_line_and_column() {
    let (err, m) = dl4j_error(
        &[("0.csv", "1,2,3\n4,5,NaN\n")],
        &[("0.csv", "1\n")],
        &ReadSettings::default(),
    );
    assert!(matches!(err, DataError::NotFinite { .. }), "{m}");
    assert!(
        m.contains("features/0.csv:2:3: NaN is not a finite number"),
        "{m}"
    );
    let (_, m) = dl4j_error(
        &[("0.csv", "1e39\n")],
        &[("0.csv", "1\n")],
        &ReadSettings::default(),
    );
    assert!(
        m.contains("features/0.csv:1:1: 1e39 is not a finite number"),
        "an f32 overflow: {m}"
    );
}

#[test]
fn nan_in_a_tensor_file_names_its_element_and_byte_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.safetensors");
    let mut input = vec![0.5f32; 2 * 3 * 2];
    input[(3 + 2) * 2 + 1] = f32::INFINITY;
    safetensors(&path, &input, [2, 3, 2], &[0, 1], "I64");
    let err = TensorData::open(&path, &ReadSettings::default()).unwrap_err();
    let m = err.to_string();
    assert!(matches!(err, DataError::NotFinite { .. }), "{m}");
    assert!(m.contains("inf at `input`[1, 2, 1]"), "{m}");
    // 8 + the 121-byte header, then element (1 * 3 + 2) * 2 + 1 of 4 bytes.
    assert!(m.contains("d.safetensors (byte 177): inf at"), "{m}");
}

#[test]
fn a_sequence_longer_than_the_maximum_is_refused_with_its_file() {
    let settings = ReadSettings {
        max_seq_len: Some(2),
        ..ReadSettings::default()
    };
    let (err, m) = dl4j_error(
        &[("0.csv", "1\n2\n"), ("1.csv", "1\n2\n3\n")],
        &[("0.csv", "1\n"), ("1.csv", "0\n")],
        &settings,
    );
    assert!(
        matches!(err, DataError::TooLong { len: 3, max: 2, .. }),
        "{m}"
    );
    assert!(
        m.contains("features/1.csv: sequence of 3 steps is longer than the maximum of 2"),
        "{m}"
    );
}

#[test]
fn a_sequence_longer_than_the_maximum_is_cut_when_asked() {
    let settings = ReadSettings {
        max_seq_len: Some(2),
        too_long: TooLong::Cut,
        ..ReadSettings::default()
    };
    let (_dir, f, l) = dl4j(&[("0.csv", "1\n2\n3\n")], &[("0.csv", "0\n1\n2\n")]);
    let s = CsvSequenceDir::open(&f, &l, &settings).unwrap();
    assert_eq!(s.lengths(), &[2]);
    let e = s.reader().unwrap().read(0).unwrap();
    assert_eq!((e.inputs.len(), e.labels.len()), (2, 2));
}

#[test]
fn a_long_csv_with_steps_out_of_order_names_the_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(
        &dir,
        "s.csv",
        b"sequence,step,f1,label\na,0,1.0,0\na,2,1.0,0\n",
    );
    let m = LongCsv::open(&path, &ReadSettings::default())
        .unwrap_err()
        .to_string();
    assert!(
        m.contains("s.csv:3:2: step `2` where 1 was expected"),
        "{m}"
    );
}

#[test]
fn a_long_csv_whose_sequence_comes_back_later_names_the_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "s.csv", b"a,0,1.0,0\nb,0,1.0,0\na,0,1.0,0\n");
    let m = LongCsv::open(&path, &ReadSettings::default())
        .unwrap_err()
        .to_string();
    assert!(m.contains("s.csv:3:1: sequence `a` appears again"), "{m}");
}

#[test]
fn a_long_csv_with_labels_on_some_rows_only_names_the_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(
        &dir,
        "s.csv",
        b"a,0,1.0,\na,1,1.0,1\nb,0,1.0,1\nb,1,1.0,\nb,2,1.0,1\n",
    );
    let m = LongCsv::open(&path, &ReadSettings::default())
        .unwrap_err()
        .to_string();
    assert!(
        m.contains("s.csv:3: sequence `b` has labels on 2 of its 3 rows"),
        "{m}"
    );
}

#[test]
fn a_tsv_line_without_a_tab_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "r.tsv", b"pos\tgood\nneg bad\n");
    let m = TsvData::open(&path, &ReadSettings::default(), None)
        .unwrap_err()
        .to_string();
    assert!(
        m.contains("r.tsv:2: no TAB between the label and the text"),
        "{m}"
    );
}

#[test]
fn a_truncated_tensor_file_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.safetensors");
    safetensors(&path, &[0.0; 4], [2, 2, 1], &[0, 1], "I64");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    let m = TensorData::open(&path, &ReadSettings::default())
        .unwrap_err()
        .to_string();
    assert!(
        m.contains("d.safetensors: not a valid safetensors file"),
        "{m}"
    );
}

#[test]
fn a_maximum_length_of_zero_is_refused_as_a_setting() {
    let settings = ReadSettings {
        max_seq_len: Some(0),
        too_long: TooLong::Cut,
        ..ReadSettings::default()
    };
    let (err, m) = dl4j_error(&[("0.csv", "1\n")], &[("0.csv", "0\n")], &settings);
    assert!(matches!(err, DataError::Settings(_)), "{m}");
}
