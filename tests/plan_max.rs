//! `tensorfit plan --max-batch` and `--max-seq-len`: the largest job that fits, found by
//! planning alone, agrees with a plain plan at that size and one more.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{job, json, plan_json, succeed, tensorfit_command};

#[test]
fn the_largest_batch_fits_and_one_more_does_not_on_a_plain_plan() {
    // A small held-out batch, so that the evaluation fits whole wherever training does.
    let job = [
        "--mode",
        "train",
        "--seq-len",
        "200",
        "--tbptt",
        "200",
        "--eval-batch",
        "8",
    ];
    let mut args = job.to_vec();
    args.extend(["--batch", "8", "--assume", "cuda=1GiB", "--max-batch"]);
    let v = plan_json(&args);
    assert_eq!(v["dimension"], "batch");
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.len() > 1, "{v}");
    let whole = &rows[0];
    assert_eq!(whole["strategy"], "whole sequence");
    assert_eq!(whole["frontier"], true);
    let n = whole["largest"].as_u64().expect("a batch fits in 1 GiB");
    assert!(whole["peak_bytes"].as_u64() <= whole["capacity_bytes"].as_u64());
    // A plain plan at that batch chooses the whole sequence; at one more it does not fit.
    let at = |batch: u64| {
        let b = batch.to_string();
        let mut a = job.to_vec();
        a.extend(["--batch", &b, "--assume", "cuda=1GiB"]);
        plan_json(&a)
    };
    let fits = at(n);
    assert_eq!(fits["chosen"]["strategy"], "whole sequence", "{fits}");
    let over = at(n + 1);
    let first = &over["candidates"][0];
    assert_eq!(first["strategy"], "whole sequence");
    assert_eq!(first["fits"], false, "{over}");
    // Recomputation fits a larger batch than the whole sequence.
    assert!(
        rows.iter()
            .any(|r| r["frontier"] == true && r["largest"].as_u64() > Some(n)),
        "{v}"
    );
}

#[test]
fn the_largest_length_table_names_each_device_and_strategy() {
    let out = succeed(
        tensorfit_command().arg("plan").args(job(
            "infer",
            "100",
            "200",
            &["--assume", "gtx750", "--assume", "t4", "--max-seq-len"],
        )),
        "plan --max-seq-len",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("largest length"), "{text}");
    for d in ["gtx750 (assumed)", "t4 (assumed)"] {
        let row = text.lines().find(|l| l.starts_with(d)).expect(d);
        assert!(row.contains("whole sequence"), "{row}");
    }
}

#[test]
fn a_device_too_small_for_any_job_says_none_and_exits_2_as_plan_does() {
    let mut args = vec!["plan", "--json"];
    args.extend(job(
        "infer",
        "4",
        "50",
        &["--assume", "cpu=1MiB", "--max-batch"],
    ));
    let out = tensorfit_command().args(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    let v = json(&out);
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["largest"].is_null()), "{v}");
    // The table says the same, with the same exit.
    args.retain(|a| *a != "--json");
    let out = tensorfit_command().args(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("none"));
}

#[test]
fn max_batch_with_a_plot_is_refused_naming_the_flags() {
    let out = tensorfit_command()
        .args([
            "plan",
            "--max-batch",
            "--plot",
            "/tmp/x.svg",
            "--assume",
            "t4",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--plot") && err.contains("--max-batch"),
        "{err}"
    );
}
