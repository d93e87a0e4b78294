// attention.wgsl: multi-head scaled dot-product self-attention, mirroring tensorfit-cpu's
// kernels/attention.rs. The host (kernels/attention.rs) builds the four ops from four
// kernels: attention_dot (the scores, and the weights' gradient), attention_softmax,
// attention_mix (the mix, and every gradient of a [T, B, D] tensor) and attention_rowsum.
// Conventions: common.wgsl.
//
// Per head, a [T, B, D] tensor is [T, P, Dh] (P = B·heads pairs, pair p = b·heads + h):
// element (t, p, f) at (t·P + p)·Dh + f; the weights [B, heads, T, T] are [P, T, T]:
// element (p, i, j) at (p·T + i)·T + j. Every launch covers pairs p0..p0 + np and a range
// of steps (and of summed steps): the host cuts a call that outgrows a binding into such
// parts, and keeps T and Dh within the loop budget. One invocation per element written.

// The keys 0..n query i attends to in a row of length `l` (read only with lengths,
// `masked` 1; without them a row has `steps`): `l` when it is in 1..=steps, else 0 (a
// kernel cannot refuse a bad length), and at most i + 1 when `causal` is 1.
fn attention_keys(l: f32, masked: u32, steps: u32, causal: u32, i: u32) -> u32 {
    var n = steps;
    if (masked == 1u) {
        n = select(0u, u32(l), l >= 1.0 && l <= f32(steps));
    }
    if (causal == 1u) {
        n = min(n, i + 1u);
    }
    return n;
}

// ---- attention_dot: out[p, i, j] = Σ_f a[i, p, f] · b[j, p, f] for rows i0..i0 + ni
// and columns j0..j0 + nj (the raw scores q·kᵀ, or the weights' gradient dout·vᵀ).

struct DotParams {
    a_base: u32, b_base: u32, out_base: u32,
    p0: u32, np: u32, i0: u32, ni: u32, j0: u32, nj: u32,
    pairs: u32, steps: u32, dh: u32,
}

@group(0) @binding(0) var<uniform> dot_p: DotParams;
@group(0) @binding(1) var<storage, read_write> dot_a: array<f32>;
@group(0) @binding(2) var<storage, read_write> dot_b: array<f32>;
@group(0) @binding(3) var<storage, read_write> dot_out: array<f32>;

@compute @workgroup_size(WG)
fn attention_dot(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = dot_p;
    let idx = flat_index(wid, nwg, lid);
    let per_pair = p.ni * p.nj;
    if (idx >= p.np * per_pair) {
        return;
    }
    let pair = p.p0 + idx / per_pair;
    let r = idx % per_pair;
    let i = p.i0 + r / p.nj;
    let j = p.j0 + r % p.nj;
    let a = p.a_base + (i * p.pairs + pair) * p.dh;
    let b = p.b_base + (j * p.pairs + pair) * p.dh;
    var sum = 0.0;
    for (var f = 0u; f < p.dh; f = f + 1u) {
        sum = fma(dot_a[a + f], dot_b[b + f], sum);
    }
    dot_out[p.out_base + (pair * p.steps + i) * p.steps + j] = sum;
}

// ---- attention_softmax: each row i0..i0 + ni of raw scores, in place: the softmax over
// its keys j < n of (s_j - max)·scale (Kahan-summed in key order), 0 for j ≥ n; a row of
// no keys all 0.

struct SoftmaxParams {
    lengths_base: u32, probs_base: u32,
    p0: u32, np: u32, i0: u32, ni: u32,
    steps: u32, heads: u32, scale: f32, causal: u32, masked: u32,
}

@group(0) @binding(0) var<uniform> softmax_p: SoftmaxParams;
@group(0) @binding(1) var<storage, read_write> softmax_lengths: array<f32>;
@group(0) @binding(2) var<storage, read_write> softmax_probs: array<f32>;

@compute @workgroup_size(WG)
fn attention_softmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = softmax_p;
    let idx = flat_index(wid, nwg, lid);
    if (idx >= p.np * p.ni) {
        return;
    }
    let pair = p.p0 + idx / p.ni;
    let i = p.i0 + idx % p.ni;
    var l = 0.0;
    if (p.masked == 1u) {
        l = softmax_lengths[p.lengths_base + pair / p.heads];
    }
    let n = attention_keys(l, p.masked, p.steps, p.causal, i);
    let row = p.probs_base + (pair * p.steps + i) * p.steps;
    var top = 0.0;
    if (n > 0u) {
        top = softmax_probs[row];
    }
    for (var j = 1u; j < n; j = j + 1u) {
        top = max(top, softmax_probs[row + j]);
    }
    var sum = Kahan(0.0, 0.0);
    for (var j = 0u; j < n; j = j + 1u) {
        let e = exp((softmax_probs[row + j] - top) * p.scale);
        softmax_probs[row + j] = e;
        kahan_add(&sum, e);
    }
    for (var j = 0u; j < p.steps; j = j + 1u) {
        var w = 0.0;
        if (j < n) {
            w = softmax_probs[row + j] / sum.sum;
        }
        softmax_probs[row + j] = w;
    }
}

// ---- attention_rowsum: r_i = Σ_j probs[p, i, j] · dprobs[p, i, j] of rows i0..i0 + ni,
// written to rsum[(i·P + p)·Dh] (the first feature of the pair's head at step i of a
// [T, P, Dh] tensor: the scores' backward keeps it in dq until dk is done).

struct RowsumParams {
    probs_base: u32, dprobs_base: u32, rsum_base: u32,
    p0: u32, np: u32, i0: u32, ni: u32,
    pairs: u32, steps: u32, dh: u32,
}

@group(0) @binding(0) var<uniform> rowsum_p: RowsumParams;
@group(0) @binding(1) var<storage, read_write> rowsum_probs: array<f32>;
@group(0) @binding(2) var<storage, read_write> rowsum_dprobs: array<f32>;
@group(0) @binding(3) var<storage, read_write> rowsum_out: array<f32>;

@compute @workgroup_size(WG)
fn attention_rowsum(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = rowsum_p;
    let idx = flat_index(wid, nwg, lid);
    if (idx >= p.np * p.ni) {
        return;
    }
    let pair = p.p0 + idx / p.ni;
    let i = p.i0 + idx % p.ni;
    let row = (pair * p.steps + i) * p.steps;
    var r = 0.0;
    for (var j = 0u; j < p.steps; j = j + 1u) {
        r = fma(rowsum_probs[p.probs_base + row + j], rowsum_dprobs[p.dprobs_base + row + j], r);
    }
    rowsum_out[p.rsum_base + (i * p.pairs + pair) * p.dh] = r;
}

// ---- attention_mix: out[t, p, f] (+)= alpha · Σ_s w · x[s, p, f] over s0..s0 + ns, for
// steps t0..t0 + nt and every feature, where w is probs[p, t, s] (`transposed` 0) or
// probs[p, s, t] (1); with `grad` 1, w·(dprobs − r) at the same element, r the rowsum of
// its query row (t: recomputed over the whole row; s: read from rsum, see
// attention_rowsum). The first window of summed steps writes (`accumulate` 0), later ones
// add, in step order.

struct MixParams {
    probs_base: u32, dprobs_base: u32, rsum_base: u32, x_base: u32, out_base: u32,
    p0: u32, np: u32, t0: u32, nt: u32, s0: u32, ns: u32,
    pairs: u32, steps: u32, dh: u32,
    grad: u32, transposed: u32, alpha: f32, accumulate: u32,
}

@group(0) @binding(0) var<uniform> mix_p: MixParams;
@group(0) @binding(1) var<storage, read_write> mix_probs: array<f32>;
@group(0) @binding(2) var<storage, read_write> mix_dprobs: array<f32>;
@group(0) @binding(3) var<storage, read_write> mix_rsum: array<f32>;
@group(0) @binding(4) var<storage, read_write> mix_x: array<f32>;
@group(0) @binding(5) var<storage, read_write> mix_out: array<f32>;

@compute @workgroup_size(WG)
fn attention_mix(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = mix_p;
    let idx = flat_index(wid, nwg, lid);
    let per_pair = p.nt * p.dh;
    if (idx >= p.np * per_pair) {
        return;
    }
    let pair = p.p0 + idx / per_pair;
    let r = idx % per_pair;
    let t = p.t0 + r / p.dh;
    let f = r % p.dh;
    var rt = 0.0;
    if (p.grad == 1u && p.transposed == 0u) {
        let row = (pair * p.steps + t) * p.steps;
        for (var j = 0u; j < p.steps; j = j + 1u) {
            rt = fma(mix_probs[p.probs_base + row + j], mix_dprobs[p.dprobs_base + row + j], rt);
        }
    }
    var sum = 0.0;
    for (var s = p.s0; s < p.s0 + p.ns; s = s + 1u) {
        var at = (pair * p.steps + t) * p.steps + s;
        if (p.transposed == 1u) {
            at = (pair * p.steps + s) * p.steps + t;
        }
        var w = mix_probs[p.probs_base + at];
        if (p.grad == 1u) {
            var rs = rt;
            if (p.transposed == 1u) {
                rs = mix_rsum[p.rsum_base + (s * p.pairs + pair) * p.dh];
            }
            w = w * (mix_dprobs[p.dprobs_base + at] - rs);
        }
        sum = fma(w, mix_x[p.x_base + (s * p.pairs + pair) * p.dh + f], sum);
    }
    let o = p.out_base + (t * p.pairs + pair) * p.dh + f;
    var v = p.alpha * sum;
    if (p.accumulate == 1u) {
        v = mix_out[o] + v;
    }
    mix_out[o] = v;
}
