// common.wgsl: prepended to every shader file of tensorfit-wgpu (WGSL has no includes).
//
// Conventions shared by every shader of tensorfit-wgpu:
// - binding 0 is the launch's parameter block (uniform); bindings 1.. are windows of the
//   planner's arena buffers, all `read_write`: an op's inputs and outputs often share a
//   buffer, and wgpu lets a launch bind one buffer several times only with one usage;
// - the first words of the parameters are the bases of bindings 1.., in binding order:
//   element i of a tensor is `buf[base + i]`, computed in u32, which wraps, so a window
//   that starts inside the tensor still works (see window.rs);
// - the host splits big work into launches whose windows fit the binding limit; a launch
//   covers `off..off + n` of a tensor (or a block `row0.., col0..` of a matrix);
// - one-dimensional launches run 256 invocations per workgroup over a 2-D grid of
//   workgroups (the x dimension is limited), and `flat_index` is the invocation's number;
// - reductions over the rows of a block run one invocation per column, 64 per workgroup
//   (`column_index`), each summing its column in row order with `kahan_add`.

const WG: u32 = 256u;
const COLUMN_WG: u32 = 64u;

fn flat_index(wid: vec3<u32>, nwg: vec3<u32>, lid: vec3<u32>) -> u32 {
    return (wid.y * nwg.x + wid.x) * WG + lid.x;
}

fn column_index(wid: vec3<u32>, nwg: vec3<u32>, lid: vec3<u32>) -> u32 {
    return (wid.y * nwg.x + wid.x) * COLUMN_WG + lid.x;
}

// A running sum with Kahan's compensation: `comp` holds the low-order bits the sum lost.
struct Kahan {
    sum: f32,
    comp: f32,
}

fn kahan_add(k: ptr<function, Kahan>, x: f32) {
    let v = x - (*k).comp;
    let t = (*k).sum + v;
    (*k).comp = (t - (*k).sum) - v;
    (*k).sum = t;
}

// tanh as Cephes' tanhf computes it: an odd polynomial below 0.625, else
// 1 - 2 / (e^{2|x|} + 1) with |x| clamped so the exponential stays finite. Drivers' own
// tanh differ in accuracy, and some return NaN for large |x|.
fn tanh_f(x: f32) -> f32 {
    let a = abs(x);
    if (a < 0.625) {
        let z = x * x;
        let p = (((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z
            + 1.33314422036e-1) * z - 3.33332819422e-1;
        return p * z * x + x;
    }
    let t = 1.0 - 2.0 / (exp(2.0 * min(a, 20.0)) + 1.0);
    return select(-t, t, x >= 0.0);
}

// The logistic function, finite for every x (as tensorfit_core::sigmoid).
fn sigmoid_f(x: f32) -> f32 {
    let e = exp(-abs(x));
    return select(e / (1.0 + e), 1.0 / (1.0 + e), x >= 0.0);
}


// The unit a fused recurrent cell pass (lstm.wgsl, gru.wgsl) computes in invocation `idx`
// of a launch over `rows` batch rows of `h` units, one invocation per (row, unit), each
// row of gates holding `gates` blocks of `h` (the cell's gates, in PyTorch's order) from
// `gates_off` on. `ok` is false past the launch's rows; `r` is the row, `j` the unit,
// `s` = r·h + j its element of a [rows, h] state, `g` where its row of gates starts.
struct CellUnit {
    ok: bool,
    h: u32,
    r: u32,
    j: u32,
    s: u32,
    g: u32,
}

fn cell_unit(idx: u32, rows: u32, h: u32, gates: u32, gates_off: u32) -> CellUnit {
    if (idx >= rows * h) {
        return CellUnit(false, h, 0u, 0u, 0u, 0u);
    }
    let r = idx / h;
    let j = idx % h;
    return CellUnit(true, h, r, j, r * h + j, gates_off + r * gates * h);
}

// The element of gate `k` (0, 1, ..) of unit `u` in its row of gates.
fn gate(u: CellUnit, k: u32) -> u32 {
    return u.g + k * u.h + u.j;
}
