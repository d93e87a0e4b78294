// layernorm.wgsl: layer normalisation over the features of each row of x [rows, F],
// mirroring tensorfit-cpu's kernels/layernorm.rs. Conventions: common.wgsl.
//
// `layernorm_forward` and `layernorm_backward` run one invocation per row, in the CPU's
// order within the row (mean, then squared deviations; the backward's two row means,
// then dx). `layernorm_backward_sums` runs one invocation per feature over the rows of a
// block, in row order with Kahan's compensation; when a tensor is larger than one
// binding the host launches row blocks in order and `accumulate` adds to the earlier
// blocks' sums. Every index is absolute: an element e = row · F + col, a statistic by row.

// ---- layernorm_forward: y = (x - mean) · rstd · gamma + beta, with each row's mean and
// rstd = 1 / sqrt(biased var + eps) written out.

struct ForwardParams {
    x_base: u32, gamma_base: u32, beta_base: u32, y_base: u32, mean_base: u32, rstd_base: u32,
    row0: u32, rows: u32, features: u32, eps: f32,
}

@group(0) @binding(0) var<uniform> fwd_p: ForwardParams;
@group(0) @binding(1) var<storage, read_write> fwd_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> fwd_gamma: array<f32>;
@group(0) @binding(3) var<storage, read_write> fwd_beta: array<f32>;
@group(0) @binding(4) var<storage, read_write> fwd_y: array<f32>;
@group(0) @binding(5) var<storage, read_write> fwd_mean: array<f32>;
@group(0) @binding(6) var<storage, read_write> fwd_rstd: array<f32>;

@compute @workgroup_size(WG)
fn layernorm_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = fwd_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.rows) {
        return;
    }
    let row = p.row0 + i;
    let f = p.features;
    let x0 = p.x_base + row * f;
    let inv_f = 1.0 / f32(f);
    var sum = 0.0;
    for (var c = 0u; c < f; c += 1u) {
        sum += fwd_x[x0 + c];
    }
    let m = sum * inv_f;
    var sq = 0.0;
    for (var c = 0u; c < f; c += 1u) {
        let d = fwd_x[x0 + c] - m;
        sq += d * d;
    }
    let r = 1.0 / sqrt(sq * inv_f + p.eps);
    fwd_mean[p.mean_base + row] = m;
    fwd_rstd[p.rstd_base + row] = r;
    let y0 = p.y_base + row * f;
    for (var c = 0u; c < f; c += 1u) {
        fwd_y[y0 + c] = (fwd_x[x0 + c] - m) * r * fwd_gamma[p.gamma_base + c] + fwd_beta[p.beta_base + c];
    }
}

// ---- layernorm_backward: per row, with x̂ = (x - mean) · rstd and g = dy · gamma,
// dx = rstd · (g - mean(g) - x̂ · mean(g · x̂)).

struct GradParams {
    x_base: u32, gamma_base: u32, mean_base: u32, rstd_base: u32, dy_base: u32, dx_base: u32,
    row0: u32, rows: u32, features: u32,
}

@group(0) @binding(0) var<uniform> grad_p: GradParams;
@group(0) @binding(1) var<storage, read_write> grad_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> grad_gamma: array<f32>;
@group(0) @binding(3) var<storage, read_write> grad_mean: array<f32>;
@group(0) @binding(4) var<storage, read_write> grad_rstd: array<f32>;
@group(0) @binding(5) var<storage, read_write> grad_dy: array<f32>;
@group(0) @binding(6) var<storage, read_write> grad_dx: array<f32>;

@compute @workgroup_size(WG)
fn layernorm_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = grad_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.rows) {
        return;
    }
    let row = p.row0 + i;
    let f = p.features;
    let m = grad_mean[p.mean_base + row];
    let r = grad_rstd[p.rstd_base + row];
    let x0 = p.x_base + row * f;
    let dy0 = p.dy_base + row * f;
    var g_mean = 0.0;
    var gx_mean = 0.0;
    for (var c = 0u; c < f; c += 1u) {
        let x_hat = (grad_x[x0 + c] - m) * r;
        let g = grad_dy[dy0 + c] * grad_gamma[p.gamma_base + c];
        g_mean += g;
        gx_mean += g * x_hat;
    }
    let inv_f = 1.0 / f32(f);
    g_mean *= inv_f;
    gx_mean *= inv_f;
    let dx0 = p.dx_base + row * f;
    for (var c = 0u; c < f; c += 1u) {
        let x_hat = (grad_x[x0 + c] - m) * r;
        let g = grad_dy[dy0 + c] * grad_gamma[p.gamma_base + c];
        grad_dx[dx0 + c] = r * (g - g_mean - x_hat * gx_mean);
    }
}

// ---- layernorm_backward_sums: dbeta[c] = Σ_rows dy, dgamma[c] = Σ_rows dy · x̂.

struct SumParams {
    x_base: u32, mean_base: u32, rstd_base: u32, dy_base: u32, dgamma_base: u32, dbeta_base: u32,
    row0: u32, col0: u32, rows: u32, cols: u32, ld: u32, accumulate: u32,
}

@group(0) @binding(0) var<uniform> sum_p: SumParams;
@group(0) @binding(1) var<storage, read_write> sum_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> sum_mean: array<f32>;
@group(0) @binding(3) var<storage, read_write> sum_rstd: array<f32>;
@group(0) @binding(4) var<storage, read_write> sum_dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> sum_dgamma: array<f32>;
@group(0) @binding(6) var<storage, read_write> sum_dbeta: array<f32>;

@compute @workgroup_size(COLUMN_WG)
fn layernorm_backward_sums(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                           @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = sum_p;
    let j = column_index(wid, nwg, lid);
    if (j >= p.cols) {
        return;
    }
    let col = p.col0 + j;
    var dy_sum = Kahan(0.0, 0.0);
    var dyx_sum = Kahan(0.0, 0.0);
    for (var r = 0u; r < p.rows; r += 1u) {
        let row = p.row0 + r;
        let e = row * p.ld + col;
        let d = sum_dy[p.dy_base + e];
        let x_hat = (sum_x[p.x_base + e] - sum_mean[p.mean_base + row]) * sum_rstd[p.rstd_base + row];
        kahan_add(&dy_sum, d);
        kahan_add(&dyx_sum, d * x_hat);
    }
    var s_dy = dy_sum.sum;
    var s_dyx = dyx_sum.sum;
    if (p.accumulate == 1u) {
        s_dy = sum_dbeta[p.dbeta_base + col] + s_dy;
        s_dyx = sum_dgamma[p.dgamma_base + col] + s_dyx;
    }
    sum_dbeta[p.dbeta_base + col] = s_dy;
    sum_dgamma[p.dgamma_base + col] = s_dyx;
}
