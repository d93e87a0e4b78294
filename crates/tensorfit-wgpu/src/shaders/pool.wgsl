// pool.wgsl: global pooling over time, each sequence over its own steps, mirroring
// tensorfit-cpu's kernels/pool.rs: mean_time, max_time and their gradients
// mean_time_backward and max_time_backward. Conventions: common.wgsl.
//
// Every launch covers steps t0..t0 + count of the block of [B, F] rows row0..row0 + rows,
// features col0..col0 + cols (the host cuts a sequence that outgrows a binding into such
// windows). Indices are absolute: an element of [T, B, F] is (t·B + b)·F + f, of [B, F]
// b·F + f. The forwards run one invocation per (row, feature), looping over the window's
// steps; the host launches a block's windows in step order, the first (`first`) starting
// the result and the others carrying it on in `out` (and `at`). The backwards run one
// invocation per element of dx, each writing only its own, so no value of `at` or of a
// length can send a write outside dx.

// The steps row b pools: `steps` without lengths (`masked` 0), else its length when it is
// in 1..=steps, and 0 otherwise (an empty row's rule, as reverse_time's): a kernel cannot
// refuse a bad length, and must not read outside x.
fn pooled_steps(l: f32, steps: u32) -> u32 {
    return select(0u, u32(l), l >= 1.0 && l <= f32(steps));
}

// NaN by its bits, which no compiler may assume away.
fn is_nan_f(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

// Whether `v`, seen after `best`, is the new maximum: larger, or the first NaN (a NaN,
// once held, stays), as the CPU's max_time compares.
fn replaces(v: f32, best: f32) -> bool {
    return !is_nan_f(best) && (is_nan_f(v) || v > best);
}

// ---- mean_time: out[b, f] = Σ_{t < L} x[t, b, f], then / L on the last window (`last`);
// 0 for L = 0. Summed in step order, as the CPU sums.

struct MeanParams {
    x_base: u32, lengths_base: u32, out_base: u32,
    t0: u32, count: u32, row0: u32, rows: u32, col0: u32, cols: u32, width: u32, batch: u32,
    steps: u32, masked: u32, first: u32, last: u32,
}

@group(0) @binding(0) var<uniform> mean_p: MeanParams;
@group(0) @binding(1) var<storage, read_write> mean_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> mean_lengths: array<f32>;
@group(0) @binding(3) var<storage, read_write> mean_out: array<f32>;

@compute @workgroup_size(WG)
fn mean_time(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = mean_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.rows * p.cols) {
        return;
    }
    let b = p.row0 + i / p.cols;
    let f = p.col0 + i % p.cols;
    var len = p.steps;
    if (p.masked == 1u) {
        len = pooled_steps(mean_lengths[p.lengths_base + b], p.steps);
    }
    let o = p.out_base + b * p.width + f;
    var sum = 0.0;
    if (p.first == 0u) {
        sum = mean_out[o];
    }
    let end = min(p.t0 + p.count, len);
    for (var t = p.t0; t < end; t = t + 1u) {
        sum = sum + mean_x[p.x_base + (t * p.batch + b) * p.width + f];
    }
    if (p.last == 1u) {
        sum = select(0.0, sum / f32(len), len > 0u);
    }
    mean_out[o] = sum;
}

// ---- max_time: out[b, f] = max_{t < L} x[t, b, f], at[b, f] the first step holding it;
// 0 and -1 for L = 0. The first window (which starts at step 0) starts from step 0; a
// later one carries on from out and at.

struct MaxParams {
    x_base: u32, lengths_base: u32, out_base: u32, at_base: u32,
    t0: u32, count: u32, row0: u32, rows: u32, col0: u32, cols: u32, width: u32, batch: u32,
    steps: u32, masked: u32, first: u32,
}

@group(0) @binding(0) var<uniform> max_p: MaxParams;
@group(0) @binding(1) var<storage, read_write> max_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> max_lengths: array<f32>;
@group(0) @binding(3) var<storage, read_write> max_out: array<f32>;
@group(0) @binding(4) var<storage, read_write> max_at: array<f32>;

@compute @workgroup_size(WG)
fn max_time(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = max_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.rows * p.cols) {
        return;
    }
    let b = p.row0 + i / p.cols;
    let f = p.col0 + i % p.cols;
    var len = p.steps;
    if (p.masked == 1u) {
        len = pooled_steps(max_lengths[p.lengths_base + b], p.steps);
    }
    let o = p.out_base + b * p.width + f;
    let a = p.at_base + b * p.width + f;
    var best = 0.0;
    var best_at = 0u;
    var start = p.t0;
    if (p.first == 1u) {
        if (len == 0u) {
            max_out[o] = 0.0;
            max_at[a] = -1.0;
            return;
        }
        best = max_x[p.x_base + b * p.width + f];
        start = 1u;
    } else {
        if (p.t0 >= len) {
            return;
        }
        best = max_out[o];
        best_at = u32(max_at[a]);
    }
    let end = min(p.t0 + p.count, len);
    for (var t = start; t < end; t = t + 1u) {
        let v = max_x[p.x_base + (t * p.batch + b) * p.width + f];
        if (replaces(v, best)) {
            best = v;
            best_at = t;
        }
    }
    max_out[o] = best;
    max_at[a] = f32(best_at);
}

// ---- mean_time_backward: dx[t, b, f] = dout[b, f] / L for t < L, else 0.

struct MeanBackParams {
    dout_base: u32, lengths_base: u32, dx_base: u32,
    t0: u32, count: u32, row0: u32, rows: u32, col0: u32, cols: u32, width: u32, batch: u32,
    steps: u32, masked: u32,
}

@group(0) @binding(0) var<uniform> mean_back_p: MeanBackParams;
@group(0) @binding(1) var<storage, read_write> mean_back_dout: array<f32>;
@group(0) @binding(2) var<storage, read_write> mean_back_lengths: array<f32>;
@group(0) @binding(3) var<storage, read_write> mean_back_dx: array<f32>;

@compute @workgroup_size(WG)
fn mean_time_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = mean_back_p;
    let i = flat_index(wid, nwg, lid);
    let per_step = p.rows * p.cols;
    if (i >= p.count * per_step) {
        return;
    }
    let t = p.t0 + i / per_step;
    let b = p.row0 + (i % per_step) / p.cols;
    let f = p.col0 + i % p.cols;
    var len = p.steps;
    if (p.masked == 1u) {
        len = pooled_steps(mean_back_lengths[p.lengths_base + b], p.steps);
    }
    let g = mean_back_dout[p.dout_base + b * p.width + f];
    mean_back_dx[p.dx_base + (t * p.batch + b) * p.width + f] = select(0.0, g / f32(len), t < len);
}

// ---- max_time_backward: dx[t, b, f] = dout[b, f] where at[b, f] = t, else 0: an `at`
// outside 0..steps (or not whole) matches no step.

struct MaxBackParams {
    dout_base: u32, at_base: u32, dx_base: u32,
    t0: u32, count: u32, row0: u32, rows: u32, col0: u32, cols: u32, width: u32, batch: u32,
}

@group(0) @binding(0) var<uniform> max_back_p: MaxBackParams;
@group(0) @binding(1) var<storage, read_write> max_back_dout: array<f32>;
@group(0) @binding(2) var<storage, read_write> max_back_at: array<f32>;
@group(0) @binding(3) var<storage, read_write> max_back_dx: array<f32>;

@compute @workgroup_size(WG)
fn max_time_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = max_back_p;
    let i = flat_index(wid, nwg, lid);
    let per_step = p.rows * p.cols;
    if (i >= p.count * per_step) {
        return;
    }
    let t = p.t0 + i / per_step;
    let b = p.row0 + (i % per_step) / p.cols;
    let f = p.col0 + i % p.cols;
    let k = b * p.width + f;
    let g = max_back_dout[p.dout_base + k];
    let hit = max_back_at[p.at_base + k] == f32(t);
    max_back_dx[p.dx_base + (t * p.batch + b) * p.width + f] = select(0.0, g, hit);
}
