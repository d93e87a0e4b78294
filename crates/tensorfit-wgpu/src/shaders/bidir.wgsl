// bidir.wgsl: the ops a bidirectional recurrent layer is built from, which only move
// values, mirroring tensorfit-cpu's kernels/bidir.rs: reverse_time, and copy_features
// (concat_features and slice_features). Conventions: common.wgsl. One invocation per
// element written; every index is absolute (an element of [T, B, F] is (t·B + b)·F + f,
// of a matrix r·ld + col), so a window that starts inside a tensor still works.

// ---- reverse_time: y[t, b] = x[s, b] with s = L - 1 - t for t < L, else s = t (see
// tensorfit_core::seq_lengths::reversed_step); L = lengths[b] with `masked` = 1, else T.
// A length that is not in 1..=T passes its row through (an empty row's rule).
//
// One launch covers steps t0..t0 + count of rows b0..b0 + rows of y, and writes only the
// elements whose source step lies in s0..s1: the host binds that window of x, and
// launches every pair of windows a source can lie in when one binding does not hold
// the whole tensor.

struct ReverseParams {
    x_base: u32, y_base: u32, lengths_base: u32,
    t0: u32, count: u32, b0: u32, rows: u32, width: u32, batch: u32, steps: u32,
    s0: u32, s1: u32, masked: u32,
}

@group(0) @binding(0) var<uniform> rev_p: ReverseParams;
@group(0) @binding(1) var<storage, read_write> rev_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> rev_y: array<f32>;
@group(0) @binding(3) var<storage, read_write> rev_lengths: array<f32>;

@compute @workgroup_size(WG)
fn reverse_time(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = rev_p;
    let i = flat_index(wid, nwg, lid);
    let per_step = p.rows * p.width;
    if (i >= p.count * per_step) {
        return;
    }
    let t = p.t0 + i / per_step;
    let b = p.b0 + (i % per_step) / p.width;
    let f = i % p.width;
    var len = p.steps;
    if (p.masked == 1u) {
        let l = rev_lengths[p.lengths_base + b];
        len = select(0u, u32(l), l >= 1.0 && l <= f32(p.steps));
    }
    let s = select(t, len - 1u - t, t < len);
    if (s < p.s0 || s >= p.s1) {
        return;
    }
    rev_y[p.y_base + (t * p.batch + b) * p.width + f] = rev_x[p.x_base + (s * p.batch + b) * p.width + f];
}

// ---- copy_features: dst[r, dst_col + j] = src[r, src_col + j] for the block of rows
// row0..row0 + rows and columns col0..col0 + cols of the `width` copied, src a
// [.., src_ld] matrix and dst a [.., dst_ld] one: concat_features copies each operand
// into its columns of out, slice_features its columns of x into out.

struct FeaturesParams {
    src_base: u32, dst_base: u32,
    row0: u32, rows: u32, col0: u32, cols: u32,
    src_ld: u32, src_col: u32, dst_ld: u32, dst_col: u32,
}

@group(0) @binding(0) var<uniform> feat_p: FeaturesParams;
@group(0) @binding(1) var<storage, read_write> feat_src: array<f32>;
@group(0) @binding(2) var<storage, read_write> feat_dst: array<f32>;

@compute @workgroup_size(WG)
fn copy_features(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = feat_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.rows * p.cols) {
        return;
    }
    let r = p.row0 + i / p.cols;
    let j = p.col0 + i % p.cols;
    feat_dst[p.dst_base + r * p.dst_ld + p.dst_col + j] = feat_src[p.src_base + r * p.src_ld + p.src_col + j];
}
