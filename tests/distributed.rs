//! `mpirun -np N tensorfit train` (docs/distributed.md): N ranks, each on its rows of the
//! global batch with the gradients averaged between backward and the update, give the
//! losses, gradient norms, held-out loss and weights of one process training on the whole
//! batch — up to the summation order of the average; every rank ends with the same
//! weights (the run checks it and reports their hash); and a run resumes from rank 0's
//! checkpoint on another number of ranks. Needs the `mpi` feature and `mpirun`; without
//! either each test prints why it skips, and fails when `TENSORFIT_REQUIRE` names `mpi`.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use serde_json::Value;
use tensorfit::core::Activation;
use tensorfit::nn::{Checkpoint, HeadLayer, HeadLayerKind, ModelDescription};

use common::ranks::{cpu_train, launch, not_built, numbers, BIN, BOUND};
use common::{assert_close, losses, ok_json, scratch};

/// Small models: exact but for the order of the average's sums.
const EXACT: (f32, f32) = (1e-6, 1e-5);

/// The seed network: the conformance suite's tolerance for it (three layers, BatchNorm
/// and Adam steps, which divide by sqrt(v), compound rounding).
const SEED_TOL: (f32, f32) = (1e-4, 1e-3);

/// The run every comparison makes: 4 steps on a global batch of 8 (4 + 4 rows on 2 ranks,
/// 3 + 3 + 2 on 3), then one evaluation.
const RUN: [&str; 11] = [
    "--batch",
    "8",
    "--seq-len",
    "6",
    "--steps",
    "4",
    "--eval-every",
    "0",
    "--eval-batch",
    "16",
    "--json",
];

/// The seed network's shape without its BatchNorm layers, small (2 LSTM layers of 12
/// units, Dense 6 tanh), as a model file.
fn no_batch_norm() -> String {
    let mut d = ModelDescription::lstm_classifier(152, 12, 2, 6);
    d.head.layers = vec![HeadLayer {
        name: "head.0".into(),
        kind: HeadLayerKind::Dense {
            units: 6,
            activation: Activation::Tanh,
        },
        residual: false,
    }];
    d.to_toml()
}

/// `train` on `ranks` ranks with `args`: rank 0's JSON, or `None` when MPI is
/// unavailable (the skip is printed).
fn train_on_ranks(test: &str, ranks: usize, args: &[&str]) -> Option<Value> {
    train_mpmd(test, &[(ranks, args)])
}

/// `train` on the ranks of each part (`mpirun -np N₁ tensorfit train ARGS₁ : -np N₂ …`):
/// rank 0's JSON, or `None` when MPI is unavailable (the skip is printed).
fn train_mpmd(test: &str, parts: &[(usize, &[&str])]) -> Option<Value> {
    let run = launch(test, "train", parts)?;
    let json = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("{test}: not one JSON object ({e}):\n{}", run.output));
    Some(json)
}

/// The same run on one process and on `ranks`, compared by the conformance suite's
/// rule: `(abs, rel)`, the absolute part scaled by the tensor's largest value (at least 1).
fn agrees(test: &str, model: &Path, ranks: usize, extra: &[&str], (abs, rel): (f32, f32)) {
    let dir = scratch(&format!("{test}-{ranks}"));
    let (one, many) = (dir.join("one.safetensors"), dir.join("many.safetensors"));
    let model = model.to_str().unwrap();
    let mut args = vec!["--model", model, "--device", "cpu"];
    args.extend(RUN);
    args.extend(extra);
    let with = |save: &Path| {
        let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        a.extend(["--save".into(), save.to_str().unwrap().into()]);
        a
    };
    let Some(got) = train_on_ranks(
        test,
        ranks,
        &with(&many).iter().map(String::as_str).collect::<Vec<_>>(),
    ) else {
        return;
    };
    let single: Vec<String> = ["train".to_string()]
        .into_iter()
        .chain(with(&one))
        .collect();
    let want = ok_json(&single.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(got["ranks"], ranks, "{test}: {got}");
    assert!(got["weights_hash"].is_string(), "{test}: {got}");
    for key in ["losses", "grad_norms", "eval_loss"] {
        let w = numbers(&want, key);
        assert_close(
            &format!("{test} on {ranks} ranks: {key}"),
            &numbers(&got, key),
            &w,
            abs * common::max_abs(&w).max(1.0),
            rel,
        );
    }
    let (a, b) = (
        Checkpoint::load(&many).unwrap(),
        Checkpoint::load(&one).unwrap(),
    );
    for (name, t) in b.params.iter() {
        let scale = common::max_abs(&t.data).max(1.0);
        assert_close(
            &format!("{test} on {ranks} ranks: {name}"),
            &a.params.get(name).unwrap().data,
            &t.data,
            abs * scale,
            rel,
        );
    }
    assert_eq!(a.step, b.step);
}

#[test]
fn ranks_on_shards_of_the_batch_train_as_one_process_on_the_whole_batch() {
    let model = scratch("no-batch-norm").join("model.toml");
    std::fs::write(&model, no_batch_norm()).unwrap();
    // 8 rows: 4 + 4 on 2 ranks, 3 + 3 + 2 on 3 (uneven shards weigh their gradients).
    for ranks in [2, 3] {
        agrees("classifier", &model, ranks, &["--clip-norm", "0.5"], EXACT);
    }
}

#[test]
fn a_regression_on_three_ranks_trains_as_one_process() {
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models/regression.toml");
    agrees(
        "regression",
        &model,
        3,
        &["--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.05"],
        EXACT,
    );
}

#[test]
fn the_seed_network_with_batch_norm_over_the_global_batch_trains_on_ranks_as_one_process() {
    // SyncBatchNorm: the statistics of all 8 rows on every rank, not of its own 4 or 3.
    // Four Adam steps compound the summation order's rounding, as in the conformance
    // suite.
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models/seed.toml");
    // Truncated BPTT over the last 3 of 6 steps: the carried chunk runs before the head
    // input and the stack's gradient program.
    let extra = ["--clip-norm", "0.5", "--tbptt", "3"];
    for ranks in [2, 3] {
        agrees("seed", &model, ranks, &extra, SEED_TOL);
    }
}

#[test]
fn a_bidirectional_seed_network_with_batch_norm_trains_on_ranks_as_one_process() {
    // Each direction's own last step into the head, whose BatchNorm is synchronised over
    // the ranks (the head runs apart from the stack there).
    let seed = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models/seed.toml"),
    )
    .unwrap();
    let text = seed.replacen("[recurrent]\n", "[recurrent]\nbidirectional = true\n", 1);
    assert!(text.contains("bidirectional = true"));
    let model = scratch("bidirectional-seed").join("model.toml");
    std::fs::write(&model, text).unwrap();
    agrees(
        "bidirectional",
        &model,
        2,
        &["--clip-norm", "0.5"],
        SEED_TOL,
    );
}

#[test]
fn a_run_checkpointed_on_two_ranks_resumes_on_three_as_one_process_would() {
    let test = "resume";
    let dir = scratch(test);
    let (ck, one) = (dir.join("ck"), dir.join("one.safetensors"));
    let model = scratch("resume-model").join("model.toml");
    std::fs::write(&model, no_batch_norm()).unwrap();
    let (model, ck_s) = (model.to_str().unwrap(), ck.to_str().unwrap());
    let common = cpu_train(model, ("6", "5", "8"), &["--json"]);
    let first: Vec<&str> = common
        .iter()
        .copied()
        .chain(["--steps", "2", "--checkpoint-dir", ck_s])
        .collect();
    let Some(a) = train_on_ranks(test, 2, &first) else {
        return;
    };
    let Some(b) = train_on_ranks(test, 3, &["--resume", ck_s, "--steps", "2", "--json"]) else {
        return;
    };
    let whole: Vec<&str> = ["train"]
        .into_iter()
        .chain(common)
        .chain(["--steps", "4", "--save", one.to_str().unwrap()])
        .collect();
    let want = ok_json(&whole);
    let got: Vec<f32> = losses(&a)
        .into_iter()
        .chain(losses(&b))
        .map(|l| l as f32)
        .collect();
    let w: Vec<f32> = losses(&want).into_iter().map(|l| l as f32).collect();
    assert_close("resumed on 3 ranks: losses", &got, &w, EXACT.0, EXACT.1);
    assert_eq!(b["step"], 4);
    let (resumed, single) = (
        Checkpoint::load(&ck.join("checkpoint.safetensors")).unwrap(),
        Checkpoint::load(&one).unwrap(),
    );
    for (name, t) in single.params.iter() {
        let scale = common::max_abs(&t.data).max(1.0);
        assert_close(
            name,
            &resumed.params.get(name).unwrap().data,
            &t.data,
            EXACT.0 * scale,
            EXACT.1,
        );
    }
}

#[test]
fn a_wgpu_rank_and_a_cpu_rank_train_the_seed_network_as_two_cpu_ranks() {
    let test = "mixed devices";
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models/seed.toml");
    let mut args = vec!["--model", model.to_str().unwrap(), "--clip-norm", "0.5"];
    args.extend(RUN);
    let on = |device: &'static str| -> Vec<&str> {
        args.iter().copied().chain(["--device", device]).collect()
    };
    let Some(cpus) = train_on_ranks(test, 2, &on("cpu")) else {
        return;
    };
    if !common::wgpu_present() {
        return;
    }
    // Rank 0 on wgpu: it reports, and its weights are the ones every rank takes.
    let (wgpu, cpu) = (on("wgpu"), on("cpu"));
    let mixed = train_mpmd(test, &[(1, &wgpu), (1, &cpu)]).unwrap();
    assert!(
        mixed["device"].as_str().unwrap().starts_with("wgpu"),
        "{mixed}"
    );
    assert!(mixed["weights_hash"].is_string(), "{mixed}");
    assert_eq!(
        (&mixed["devices_differ"], &cpus["devices_differ"]),
        (&Value::Bool(true), &Value::Bool(false))
    );
    // The conformance suite's tolerance for a loss curve on wgpu against the CPU.
    for key in ["losses", "grad_norms", "eval_loss"] {
        let what = format!("{test}: {key}");
        assert_close(
            &what,
            &numbers(&mixed, key),
            &numbers(&cpus, key),
            2e-4,
            2e-4,
        );
    }
}

#[test]
fn each_rank_plans_its_rows_and_counts_the_communication_in_the_host_section() {
    let test = "plan";
    // Each rank's output in its own file: mpirun may cut long lines of two ranks into
    // each other on one stdout.
    let out = scratch("plan-output");
    let cache = format!("XDG_CACHE_HOME={}", scratch("cache").display());
    let line: Vec<String> = [
        "-x",
        &cache,
        "--output-filename",
        out.to_str().unwrap(),
        "-np",
        "2",
        BIN,
        "plan",
        "--batch",
        "9",
        "--seq-len",
        "20",
        "--device",
        "cpu",
        "--json",
    ]
    .map(String::from)
    .to_vec();
    let Some(run) = tensorfit_testing::mpirun::launch(test, not_built(), &line, BOUND) else {
        return;
    };
    assert!(run.ok, "{test}: {}", run.output);
    // The seed network: 4 host copies of its 1,434,406 gradients, and of the gathered
    // head input (250) and label (1) of 9 rows.
    let communication = 4 * 4 * (1_434_406 + 9 * (250 + 1));
    for (rank, rows) in [(0, [0, 5]), (1, [5, 9])] {
        let file = out.join(format!("1/rank.{rank}/stdout"));
        let text = std::fs::read_to_string(&file).unwrap();
        let p: Value = serde_json::from_str(text.trim())
            .unwrap_or_else(|e| panic!("{test}: {} is not JSON ({e}): {text}", file.display()));
        assert_eq!(
            (&p["rank"], &p["ranks"]),
            (&Value::from(rank), &Value::from(2))
        );
        assert_eq!(p["rows"], Value::from(rows.to_vec()), "{p}");
        assert_eq!(p["host"]["communication"], communication, "{p}");
        assert!(p["chosen"].is_object(), "{p}");
    }
}
