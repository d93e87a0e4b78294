//! Every format's example in examples/data (written by examples/data/make.py) reads as the
//! data set it holds, and the formats that hold the same sequences read them alike.

// Helpers outside #[test] functions unwrap too: a failure is the test's failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use tensorfit_data::{
    open, CharCorpus, CharVocab, CharWindows, CsvSequenceDir, Inputs, Labels, LabelsPer, LongCsv,
    Opened, ReadSettings, Source, Targets, TensorData, TsvData, Values,
};
use tensorfit_testing::repo_file;

fn example(name: &str) -> PathBuf {
    repo_file("examples/data").join(name)
}

fn sequences(name: &str) -> Arc<dyn Source> {
    match open(&example(name), &ReadSettings::default()).unwrap() {
        Opened::Sequences(s) => s,
        Opened::Corpus(_) => panic!("{name} opened as a text corpus"),
    }
}

fn f32s(v: &Values) -> &[f32] {
    match v {
        Values::F32(v) => v,
        Values::Ids(_) => panic!("expected f32 values"),
    }
}

fn ids(v: &Values) -> &[u32] {
    match v {
        Values::Ids(v) => v,
        Values::F32(_) => panic!("expected ids"),
    }
}

#[test]
fn a_safetensors_file_reads_as_sequences_of_its_lengths_with_one_label_each() {
    let s = sequences("classify.safetensors");
    let d = s.dataset();
    assert_eq!(d.inputs, Inputs::Dense { features: 3 });
    assert_eq!(d.targets, Targets::Classes { classes: 3 });
    assert_eq!(d.labels_per, LabelsPer::Sequence);
    assert_eq!(d.sequences, 12);
    assert!(s.lengths().iter().all(|&l| (4..=9).contains(&l)));
    assert!(
        s.lengths().iter().any(|&l| l < 9),
        "lengths are read from `lengths`"
    );
    let e = s.reader().unwrap().read(0).unwrap();
    assert_eq!(e.inputs.len(), e.len * 3);
    assert_eq!(e.labels.len(), 1);
}

#[test]
fn tokens_with_a_label_per_step_read_as_ids() {
    let s = sequences("tokens.safetensors");
    let d = s.dataset();
    assert!(matches!(d.inputs, Inputs::Tokens { vocab } if vocab <= 20 && vocab > 1));
    assert_eq!(d.labels_per, LabelsPer::Step);
    let e = s.reader().unwrap().read(3).unwrap();
    assert_eq!(ids(&e.inputs).len(), e.len);
    assert_eq!(ids(&e.labels).len(), e.len);
}

#[test]
fn every_format_of_the_toy_task_reads_the_same_sequences() {
    let reference = sequences("classify.safetensors");
    let mut r = reference.reader().unwrap();
    let dir = example("dl4j");
    let others: Vec<(&str, Arc<dyn Source>)> = vec![
        ("npz", sequences("classify.npz")),
        ("compressed npz", sequences("classify_compressed.npz")),
        (
            "dl4j",
            Arc::new(
                CsvSequenceDir::open(
                    &dir.join("features"),
                    &dir.join("labels"),
                    &ReadSettings::default(),
                )
                .unwrap(),
            ),
        ),
    ];
    for (name, other) in &others {
        assert_eq!(other.lengths(), reference.lengths(), "{name}");
        assert_eq!(other.dataset(), reference.dataset(), "{name}");
        let mut o = other.reader().unwrap();
        for i in 0..reference.lengths().len() {
            let (a, b) = (r.read(i).unwrap(), o.read(i).unwrap());
            assert_eq!(a.labels, b.labels, "{name} sequence {i}");
            for (x, y) in f32s(&a.inputs).iter().zip(f32s(&b.inputs)) {
                assert!(
                    (x - y).abs() <= 1e-5 * x.abs().max(1.0),
                    "{name} sequence {i}: {x} vs {y}"
                );
            }
        }
    }
}

#[test]
fn a_lone_npy_is_an_array_named_by_its_file() {
    let err = TensorData::open(&example("input.npy"), &ReadSettings::default()).unwrap_err();
    // input.npy holds only `input` (named by the file stem), so the labels are missing.
    assert!(err.to_string().contains("has no `labels`"), "{err}");
}

#[test]
fn with_labels_ignored_a_file_without_them_reads_with_placeholders_laid_out_as_asked() {
    for (per, regression, want) in [
        (LabelsPer::Sequence, false, Values::Ids(vec![0])),
        (LabelsPer::Step, false, Values::Ids(vec![0; 9])),
        (LabelsPer::Sequence, true, Values::F32(vec![0.0])),
    ] {
        let settings = ReadSettings {
            labels: Labels::Ignored { per },
            regression,
            classes: (!regression).then_some(3),
            ..ReadSettings::default()
        };
        let data = TensorData::open(&example("input.npy"), &settings).unwrap();
        let d = data.dataset();
        assert_eq!((d.labels_per, d.sequences), (per, 12));
        let example = data.reader().unwrap().read(0).unwrap();
        assert_eq!(example.labels, want, "{per:?}, regression {regression}");
        assert_eq!(example.inputs.len(), 9 * 3);
    }
}

#[test]
fn a_csv_that_starts_with_a_byte_order_mark_reads_as_without_it() {
    // Excel's "CSV UTF-8" begins the file with one, here right before the first
    // sequence's id (no header).
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(example("sequences.csv")).unwrap();
    let rows = text.split_once('\n').unwrap().1;
    let (with_path, without_path) = (dir.path().join("bom.csv"), dir.path().join("plain.csv"));
    std::fs::write(&with_path, format!("\u{feff}{rows}")).unwrap();
    std::fs::write(&without_path, rows).unwrap();
    let settings = ReadSettings::default();
    let (with, without) = (
        LongCsv::open(&with_path, &settings).unwrap(),
        LongCsv::open(&without_path, &settings).unwrap(),
    );
    assert_eq!(with.lengths(), without.lengths());
    assert_eq!(with.ids(), without.ids());
    let (mut a, mut b) = (with.reader().unwrap(), without.reader().unwrap());
    for i in 0..with.lengths().len() {
        assert_eq!(a.read(i).unwrap(), b.read(i).unwrap(), "sequence {i}");
    }
}

#[test]
fn a_long_csv_reads_sequences_by_their_id_with_a_label_per_step() {
    let s = LongCsv::open(&example("sequences.csv"), &ReadSettings::default()).unwrap();
    let reference = sequences("classify.safetensors");
    assert_eq!(s.lengths(), reference.lengths());
    assert_eq!(s.dataset().labels_per, LabelsPer::Step);
    assert_eq!(s.ids()[2], "s2");
    let (mut a, mut b) = (s.reader().unwrap(), reference.reader().unwrap());
    for i in [0, 5, 11] {
        let (x, y) = (a.read(i).unwrap(), b.read(i).unwrap());
        assert_eq!(x.labels.len(), x.len);
        for (p, q) in f32s(&x.inputs).iter().zip(f32s(&y.inputs)) {
            assert!((p - q).abs() <= 1e-5 * p.abs().max(1.0));
        }
    }
}

#[test]
fn a_corpus_becomes_a_vocabulary_and_windows_whose_targets_are_the_next_characters() {
    let corpus = CharCorpus::open(&example("corpus.txt")).unwrap();
    let vocab = corpus.vocab();
    let text = std::fs::read_to_string(example("corpus.txt")).unwrap();
    assert_eq!(corpus.chars as usize, text.chars().count());
    let windows = CharWindows::new(&corpus, &vocab, (0, corpus.chars), 4, 10).unwrap();
    let mut r = windows.reader().unwrap();
    let chars: Vec<u32> = text.chars().map(|c| vocab.id(c)).collect();
    let per_stream = text.chars().count() / 4;
    // Windows in batch order: window k of stream s is sequence k * 4 + s.
    for k in 0..3 {
        for s in 0..4 {
            let e = r.read(k * 4 + s).unwrap();
            let start = s * per_stream + k * 10;
            assert_eq!(ids(&e.inputs), &chars[start..start + 10]);
            assert_eq!(ids(&e.labels), &chars[start + 1..start + 11]);
        }
    }
    assert_eq!(windows.position(9), (1, 2));
    assert!(CharWindows::new(&corpus, &vocab, (0, corpus.chars + 1), 4, 10).is_err());
}

#[test]
fn a_corpus_splits_into_training_and_validation_ranges_of_characters() {
    let corpus = CharCorpus::open(&example("corpus.txt")).unwrap();
    let (train, val) = corpus.split(0.25).unwrap();
    assert_eq!(train.0, 0);
    assert_eq!(train.1, val.0);
    assert_eq!(val.1, corpus.chars);
    assert_eq!(val.1 - val.0, (corpus.chars as f64 * 0.25).round() as u64);
    assert!(corpus.split(1.0).is_err());
}

#[test]
fn a_character_vocabulary_survives_its_json_and_maps_unknown_characters_to_zero() {
    let vocab = CharCorpus::open(&example("corpus.txt")).unwrap().vocab();
    let back = CharVocab::from_json(&vocab.to_json()).unwrap();
    assert_eq!(back, vocab);
    assert_eq!(vocab.id('€'), 0);
    let t = vocab.id('t');
    assert_ne!(t, 0);
    assert_eq!(vocab.char(t), Some('t'));
}

#[test]
fn a_tsv_of_labelled_texts_reads_as_sequence_classification() {
    let s = TsvData::open(&example("reviews.tsv"), &ReadSettings::default(), None).unwrap();
    assert_eq!(s.labels().len(), 2);
    assert_eq!(s.dataset().targets, Targets::Classes { classes: 2 });
    assert_eq!(s.lengths()[0], "a fine film".len());
    let e = s.reader().unwrap().read(1).unwrap();
    assert_eq!(ids(&e.labels), &[s.labels().id("neg").unwrap()]);
    let text: String = ids(&e.inputs)
        .iter()
        .map(|&i| s.chars().char(i).unwrap())
        .collect();
    assert_eq!(text, "dull and long");
}

#[test]
fn a_validation_tsv_uses_the_training_vocabularies() {
    let train = TsvData::open(&example("reviews.tsv"), &ReadSettings::default(), None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("val.tsv");
    std::fs::write(&path, "neg\tzzz!\n").unwrap();
    let val = TsvData::open(
        &path,
        &ReadSettings::default(),
        Some((train.chars(), train.labels())),
    )
    .unwrap();
    let e = val.reader().unwrap().read(0).unwrap();
    assert_eq!(val.dataset(), &{
        let mut d = train.dataset().clone();
        d.sequences = 1;
        d.max_len = 4;
        d.total_steps = 4;
        d
    });
    assert_eq!(ids(&e.inputs)[3], 0, "`!` is not in the training texts");
}

#[test]
fn a_long_csv_cut_to_a_maximum_keeps_the_first_steps_and_the_sequence_label() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.csv");
    std::fs::write(&path, "a,0,1.0,\na,1,2.0,\na,2,3.0,2\nb,0,4.0,1\n").unwrap();
    let settings = ReadSettings {
        max_seq_len: Some(2),
        too_long: tensorfit_data::TooLong::Cut,
        ..ReadSettings::default()
    };
    let s = LongCsv::open(&path, &settings).unwrap();
    assert_eq!(s.lengths(), &[2, 1]);
    assert_eq!(s.dataset().labels_per, LabelsPer::Sequence);
    let e = s.reader().unwrap().read(0).unwrap();
    assert_eq!(f32s(&e.inputs), &[1.0, 2.0]);
    assert_eq!(
        ids(&e.labels),
        &[2],
        "the label of the last row, past the cut"
    );
}
