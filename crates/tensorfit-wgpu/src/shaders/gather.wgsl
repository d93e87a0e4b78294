// gather.wgsl: rows of a table picked by token ids and their scatter-add, mirroring
// tensorfit-cpu's kernels/gather.rs (`gather`, `scatter_add`): nn.Embedding, and the input
// projection of a recurrent layer on token input (a column of w_ih per token).
// Conventions: common.wgsl.
//
// The vector of token v is element e at `v * v_stride + e * e_stride` of the table (a row
// of [V, E], or a column of [E, V]). A launch covers output rows (ids) row0..row0+rows,
// columns col0..col0+cols of the [N, width] side, and only the tokens v0..v1 of the table
// (the host cuts the table so its window fits a binding). An id that is not a whole
// number in 0..vocab reads nothing: the launch with `zero_bad` 1 writes it as zeros
// (gather), and the scatter skips it; nothing reports it from here, so the host checks
// the ids it uploads (see tensorfit_core::tokens).

struct GatherParams {
    table_base: u32, ids_base: u32, side_base: u32,
    row0: u32, rows: u32, col0: u32, cols: u32, width: u32,
    vocab: u32, v0: u32, v1: u32, v_stride: u32, e_stride: u32, zero_bad: u32,
}

@group(0) @binding(0) var<uniform> gp: GatherParams;
@group(0) @binding(1) var<storage, read_write> g_table: array<f32>;
@group(0) @binding(2) var<storage, read_write> g_ids: array<f32>;
@group(0) @binding(3) var<storage, read_write> g_side: array<f32>;

// The token that `id` names, or `vocab` (none) if it is not a whole number in 0..vocab.
fn token_of(id: f32, vocab: u32) -> u32 {
    if (id >= 0.0 && id < f32(vocab) && floor(id) == id) {
        return u32(id);
    }
    return vocab;
}

// ---- gather: side[n, e] = table's element e of token ids[n] (side is the output).
@compute @workgroup_size(WG)
fn gather(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = gp;
    let idx = flat_index(wid, nwg, lid);
    if (idx >= p.rows * p.cols) {
        return;
    }
    let n = p.row0 + idx / p.cols;
    let e = p.col0 + idx % p.cols;
    let v = token_of(g_ids[p.ids_base + n], p.vocab);
    let at = p.side_base + n * p.width + e;
    if (v >= p.v0 && v < p.v1) {
        g_side[at] = g_table[p.table_base + v * p.v_stride + e * p.e_stride];
    } else if (v == p.vocab && p.zero_bad == 1u) {
        g_side[at] = 0.0;
    }
}

// ---- scatter_add: table's element e of token ids[n] += side[n, e] (side is the
// gradient arriving at the output), one invocation per column e, over the launch's rows
// in order, so every element sums in the order of n (deterministic).
@compute @workgroup_size(COLUMN_WG)
fn scatter_add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = gp;
    let c = column_index(wid, nwg, lid);
    if (c >= p.cols) {
        return;
    }
    let e = p.col0 + c;
    for (var r = 0u; r < p.rows; r++) {
        let n = p.row0 + r;
        let v = token_of(g_ids[p.ids_base + n], p.vocab);
        if (v >= p.v0 && v < p.v1) {
            let at = p.table_base + v * p.v_stride + e * p.e_stride;
            g_table[at] = g_table[at] + g_side[p.side_base + n * p.width + e];
        }
    }
}
