// dropout.wgsl: `dropout`, inverted dropout with the counter-based mask of
// tensorfit-core's dropout.rs, whose `mix32`, `site_key` and `element_bits` the three
// functions below repeat line for line (u32 arithmetic wraps, as Rust's wrapping_* do), so
// the mask is the CPU's bit for bit. Conventions: common.wgsl.

fn mix32(v: u32) -> u32 {
    var x = v;
    x ^= x >> 16u;
    x = x * 0x7feb352du;
    x ^= x >> 15u;
    x = x * 0x846ca68bu;
    return x ^ (x >> 16u);
}

fn site_key(key: u32, site: u32) -> u32 {
    return mix32(key ^ mix32(site + 0x9e3779b9u));
}

fn element_bits(k: u32, index: u32) -> u32 {
    return mix32(mix32(index ^ k) + k);
}

// ---- dropout: y = x · m, m = scale where element_bits(site_key(key, site), offset + e)
// >= threshold, else 0 (a product, as on the CPU), on elements e = off..off+n; `key` holds
// the step's key as two 16-bit halves (exact in f32).

struct DropoutParams {
    x_base: u32, key_base: u32, y_base: u32,
    off: u32, n: u32, site: u32, offset: u32, threshold: u32, scale: f32,
}

@group(0) @binding(0) var<uniform> drop_p: DropoutParams;
@group(0) @binding(1) var<storage, read_write> drop_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> drop_key: array<f32>;
@group(0) @binding(3) var<storage, read_write> drop_y: array<f32>;

@compute @workgroup_size(WG)
fn dropout(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = drop_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let e = p.off + i;
    let key = (u32(drop_key[p.key_base]) << 16u) | (u32(drop_key[p.key_base + 1u]) & 0xffffu);
    let kept = element_bits(site_key(key, p.site), p.offset + e) >= p.threshold;
    drop_y[p.y_base + e] = drop_x[p.x_base + e] * select(0.0, p.scale, kept);
}
