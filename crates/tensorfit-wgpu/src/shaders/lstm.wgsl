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
// Every pass's parameters after the bases run: rows, units, the gates' offset, the pass's
// own offsets, masked, t, first_row (and a forward's h_n_off), as kernels/recurrent.rs's
// `StepBlock` writes them.

// The forward pass's entry point: `forward_unit` below on the unit its invocation
// computes (see common.wgsl's `cell_unit`); the backward's is at the end of the file.
@compute @workgroup_size(WG)
fn lstm_forward_cell(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_id) lid: vec3<u32>) {
    forward_unit(fwd_p, cell_unit(flat_index(wid, nwg, lid), fwd_p.rows, fwd_p.hidden, 4u, fwd_p.gates_off));
}

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

// The pre-activation of gate `k` of unit `u`, with both biases.
fn pre_activation(p: CellForwardParams, u: CellUnit, k: u32) -> f32 {
    let unit = k * u.h + u.j;
    return fwd_gates[p.gates_base + gate(u, k)] + (fwd_b_ih[p.b_ih_base + unit] + fwd_b_hh[p.b_hh_base + unit]);
}

// c_{t-1} of state element `s`: read from `c` itself when `prev_in_c` is 1, else from
// `c_prev`.
fn previous_cell(p: CellForwardParams, s: u32) -> f32 {
    if (p.prev_in_c == 1u) {
        return fwd_c[p.c_base + p.c_off + s];
    }
    return fwd_c_prev[p.c_prev_base + p.c_prev_off + s];
}

// What `lstm_forward_cell` computes in one unit (nothing past the launch's rows).
fn forward_unit(p: CellForwardParams, u: CellUnit) {
    if (!u.ok) {
        return;
    }
    let c_prev = previous_cell(p, u.s);
    var len = 0.0;
    if (p.masked == 1u) {
        len = fwd_lengths[p.lengths_base + p.first_row + u.r];
        if (f32(p.t) >= len) {
            fwd_gates[p.gates_base + gate(u, 0u)] = 0.0;
            fwd_gates[p.gates_base + gate(u, 1u)] = 0.0;
            fwd_gates[p.gates_base + gate(u, 2u)] = 0.0;
            fwd_gates[p.gates_base + gate(u, 3u)] = 0.0;
            fwd_c[p.c_base + p.c_off + u.s] = c_prev;
            fwd_y[p.y_base + p.y_off + u.s] = 0.0;
            return;
        }
    }
    let i_gate = sigmoid_f(pre_activation(p, u, 0u));
    let f_gate = sigmoid_f(pre_activation(p, u, 1u));
    let g_gate = tanh_f(pre_activation(p, u, 2u));
    let o_gate = sigmoid_f(pre_activation(p, u, 3u));
    fwd_gates[p.gates_base + gate(u, 0u)] = i_gate;
    fwd_gates[p.gates_base + gate(u, 1u)] = f_gate;
    fwd_gates[p.gates_base + gate(u, 2u)] = g_gate;
    fwd_gates[p.gates_base + gate(u, 3u)] = o_gate;
    let c = f_gate * c_prev + i_gate * g_gate;
    fwd_c[p.c_base + p.c_off + u.s] = c;
    let h_t = o_gate * tanh_f(c);
    fwd_y[p.y_base + p.y_off + u.s] = h_t;
    if (p.masked == 1u && f32(p.t + 1u) == len) {
        fwd_h_n[p.h_n_base + p.h_n_off + u.s] = h_t;
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

// What `lstm_backward_cell` computes in one unit (nothing past the launch's rows).
fn backward_unit(p: CellBackwardParams, u: CellUnit) {
    if (!u.ok) {
        return;
    }
    if (p.masked == 1u && f32(p.t) >= bwd_lengths[p.lengths_base + p.first_row + u.r]) {
        bwd_dgates[p.dgates_base + gate(u, 0u)] = 0.0;
        bwd_dgates[p.dgates_base + gate(u, 1u)] = 0.0;
        bwd_dgates[p.dgates_base + gate(u, 2u)] = 0.0;
        bwd_dgates[p.dgates_base + gate(u, 3u)] = 0.0;
        return;
    }
    let i_gate = bwd_gates[p.gates_base + gate(u, 0u)];
    let f_gate = bwd_gates[p.gates_base + gate(u, 1u)];
    let g_gate = bwd_gates[p.gates_base + gate(u, 2u)];
    let o_gate = bwd_gates[p.gates_base + gate(u, 3u)];
    let tc = tanh_f(bwd_c[p.c_base + p.step_off + u.s]);
    let c_prev = bwd_c_prev[p.c_prev_base + p.c_prev_off + u.s];
    let dh_total = bwd_dy[p.dy_base + p.step_off + u.s] + bwd_dh[p.dh_base + p.state_off + u.s];
    let dc = bwd_dc[p.dc_base + p.state_off + u.s] + dh_total * o_gate * (1.0 - tc * tc);
    bwd_dgates[p.dgates_base + gate(u, 0u)] = dc * g_gate * i_gate * (1.0 - i_gate);
    bwd_dgates[p.dgates_base + gate(u, 1u)] = dc * c_prev * f_gate * (1.0 - f_gate);
    bwd_dgates[p.dgates_base + gate(u, 2u)] = dc * i_gate * (1.0 - g_gate * g_gate);
    bwd_dgates[p.dgates_base + gate(u, 3u)] = dh_total * tc * o_gate * (1.0 - o_gate);
    bwd_dc[p.dc_base + p.state_off + u.s] = dc * f_gate;
    if (p.masked == 1u) {
        bwd_dh[p.dh_base + p.state_off + u.s] = 0.0;
    }
}

// The backward pass's entry point: `backward_unit` above on its invocation's unit.
@compute @workgroup_size(WG)
fn lstm_backward_cell(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_id) lid: vec3<u32>) {
    backward_unit(bwd_p, cell_unit(flat_index(wid, nwg, lid), bwd_p.rows, bwd_p.hidden, 4u, bwd_p.gates_off));
}
