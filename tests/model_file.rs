//! `--model FILE.toml` on the command line: every command takes a description file, a
//! bad one is refused naming the file, line and key, `[training]` fills `train`'s
//! settings under the typed flags, `model` prints it all, and a checkpoint carries its
//! model so `eval` and `predict` need no `--model` (and refuse another).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::Value;
use tensorfit::nn::Checkpoint;

use common::{
    example_data, json, ok_json, refused, scratch, succeed, task_model, tensorfit_command,
};

/// A small model of the built-in task (LSTM 8, Dense 4) with the `[training]` table
/// `training` (none if empty), written to the scratch file `name`; returns its path.
fn model_file(name: &str, training: &str) -> String {
    let mut text = task_model(8, 2, 4).to_toml();
    if !training.is_empty() {
        text += &format!("\n[training]\n{training}");
    }
    let path = scratch("model-file").join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// The 1-based line of the first line of `path` that starts with `start`.
fn line_of(path: &str, start: &str) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().position(|l| l.starts_with(start)).unwrap() + 1
}

/// The model file `NAME.toml` (a short run in its `[training]` table) and the
/// checkpoint `NAME.safetensors` that `train --model NAME.toml --save` wrote.
fn trained(name: &str) -> (String, String) {
    let f = model_file(&format!("{name}.toml"), SHORT_RUN);
    let ck = scratch("model-file").join(format!("{name}.safetensors"));
    let ck = ck.to_str().unwrap();
    ok_json(&[
        "train", "--model", &f, "--device", "cpu", "--save", ck, "--json",
    ]);
    (f, ck.to_string())
}

/// The job of `plan` and `eval` here: batch 4 of 8 steps on the CPU, as JSON.
const SMALL_JOB: &[&str] = &[
    "--device",
    "cpu",
    "--batch",
    "4",
    "--seq-len",
    "8",
    "--json",
];

/// A short run: 4 sequences of 8 steps, one evaluation at the end, on the CPU.
const SHORT_RUN: &str = "steps = 2\nbatch = 4\nseq_len = 8\neval_every = 0\neval_batch = 4\n";

#[test]
fn train_takes_its_settings_from_the_files_training_table() {
    let f = model_file(
        "sgd.toml",
        &format!("{SHORT_RUN}optimizer = \"sgd\"\nmomentum = 0.9\nnesterov = true\nlr = 0.05\n"),
    );
    let v = ok_json(&["train", "--model", &f, "--device", "cpu", "--json"]);
    assert_eq!(v["steps"], 2, "{v}");
    let lrs: Vec<f64> = v["lrs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(lrs.len(), 2);
    assert!(lrs.iter().all(|lr| (lr - 0.05).abs() < 1e-6), "{lrs:?}");
}

#[test]
fn a_typed_flag_overrides_the_files_setting_and_the_rest_of_the_file_still_applies() {
    let f = model_file("override.toml", &format!("{SHORT_RUN}lr = 0.05\n"));
    let v = ok_json(&[
        "train", "--model", &f, "--device", "cpu", "--lr", "0.02", "--steps", "1", "--json",
    ]);
    assert_eq!(v["steps"], 1, "{v}");
    assert!((v["lrs"][0].as_f64().unwrap() - 0.02).abs() < 1e-6, "{v}");
    // A flag also overrides a file value its own parser would refuse.
    let f = model_file("override-bad.toml", &format!("{SHORT_RUN}lr = -1\n"));
    let v = ok_json(&[
        "train", "--model", &f, "--device", "cpu", "--lr", "0.02", "--json",
    ]);
    assert_eq!(v["steps"], 2, "{v}");
}

#[test]
fn each_bad_training_entry_is_refused_naming_the_file_line_and_key() {
    for (entry, key, says) in [
        (
            "bach = 4",
            "unknown key `training.bach`",
            "`[training]` takes batch, seq_len",
        ),
        (
            "device = \"cpu\"",
            "unknown key `training.device`",
            "warmup_steps",
        ),
        (
            "batch = \"four\"",
            "`training.batch` = \"four\"",
            "invalid value 'four' for '--batch",
        ),
        ("batch = 0", "`training.batch`", "must be at least 1"),
        (
            "lr = -1",
            "`training.lr`",
            "must be a positive number, got -1",
        ),
        (
            "momentum = 1.5",
            "`training.momentum`",
            "must be in [0, 1), got 1.5",
        ),
        ("schedule = \"linear\"", "`training.schedule`", "linear"),
        (
            "nesterov = \"yes\"",
            "`training.nesterov`",
            "must be true or false",
        ),
        (
            "clip_norm = true",
            "`training.clip_norm`",
            "must be a number or a string",
        ),
        (
            "lr = [0.1]",
            "`training.lr`",
            "must be a number, a string or true/false, not array",
        ),
        ("steps = 0", "`training.steps`", "must be at least 1"),
    ] {
        let name = entry.split(" =").next().unwrap();
        let others: String = SHORT_RUN
            .lines()
            .filter(|l| !l.starts_with(&format!("{name} =")))
            .map(|l| format!("{l}\n"))
            .collect();
        let f = model_file("bad-training.toml", &format!("{others}{entry}\n"));
        // `plan` reads the same table, and refuses it the same way.
        for command in ["train", "plan"] {
            let err = refused(&[command, "--model", &f, "--device", "cpu"]);
            let at = format!("{f}:{}:", line_of(&f, entry));
            assert!(
                err.contains(&at) && err.contains(key),
                "{command} {entry}: the error must name {at} and {key}: {err}"
            );
            assert!(
                err.contains(says),
                "{command} {entry}: the error must say {says:?}: {err}"
            );
        }
    }
}

#[test]
fn plan_plans_the_run_of_the_files_training_table_under_the_typed_flags() {
    let peak = |args: &[&str]| {
        let v = ok_json(&[&["plan", "--device", "cpu", "--json"], args].concat());
        v["chosen"]["estimated_peak_bytes"].as_u64().unwrap()
    };
    let f = model_file(
        "plan-training.toml",
        "batch = 4\nseq_len = 12\ntbptt = 6\noptimizer = \"sgd\"\nsteps = 3\nlr = 0.1\n",
    );
    let f = f.as_str();
    let flags = ["--batch", "4", "--seq-len", "12", "--tbptt", "6"];
    let from_file = peak(&["--model", f]);
    let typed_sgd = peak(&[&["--model", f], &flags[..], &["--optimizer", "sgd"]].concat());
    let typed_adam = peak(&[&["--model", f], &flags[..], &["--optimizer", "adam"]].concat());
    assert_eq!(
        from_file, typed_sgd,
        "the file's settings are those planned"
    );
    assert!(
        typed_adam > typed_sgd,
        "a typed --optimizer overrides the file's"
    );
    let wider = peak(&["--model", f, "--batch", "64"]);
    assert!(wider > from_file, "a typed --batch overrides the file's");
}

#[test]
fn a_bad_description_is_refused_by_every_command_naming_the_file_line_and_key() {
    let f = model_file("bad-model.toml", "");
    let text = std::fs::read_to_string(&f).unwrap();
    for (from, to, line_start, says) in [
        (
            "hidden = 8",
            "hidden = 100000000",
            "hidden",
            "`recurrent.hidden` = 100000000: must be between 1 and",
        ),
        (
            "hidden = 8",
            "hiden = 8",
            "hiden",
            "unknown key `recurrent.hiden`",
        ),
        (
            "units = 4",
            "units = 0",
            "  { kind = \"dense\"",
            "`head.layers[1].units` must be at least 1",
        ),
    ] {
        std::fs::write(&f, text.replace(from, to)).unwrap();
        let line = line_of(&f, line_start);
        let path = f.as_str();
        for args in [
            vec!["train", "--model", path],
            vec!["plan", "--model", path],
            vec!["eval", "--model", path],
            vec!["bench", "--model", path],
            vec!["model", "--model", path],
            vec![
                "import",
                "--model",
                path,
                "--weights",
                "w.safetensors",
                "--output",
                "/tmp/never-written.safetensors",
            ],
        ] {
            let err = refused(&args);
            assert!(
                err.contains(&format!("{path}:{line}:")) && err.contains(says),
                "{args:?}: {err}"
            );
        }
    }
}

#[test]
fn a_model_that_is_neither_a_preset_nor_a_file_names_the_presets() {
    let err = refused(&["plan", "--model", "sed"]);
    assert!(
        err.contains("--model sed: no such file, and not a preset (seed)"),
        "{err}"
    );
}

#[test]
fn plan_takes_a_description_file_and_plans_its_model() {
    let plan = |model: &str| ok_json(&[&["plan", "--model", model], SMALL_JOB].concat());
    let small = plan(&model_file("plan.toml", ""));
    let seed = plan("seed");
    let peak = |v: &Value| v["chosen"]["estimated_peak_bytes"].as_u64().unwrap();
    assert!(
        peak(&small) < peak(&seed),
        "the small model plans less memory: {small} vs {seed}"
    );
}

#[test]
fn model_prints_the_description_its_training_settings_and_its_tensors() {
    let f = model_file(
        "show.toml",
        &format!("{SHORT_RUN}optimizer = \"adamw\"\nlr = 0.01\n"),
    );
    let path = f.as_str();
    let out = succeed(
        tensorfit_command().args(["model", "--model", path]),
        "model",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let want = task_model(8, 2, 4);
    // The printed description and table are a description file of the same model.
    let toml_part = &text[..text.find("tensor ").unwrap()];
    let back =
        tensorfit::nn::ModelDescription::from_toml(toml_part, std::path::Path::new("printed"))
            .unwrap();
    assert_eq!(back, want);
    for line in [
        "[training]",
        "optimizer = \"adamw\"",
        "lr = 0.01",
        "lstm.weight_ih_l0",
        "out.bias",
    ] {
        assert!(text.contains(line), "missing {line:?}: {text}");
    }
    let v = ok_json(&["model", "--model", path, "--json"]);
    assert_eq!(v["training"]["lr"], 0.01);
    assert_eq!(v["training"]["optimizer"], "adamw");
    assert_eq!(v["description"]["recurrent"]["hidden"], 8);
    let counts: u64 = v["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "trainable")
        .map(|p| p["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counts, v["trainable_parameters"].as_u64().unwrap());
    assert_eq!(counts as usize, want.trainable_parameters().unwrap());
}

#[test]
fn model_prints_a_list_of_layers_back_as_a_list() {
    let path = tensorfit_testing::repo_file("examples/models/bidirectional_tagger.toml");
    let path = path.to_str().unwrap();
    let out = succeed(
        tensorfit_command().args(["model", "--model", path]),
        "model",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let toml_part = &text[..text.find("tensor ").unwrap()];
    assert!(
        toml_part.contains("[[layers]]") && !toml_part.contains("[recurrent]"),
        "{toml_part}"
    );
    let back =
        tensorfit::nn::ModelDescription::from_toml(toml_part, std::path::Path::new("printed"))
            .unwrap();
    let want = tensorfit::nn::ModelDescription::load(std::path::Path::new(path)).unwrap();
    assert_eq!(back, want);
    let v = ok_json(&["model", "--model", path, "--json"]);
    assert!(v["toml"].as_str().unwrap().contains("bidirectional = true"));
}

#[test]
fn eval_and_predict_from_a_checkpoint_need_no_model_and_refuse_another() {
    let (f, ck) = trained("saved");
    let (f, ck) = (f.as_str(), ck.as_str());
    assert_eq!(
        Checkpoint::load(std::path::Path::new(ck)).unwrap().config,
        task_model(8, 2, 4)
    );
    let eval = [&["eval", "--checkpoint", ck], SMALL_JOB].concat();
    ok_json(&eval);
    ok_json(&[&eval[..], &["--model", f]].concat());
    let err = refused(&[&eval[..], &["--model", "seed"]].concat());
    assert!(
        err.contains("--model seed (dense 152 → 3 × lstm 250")
            && err.contains(&format!("is not the model of {ck} (dense 152 → 2 × lstm 8")),
        "{err}"
    );
    let err = refused(&[
        "predict",
        "--checkpoint",
        ck,
        "--model",
        "seed",
        "--input",
        "in.safetensors",
        "--output",
        "out.safetensors",
    ]);
    assert!(
        err.contains("--model seed (dense 152 → 3 × lstm 250"),
        "{err}"
    );
}

#[test]
fn a_resumed_run_keeps_its_settings_and_does_not_use_the_files_training_table() {
    let (_, ck) = trained("resume");
    let ck = ck.as_str();
    let changed = model_file("resume-changed.toml", &format!("{SHORT_RUN}lr = 0.5\n"));
    let out = succeed(
        tensorfit_command().args([
            "train", "--model", &changed, "--resume", ck, "--steps", "1", "--device", "cpu",
            "--json",
        ]),
        "resume",
    );
    let v = json(&out);
    assert!(
        (v["lrs"][0].as_f64().unwrap() - 1e-3).abs() < 1e-9,
        "the run's own rate, not the file's: {v}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not used"),
        "a note says so"
    );
}

/// `text` written to the scratch file `name`; its path.
fn written(name: &str, text: &str) -> String {
    let path = scratch("model-file").join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn figures_left_to_the_data_are_taken_from_it_by_train_data_and_refused_elsewhere() {
    let data = example_data("classify.safetensors");
    let data = data.to_str().unwrap();
    let described = std::fs::read_to_string(example_data("classify_model.toml")).unwrap();
    let left = described
        .replace("features = 3", "features = \"data\"")
        .replace("classes = 3", "classes = \"data\"");
    let file = written("from-data.toml", &left);
    // train --data fills them in (3 features, 3 classes) and says so.
    let out = succeed(
        tensorfit_command().args([
            "train",
            "--model",
            &file,
            "--data",
            data,
            "--epochs",
            "1",
            "--device",
            "cpu",
            "--save",
            &format!("{file}.safetensors"),
        ]),
        "train --data with figures left to it",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("input.features, loss.classes from"), "{err}");
    let ck = Checkpoint::load(std::path::Path::new(&format!("{file}.safetensors"))).unwrap();
    assert_eq!(ck.config.input_features(), 3);
    assert_eq!(ck.config.loss.outputs(), 3);
    // A command that reads no data refuses them at their line.
    let e = refused(&["plan", "--model", &file, "--device", "cpu"]);
    let line = left.lines().position(|l| l.contains("\"data\"")).unwrap() + 1;
    assert!(e.contains(&format!("from-data.toml:{line}:")), "{e}");
    assert!(
        e.contains("`input.features = \"data\"`") && e.contains("give a number"),
        "{e}"
    );
    // A figure the data does not hold is refused naming it: dense data has no token
    // vocabulary.
    let tokens = left.replace(
        "kind = \"dense\"\nfeatures = \"data\"",
        "kind = \"tokens\"\nvocab = \"data\"",
    );
    assert!(tokens.contains("vocab = \"data\""));
    let file = written("from-data-tokens.toml", &tokens);
    let e = refused(&["train", "--model", &file, "--data", data, "--device", "cpu"]);
    assert!(
        e.contains("`input.vocab = \"data\"`") && e.contains("the data has none"),
        "{e}"
    );
    assert!(e.contains("3 values per step, 3 classes"), "{e}");
    // Any other word is refused as a value of the wrong type.
    let file = written("from-data-word.toml", &left.replace("\"data\"", "\"auto\""));
    let e = refused(&["train", "--model", &file, "--data", data, "--device", "cpu"]);
    assert!(e.contains("or \"data\""), "{e}");
}
