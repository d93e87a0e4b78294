// softmax.wgsl: softmax cross-entropy, mirroring tensorfit-cpu's kernels/softmax.rs.
// Conventions: common.wgsl.
//
// Labels are f32 class indices. The CPU returns an input error naming the row of a label
// that is not a whole number in [0, K); a kernel cannot return an error without a
// read-back inside the step, so here such a row's loss (and its gradient) is NaN, which
// the trainer reports as a non-finite loss. (The trainer checks labels before writing
// them, so this only catches labels written by other means.) A label of -1
// (tensorfit_core::rows::IGNORE_LABEL) marks a row that adds no loss and gets a zero
// gradient.

const IGNORE_LABEL: f32 = -1.0;

fn nan_f() -> f32 {
    return bitcast<f32>(0x7fc00000u);
}

// The class index in `label`, or K when it is not a valid one.
fn class_of(label: f32, classes: u32) -> u32 {
    if (label == floor(label) && label >= 0.0 && label < f32(classes)) {
        return u32(label);
    }
    return classes;
}

// ---- softmax_cross_entropy_forward: probs = softmax(logits) row by row, and
// loss[0] = mean over rows of -ln probs[row, label]. One workgroup per launch: each
// invocation takes rows lid, lid+256, ... of the block, forming -ln p[label] stably as
// ln Σ exp(x - max) - (x[label] - max) and summing its rows with Kahan's compensation;
// the workgroup then adds the 256 partial sums as a fixed tree. Blocks of rows (when the
// logits exceed one binding) accumulate into loss[0]; the last divides by the batch.

struct ForwardParams {
    logits_base: u32, labels_base: u32, loss_base: u32, probs_base: u32,
    row0: u32, rows: u32, classes: u32, accumulate: u32, last: u32, batch: u32,
}

@group(0) @binding(0) var<uniform> fwd_p: ForwardParams;
@group(0) @binding(1) var<storage, read_write> fwd_logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> fwd_labels: array<f32>;
@group(0) @binding(3) var<storage, read_write> fwd_loss: array<f32>;
@group(0) @binding(4) var<storage, read_write> fwd_probs: array<f32>;

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(WG)
fn softmax_cross_entropy_forward(@builtin(local_invocation_id) lid: vec3<u32>) {
    let p = fwd_p;
    let k = p.classes;
    var acc = Kahan(0.0, 0.0);
    for (var r = lid.x; r < p.rows; r += 256u) {
        let row = p.row0 + r;
        let x0 = p.logits_base + row * k;
        let p0 = p.probs_base + row * k;
        var mx = fwd_logits[x0];
        for (var c = 1u; c < k; c += 1u) {
            mx = max(mx, fwd_logits[x0 + c]);
        }
        var sum = 0.0;
        for (var c = 0u; c < k; c += 1u) {
            let e = exp(fwd_logits[x0 + c] - mx);
            fwd_probs[p0 + c] = e;
            sum += e;
        }
        for (var c = 0u; c < k; c += 1u) {
            fwd_probs[p0 + c] = fwd_probs[p0 + c] / sum;
        }
        let label = class_of(fwd_labels[p.labels_base + row], k);
        var row_loss = nan_f();
        if (label < k) {
            row_loss = log(sum) - (fwd_logits[x0 + label] - mx);
        } else if (fwd_labels[p.labels_base + row] == IGNORE_LABEL) {
            row_loss = 0.0;
        }
        kahan_add(&acc, row_loss);
    }
    partial[lid.x] = acc.sum;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w = w / 2u) {
        if (lid.x < w) {
            partial[lid.x] = partial[lid.x] + partial[lid.x + w];
        }
        workgroupBarrier();
    }
    if (lid.x == 0u) {
        var total = partial[0];
        if (p.accumulate == 1u) {
            total = fwd_loss[p.loss_base] + total;
        }
        if (p.last == 1u) {
            total = total / f32(p.batch);
        }
        fwd_loss[p.loss_base] = total;
    }
}

// ---- softmax_cross_entropy_backward: dlogits = (probs - onehot(labels)) · dloss / B (0 on
// ignored rows) on
// elements off..off+n of the [B, K] gradient.

struct BackwardParams {
    probs_base: u32, labels_base: u32, dloss_base: u32, dlogits_base: u32,
    off: u32, n: u32, classes: u32, batch: u32,
}

@group(0) @binding(0) var<uniform> bwd_p: BackwardParams;
@group(0) @binding(1) var<storage, read_write> bwd_probs: array<f32>;
@group(0) @binding(2) var<storage, read_write> bwd_labels: array<f32>;
@group(0) @binding(3) var<storage, read_write> bwd_dloss: array<f32>;
@group(0) @binding(4) var<storage, read_write> bwd_dlogits: array<f32>;

@compute @workgroup_size(WG)
fn softmax_cross_entropy_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                                  @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = bwd_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let e = p.off + i;
    let row = e / p.classes;
    let col = e % p.classes;
    let scale = bwd_dloss[p.dloss_base] / f32(p.batch);
    let label = class_of(bwd_labels[p.labels_base + row], p.classes);
    var d = bwd_probs[p.probs_base + e] * scale;
    if (label == col) {
        d = d - scale;
    } else if (bwd_labels[p.labels_base + row] == IGNORE_LABEL) {
        d = 0.0;
    } else if (label >= p.classes) {
        d = nan_f();
    }
    bwd_dlogits[p.dlogits_base + e] = d;
}
