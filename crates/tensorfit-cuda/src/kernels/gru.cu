// The GRU's fused per-step passes, `gru_forward_cell` and `gru_backward_cell`; the GEMMs
// around them are cuBLAS calls made by kernels/gru.rs, which organises a layer as the
// LSTM's (one input-projection GEMM over all steps; per step one GEMM plus one of these
// kernels; weight gradients as GEMMs over all steps). Gate order is PyTorch's (r, z, n):
// row r of gates[t] is [r | z | n], each block H wide; b_hn sits inside the reset product.
//
// One thread per (batch row, unit).

// On entry gates_t [B, 3H] holds x_t W_ih^T and hidden_t [B, 3H] holds h_{t-1} W_hh^T;
// the biases are added here (hidden_t keeps b_hh: the backward reads its n block). On
// exit gates_t holds r, z, n and h_t = (1 - z) n + z h_{t-1}. With `lengths` (else null),
// a row past its end at step t (t >= lengths[r]) gets zero gates, projections and h_t
// (see tensorfit_core::seq_lengths).
extern "C" __global__ void gru_forward_cell(float* gates_t, float* hidden_t, const float* b_ih,
                                            const float* b_hh, const float* h_prev, float* h_t,
                                            const float* lengths, int t, int batch,
                                            int hidden) {
    i64 n = (i64)batch * hidden;
    GRID_STRIDE(idx, n) {
        auto [r, j] = unit_of(idx, hidden);
        float* g = gates_t + (i64)r * 3 * hidden;
        float* hh = hidden_t + (i64)r * 3 * hidden;
        int kz = hidden + j, kn = 2 * hidden + j;
        if (lengths != nullptr && (float)t >= lengths[r]) {
            g[j] = g[kz] = g[kn] = hh[j] = hh[kz] = hh[kn] = 0.0f;
            h_t[idx] = 0.0f;
            continue;
        }
        hh[j] += b_hh[j];
        hh[kz] += b_hh[kz];
        hh[kn] += b_hh[kn];
        float reset = sigmoid_f(g[j] + b_ih[j] + hh[j]);
        float update = sigmoid_f(g[kz] + b_ih[kz] + hh[kz]);
        float cand = tanhf(g[kn] + b_ih[kn] + reset * hh[kn]);
        g[j] = reset;
        g[kz] = update;
        g[kn] = cand;
        h_t[idx] = (1.0f - update) * cand + update * h_prev[idx];
    }
}

// One backward step. dh [B, H] holds the gradient arriving at h_t from step t+1 (or h_n)
// on entry and dh_total z on exit (the GEMM after this adds dhidden_t W_hh); dy_t is the
// gradient arriving at y_t from outside. With dh_total = dy + dh:
// dn = dh_total (1 - z)(1 - n^2), dz = dh_total (h_{t-1} - n) z (1 - z),
// dr = dn h_n r (1 - r); dgates_t gets (dr, dz, dn), dhidden_t (dr, dz, dn r). With
// `lengths` (else null), a row past its end at step t gets zero gradients and keeps dh
// (the GEMM after this adds nothing to it).
extern "C" __global__ void gru_backward_cell(const float* gates_t, const float* hidden_t,
                                             const float* h_prev, const float* dy_t, float* dh,
                                             float* dgates_t, float* dhidden_t,
                                             const float* lengths, int t, int batch,
                                             int hidden) {
    i64 n = (i64)batch * hidden;
    GRID_STRIDE(idx, n) {
        auto [r, j] = unit_of(idx, hidden);
        i64 row = (i64)r * 3 * hidden;
        int kz = hidden + j, kn = 2 * hidden + j;
        if (lengths != nullptr && (float)t >= lengths[r]) {
            dgates_t[row + j] = dgates_t[row + kz] = dgates_t[row + kn] = 0.0f;
            dhidden_t[row + j] = dhidden_t[row + kz] = dhidden_t[row + kn] = 0.0f;
            continue;
        }
        float reset = gates_t[row + j], update = gates_t[row + kz], cand = gates_t[row + kn];
        float dh_total = dy_t[idx] + dh[idx];
        float d_new = dh_total * (1.0f - update) * (1.0f - cand * cand);
        float d_update = dh_total * (h_prev[idx] - cand) * update * (1.0f - update);
        float d_reset = d_new * hidden_t[row + kn] * reset * (1.0f - reset);
        dgates_t[row + j] = d_reset;
        dgates_t[row + kz] = d_update;
        dgates_t[row + kn] = d_new;
        dhidden_t[row + j] = d_reset;
        dhidden_t[row + kz] = d_update;
        dhidden_t[row + kn] = d_new * reset;
        dh[idx] = dh_total * update;
    }
}
