//! Files as other tools write them: extensions in any case, content that is not what its
//! name says (a PyTorch file, a pickle), safetensors headers Python's `safetensors`
//! refuses, numpy dtypes that are not read, class ids written as floats, files of
//! one-step sequences, CSVs separated or quoted otherwise, and directories with hidden
//! files or without `features/`.

// Helpers outside #[test] functions unwrap too: a failure is the test's failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use tempfile::TempDir;
use tensorfit_data::{
    format_of, open, CsvSequenceDir, DataError, Format, LabelsPer, LongCsv, Opened, ReadSettings,
    Source, Values,
};
use tensorfit_testing::files::{npy, safetensors, stored_zip};
use tensorfit_testing::repo_file;

fn example(name: &str) -> PathBuf {
    repo_file("examples/data").join(name)
}

fn file(dir: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn sequences(path: &Path, settings: &ReadSettings) -> std::sync::Arc<dyn Source> {
    match open(path, settings).unwrap() {
        Opened::Sequences(s) => s,
        Opened::Corpus(_) => panic!("{} opened as a text corpus", path.display()),
    }
}

fn error(path: &Path) -> String {
    open(path, &ReadSettings::default())
        .unwrap_err()
        .to_string()
}

const INPUT_2X1X1: &str = r#""input":{"dtype":"F32","shape":[2,1,1],"data_offsets":[0,8]}"#;

#[test]
fn an_extension_in_capitals_reads_as_its_format() {
    let dir = tempfile::tempdir().unwrap();
    for (example_name, name, format) in [
        ("sequences.csv", "seq.CSV", Format::LongCsv),
        ("classify.npz", "cl.NPZ", Format::Npz),
        ("reviews.tsv", "r.Tsv", Format::Tsv),
    ] {
        let copy = file(&dir, name, &std::fs::read(example(example_name)).unwrap());
        assert_eq!(format_of(&copy).unwrap(), format, "{name}");
        let (a, b) = (
            sequences(&copy, &ReadSettings::default()),
            sequences(&example(example_name), &ReadSettings::default()),
        );
        assert_eq!(a.dataset(), b.dataset(), "{name}");
    }
}

#[test]
fn a_file_is_read_by_its_first_bytes_whatever_its_name() {
    let dir = tempfile::tempdir().unwrap();
    for (example_name, name, format) in [
        ("classify.npz", "data.bin", Format::Npz),
        ("classify.safetensors", "data.csv", Format::Safetensors),
        ("input.npy", "input.txt", Format::Npy),
    ] {
        let copy = file(&dir, name, &std::fs::read(example(example_name)).unwrap());
        assert_eq!(format_of(&copy).unwrap(), format, "{name}");
    }
    let text = file(&dir, "corpus", b"hello, world {\n");
    assert_eq!(format_of(&text).unwrap(), Format::Text);
}

#[test]
fn a_pytorch_file_is_refused_with_how_to_export_safetensors_whatever_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let zip = stored_zip(&[
        ("archive/data.pkl", b"\x80\x02}q\x00."),
        ("archive/version", b"3\n"),
    ]);
    for name in ["x.pt", "x.safetensors", "x.npz", "x.txt"] {
        let m = error(&file(&dir, name, &zip));
        assert!(
            m.contains(&format!("{name}: is a PyTorch file"))
                && m.contains("save_file({\"input\": x, \"labels\": y}, \"data.safetensors\")"),
            "{m}"
        );
    }
    // torch.save's legacy format, and any pickle.
    let m = error(&file(&dir, "old.pt", b"\x80\x02\x8a\x0alq\x00."));
    assert!(m.contains("old.pt: is a Python pickle"), "{m}");
    assert!(m.contains("safetensors.torch import save_file"), "{m}");
}

#[test]
fn other_formats_are_named_with_how_to_bring_them() {
    let dir = tempfile::tempdir().unwrap();
    let xlsx = stored_zip(&[
        ("[Content_Types].xml", b"<x/>"),
        ("xl/workbook.xml", b"<x/>"),
    ]);
    let zip = stored_zip(&[("notes.txt", b"hello")]);
    for (name, bytes, says) in [
        (
            "d.xlsx",
            &xlsx[..],
            "is an Excel workbook, which is not read; save it as CSV",
        ),
        (
            "d.zip",
            &zip[..],
            "is a zip without .npy members (it has `notes.txt`)",
        ),
        (
            "d.csv.gz",
            b"\x1f\x8b\x08\x00\x00\x00",
            "is compressed with gzip",
        ),
        ("d.h5", b"\x89HDF\r\n\x1a\n\x00\x00", "is an HDF5 file"),
        ("d.parquet", b"PAR1\x15\x04", "is a Parquet file"),
    ] {
        let m = error(&file(&dir, name, bytes));
        assert!(m.contains(&format!("{name}: {says}")), "{m}");
    }
}

#[test]
fn a_safetensors_header_python_refuses_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let labels = |offsets: &str| {
        format!(
            r#"{{{INPUT_2X1X1},"labels":{{"dtype":"I64","shape":[2],"data_offsets":{offsets}}}}}"#
        )
    };
    for (name, header, data, says) in [
        (
            "overlap",
            labels("[4,20]"),
            24,
            "invalid offset for tensor `labels`",
        ),
        (
            "hole",
            labels("[12,28]"),
            28,
            "invalid offset for tensor `labels`",
        ),
        ("tail", labels("[8,24]"), 32, "bytes no tensor covers"),
        (
            "twice",
            format!(
                r#"{{{INPUT_2X1X1},"labels":{{"dtype":"I64","shape":[2],"data_offsets":[8,24]}},"labels":{{"dtype":"I64","shape":[2],"data_offsets":[8,24]}}}}"#
            ),
            24,
            "the header names `labels` twice",
        ),
    ] {
        let path = file(&dir, "d.safetensors", &safetensors(&header, &vec![0; data]));
        let m = error(&path);
        assert!(
            m.contains("d.safetensors: not a valid safetensors file") && m.contains(says),
            "{name}: {m}"
        );
    }
    let path = file(
        &dir,
        "d.safetensors",
        &safetensors(&labels("[8,24]"), &[0; 24]),
    );
    assert_eq!(sequences(&path, &ReadSettings::default()).lengths(), [1, 1]);
}

#[test]
fn a_file_with_both_input_and_tokens_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let header = format!(
        r#"{{{INPUT_2X1X1},"tokens":{{"dtype":"I64","shape":[2,1],"data_offsets":[8,24]}},"labels":{{"dtype":"I64","shape":[2],"data_offsets":[24,40]}}}}"#
    );
    let m = error(&file(
        &dir,
        "d.safetensors",
        &safetensors(&header, &[0; 40]),
    ));
    assert!(
        m.contains("has both `input` [N, T, F] and `tokens` [N, T]"),
        "{m}"
    );
}

#[test]
fn a_label_of_2_to_the_64_minus_1_is_printed_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let header = format!(
        r#"{{{INPUT_2X1X1},"labels":{{"dtype":"U64","shape":[2],"data_offsets":[8,24]}}}}"#
    );
    let mut data = vec![0; 16];
    data.extend(u64::MAX.to_le_bytes());
    let m = error(&file(&dir, "d.safetensors", &safetensors(&header, &data)));
    assert!(
        m.contains("label 18446744073709551615 at `labels`[1] is out of range"),
        "{m}"
    );
}

#[test]
fn npy_float16_is_read_and_other_dtypes_are_named_with_what_is_read() {
    let dir = tempfile::tempdir().unwrap();
    // 1.5 and -2 in float16.
    let halves = [0x3E00u16, 0xC000].map(u16::to_le_bytes).concat();
    let input = npy("<f2", "(2, 1, 1)", &halves);
    let labels = npy("<i8", "(2,)", &[[0u8; 8], 1u64.to_le_bytes()].concat());
    let path = file(
        &dir,
        "d.npz",
        &stored_zip(&[("input.npy", &input), ("labels.npy", &labels)]),
    );
    let s = sequences(&path, &ReadSettings::default());
    let mut r = s.reader().unwrap();
    assert_eq!(r.read(0).unwrap().inputs, Values::F32(vec![1.5]));
    assert_eq!(r.read(1).unwrap().inputs, Values::F32(vec![-2.0]));
    let m = error(&file(&dir, "x.npy", &npy("<f4", "(2, 1, 1)", &[0; 8])));
    assert!(
        m.contains("(it has `x`); a .npy holds one array, named by its file: name it input.npy"),
        "{m}"
    );
    for (descr, says) in [
        ("|b1", "dtype `|b1` (bool) is not read"),
        ("|O", "dtype `|O` (Python objects) is not read"),
        ("<c8", "dtype `<c8` (complex numbers) is not read"),
        (">f4", "dtype `>f4` is big-endian"),
    ] {
        let path = file(&dir, "input.npy", &npy(descr, "(2, 1, 1)", &[0; 16]));
        let m = error(&path);
        assert!(m.contains(says), "{descr}: {m}");
        if descr != ">f4" {
            assert!(m.contains("float16, float32, float64"), "{m}");
        }
    }
}

/// A DL4J-style directory with the given feature and label files.
fn dl4j(features: &[(&str, &str)], labels: &[(&str, &str)]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (sub, files) in [("features", features), ("labels", labels)] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(sub).join(name), text).unwrap();
        }
    }
    dir
}

fn labels_of(source: &dyn Source) -> Vec<Values> {
    let mut r = source.reader().unwrap();
    (0..source.lengths().len())
        .map(|i| r.read(i).unwrap().labels)
        .collect()
}

#[test]
fn class_ids_written_as_floats_are_read_and_a_fraction_is_refused_with_its_place() {
    let dir = dl4j(
        &[("0.csv", "1,2\n3,4\n"), ("1.csv", "5,6\n")],
        &[("0.csv", "2.0\n"), ("1.csv", "1.00\n")],
    );
    let s = sequences(dir.path(), &ReadSettings::default());
    assert_eq!(
        labels_of(s.as_ref()),
        [Values::Ids(vec![2]), Values::Ids(vec![1])]
    );
    std::fs::write(dir.path().join("labels/1.csv"), "1.5\n").unwrap();
    let e = open(dir.path(), &ReadSettings::default()).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, DataError::LabelKind { .. }), "{m}");
    assert!(
        m.contains("labels/1.csv:1:1: label `1.5` is not a class id"),
        "{m}"
    );
    let t = tempfile::tempdir().unwrap();
    let csv = file(
        &t,
        "d.csv",
        b"sequence,step,f1,label\na,0,0.5,\na,1,0.5,1.0\nb,0,0.5,\nb,1,0.5,-1.0\n",
    );
    let m = error(&csv);
    assert!(m.contains("d.csv:5:4: label -1.0 is out of range"), "{m}");
}

#[test]
fn sequences_of_one_step_take_the_layout_of_the_models_head() {
    let head = |per| ReadSettings {
        head: Some(per),
        ..ReadSettings::default()
    };
    let dir = dl4j(
        &[("0.csv", "1,2\n"), ("1.csv", "5,6\n")],
        &[("0.csv", "2\n"), ("1.csv", "1\n")],
    );
    let t = tempfile::tempdir().unwrap();
    let csv = file(&t, "d.csv", b"a,0,0.5,1\nb,0,0.5,2\n");
    let header = format!(
        r#"{{{INPUT_2X1X1},"labels":{{"dtype":"I64","shape":[2,1],"data_offsets":[8,24]}}}}"#
    );
    let tensors = file(&t, "d.safetensors", &safetensors(&header, &[0; 24]));
    for path in [dir.path(), &csv, &tensors] {
        for per in [LabelsPer::Step, LabelsPer::Sequence] {
            let s = sequences(path, &head(per));
            assert_eq!(s.dataset().labels_per, per, "{}", path.display());
            assert_eq!(labels_of(s.as_ref()).len(), 2);
        }
        let s = sequences(path, &ReadSettings::default());
        assert_eq!(s.dataset().labels_per, LabelsPer::Sequence);
    }
    // A one-step sequence among per-step ones takes their layout, first or not.
    let dir = dl4j(
        &[("0.csv", "1,2\n"), ("1.csv", "5,6\n7,8\n")],
        &[("0.csv", "2\n"), ("1.csv", "1\n0\n")],
    );
    let s = CsvSequenceDir::open_dir(dir.path(), &head(LabelsPer::Sequence)).unwrap();
    assert_eq!(s.dataset().labels_per, LabelsPer::Step);
    let csv = file(&t, "e.csv", b"a,0,0.5,1\nb,0,0.5,2\nb,1,0.5,0\n");
    let s = LongCsv::open(&csv, &ReadSettings::default()).unwrap();
    assert_eq!(s.dataset().labels_per, LabelsPer::Step);
    assert_eq!(
        labels_of(&s),
        [Values::Ids(vec![1]), Values::Ids(vec![2, 0])]
    );
}

#[test]
fn a_csv_separated_by_semicolons_or_tabs_is_refused_naming_the_separator() {
    let t = tempfile::tempdir().unwrap();
    for (text, name) in [
        ("sequence;step;f1;label\na;0;0,5;1\n", "`;`"),
        ("a;0;0.5;1\n", "`;`"),
        ("a\t0\t0.5\t1\n", "TAB"),
    ] {
        let m = error(&file(&t, "d.csv", text.as_bytes()));
        assert!(
            m.contains(&format!("d.csv:1: fields are separated by {name}")),
            "{m}"
        );
    }
    let dir = dl4j(&[("0.csv", "1;2\n")], &[("0.csv", "1\n")]);
    let m = error(dir.path());
    assert!(
        m.contains("features/0.csv:1: fields are separated by `;`"),
        "{m}"
    );
}

#[test]
fn quoted_fields_are_read_and_an_error_after_a_skipped_header_shows_it() {
    let t = tempfile::tempdir().unwrap();
    let quoted = file(
        &t,
        "q.csv",
        b"\"sequence\",\"step\",\"f1\",\"label\"\n\"a\",\"0\",\"0.5\",\"\"\n\"a\",\"1\",\"1.5\",\"2\"\n",
    );
    let s = sequences(&quoted, &ReadSettings::default());
    let e = s.reader().unwrap().read(0).unwrap();
    assert_eq!(
        (e.inputs, e.labels),
        (Values::F32(vec![0.5, 1.5]), Values::Ids(vec![2]))
    );
    let m = error(&file(&t, "h.csv", b"a,b,c,d\na,0,x,1\na,1,0.5,1\n"));
    assert!(
        m.contains("h.csv:2:3: `x` is not a number (line 1 was skipped as a header, none of its fields being a number: `a,b,c,d`)"),
        "{m}"
    );
    // Not at a later line, which the header has nothing to do with.
    let m = error(&file(&t, "h.csv", b"a,b,c,d\na,0,1,1\na,1,x,1\n"));
    assert!(!m.contains("header"), "{m}");
}

#[test]
fn a_directory_without_features_names_the_layout_and_hidden_files_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("labels")).unwrap();
    let m = error(dir.path());
    assert!(
        m.contains(
            "has no features/ directory (a directory is read in DL4J's layout: features/0.csv"
        ),
        "{m}"
    );
    let dir = dl4j(
        &[("0.csv", "1,2\n"), (".DS_Store", "\0\0\0\x01Bud1")],
        &[("0.csv", "1\n"), ("._0.csv", "\0\x05\x16\x07")],
    );
    let s = sequences(dir.path(), &ReadSettings::default());
    assert_eq!(s.lengths(), [1]);
}
