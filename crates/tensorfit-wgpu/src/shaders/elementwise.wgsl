// elementwise.wgsl: the elementwise kernels and the small data-movement ops, mirroring
// tensorfit-cpu's kernels/elementwise.rs: binary, activation_forward, activation_backward,
// sum_to_shape, fill, copy (also slice_time's kernel), scatter_time, copy_rows_at_step
// (slice_time and scatter_time with lengths). Conventions:
// common.wgsl.

// erfc(z) for z >= 0 (WGSL has no erf): Numerical Recipes' Chebyshev fit
// t·exp(-z² + P(t)), t = 1/(1 + z/2), whose relative error is below 1.2e-7 everywhere
// (in f32 arithmetic a few ulp more); one exponential, no cancellation in either tail.
fn erfc_nonneg(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.5 * z);
    var p = 0.17087277;
    p = -0.82215223 + t * p;
    p = 1.48851587 + t * p;
    p = -1.13520398 + t * p;
    p = 0.27886807 + t * p;
    p = -0.18628806 + t * p;
    p = 0.09678418 + t * p;
    p = 0.37409196 + t * p;
    p = 1.00002368 + t * p;
    p = -1.26551223 + t * p;
    return t * exp(-z * z + p);
}

// Φ(x), the standard normal distribution function, as 0.5·erfc(-x/√2) from the tail
// that does not cancel.
fn normal_cdf(x: f32) -> f32 {
    let e = 0.5 * erfc_nonneg(abs(x) * 0.70710678);
    return select(e, 1.0 - e, x >= 0.0);
}

// GELU (PyTorch's exact nn.GELU()): x·Φ(x).
fn gelu_f(x: f32) -> f32 {
    return x * normal_cdf(x);
}

// GELU's derivative Φ(x) + x·φ(x), φ(x) = exp(-x²/2)/√(2π).
fn gelu_derivative(x: f32) -> f32 {
    return normal_cdf(x) + x * exp(-0.5 * x * x) * 0.39894228;
}

// Activation codes: 0 identity, 1 relu, 2 tanh, 3 sigmoid, 4 gelu.
fn activate(f: u32, x: f32) -> f32 {
    switch f {
        case 1u: { return max(x, 0.0); }
        case 2u: { return tanh_f(x); }
        case 3u: { return sigmoid_f(x); }
        case 4u: { return gelu_f(x); }
        default: { return x; }
    }
}

// f'(x) from v: the forward output y = f(x), or for gelu (whose derivative needs it) the
// input x.
fn derivative(f: u32, v: f32) -> f32 {
    switch f {
        case 1u: { return select(0.0, 1.0, v > 0.0); }
        case 2u: { return 1.0 - v * v; }
        case 3u: { return v * (1.0 - v); }
        case 4u: { return gelu_derivative(v); }
        default: { return 1.0; }
    }
}

// ---- binary: out = a ∘ b on a block of a, viewed as [.., ld] with b of ld elements
// repeated over its rows. op: 0 add, 1 mul.

struct BinaryParams {
    a_base: u32, b_base: u32, out_base: u32,
    row0: u32, col0: u32, rows: u32, cols: u32, ld: u32, op: u32,
}

@group(0) @binding(0) var<uniform> binary_p: BinaryParams;
@group(0) @binding(1) var<storage, read_write> binary_a: array<f32>;
@group(0) @binding(2) var<storage, read_write> binary_b: array<f32>;
@group(0) @binding(3) var<storage, read_write> binary_out: array<f32>;

@compute @workgroup_size(WG)
fn binary(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = binary_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.rows * p.cols) {
        return;
    }
    let col = p.col0 + i % p.cols;
    let e = (p.row0 + i / p.cols) * p.ld + col;
    let x = binary_a[p.a_base + e];
    let y = binary_b[p.b_base + col];
    binary_out[p.out_base + e] = select(x + y, x * y, p.op == 1u);
}

// ---- activation_forward: y = f(x) on off..off+n.

struct ActivationParams {
    x_base: u32, y_base: u32,
    off: u32, n: u32, f: u32,
}

@group(0) @binding(0) var<uniform> act_p: ActivationParams;
@group(0) @binding(1) var<storage, read_write> act_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> act_y: array<f32>;

@compute @workgroup_size(WG)
fn activation_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = act_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let e = p.off + i;
    act_y[p.y_base + e] = activate(p.f, act_x[p.x_base + e]);
}

// ---- activation_backward: dx = dy · f'(x), with f' from v: the forward output y, or
// the input x for gelu (the host binds whichever).

struct ActivationBackwardParams {
    v_base: u32, dy_base: u32, dx_base: u32,
    off: u32, n: u32, f: u32,
}

@group(0) @binding(0) var<uniform> actb_p: ActivationBackwardParams;
@group(0) @binding(1) var<storage, read_write> actb_v: array<f32>;
@group(0) @binding(2) var<storage, read_write> actb_dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> actb_dx: array<f32>;

@compute @workgroup_size(WG)
fn activation_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = actb_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let e = p.off + i;
    actb_dx[p.dx_base + e] = actb_dy[p.dy_base + e] * derivative(p.f, actb_v[p.v_base + e]);
}

// ---- sum_to_shape: out[col] (+)= Σ over the block's rows of x[row, col], x viewed as
// [.., ld], then times `scale`. One invocation per column, summing its rows in order
// with Kahan's compensation; the host visits row blocks in order, the first one writing.
// `scale` is 1 but on the last block of a mean (batchnorm_forward's batch mean: 1/B).

struct SumParams {
    x_base: u32, out_base: u32,
    row0: u32, col0: u32, rows: u32, cols: u32, ld: u32, accumulate: u32, scale: f32,
}

@group(0) @binding(0) var<uniform> sum_p: SumParams;
@group(0) @binding(1) var<storage, read_write> sum_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> sum_out: array<f32>;

@compute @workgroup_size(COLUMN_WG)
fn sum_to_shape(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = sum_p;
    let j = column_index(wid, nwg, lid);
    if (j >= p.cols) {
        return;
    }
    let col = p.col0 + j;
    var acc = Kahan(0.0, 0.0);
    for (var r = 0u; r < p.rows; r += 1u) {
        kahan_add(&acc, sum_x[p.x_base + (p.row0 + r) * p.ld + col]);
    }
    var s = acc.sum;
    if (p.accumulate == 1u) {
        s = sum_out[p.out_base + col] + s;
    }
    sum_out[p.out_base + col] = s * p.scale;
}

// ---- fill: out = value on off..off+n (value as f32 bits).

struct FillParams {
    out_base: u32,
    off: u32, n: u32, value: u32,
}

@group(0) @binding(0) var<uniform> fill_p: FillParams;
@group(0) @binding(1) var<storage, read_write> fill_out: array<f32>;

@compute @workgroup_size(WG)
fn fill(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = fill_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    fill_out[p.out_base + p.off + i] = bitcast<f32>(p.value);
}

// ---- copy: out[off + i] = x[src_off + off + i]. The op Copy has src_off = 0; the op
// SliceTime reads the block of one time step (src_off = t·B·F).

struct CopyParams {
    x_base: u32, out_base: u32,
    src_off: u32, off: u32, n: u32,
}

@group(0) @binding(0) var<uniform> copy_p: CopyParams;
@group(0) @binding(1) var<storage, read_write> copy_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> copy_out: array<f32>;

@compute @workgroup_size(WG)
fn copy(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = flat_index(wid, nwg, lid);
    let p = copy_p;
    if (i >= p.n) {
        return;
    }
    copy_out[p.out_base + p.off + i] = copy_x[p.x_base + p.src_off + p.off + i];
}

// ---- scatter_time: out[e] = x[e - block] inside the step's block block..block+len,
// 0 elsewhere, for e in off..off+n.

struct ScatterParams {
    x_base: u32, out_base: u32,
    off: u32, n: u32, block: u32, len: u32,
}

@group(0) @binding(0) var<uniform> scatter_p: ScatterParams;
@group(0) @binding(1) var<storage, read_write> scatter_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> scatter_out: array<f32>;

@compute @workgroup_size(WG)
fn scatter_time(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = scatter_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let e = p.off + i;
    var v = 0.0;
    if (e >= p.block && e - p.block < p.len) {
        v = scatter_x[p.x_base + e - p.block];
    }
    scatter_out[p.out_base + e] = v;
}

// ---- copy_rows_at_step: for a padded batch (see tensorfit_core::seq_lengths::step_at),
// copies row r of `src` to `dst` where the row's step min(t, L - 1) (L = lengths[r] in
// 1..=steps) is `s`: slice_time with lengths (src is x at step s), scatter_time with
// lengths (dst is out at step s). One launch per step and block of rows; rows of other
// steps and of empty sequences are left alone.

struct StepRowsParams {
    src_base: u32, dst_base: u32, lengths_base: u32,
    src_off: u32, dst_off: u32, first_row: u32, rows: u32, width: u32,
    t: u32, s: u32, steps: u32,
}

@group(0) @binding(0) var<uniform> sr_p: StepRowsParams;
@group(0) @binding(1) var<storage, read_write> sr_src: array<f32>;
@group(0) @binding(2) var<storage, read_write> sr_dst: array<f32>;
@group(0) @binding(3) var<storage, read_write> sr_lengths: array<f32>;

@compute @workgroup_size(WG)
fn copy_rows_at_step(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = sr_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.rows * p.width) {
        return;
    }
    let len = sr_lengths[p.lengths_base + p.first_row + i / p.width];
    if (len < 1.0 || len > f32(p.steps) || min(u32(len) - 1u, p.t) != p.s) {
        return;
    }
    sr_dst[p.dst_base + p.dst_off + i] = sr_src[p.src_base + p.src_off + i];
}
