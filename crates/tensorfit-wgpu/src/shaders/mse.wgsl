// mse.wgsl: mean squared error, `mse_loss_forward` and `mse_loss_backward`, mirroring
// tensorfit-cpu's kernels/mse.rs. Conventions: common.wgsl.

// ---- mse_loss_forward: loss (+)= Σ (pred - target)² over off..off+n, by one workgroup:
// each invocation sums a strided share with Kahan's compensation, then a tree in
// workgroup memory. The host visits the chunks in order, the first one writing; the
// last divides by the element count.

struct MseForwardParams {
    pred_base: u32, target_base: u32, loss_base: u32,
    off: u32, n: u32, accumulate: u32, last: u32, numel: u32,
}

@group(0) @binding(0) var<uniform> msef_p: MseForwardParams;
@group(0) @binding(1) var<storage, read_write> msef_pred: array<f32>;
@group(0) @binding(2) var<storage, read_write> msef_target: array<f32>;
@group(0) @binding(3) var<storage, read_write> msef_loss: array<f32>;

var<workgroup> mse_part: array<f32, WG>;

@compute @workgroup_size(WG)
fn mse_loss_forward(@builtin(local_invocation_id) lid: vec3<u32>) {
    let p = msef_p;
    var acc = Kahan(0.0, 0.0);
    for (var i = lid.x; i < p.n; i += WG) {
        let d = msef_pred[p.pred_base + p.off + i] - msef_target[p.target_base + p.off + i];
        kahan_add(&acc, d * d);
    }
    mse_part[lid.x] = acc.sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid.x < s) {
            mse_part[lid.x] = mse_part[lid.x] + mse_part[lid.x + s];
        }
        workgroupBarrier();
    }
    if (lid.x == 0u) {
        var t = mse_part[0];
        if (p.accumulate == 1u) {
            t = msef_loss[p.loss_base] + t;
        }
        if (p.last == 1u) {
            t = t / f32(p.numel);
        }
        msef_loss[p.loss_base] = t;
    }
}

// ---- mse_loss_backward: dpred = 2 (pred - target) · dloss / numel on off..off+n.

struct MseBackwardParams {
    pred_base: u32, target_base: u32, dloss_base: u32, dpred_base: u32,
    off: u32, n: u32, numel: u32,
}

@group(0) @binding(0) var<uniform> mseb_p: MseBackwardParams;
@group(0) @binding(1) var<storage, read_write> mseb_pred: array<f32>;
@group(0) @binding(2) var<storage, read_write> mseb_target: array<f32>;
@group(0) @binding(3) var<storage, read_write> mseb_dloss: array<f32>;
@group(0) @binding(4) var<storage, read_write> mseb_dpred: array<f32>;

@compute @workgroup_size(WG)
fn mse_loss_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = mseb_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let e = p.off + i;
    let scale = 2.0 * mseb_dloss[p.dloss_base] / f32(p.numel);
    let d = mseb_pred[p.pred_base + e] - mseb_target[p.target_base + e];
    mseb_dpred[p.dpred_base + e] = d * scale;
}
