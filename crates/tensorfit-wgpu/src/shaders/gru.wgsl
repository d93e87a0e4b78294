// gru.wgsl: the fused per-step kernels of the GRU, mirroring tensorfit-cpu's
// kernels/gru/mod.rs (`cell_forward`, `cell_backward`). Conventions: common.wgsl.
//
// The host (kernels/gru.rs) keeps the LSTM's structure: `gru_forward` is one GEMM for the
// input projection of all steps, then per step one GEMM (hidden[t] = h_{t-1} · w_hhᵀ) and
// one launch of `gru_forward_cell`; `gru_backward` is per step one launch of
// `gru_backward_cell` and one GEMM (dh += dhidden[t] · w_hh), then the weight gradients
// as GEMMs over all steps. Gate order is PyTorch's (r, z, n): a row of gates holds
// [r | z | n], each `hidden` wide. One invocation per (batch row, unit); a launch covers
// `rows` batch rows, starting at the offsets given (region-relative elements).
// Every pass's parameters after the bases run: rows, units, the gates' offset, the pass's
// own offsets, masked, t, first_row (and a forward's h_n_off), as kernels/recurrent.rs's
// `StepBlock` writes them.

// The forward pass's entry point: `forward_unit` below on the unit its invocation
// computes (see common.wgsl's `cell_unit`); the backward's is at the end of the file.
@compute @workgroup_size(WG)
fn gru_forward_cell(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_id) lid: vec3<u32>) {
    forward_unit(fwd_p, cell_unit(flat_index(wid, nwg, lid), fwd_p.rows, fwd_p.units, 3u, fwd_p.gates_off));
}

// ---- gru_forward_cell: adds b_ih to the input projections in gates[t] and b_hh to the
// recurrent ones in hidden[t] (which keeps them so), then stores r = σ(g_r + h_r),
// z = σ(g_z + h_z), n = tanh(g_n + r·h_n) in gates[t] and h_t = (1 − z)·n + z·h_{t-1}.
// With `masked` = 1, `lengths` holds each row's sequence length (see
// tensorfit_core::seq_lengths): a row past its end at step `t` gets zero gates,
// projections and y, and a row whose sequence ends at `t` writes its h into `h_n`. With
// `masked` = 0 neither binding is read.

struct CellForwardParams {
    gates_base: u32, hidden_base: u32, h_prev_base: u32, y_base: u32, b_ih_base: u32,
    b_hh_base: u32, lengths_base: u32, h_n_base: u32,
    rows: u32, units: u32,
    gates_off: u32, h_prev_off: u32, y_off: u32,
    masked: u32, t: u32, first_row: u32, h_n_off: u32,
}

@group(0) @binding(0) var<uniform> fwd_p: CellForwardParams;
@group(0) @binding(1) var<storage, read_write> fwd_gates: array<f32>;
@group(0) @binding(2) var<storage, read_write> fwd_hidden: array<f32>;
@group(0) @binding(3) var<storage, read_write> fwd_h_prev: array<f32>;
@group(0) @binding(4) var<storage, read_write> fwd_y: array<f32>;
@group(0) @binding(5) var<storage, read_write> fwd_b_ih: array<f32>;
@group(0) @binding(6) var<storage, read_write> fwd_b_hh: array<f32>;
@group(0) @binding(7) var<storage, read_write> fwd_lengths: array<f32>;
@group(0) @binding(8) var<storage, read_write> fwd_h_n: array<f32>;

// The input projection of gate `k` of unit `u`, with its bias.
fn input_projection(p: CellForwardParams, u: CellUnit, k: u32) -> f32 {
    return fwd_gates[p.gates_base + gate(u, k)] + fwd_b_ih[p.b_ih_base + k * u.h + u.j];
}

// The recurrent projection of gate `k` of unit `u` with its bias, written back.
fn recurrent_projection(p: CellForwardParams, u: CellUnit, k: u32) -> f32 {
    let at = p.hidden_base + gate(u, k);
    let v = fwd_hidden[at] + fwd_b_hh[p.b_hh_base + k * u.h + u.j];
    fwd_hidden[at] = v;
    return v;
}

// What `gru_forward_cell` computes in one unit (nothing past the launch's rows).
fn forward_unit(p: CellForwardParams, u: CellUnit) {
    if (!u.ok) {
        return;
    }
    var len = 0.0;
    if (p.masked == 1u) {
        len = fwd_lengths[p.lengths_base + p.first_row + u.r];
        if (f32(p.t) >= len) {
            for (var k = 0u; k < 3u; k = k + 1u) {
                fwd_gates[p.gates_base + gate(u, k)] = 0.0;
                fwd_hidden[p.hidden_base + gate(u, k)] = 0.0;
            }
            fwd_y[p.y_base + p.y_off + u.s] = 0.0;
            return;
        }
    }
    let reset = sigmoid_f(input_projection(p, u, 0u) + recurrent_projection(p, u, 0u));
    let update = sigmoid_f(input_projection(p, u, 1u) + recurrent_projection(p, u, 1u));
    let cand = tanh_f(input_projection(p, u, 2u) + reset * recurrent_projection(p, u, 2u));
    fwd_gates[p.gates_base + gate(u, 0u)] = reset;
    fwd_gates[p.gates_base + gate(u, 1u)] = update;
    fwd_gates[p.gates_base + gate(u, 2u)] = cand;
    let h_prev = fwd_h_prev[p.h_prev_base + p.h_prev_off + u.s];
    let h_t = (1.0 - update) * cand + update * h_prev;
    fwd_y[p.y_base + p.y_off + u.s] = h_t;
    if (p.masked == 1u && f32(p.t + 1u) == len) {
        fwd_h_n[p.h_n_base + p.h_n_off + u.s] = h_t;
    }
}

// ---- gru_backward_cell: from the activated gates r, z, n of step t, the recurrent
// projections hidden[t], h_{t-1}, the gradient dy arriving at y_t from outside and dh
// arriving at h_t from step t+1, writes the gradients at both projections and leaves
// dh = dh_total·z (the GEMM after it adds dhidden[t] · w_hh). With dh_total = dy + dh:
// dn = dh_total·(1 − z)·(1 − n²), dz = dh_total·(h_{t-1} − n)·z·(1 − z),
// dr = dn·h_n·r·(1 − r); dgates gets (dr, dz, dn), dhidden (dr, dz, dn·r).
// With `masked` = 1, a row past its end at step `t` gets zero gradients and keeps dh (the
// GEMM after it adds nothing to it).

struct CellBackwardParams {
    gates_base: u32, hidden_base: u32, h_prev_base: u32, dy_base: u32, dh_base: u32,
    dgates_base: u32, dhidden_base: u32, lengths_base: u32,
    rows: u32, units: u32,
    gates_off: u32, h_prev_off: u32, step_off: u32, state_off: u32,
    masked: u32, t: u32, first_row: u32,
}

@group(0) @binding(0) var<uniform> bwd_p: CellBackwardParams;
@group(0) @binding(1) var<storage, read_write> bwd_gates: array<f32>;
@group(0) @binding(2) var<storage, read_write> bwd_hidden: array<f32>;
@group(0) @binding(3) var<storage, read_write> bwd_h_prev: array<f32>;
@group(0) @binding(4) var<storage, read_write> bwd_dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> bwd_dh: array<f32>;
@group(0) @binding(6) var<storage, read_write> bwd_dgates: array<f32>;
@group(0) @binding(7) var<storage, read_write> bwd_dhidden: array<f32>;
@group(0) @binding(8) var<storage, read_write> bwd_lengths: array<f32>;

// What `gru_backward_cell` computes in one unit (nothing past the launch's rows).
fn backward_unit(p: CellBackwardParams, u: CellUnit) {
    if (!u.ok) {
        return;
    }
    if (p.masked == 1u && f32(p.t) >= bwd_lengths[p.lengths_base + p.first_row + u.r]) {
        for (var k = 0u; k < 3u; k = k + 1u) {
            bwd_dgates[p.dgates_base + gate(u, k)] = 0.0;
            bwd_dhidden[p.dhidden_base + gate(u, k)] = 0.0;
        }
        return;
    }
    let reset = bwd_gates[p.gates_base + gate(u, 0u)];
    let update = bwd_gates[p.gates_base + gate(u, 1u)];
    let cand = bwd_gates[p.gates_base + gate(u, 2u)];
    let h_n = bwd_hidden[p.hidden_base + gate(u, 2u)];
    let h_prev = bwd_h_prev[p.h_prev_base + p.h_prev_off + u.s];
    let dh_total = bwd_dy[p.dy_base + p.step_off + u.s] + bwd_dh[p.dh_base + p.state_off + u.s];
    let d_new = dh_total * (1.0 - update) * (1.0 - cand * cand);
    let d_update = dh_total * (h_prev - cand) * update * (1.0 - update);
    let d_reset = d_new * h_n * reset * (1.0 - reset);
    bwd_dgates[p.dgates_base + gate(u, 0u)] = d_reset;
    bwd_dgates[p.dgates_base + gate(u, 1u)] = d_update;
    bwd_dgates[p.dgates_base + gate(u, 2u)] = d_new;
    bwd_dhidden[p.dhidden_base + gate(u, 0u)] = d_reset;
    bwd_dhidden[p.dhidden_base + gate(u, 1u)] = d_update;
    bwd_dhidden[p.dhidden_base + gate(u, 2u)] = d_new * reset;
    bwd_dh[p.dh_base + p.state_off + u.s] = dh_total * update;
}

// The backward pass's entry point: `backward_unit` above on its invocation's unit.
@compute @workgroup_size(WG)
fn gru_backward_cell(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_id) lid: vec3<u32>) {
    backward_unit(bwd_p, cell_unit(flat_index(wid, nwg, lid), bwd_p.rows, bwd_p.units, 3u, bwd_p.gates_off));
}
