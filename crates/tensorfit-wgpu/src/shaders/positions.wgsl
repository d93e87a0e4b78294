// positions.wgsl: the positions of a sequence, mirroring tensorfit-cpu's
// kernels/positions.rs: add_time_rows, sum_batch_to_rows and sinusoids. Conventions:
// common.wgsl. Every launch covers a block of a row-major matrix (rows row0.., columns
// col0.., rows of `ld` elements), indices absolute: x [T, B, D] is read as [T·B, D], a
// table [N, D] as itself.

// ---- add_time_rows: out[r, c] = x[r, c] + table[r / batch, c], x and out [T·B, D].

struct AddParams {
    x_base: u32, table_base: u32, out_base: u32,
    row0: u32, col0: u32, rows: u32, cols: u32, ld: u32, batch: u32,
}

@group(0) @binding(0) var<uniform> add_p: AddParams;
@group(0) @binding(1) var<storage, read_write> add_x: array<f32>;
@group(0) @binding(2) var<storage, read_write> add_table: array<f32>;
@group(0) @binding(3) var<storage, read_write> add_out: array<f32>;

@compute @workgroup_size(WG)
fn add_time_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = add_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.rows * p.cols) {
        return;
    }
    let r = p.row0 + i / p.cols;
    let c = p.col0 + i % p.cols;
    let e = r * p.ld + c;
    add_out[p.out_base + e] = add_x[p.x_base + e] + add_table[p.table_base + (r / p.batch) * p.ld + c];
}

// ---- sum_batch_to_rows: dtable[t, c] = Σ_b dout[t, b, c] over steps t0..t0 + steps,
// columns c0..c0 + cols, batch rows b0..b0 + rows, one invocation per (t, c) adding in b
// order onto 0 (`carry` 0) or onto what the previous window of rows left (`carry` 1):
// the CPU's order, so the same sums. The rows past the sequence's steps are a fill.

struct SumRowsParams {
    dout_base: u32, dtable_base: u32,
    t0: u32, steps: u32, b0: u32, rows: u32, c0: u32, cols: u32, batch: u32, width: u32,
    carry: u32,
}

@group(0) @binding(0) var<uniform> sum_p: SumRowsParams;
@group(0) @binding(1) var<storage, read_write> sum_dout: array<f32>;
@group(0) @binding(2) var<storage, read_write> sum_dtable: array<f32>;

@compute @workgroup_size(WG)
fn sum_batch_to_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = sum_p;
    let i = flat_index(wid, nwg, lid);
    if (i >= p.steps * p.cols) {
        return;
    }
    let t = p.t0 + i / p.cols;
    let c = p.c0 + i % p.cols;
    let o = p.dtable_base + t * p.width + c;
    var s = 0.0;
    if (p.carry == 1u) {
        s = sum_dtable[o];
    }
    for (var b = p.b0; b < p.b0 + p.rows; b += 1u) {
        s = s + sum_dout[p.dout_base + (t * p.batch + b) * p.width + c];
    }
    sum_dtable[o] = s;
}

// ---- sinusoids: table[pos, 2i] = sin(pos · w_i), table[pos, 2i + 1] = cos(pos · w_i),
// w_i the product of factors[k] for the bits k of i in ascending k (the host's
// tensorfit_core::positions_ops::sinusoid_factors, as every backend multiplies them), so
// the argument f32(pos) · w_i is the CPU's bits.

// sin and cos of a >= 0 as Cephes' sinf and cosf take them: a reduced by the multiple j
// of π/4 nearest below (rounded up to even) in three parts whose products with j are
// exact for j < 8192, then their polynomials on [-π/4, π/4]. Within ~1e-7 of the true
// values for a below 8192, 1e-6 below 65536, then worse (drivers' own sin and cos are
// looser still for large a, and unspecified outside [-π, π]).
fn sin_cos(a: f32) -> vec2<f32> {
    var j = u32(floor(a * 1.27323954473516));
    j = j + (j & 1u);
    let y = f32(j);
    let r = ((a - y * 0.78515625) - y * 2.4187564849853515625e-4) - y * 3.77489497744594108e-8;
    let z = r * r;
    let s = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
    let c = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z
        - 0.5 * z + 1.0;
    switch (j & 7u) {
        case 0u: { return vec2<f32>(s, c); }
        case 2u: { return vec2<f32>(c, -s); }
        case 4u: { return vec2<f32>(-s, -c); }
        default: { return vec2<f32>(-c, s); }
    }
}

struct SinusoidParams {
    table_base: u32,
    row0: u32, col0: u32, rows: u32, cols: u32, ld: u32, pad0: u32, pad1: u32,
    factors: array<vec4<f32>, 4>,
}

@group(0) @binding(0) var<uniform> sin_p: SinusoidParams;
@group(0) @binding(1) var<storage, read_write> sin_table: array<f32>;

@compute @workgroup_size(WG)
fn sinusoids(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = sin_p;
    let idx = flat_index(wid, nwg, lid);
    if (idx >= p.rows * p.cols) {
        return;
    }
    let pos = p.row0 + idx / p.cols;
    let j = p.col0 + idx % p.cols;
    let i = j / 2u;
    var w = 1.0;
    for (var k = 0u; k < 16u; k += 1u) {
        if (((i >> k) & 1u) == 1u) {
            w = w * sin_p.factors[k / 4u][k % 4u];
        }
    }
    let sc = sin_cos(f32(pos) * w);
    sin_table[p.table_base + pos * p.ld + j] = select(sc.x, sc.y, (j & 1u) == 1u);
}
