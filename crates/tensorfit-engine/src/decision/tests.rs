//! The ordering of strategies by their estimates.

use super::*;

#[test]
fn a_saving_strategy_an_ulp_cheaper_than_the_plain_one_stays_behind_it() {
    let s = |chunk| Strategy {
        chunk,
        micro_batch: None,
        recompute: None,
    };
    let mut options = vec![
        (s(2000), (), 1.0),
        (s(250), (), 1.0 - 1e-15),
        (s(100), (), 0.9),
    ];
    sort_by_estimate(&mut options);
    let order: Vec<usize> = options.iter().map(|o| o.0.chunk).collect();
    assert_eq!(order, [100, 2000, 250]);
}

#[test]
fn strategies_within_the_tie_keep_their_order_and_a_clearly_faster_one_goes_first() {
    let s = |chunk| Strategy {
        chunk,
        micro_batch: None,
        recompute: None,
    };
    let mut options = vec![
        (s(2000), (), 1.00),
        (s(1000), (), 0.95),
        (s(500), (), f64::NAN),
        (s(250), (), 0.80),
        (s(100), (), 0.85),
    ];
    sort_by_estimate(&mut options);
    let order: Vec<usize> = options.iter().map(|o| o.0.chunk).collect();
    // 250 is more than 10% faster than 1000 and 2000; 100 ties with 250 but comes after
    // it; 2000 and 1000 tie and keep their order; no estimate comes last.
    assert_eq!(order, [250, 100, 2000, 1000, 500]);
}

#[test]
fn the_cpu_counts_its_kernels_packed_operands_and_a_gpu_does_not() {
    let job = Job::Eval {
        batch: 8,
        seq_len: 500,
    };
    let optim = (50, OptimConfig::default());
    let req = Request::new(ModelDescription::seed(), job, optim);
    let cpu = tensorfit_cpu::assumed_info("cpu".into(), 1 << 30);
    let gpu = DeviceInfo {
        kind: DeviceKind::Cuda,
        software: false,
        ..cpu.clone()
    };
    let without = host_need(&req, job, None).unwrap();
    assert_eq!(without.cpu_kernels, 0);
    let host = host_need(&req, job, Some(true)).unwrap();
    // The seed network's LSTM layers: `w_ihᵀ` and `w_hhᵀ` packed, `[250, 1000]` each
    // at most (or matrixmultiply's blocks, without AVX-512).
    assert!(host.cpu_kernels >= 250 * 1000 * 4, "{}", host.cpu_kernels);
    assert!(host.cpu_kernels < 64 << 20, "{}", host.cpu_kernels);
    assert_eq!(host.driver_bytes(&cpu), host.cpu_kernels);
    assert_eq!(host.driver_bytes(&gpu), 0);
    let planned = host.resident(0, 1000, &cpu);
    assert_eq!(
        planned,
        crate::host_budget::RUN_CODE_BYTES + host.bytes() + 1000 + host.cpu_kernels
    );
    assert_eq!(
        host.resident(0, 1000, &gpu),
        crate::host_budget::RUN_CODE_BYTES + host.bytes()
    );
}
