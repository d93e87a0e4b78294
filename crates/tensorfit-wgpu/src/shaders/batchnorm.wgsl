// batchnorm.wgsl: batch normalisation over the batch of a [B, C] input, mirroring
// tensorfit-cpu's kernels/batchnorm.rs. Conventions: common.wgsl.
//
// `batchnorm_forward` (training) is three launches on the host: the batch mean
// (elementwise.wgsl's `sum_to_shape`, scaled by 1/B), the biased variance from squared
// deviations about it (`batchnorm_forward_var`, two passes for accuracy as on the CPU),
// then the normalisation (`batchnorm_forward`, alone in inference). `batchnorm_backward`
// is the two sums (`batchnorm_backward_sums`, written to dgamma and dbeta) and then dx.
//
// The reductions run one invocation per channel over the rows of a block, in row order,
// with Kahan's compensation (the CPU sums the backward in f64; WGSL has no f64). When a
// tensor is larger than one binding, the host launches row blocks in order: `accumulate`
// adds to the partial sums of the earlier blocks, and the last block's `scale` (1/B)
// finishes a mean. Statistics and parameters are indexed by channel, x, y, dy and dx as
// [.., ld].

// ---- batchnorm_forward_var: var[c] = Σ_b (x[b, c] - mean[c])² / B (biased).

struct VarParams {
    x_base: u32, mean_base: u32, var_base: u32,
    row0: u32, col0: u32, rows: u32, cols: u32, ld: u32, accumulate: u32, scale: f32,
}

@group(0) @binding(0) var<uniform> var_p: VarParams;
@group(0) @binding(1) var<storage, read_write> var_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> var_mean: array<f32>;
@group(0) @binding(3) var<storage, read_write> var_out: array<f32>;

@compute @workgroup_size(COLUMN_WG)
fn batchnorm_forward_var(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = var_p;
    let j = column_index(wid, nwg, lid);
    if (j >= p.cols) {
        return;
    }
    let col = p.col0 + j;
    let m = var_mean[p.mean_base + col];
    var acc = Kahan(0.0, 0.0);
    for (var r = 0u; r < p.rows; r += 1u) {
        let d = var_x[p.x_base + (p.row0 + r) * p.ld + col] - m;
        kahan_add(&acc, d * d);
    }
    var s = acc.sum;
    if (p.accumulate == 1u) {
        s = var_out[p.var_base + col] + s;
    }
    var_out[p.var_base + col] = s * p.scale;
}

// ---- batchnorm_forward: y = (x - mean) / sqrt(var + eps) · gamma + beta on a block
// (batch or running statistics).

struct NormParams {
    x_base: u32, gamma_base: u32, beta_base: u32, mean_base: u32, var_base: u32, y_base: u32,
    row0: u32, col0: u32, rows: u32, cols: u32, ld: u32, eps: f32,
}

@group(0) @binding(0) var<uniform> norm_p: NormParams;
@group(0) @binding(1) var<storage, read_write> norm_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> norm_gamma: array<f32>;
@group(0) @binding(3) var<storage, read_write> norm_beta: array<f32>;
@group(0) @binding(4) var<storage, read_write> norm_mean: array<f32>;
@group(0) @binding(5) var<storage, read_write> norm_var: array<f32>;
@group(0) @binding(6) var<storage, read_write> norm_y: array<f32>;

@compute @workgroup_size(WG)
fn batchnorm_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = norm_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.rows * p.cols) {
        return;
    }
    let col = p.col0 + i % p.cols;
    let e = (p.row0 + i / p.cols) * p.ld + col;
    let inv_std = 1.0 / sqrt(norm_var[p.var_base + col] + p.eps);
    norm_y[p.y_base + e] = (norm_x[p.x_base + e] - norm_mean[p.mean_base + col]) * inv_std
        * norm_gamma[p.gamma_base + col] + norm_beta[p.beta_base + col];
}

// ---- batchnorm_backward_sums: dbeta[c] = Σ_b dy, dgamma[c] = Σ_b dy · x̂ with
// x̂ = (x - mean) / sqrt(var + eps).

struct GradSumParams {
    x_base: u32, mean_base: u32, var_base: u32, dy_base: u32, dgamma_base: u32, dbeta_base: u32,
    row0: u32, col0: u32, rows: u32, cols: u32, ld: u32, accumulate: u32, eps: f32,
}

@group(0) @binding(0) var<uniform> gsum_p: GradSumParams;
@group(0) @binding(1) var<storage, read_write> gsum_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> gsum_mean: array<f32>;
@group(0) @binding(3) var<storage, read_write> gsum_var: array<f32>;
@group(0) @binding(4) var<storage, read_write> gsum_dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> gsum_dgamma: array<f32>;
@group(0) @binding(6) var<storage, read_write> gsum_dbeta: array<f32>;

@compute @workgroup_size(COLUMN_WG)
fn batchnorm_backward_sums(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                           @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = gsum_p;
    let j = column_index(wid, nwg, lid);
    if (j >= p.cols) {
        return;
    }
    let col = p.col0 + j;
    let m = gsum_mean[p.mean_base + col];
    let inv_std = 1.0 / sqrt(gsum_var[p.var_base + col] + p.eps);
    var dy_sum = Kahan(0.0, 0.0);
    var dyx_sum = Kahan(0.0, 0.0);
    for (var r = 0u; r < p.rows; r += 1u) {
        let e = (p.row0 + r) * p.ld + col;
        let d = gsum_dy[p.dy_base + e];
        let x_hat = (gsum_x[p.x_base + e] - m) * inv_std;
        kahan_add(&dy_sum, d);
        kahan_add(&dyx_sum, d * x_hat);
    }
    var s_dy = dy_sum.sum;
    var s_dyx = dyx_sum.sum;
    if (p.accumulate == 1u) {
        s_dy = gsum_dbeta[p.dbeta_base + col] + s_dy;
        s_dyx = gsum_dgamma[p.dgamma_base + col] + s_dyx;
    }
    gsum_dbeta[p.dbeta_base + col] = s_dy;
    gsum_dgamma[p.dgamma_base + col] = s_dyx;
}

// ---- batchnorm_backward: dx on a block, from the sums above (read back from dgamma and
// dbeta). Training (statistics depend on x):
// dx = gamma·inv_std·(dy - Σdy/B - x̂·Σ(dy·x̂)/B), written with the means so that the
// cancellation happens between terms of the size of dy; inference: dx = dy·gamma·inv_std.

struct GradParams {
    x_base: u32, gamma_base: u32, mean_base: u32, var_base: u32, dy_base: u32,
    dgamma_base: u32, dbeta_base: u32, dx_base: u32,
    row0: u32, col0: u32, rows: u32, cols: u32, ld: u32, training: u32, batch: u32, eps: f32,
}

@group(0) @binding(0) var<uniform> grad_p: GradParams;
@group(0) @binding(1) var<storage, read_write> grad_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> grad_gamma: array<f32>;
@group(0) @binding(3) var<storage, read_write> grad_mean: array<f32>;
@group(0) @binding(4) var<storage, read_write> grad_var: array<f32>;
@group(0) @binding(5) var<storage, read_write> grad_dy: array<f32>;
@group(0) @binding(6) var<storage, read_write> grad_dgamma: array<f32>;
@group(0) @binding(7) var<storage, read_write> grad_dbeta: array<f32>;
@group(0) @binding(8) var<storage, read_write> grad_dx: array<f32>;

@compute @workgroup_size(WG)
fn batchnorm_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = grad_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.rows * p.cols) {
        return;
    }
    let col = p.col0 + i % p.cols;
    let e = (p.row0 + i / p.cols) * p.ld + col;
    let inv_std = 1.0 / sqrt(grad_var[p.var_base + col] + p.eps);
    let g = grad_gamma[p.gamma_base + col];
    let d = grad_dy[p.dy_base + e];
    var dx = d * g * inv_std;
    if (p.training == 1u) {
        let b = f32(p.batch);
        let x_hat = (grad_x[p.x_base + e] - grad_mean[p.mean_base + col]) * inv_std;
        let mean_dy = grad_dbeta[p.dbeta_base + col] / b;
        let mean_dyx = grad_dgamma[p.dgamma_base + col] / b;
        dx = g * inv_std * (d - mean_dy - x_hat * mean_dyx);
    }
    grad_dx[p.dx_base + e] = dx;
}

// ---- batchnorm_stats_update (update op): running = (1 - momentum)·running + momentum·stat,
// the variance made unbiased first (unbias = B / (B - 1)).

struct StatsUpdateParams {
    mean_base: u32, var_base: u32, rmean_base: u32, rvar_base: u32,
    off: u32, n: u32, momentum: f32, unbias: f32,
}

@group(0) @binding(0) var<uniform> upd_p: StatsUpdateParams;
@group(0) @binding(1) var<storage, read_write> upd_mean: array<f32>;
@group(0) @binding(2) var<storage, read_write> upd_var: array<f32>;
@group(0) @binding(3) var<storage, read_write> upd_rmean: array<f32>;
@group(0) @binding(4) var<storage, read_write> upd_rvar: array<f32>;

@compute @workgroup_size(WG)
fn batchnorm_stats_update(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = upd_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let e = p.off + i;
    let m = p.momentum;
    upd_rmean[p.rmean_base + e] = (1.0 - m) * upd_rmean[p.rmean_base + e] + m * upd_mean[p.mean_base + e];
    upd_rvar[p.rvar_base + e] = (1.0 - m) * upd_rvar[p.rvar_base + e] + m * upd_var[p.var_base + e] * p.unbias;
}
