// The LSTM's fused per-step passes, `lstm_forward_cell` and `lstm_backward_cell`; the
// GEMMs around them are cuBLAS calls made by kernels/lstm.rs, which organises a layer the
// cuDNN way (one input-projection GEMM over all steps; per step one GEMM plus one of these
// kernels; weight gradients as GEMMs over all steps). Gate order is PyTorch's (i, f, g, o):
// row r of gates[t] is [i | f | g | o], each block H wide.
//
// One thread per (batch row, unit). No host round trip inside a step: the step's state
// stays on the device, and the kernels read and write it in place.

// On entry gates_t [B, 4H] holds x_t W_ih^T + h_{t-1} W_hh^T (the biases are added here,
// which saves a pass over the whole sequence); on exit the activated gates
// sigma(i), sigma(f), tanh(g), sigma(o). c_prev and c_t may be the same buffer (the
// running cell state when cells are not kept): each thread reads its element before
// writing it. With `lengths` (else null), a row past its end at step t (t >= lengths[r])
// carries its cell state and gets h_t = 0 and zero gates (see tensorfit_core::seq_lengths).
extern "C" __global__ void lstm_forward_cell(float* gates_t, const float* b_ih,
                                             const float* b_hh, const float* c_prev,
                                             float* c_t, float* h_t, const float* lengths,
                                             int t, int batch, int hidden) {
    i64 n = (i64)batch * hidden;
    GRID_STRIDE(idx, n) {
        auto [r, j] = unit_of(idx, hidden);
        float* g = gates_t + (i64)r * 4 * hidden;
        if (lengths != nullptr && (float)t >= lengths[r]) {
            g[j] = g[hidden + j] = g[2 * hidden + j] = g[3 * hidden + j] = 0.0f;
            c_t[idx] = c_prev[idx];
            h_t[idx] = 0.0f;
            continue;
        }
        int kf = hidden + j, kg = 2 * hidden + j, ko = 3 * hidden + j;
        float ig = sigmoid_f(g[j] + (b_ih[j] + b_hh[j]));
        float fg = sigmoid_f(g[kf] + (b_ih[kf] + b_hh[kf]));
        float gg = tanhf(g[kg] + (b_ih[kg] + b_hh[kg]));
        float og = sigmoid_f(g[ko] + (b_ih[ko] + b_hh[ko]));
        g[j] = ig;
        g[kf] = fg;
        g[kg] = gg;
        g[ko] = og;
        float c = fg * c_prev[idx] + ig * gg;
        c_t[idx] = c;
        h_t[idx] = og * tanhf(c);
    }
}

// One backward step. dh [B, H] is the gradient arriving at h_t from step t+1 (or h_n),
// dy_t the one arriving at y_t from outside; dc [B, H] holds the gradient at c_t on entry
// and at c_{t-1} on exit. Writes the pre-activation gate gradients dgates_t [B, 4H].
// With tc = tanh(c_t): do = dh_total tc, dc += dh_total o (1 - tc^2), di = dc g,
// df = dc c_{t-1}, dg = dc i, each times its activation's derivative; dc *= f.
// With `lengths` (else null): a row past its end at step t gets zero dgates and keeps dc
// and dh; a row inside its sequence reads dh, then zeroes it for the step's GEMM to add
// dgates_t w_hh to (see tensorfit_core::seq_lengths).
extern "C" __global__ void lstm_backward_cell(const float* gates_t, const float* c_t,
                                              const float* c_prev, const float* dy_t,
                                              float* dh, float* dc, float* dgates_t,
                                              const float* lengths, int t, int batch,
                                              int hidden) {
    i64 n = (i64)batch * hidden;
    GRID_STRIDE(idx, n) {
        auto [r, j] = unit_of(idx, hidden);
        const float* g = gates_t + (i64)r * 4 * hidden;
        float* d = dgates_t + (i64)r * 4 * hidden;
        if (lengths != nullptr && (float)t >= lengths[r]) {
            d[j] = d[hidden + j] = d[2 * hidden + j] = d[3 * hidden + j] = 0.0f;
            continue;
        }
        float ig = g[j], fg = g[hidden + j], gg = g[2 * hidden + j], og = g[3 * hidden + j];
        float tc = tanhf(c_t[idx]);
        float dh_total = dy_t[idx] + dh[idx];
        float dct = dc[idx] + dh_total * og * (1.0f - tc * tc);
        d[j] = dct * gg * ig * (1.0f - ig);
        d[hidden + j] = dct * c_prev[idx] * fg * (1.0f - fg);
        d[2 * hidden + j] = dct * ig * (1.0f - gg * gg);
        d[3 * hidden + j] = dh_total * tc * og * (1.0f - og);
        dc[idx] = dct * fg;
        if (lengths != nullptr) dh[idx] = 0.0f;
    }
}
