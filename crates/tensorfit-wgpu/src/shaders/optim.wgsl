// optim.wgsl: SGD and gradient clipping, `sgd_update`, `sum_squares`, `clip_grad`,
// mirroring tensorfit-cpu's kernels/optim.rs. Conventions: common.wgsl.

// ---- sgd_update: with (lr, s) = scalars, written by the host each step,
// g = grad + weight_decay·param, buf = momentum·buf + s·g,
// d = g + momentum·buf (nesterov) or buf, param -= lr·d, on elements off..off+n.

struct SgdParams {
    grad_base: u32, scalars_base: u32, param_base: u32, buf_base: u32,
    off: u32, n: u32, momentum: f32, nesterov: u32, weight_decay: f32,
}

@group(0) @binding(0) var<uniform> sgd_p: SgdParams;
@group(0) @binding(1) var<storage, read_write> sgd_grad: array<f32>;
@group(0) @binding(2) var<storage, read_write> sgd_scalars: array<f32>;
@group(0) @binding(3) var<storage, read_write> sgd_param: array<f32>;
@group(0) @binding(4) var<storage, read_write> sgd_buf: array<f32>;

@compute @workgroup_size(WG)
fn sgd_update(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = sgd_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let e = p.off + i;
    let lr = sgd_scalars[p.scalars_base];
    let weight = sgd_scalars[p.scalars_base + 1u];
    let w = sgd_param[p.param_base + e];
    let g = sgd_grad[p.grad_base + e] + p.weight_decay * w;
    let b = p.momentum * sgd_buf[p.buf_base + e] + weight * g;
    sgd_buf[p.buf_base + e] = b;
    let d = select(b, g + p.momentum * b, p.nesterov == 1u);
    sgd_param[p.param_base + e] = w - lr * d;
}

// ---- sum_squares: total (+)= Σ x² over off..off+n, by one workgroup: each invocation
// sums a strided share with Kahan's compensation, then a tree in workgroup memory. The
// host visits the chunks in order, the first one writing.

struct SumSquaresParams {
    x_base: u32, total_base: u32,
    off: u32, n: u32, accumulate: u32,
}

@group(0) @binding(0) var<uniform> sq_p: SumSquaresParams;
@group(0) @binding(1) var<storage, read_write> sq_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> sq_total: array<f32>;

var<workgroup> sq_part: array<f32, WG>;

@compute @workgroup_size(WG)
fn sum_squares(@builtin(local_invocation_id) lid: vec3<u32>) {
    let p = sq_p;
    var acc = Kahan(0.0, 0.0);
    for (var i = lid.x; i < p.n; i += WG) {
        let v = sq_x[p.x_base + p.off + i];
        kahan_add(&acc, v * v);
    }
    sq_part[lid.x] = acc.sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid.x < s) {
            sq_part[lid.x] = sq_part[lid.x] + sq_part[lid.x + s];
        }
        workgroupBarrier();
    }
    if (lid.x == 0u) {
        var t = sq_part[0];
        if (p.accumulate == 1u) {
            t = sq_total[p.total_base] + t;
        }
        sq_total[p.total_base] = t;
    }
}

// ---- clip_grad: y = clamp(x · min(1, max_norm / (sqrt(total_sq) + 1e-6)), -value, value)
// on off..off+n; the flags say which limit is set (the host never passes infinities).

struct ClipParams {
    x_base: u32, total_base: u32, y_base: u32,
    off: u32, n: u32, by_norm: u32, max_norm: f32, by_value: u32, value: f32,
}

@group(0) @binding(0) var<uniform> clip_p: ClipParams;
@group(0) @binding(1) var<storage, read_write> clip_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> clip_total: array<f32>;
@group(0) @binding(3) var<storage, read_write> clip_y: array<f32>;

@compute @workgroup_size(WG)
fn clip_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = clip_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let e = p.off + i;
    var factor = 1.0;
    if (p.by_norm == 1u) {
        factor = min(1.0, p.max_norm / (sqrt(clip_total[p.total_base]) + 1e-6));
    }
    var y = clip_x[p.x_base + e] * factor;
    if (p.by_value == 1u) {
        y = clamp(y, -p.value, p.value);
    }
    clip_y[p.y_base + e] = y;
}
