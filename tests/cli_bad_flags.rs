//! The command line under odd flag combinations and files: each is refused with exit 1
//! and a message naming the flag or file and what to do, or, where the run can go on, it
//! goes on and says what it did. Nothing a run reads is ever overwritten by its outputs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{arg, example_data, refused, scratch};
use tensorfit::core::DeviceKind;
use tensorfit::decision::decide_on;
use tensorfit::devices::{DeviceStatus, MemoryCaps};
use tensorfit::nn::{Job, ModelDescription};

/// A copy of `from` as `name` in this test's scratch directory.
fn copy(from: &Path, name: &str) -> PathBuf {
    let to = scratch("bad_flags").join(name);
    std::fs::copy(from, &to).unwrap();
    to
}

/// A small model of the built-in temporal-order task, as the description file `name`.
fn task_model(name: &str) -> PathBuf {
    let path = scratch("bad_flags").join(name);
    let text = "[input]\nkind = \"dense\"\nfeatures = 152\n[recurrent]\ncell = \"lstm\"\nhidden = 4\nlayers = 1\n[head]\non = \"last\"\nlayers = []\n[loss]\nkind = \"cross_entropy\"\nclasses = 6\n";
    std::fs::write(&path, text).unwrap();
    path
}

/// A short run of the built-in task.
const SHORT: [&str; 8] = [
    "--steps",
    "1",
    "--batch",
    "2",
    "--seq-len",
    "4",
    "--eval-batch",
    "2",
];

/// `train --model MODEL --data DATA --epochs 1` and `more`.
fn one_epoch<'a>(model: &'a Path, data: &'a Path, more: &[&'a str]) -> Vec<&'a str> {
    let train = ["train", "--model", arg(model), "--data", arg(data)];
    [&train[..], &["--epochs", "1"], more].concat()
}

/// Requires `err` to hold `want`.
fn holds(err: &str, want: &str) {
    assert!(err.contains(want), "expected `{want}` in: {err}");
}

/// Requires `err` to hold `want` and to say it once.
fn says_once(err: &str, want: &str) {
    assert_eq!(
        err.matches(want).count(),
        1,
        "expected `{want}` once in: {err}"
    );
}

#[test]
fn an_output_over_a_file_the_run_reads_is_refused_and_the_file_kept() {
    let model = task_model("overwritten.toml");
    let files_model = example_data("classify_model.toml");
    let data = copy(&example_data("classify.safetensors"), "data.safetensors");
    let save_over_model = [
        &["train", "--model", arg(&model)][..],
        &SHORT,
        &["--save", arg(&model)],
    ]
    .concat();
    let save_over_data = one_epoch(&files_model, &data, &["--save", arg(&data)]);
    let cases: [(&[&str], &Path, &str); 3] = [
        (&save_over_model, &model, "--save"),
        (&save_over_data, &data, "--save"),
        (
            &["plan", "--model", arg(&model), "--plot", arg(&model)],
            &model,
            "--plot",
        ),
    ];
    for (args, kept, flag) in cases {
        let before = std::fs::read(kept).unwrap();
        let err = refused(args);
        says_once(&err, &format!("{flag} {}", kept.display()));
        assert!(err.contains("would destroy it"), "{args:?}: {err}");
        assert_eq!(
            std::fs::read(kept).unwrap(),
            before,
            "{args:?} changed {kept:?}"
        );
    }
}

#[test]
fn no_device_allowed_being_usable_is_said_once_with_what_to_do() {
    // `--device cuda` on a machine without a CUDA driver.
    let job = Job::Eval {
        batch: 2,
        seq_len: 4,
    };
    let cfg = ModelDescription::seed();
    let req = common::request(&cfg, job, 4, DeviceKind::Cuda, MemoryCaps::default());
    let absent = DeviceStatus {
        id: "cuda:0".into(),
        kind: DeviceKind::Cuda,
        index: 0,
        info: Err("no CUDA driver found (libcuda.so)".into()),
        assumed: None,
    };
    let decision = decide_on(&req, vec![absent]).unwrap();
    assert!(decision.chosen().is_none());
    // The library's error is `no device: ` and this.
    let e = decision.nothing_fits().to_string();
    holds(&e, "none of the devices allowed can be used (cuda:0: no CUDA driver found (libcuda.so)); `tensorfit devices` lists those present");
    assert!(!e.contains("no device"), "{e}");
}

#[test]
fn a_text_too_short_for_its_windows_names_the_flag_to_change_and_the_file_once() {
    let corpus = example_data("corpus.txt");
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models/char_lm.toml");
    let run = |extra: &[&str]| {
        let args = [
            &["train", "--model", arg(&model), "--data", arg(&corpus)][..],
            &["--epochs", "1", "--batch", "4"],
            extra,
        ]
        .concat();
        refused(&args)
    };
    // 688 characters: the last 10% (69) make no window of the default 100.
    let e = run(&[]);
    says_once(&e, "corpus.txt");
    holds(&e, "--val-fraction 0.1 holds out too little of the text for one window (give a larger --val-fraction, a smaller --max-seq-len, or --val FILE)");
    holds(&e, "69 characters are too few for one window");
    let e = run(&["--max-seq-len", "2000", "--val-fraction", "0"]);
    says_once(&e, "corpus.txt");
    holds(
        &e,
        "windows of 2000 characters (--max-seq-len: give at most 687)",
    );
    let e = run(&["--max-seq-len", "20", "--val-fraction", "0.99"]);
    says_once(&e, "corpus.txt");
    holds(&e, "--val-fraction 0.99 leaves too little of the text to train on (give a smaller --val-fraction or --max-seq-len)");
}

#[test]
fn a_resumed_data_run_refuses_flags_typed_with_other_values_than_its_own() {
    let dir = scratch("bad_flags").join("data_run");
    let model = example_data("classify_model.toml");
    let data = example_data("dl4j");
    let start = one_epoch(
        &model,
        &data,
        &["--batch", "4", "--checkpoint-dir", arg(&dir)],
    );
    common::succeed(common::tensorfit_command().args(start), "the first run");
    let resume = |extra: &[&str]| {
        let args = [
            &["train", "--resume", arg(&dir), "--data", arg(&data)][..],
            extra,
        ]
        .concat();
        refused(&args)
    };
    // The run's batch was 4: a typed 7 was silently replaced by it.
    let e = resume(&["--batch", "7"]);
    holds(&e, "a resumed run keeps the settings it was started with");
    holds(&e, "--batch 7 (the run's is 4) differs; drop that flag");
    let e = resume(&["--val-fraction", "0.3", "--lr", "0.5"]);
    holds(
        &e,
        "--lr 0.5 (the run's is 0.001), --val-fraction 0.3 (the run's is 0.1) differ",
    );
}

#[test]
fn predict_input_that_does_not_fit_the_model_names_the_file_before_planning() {
    let dir = scratch("bad_flags");
    let input = example_data("classify.safetensors"); // `input` [12, 9, 3]
    let output = dir.join("probabilities.safetensors");
    let predict = |ck: &Path| {
        refused(&[
            "predict",
            "--checkpoint",
            arg(ck),
            "--input",
            arg(&input),
            "--output",
            arg(&output),
        ])
    };
    let seed = dir.join("seed.safetensors");
    tensorfit::Model::seed().save(&seed).unwrap();
    let e = predict(&seed);
    let shown = input.display();
    holds(
        &e,
        &format!("--input {shown}: `input` has shape [12, 9, 3], expected [batch, time, 152]"),
    );
    // A model of token ids cannot read --input at all: it was planned, then refused
    // with the internal [time, batch] layout.
    let mut tokens = ModelDescription::lstm_language_model(20, 8, 1);
    tokens.head.on = tensorfit::nn::HeadOn::LAST_STEP;
    let ck = dir.join("tokens.safetensors");
    tensorfit::Model::new(tokens, 1).unwrap().save(&ck).unwrap();
    let e = predict(&ck);
    holds(
        &e,
        "--input takes dense features [batch, time, features], and the model of --checkpoint",
    );
    holds(&e, "reads token ids: give them with --data");
    assert!(!e.contains("chosen:"), "refused before planning: {e}");
}

#[test]
fn init_from_a_checkpoint_of_another_model_than_model_is_refused() {
    let ck = scratch("bad_flags").join("classifier.safetensors");
    let classifier = example_data("classify_model.toml");
    let cfg = tensorfit::nn::DescriptionFile::load(&classifier)
        .unwrap()
        .model;
    tensorfit::Model::new(cfg, 1).unwrap().save(&ck).unwrap();
    let regression = example_data("regress_model.toml");
    let data = example_data("dl4j");
    let e = refused(&one_epoch(&regression, &data, &["--init", arg(&ck)]));
    // The run trained the checkpoint's classifier, --model unused.
    holds(&e, "is not the model of");
    holds(&e, "drop --model to start from the checkpoint's");
}

#[test]
fn an_inference_that_fits_nowhere_is_not_told_about_truncated_bptt() {
    // An assumed GPU of 64 MiB: every plan fits its buffers, none its memory.
    let found = tensorfit::assume::parse(&["cuda=64MiB".to_string()]).unwrap();
    let cfg = ModelDescription::seed();
    let caps = MemoryCaps::default();
    let fits_nowhere = |job: Job| {
        let req = common::request(&cfg, job, 4, DeviceKind::Cuda, caps.clone());
        let d = decide_on(&req, found.clone()).unwrap();
        assert!(d.chosen().is_none());
        d.nothing_fits().to_string()
    };
    let (batch, seq_len) = (2, 4);
    let e = fits_nowhere(Job::Eval { batch, seq_len });
    holds(
        &e,
        "inference memory depends on the batch, the sequence length and the model's size",
    );
    assert!(!e.contains("--tbptt"), "{e}");
    let eval = None;
    let e = fits_nowhere(Job::Train {
        batch,
        seq_len,
        eval,
    });
    holds(&e, "training memory depends on --batch and --tbptt");
}

#[test]
fn a_device_no_strategy_can_be_planned_on_is_listed_with_why() {
    // 4 KiB: a weight matrix is larger than the device's largest buffer under every
    // strategy; the device was left out of the table and the error said `()`.
    let found = tensorfit::assume::parse(&["cuda=4KiB".to_string()]).unwrap();
    let job = Job::Eval {
        batch: 2,
        seq_len: 4,
    };
    let cfg = ModelDescription::seed();
    let req = common::request(&cfg, job, 4, DeviceKind::Cuda, MemoryCaps::default());
    let d = decide_on(&req, found).unwrap();
    assert!(d.candidates.is_empty());
    let (device, why) = &d.unavailable[0];
    assert_eq!(device, "cuda=4kib (assumed)");
    assert!(
        why.starts_with("no strategy can be planned on it: `lstm.weight_")
            && why.contains("more than the device's largest buffer (4096 bytes)"),
        "{why}"
    );
    let e = d.nothing_fits().to_string();
    holds(&e, &format!("({device}: {why})"));
}

#[test]
fn model_checks_the_training_table_as_train_does() {
    let path = task_model("bad_training.toml");
    let text = std::fs::read_to_string(&path).unwrap() + "[training]\nlr = -1\n";
    std::fs::write(&path, text).unwrap();
    let e = refused(&["model", "--model", arg(&path)]);
    holds(
        &e,
        ":15:1: `training.lr` = -1: invalid value '-1' for '--lr <LR>': must be a positive number",
    );
}

#[test]
fn resuming_a_data_run_from_a_directory_without_its_state_names_the_file_once() {
    let dir = scratch("bad_flags").join("no_run_here");
    std::fs::create_dir_all(&dir).unwrap();
    let data = example_data("dl4j");
    let e = refused(&["train", "--resume", arg(&dir), "--data", arg(&data)]);
    says_once(&e, "last.safetensors");
    holds(&e, "--resume: ");
}

#[test]
fn an_absurd_batch_or_read_ahead_with_data_runs_on_the_data_there_is() {
    // They overflowed (exit 101) or allocated a channel of 10^9 batches (abort, 134).
    let dir = scratch("bad_flags");
    let model = example_data("classify_model.toml");
    let data = example_data("dl4j");
    let ck = dir.join("absurd.safetensors");
    let out = dir.join("absurd_probabilities.safetensors");
    let max = usize::MAX.to_string();
    let save = ["--save", arg(&ck)];
    let on_data =
        |command: &'static str| vec![command, "--checkpoint", arg(&ck), "--data", arg(&data)];
    let runs: [Vec<&str>; 5] = [
        one_epoch(
            &model,
            &data,
            &[&save[..], &["--read-ahead", "1000000000"]].concat(),
        ),
        one_epoch(
            &model,
            &data,
            &[&save[..], &["--batch", &max, "--read-ahead", &max]].concat(),
        ),
        [on_data("eval"), vec!["--batch", &max]].concat(),
        [
            on_data("predict"),
            vec!["--batch", &max, "--output", arg(&out)],
        ]
        .concat(),
        vec![
            "plan",
            "--model",
            arg(&model),
            "--data",
            arg(&data),
            "--batch",
            &max,
        ],
    ];
    for args in runs {
        common::succeed(
            common::tensorfit_command().args(&args),
            &format!("{args:?}"),
        );
    }
}
