// lstm.wgsl: the fused per-step kernels of the LSTM, mirroring tensorfit-cpu's
// kernels/lstm.rs (`cell_forward_row`, `cell_backward_row`). Conventions: common.wgsl.
//
// The host (kernels/lstm.rs) keeps cuDNN's structure: `lstm_forward` is one GEMM for the
// input projection of all steps, then per step one GEMM (gates[t] += h_{t-1} · w_hhᵀ) and
// one launch of `lstm_forward_cell`; `lstm_backward` is per step one launch of
// `lstm_backward_cell` and one GEMM (dh = dgates[t] · w_hh), then the weight gradients as
// GEMMs over all steps. Gate order is PyTorch's (i, f, g, o): a row of gates holds
// [i | f | g | o], each `hidden` wide. One invocation per (batch row, unit); a launch
// covers `rows` batch rows, starting at the offsets given (region-relative elements).

// ---- lstm_forward_cell: adds both biases to the pre-activations in gates[t], applies
// the nonlinearities in place (storing σ(i), σ(f), tanh(g), σ(o)), and updates the cell
// and hidden state: c = σ(f)·c_prev + σ(i)·tanh(g), h = σ(o)·tanh(c).
// c_prev is read from `c_prev` (c0 or cells[t-1]), or from `c` itself when `prev_in_c`
// is 1 (the running state c_n when the cells are not kept).
// With `masked` = 1, `lengths` holds each row's sequence length (see
// tensorfit_core::seq_lengths): a row past its end at step `t` carries its cell state and
// gets y = 0 and zero gates, and a row whose sequence ends at `t` writes its h into `h_n`. With
// `masked` = 0 neither binding is read.

struct CellForwardParams {
    gates_base: u32, c_prev_base: u32, c_base: u32, y_base: u32, b_ih_base: u32, b_hh_base: u32,
    lengths_base: u32, h_n_base: u32,
    rows: u32, hidden: u32,
    gates_off: u32, c_prev_off: u32, c_off: u32, y_off: u32, prev_in_c: u32,
    masked: u32, t: u32, first_row: u32, h_n_off: u32,
}

@group(0) @binding(0) var<uniform> fwd_p: CellForwardParams;
@group(0) @binding(1) var<storage, read_write> fwd_gates: array<f32>;
@group(0) @binding(2) var<storage, read_write> fwd_c_prev: array<f32>;
@group(0) @binding(3) var<storage, read_write> fwd_c: array<f32>;
@group(0) @binding(4) var<storage, read_write> fwd_y: array<f32>;
@group(0) @binding(5) var<storage, read_write> fwd_b_ih: array<f32>;
@group(0) @binding(6) var<storage, read_write> fwd_b_hh: array<f32>;
@group(0) @binding(7) var<storage, read_write> fwd_lengths: array<f32>;
@group(0) @binding(8) var<storage, read_write> fwd_h_n: array<f32>;

fn pre_activation(p: CellForwardParams, at: u32, unit: u32) -> f32 {
    return fwd_gates[p.gates_base + at] + (fwd_b_ih[p.b_ih_base + unit] + fwd_b_hh[p.b_hh_base + unit]);
}

@compute @workgroup_size(WG)
fn lstm_forward_cell(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = fwd_p;
    let idx = flat_index(wid, nwg, lid);
    if (idx >= p.rows * p.hidden) {
        return;
    }
    let h = p.hidden;
    let r = idx / h;
    let j = idx % h;
    let s = r * h + j;
    let g = p.gates_off + r * 4u * h;
    var len = 0.0;
    if (p.masked == 1u) {
        len = fwd_lengths[p.lengths_base + p.first_row + r];
        if (f32(p.t) >= len) {
            fwd_gates[p.gates_base + g + j] = 0.0;
            fwd_gates[p.gates_base + g + h + j] = 0.0;
            fwd_gates[p.gates_base + g + 2u * h + j] = 0.0;
            fwd_gates[p.gates_base + g + 3u * h + j] = 0.0;
            var c_prev: f32;
            if (p.prev_in_c == 1u) {
                c_prev = fwd_c[p.c_base + p.c_off + s];
            } else {
                c_prev = fwd_c_prev[p.c_prev_base + p.c_prev_off + s];
            }
            fwd_c[p.c_base + p.c_off + s] = c_prev;
            fwd_y[p.y_base + p.y_off + s] = 0.0;
            return;
        }
    }
    let i_gate = sigmoid_f(pre_activation(p, g + j, j));
    let f_gate = sigmoid_f(pre_activation(p, g + h + j, h + j));
    let g_gate = tanh_f(pre_activation(p, g + 2u * h + j, 2u * h + j));
    let o_gate = sigmoid_f(pre_activation(p, g + 3u * h + j, 3u * h + j));
    fwd_gates[p.gates_base + g + j] = i_gate;
    fwd_gates[p.gates_base + g + h + j] = f_gate;
    fwd_gates[p.gates_base + g + 2u * h + j] = g_gate;
    fwd_gates[p.gates_base + g + 3u * h + j] = o_gate;
    var c_prev: f32;
    if (p.prev_in_c == 1u) {
        c_prev = fwd_c[p.c_base + p.c_off + s];
    } else {
        c_prev = fwd_c_prev[p.c_prev_base + p.c_prev_off + s];
    }
    let c = f_gate * c_prev + i_gate * g_gate;
    fwd_c[p.c_base + p.c_off + s] = c;
    let h_t = o_gate * tanh_f(c);
    fwd_y[p.y_base + p.y_off + s] = h_t;
    if (p.masked == 1u && f32(p.t + 1u) == len) {
        fwd_h_n[p.h_n_base + p.h_n_off + s] = h_t;
    }
}

// ---- lstm_backward_cell: from the activated gates of step t, c_t, c_{t-1}, the gradient
// dy arriving at y_t from outside and dh arriving at h_t from step t+1, writes the
// pre-activation gate gradients dgates[t] and replaces dc (the gradient at c_t) by the
// gradient at c_{t-1}. With tc = tanh(c_t) and dh_total = dy + dh:
// do = dh_total·tc, dc += dh_total·o·(1 - tc²), di = dc·g, df = dc·c_{t-1}, dg = dc·i,
// each times its gate's derivative written with the gate's output; then dc = dc·f.
// With `masked` = 1 (see tensorfit_core::seq_lengths): a row past its end at step `t`
// gets zero dgates and keeps dc and dh; a row inside its sequence reads dh, then zeroes
// it, for the step's GEMM to add dgates[t] · w_hh to.

struct CellBackwardParams {
    gates_base: u32, c_base: u32, c_prev_base: u32, dy_base: u32, dh_base: u32, dc_base: u32,
    dgates_base: u32, lengths_base: u32,
    rows: u32, hidden: u32,
    gates_off: u32, step_off: u32, c_prev_off: u32, state_off: u32,
    masked: u32, t: u32, first_row: u32,
}

@group(0) @binding(0) var<uniform> bwd_p: CellBackwardParams;
@group(0) @binding(1) var<storage, read_write> bwd_gates: array<f32>;
@group(0) @binding(2) var<storage, read_write> bwd_c: array<f32>;
@group(0) @binding(3) var<storage, read_write> bwd_c_prev: array<f32>;
@group(0) @binding(4) var<storage, read_write> bwd_dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> bwd_dh: array<f32>;
@group(0) @binding(6) var<storage, read_write> bwd_dc: array<f32>;
@group(0) @binding(7) var<storage, read_write> bwd_dgates: array<f32>;
@group(0) @binding(8) var<storage, read_write> bwd_lengths: array<f32>;

@compute @workgroup_size(WG)
fn lstm_backward_cell(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = bwd_p;
    let idx = flat_index(wid, nwg, lid);
    if (idx >= p.rows * p.hidden) {
        return;
    }
    let h = p.hidden;
    let r = idx / h;
    let j = idx % h;
    let g = p.gates_off + r * 4u * h;
    if (p.masked == 1u && f32(p.t) >= bwd_lengths[p.lengths_base + p.first_row + r]) {
        bwd_dgates[p.dgates_base + g + j] = 0.0;
        bwd_dgates[p.dgates_base + g + h + j] = 0.0;
        bwd_dgates[p.dgates_base + g + 2u * h + j] = 0.0;
        bwd_dgates[p.dgates_base + g + 3u * h + j] = 0.0;
        return;
    }
    let i_gate = bwd_gates[p.gates_base + g + j];
    let f_gate = bwd_gates[p.gates_base + g + h + j];
    let g_gate = bwd_gates[p.gates_base + g + 2u * h + j];
    let o_gate = bwd_gates[p.gates_base + g + 3u * h + j];
    let s = r * h + j;
    let tc = tanh_f(bwd_c[p.c_base + p.step_off + s]);
    let c_prev = bwd_c_prev[p.c_prev_base + p.c_prev_off + s];
    let dh_total = bwd_dy[p.dy_base + p.step_off + s] + bwd_dh[p.dh_base + p.state_off + s];
    let dc = bwd_dc[p.dc_base + p.state_off + s] + dh_total * o_gate * (1.0 - tc * tc);
    bwd_dgates[p.dgates_base + g + j] = dc * g_gate * i_gate * (1.0 - i_gate);
    bwd_dgates[p.dgates_base + g + h + j] = dc * c_prev * f_gate * (1.0 - f_gate);
    bwd_dgates[p.dgates_base + g + 2u * h + j] = dc * i_gate * (1.0 - g_gate * g_gate);
    bwd_dgates[p.dgates_base + g + 3u * h + j] = dh_total * tc * o_gate * (1.0 - o_gate);
    bwd_dc[p.dc_base + p.state_off + s] = dc * f_gate;
    if (p.masked == 1u) {
        bwd_dh[p.dh_base + p.state_off + s] = 0.0;
    }
}
