// gemm.wgsl: the matrix product, `matmul`, mirroring tensorfit-cpu's kernels/gemm.rs.
// Conventions: common.wgsl.
//
// c[m, n] (+)= Σ_k op(a)[m, k] · op(b)[k, n] on one block of the product: `m × n` outputs
// and a `k` range, with each operand stored row-major with leading dimension `ld*` from
// element `*_off`, and op() transposing when `trans_*` is 1. The host splits a product
// into such blocks when an operand is too large for one binding (accumulating over k
// blocks), and otherwise launches the whole product at once.
//
// Tiling: each workgroup of 8×8 invocations computes a 64×64 tile of c. The k dimension
// is walked in slices of 16: the workgroup stages a 64×16 slice of op(a) and a 16×64
// slice of op(b) in workgroup memory (loads arranged so neighbouring invocations read
// neighbouring addresses for either storage order), then each invocation accumulates an
// 8×8 block of outputs in registers, rows `ty + 8i` and columns `tx + 8j`, so that its
// reads of the staged slices are conflict-free broadcasts and its writes coalesce. Eight
// staged values of each operand feed 64 multiply-adds per k. Each output is one fused
// multiply-add chain in k order, added to c's old value when `accumulate` is 1.

struct MatmulParams {
    a_base: u32, b_base: u32, c_base: u32,
    a_off: u32, b_off: u32, c_off: u32,
    m: u32, n: u32, k: u32,
    lda: u32, ldb: u32, ldc: u32,
    trans_a: u32, trans_b: u32, accumulate: u32,
}

@group(0) @binding(0) var<uniform> mm_p: MatmulParams;
@group(0) @binding(1) var<storage, read_write> mm_a: array<f32>;
@group(0) @binding(2) var<storage, read_write> mm_b: array<f32>;
@group(0) @binding(3) var<storage, read_write> mm_c: array<f32>;

const TILE: u32 = 64u;
const TK: u32 = 16u;

// Staged slices, k-major: a_tile[kk * TILE + row], b_tile[kk * TILE + col].
var<workgroup> a_tile: array<f32, 1024>;
var<workgroup> b_tile: array<f32, 1024>;

// Where element [r, c] of op(x) lies, after x's base: x is stored row-major with leading
// dimension `ld` from element `off`, and op() transposes when `trans` is 1.
fn op_index(trans: u32, off: u32, ld: u32, r: u32, c: u32) -> u32 {
    return off + select(c * ld + r, r * ld + c, trans == 0u);
}

// op(a)[row, kk], zero outside the block.
fn load_a(p: MatmulParams, row: u32, kk: u32) -> f32 {
    if (row >= p.m || kk >= p.k) {
        return 0.0;
    }
    return mm_a[p.a_base + op_index(p.trans_a, p.a_off, p.lda, row, kk)];
}

// op(b)[kk, col], zero outside the block.
fn load_b(p: MatmulParams, kk: u32, col: u32) -> f32 {
    if (kk >= p.k || col >= p.n) {
        return 0.0;
    }
    return mm_b[p.b_base + op_index(p.trans_b, p.b_off, p.ldb, kk, col)];
}

@compute @workgroup_size(8, 8)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = mm_p;
    let row0 = wid.y * TILE;
    let col0 = wid.x * TILE;
    let tid = lid.y * 8u + lid.x;
    // Row i of this invocation's 8×8 block is (lo_i, hi_i): columns tx + 8j, j < 4 in lo
    // and 4 <= j < 8 in hi.
    var lo0 = vec4<f32>(0.0); var hi0 = vec4<f32>(0.0);
    var lo1 = vec4<f32>(0.0); var hi1 = vec4<f32>(0.0);
    var lo2 = vec4<f32>(0.0); var hi2 = vec4<f32>(0.0);
    var lo3 = vec4<f32>(0.0); var hi3 = vec4<f32>(0.0);
    var lo4 = vec4<f32>(0.0); var hi4 = vec4<f32>(0.0);
    var lo5 = vec4<f32>(0.0); var hi5 = vec4<f32>(0.0);
    var lo6 = vec4<f32>(0.0); var hi6 = vec4<f32>(0.0);
    var lo7 = vec4<f32>(0.0); var hi7 = vec4<f32>(0.0);
    for (var k0 = 0u; k0 < p.k; k0 += TK) {
        for (var l = 0u; l < 16u; l += 1u) {
            let e = tid + l * 64u;
            // Along k when a row of op(a) is contiguous in memory, else along rows.
            var ar = e / TK;
            var ak = e % TK;
            if (p.trans_a == 1u) {
                ar = e % TILE;
                ak = e / TILE;
            }
            a_tile[ak * TILE + ar] = load_a(p, row0 + ar, k0 + ak);
            // Along columns when a row of op(b) is contiguous in memory, else along k.
            var bc = e % TILE;
            var bk = e / TILE;
            if (p.trans_b == 1u) {
                bc = e / TK;
                bk = e % TK;
            }
            b_tile[bk * TILE + bc] = load_b(p, k0 + bk, col0 + bc);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk += 1u) {
            let at = kk * TILE + lid.y;
            let bt = kk * TILE + lid.x;
            let bl = vec4<f32>(b_tile[bt], b_tile[bt + 8u], b_tile[bt + 16u], b_tile[bt + 24u]);
            let bh = vec4<f32>(b_tile[bt + 32u], b_tile[bt + 40u], b_tile[bt + 48u], b_tile[bt + 56u]);
            let a0 = vec4<f32>(a_tile[at]);
            let a1 = vec4<f32>(a_tile[at + 8u]);
            let a2 = vec4<f32>(a_tile[at + 16u]);
            let a3 = vec4<f32>(a_tile[at + 24u]);
            let a4 = vec4<f32>(a_tile[at + 32u]);
            let a5 = vec4<f32>(a_tile[at + 40u]);
            let a6 = vec4<f32>(a_tile[at + 48u]);
            let a7 = vec4<f32>(a_tile[at + 56u]);
            lo0 = fma(a0, bl, lo0); hi0 = fma(a0, bh, hi0);
            lo1 = fma(a1, bl, lo1); hi1 = fma(a1, bh, hi1);
            lo2 = fma(a2, bl, lo2); hi2 = fma(a2, bh, hi2);
            lo3 = fma(a3, bl, lo3); hi3 = fma(a3, bh, hi3);
            lo4 = fma(a4, bl, lo4); hi4 = fma(a4, bh, hi4);
            lo5 = fma(a5, bl, lo5); hi5 = fma(a5, bh, hi5);
            lo6 = fma(a6, bl, lo6); hi6 = fma(a6, bh, hi6);
            lo7 = fma(a7, bl, lo7); hi7 = fma(a7, bh, hi7);
        }
        workgroupBarrier();
    }
    let r = row0 + lid.y;
    let c = col0 + lid.x;
    store_row(p, r, c, lo0, hi0);
    store_row(p, r + 8u, c, lo1, hi1);
    store_row(p, r + 16u, c, lo2, hi2);
    store_row(p, r + 24u, c, lo3, hi3);
    store_row(p, r + 32u, c, lo4, hi4);
    store_row(p, r + 40u, c, lo5, hi5);
    store_row(p, r + 48u, c, lo6, hi6);
    store_row(p, r + 56u, c, lo7, hi7);
}

// Writes (or adds) the eight outputs of one row: columns col + 8j.
fn store_row(p: MatmulParams, row: u32, col: u32, lo: vec4<f32>, hi: vec4<f32>) {
    if (row >= p.m) {
        return;
    }
    for (var j = 0u; j < 8u; j += 1u) {
        let c = col + 8u * j;
        if (c < p.n) {
            let idx = p.c_base + p.c_off + row * p.ldc + c;
            var x = select(hi[j % 4u], lo[j % 4u], j < 4u);
            if (p.accumulate == 1u) {
                x = mm_c[idx] + x;
            }
            mm_c[idx] = x;
        }
    }
}
