// conv.wgsl: the columns of a 1-D convolution over time and their gradient, mirroring
// tensorfit-cpu's kernels/conv.rs: unfold_time and fold_time. Conventions: common.wgsl.
//
// Every launch covers steps t0..t0 + count of the block of [B, C] rows row0..row0 + rows,
// features col0..col0 + cols, taps k0..k0 + taps (the host cuts a call that outgrows a
// binding into such parts). Indices are absolute: an element of x [T, B, C] is
// (t·B + b)·C + c, of cols [T, B, C·K] (t·B + b)·C·K + c·K + k. Output step t's tap k
// reads step s = t - left + k·dilation, formed as s + left = t + k·dilation in u32 (the
// host keeps T + (K - 1)·dilation below 2^31). One invocation per element written, so
// no length can send a write outside the output.

// The steps of a row of length `l` (read only with lengths, `masked` 1; without them a
// row has `steps`): `l` when it is in 1..=steps, and 0 otherwise (an empty row's rule, as
// pool.wgsl's): a kernel cannot refuse a bad length, and must not read outside its input.
fn conv_length(l: f32, steps: u32) -> u32 {
    return select(0u, u32(l), l >= 1.0 && l <= f32(steps));
}

// ---- unfold_time: cols[t, b, c·K + k] = x[s, b, c] for t < L and s in 0..L, else 0.

struct UnfoldParams {
    x_base: u32, lengths_base: u32, cols_base: u32,
    t0: u32, count: u32, row0: u32, rows: u32, col0: u32, cols: u32, k0: u32, taps: u32,
    channels: u32, batch: u32, kernel: u32, dilation: u32, left: u32, steps: u32, masked: u32,
}

@group(0) @binding(0) var<uniform> unfold_p: UnfoldParams;
@group(0) @binding(1) var<storage, read_write> unfold_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> unfold_lengths: array<f32>;
@group(0) @binding(3) var<storage, read_write> unfold_cols: array<f32>;

@compute @workgroup_size(WG)
fn unfold_time(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = unfold_p;
    let i = flat_index(wid, nwg, lid);
    let per_row = p.cols * p.taps;
    let per_step = p.rows * per_row;
    if (i >= p.count * per_step) {
        return;
    }
    let t = p.t0 + i / per_step;
    let r = i % per_step;
    let b = p.row0 + r / per_row;
    let c = p.col0 + (r % per_row) / p.taps;
    let k = p.k0 + r % p.taps;
    var len = p.steps;
    if (p.masked == 1u) {
        len = conv_length(unfold_lengths[p.lengths_base + b], p.steps);
    }
    let at = t + k * p.dilation;
    var v = 0.0;
    if (t < len && at >= p.left && at - p.left < len) {
        v = unfold_x[p.x_base + ((at - p.left) * p.batch + b) * p.channels + c];
    }
    unfold_cols[p.cols_base + (t * p.batch + b) * p.channels * p.kernel + c * p.kernel + k] = v;
}

// ---- fold_time: dx[s, b, c] = Σ_k dcols[t, b, c·K + k] over the taps whose step
// t = s + left - k·dilation lies in 0..L, in tap order; 0 for s ≥ L. The first group of
// taps (`first`) starts the sum, a later one carries it on from dx.

struct FoldParams {
    dcols_base: u32, lengths_base: u32, dx_base: u32,
    t0: u32, count: u32, row0: u32, rows: u32, col0: u32, cols: u32, k0: u32, taps: u32,
    channels: u32, batch: u32, kernel: u32, dilation: u32, left: u32, steps: u32, masked: u32,
    first: u32,
}

@group(0) @binding(0) var<uniform> fold_p: FoldParams;
@group(0) @binding(1) var<storage, read_write> fold_dcols: array<f32>;
@group(0) @binding(2) var<storage, read_write> fold_lengths: array<f32>;
@group(0) @binding(3) var<storage, read_write> fold_dx: array<f32>;

@compute @workgroup_size(WG)
fn fold_time(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = fold_p;
    let i = flat_index(wid, nwg, lid);
    let per_step = p.rows * p.cols;
    if (i >= p.count * per_step) {
        return;
    }
    let s = p.t0 + i / per_step;
    let b = p.row0 + (i % per_step) / p.cols;
    let c = p.col0 + i % p.cols;
    var len = p.steps;
    if (p.masked == 1u) {
        len = conv_length(fold_lengths[p.lengths_base + b], p.steps);
    }
    let o = p.dx_base + (s * p.batch + b) * p.channels + c;
    var sum = 0.0;
    if (p.first == 0u) {
        sum = fold_dx[o];
    }
    if (s < len) {
        let at = s + p.left;
        for (var k = p.k0; k < p.k0 + p.taps; k = k + 1u) {
            let reach = k * p.dilation;
            if (at >= reach && at - reach < len) {
                let t = at - reach;
                sum = sum + fold_dcols[p.dcols_base + (t * p.batch + b) * p.channels * p.kernel + c * p.kernel + k];
            }
        }
    }
    fold_dx[o] = sum;
}
