// adam.wgsl: one Adam step with PyTorch's formula, `adam_update`, mirroring
// tensorfit-cpu's kernels/adam.rs. Conventions: common.wgsl.
//
// With (s0, s1, s2) = scalars, written by the host each step (lr / (1 - β1^t),
// sqrt(1 - β2^t), 1 - lr·decoupled decay): g = grad + weight_decay·param, param *= s2, m = β1·m + (1-β1)·g, v = β2·v + (1-β2)·g²,
// param -= s0 · m / (sqrt(v)/s1 + eps), on elements off..off+n.

struct AdamParams {
    grad_base: u32, scalars_base: u32, param_base: u32, m_base: u32, v_base: u32,
    off: u32, n: u32, beta1: f32, beta2: f32, eps: f32, weight_decay: f32,
}

@group(0) @binding(0) var<uniform> adam_p: AdamParams;
@group(0) @binding(1) var<storage, read_write> adam_grad: array<f32>;
@group(0) @binding(2) var<storage, read_write> adam_scalars: array<f32>;
@group(0) @binding(3) var<storage, read_write> adam_param: array<f32>;
@group(0) @binding(4) var<storage, read_write> adam_m: array<f32>;
@group(0) @binding(5) var<storage, read_write> adam_v: array<f32>;

@compute @workgroup_size(WG)
fn adam_update(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = adam_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let e = p.off + i;
    let step_size = adam_scalars[p.scalars_base];
    let bias2_sqrt = adam_scalars[p.scalars_base + 1u];
    let w0 = adam_param[p.param_base + e];
    let g = adam_grad[p.grad_base + e] + p.weight_decay * w0;
    let w = w0 * adam_scalars[p.scalars_base + 2u];
    let m = p.beta1 * adam_m[p.m_base + e] + (1.0 - p.beta1) * g;
    let v = p.beta2 * adam_v[p.v_base + e] + (1.0 - p.beta2) * g * g;
    adam_m[p.m_base + e] = m;
    adam_v[p.v_base + e] = v;
    adam_param[p.param_base + e] = w - step_size * m / (sqrt(v) / bias2_sqrt + p.eps);
}
