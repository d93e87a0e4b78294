// Token vectors of a table picked by ids, and their scatter-add: nn.Embedding, and the
// input projection of a recurrent layer on token input (a column of w_ih per token),
// mirroring tensorfit-cpu's kernels/gather.rs. Element e of token v's vector lies at
// v * v_stride + e * e_stride of the table (a row of [V, E] or a column of [E, V]); the
// other side is [n, width]. An id that is not a whole number in [0, vocab) reads nothing:
// it gives zeros (gather) or is skipped (scatter_add), and its position is left in the
// status word (see common.cuh), which the backend reports as an error.

__device__ __forceinline__ int token_of(float id, int vocab) {
    return (id >= 0.0f && id < (float)vocab && floorf(id) == id) ? (int)id : -1;
}

// out[r, e] = table's element e of token ids[r].
extern "C" __global__ void gather(const float* table, const float* ids, float* out, int* status,
                                  i64 n, int width, int vocab, i64 v_stride, i64 e_stride) {
    GRID_STRIDE(idx, n * width) {
        i64 r = idx / width;
        i64 e = idx - r * width;
        int v = token_of(ids[r], vocab);
        if (v < 0) {
            out[idx] = 0.0f;
            if (e == 0) report(status, STATUS_BAD_TOKEN, (int)r);
        } else {
            out[idx] = table[v * v_stride + e * e_stride];
        }
    }
}

// table's element e of token ids[r] += dout[r, e] over a zeroed table: one thread per e,
// over the ids in order, so every element sums in the order of r (deterministic).
extern "C" __global__ void scatter_add(float* table, const float* ids, const float* dout,
                                       int* status, i64 n, int width, int vocab, i64 v_stride,
                                       i64 e_stride) {
    GRID_STRIDE(e, (i64)width) {
        for (i64 r = 0; r < n; ++r) {
            int v = token_of(ids[r], vocab);
            if (v >= 0) {
                table[v * v_stride + e * e_stride] += dout[r * width + e];
            } else if (e == 0) {
                report(status, STATUS_BAD_TOKEN, (int)r);
            }
        }
    }
}

// Each row's own step of a padded batch (see tensorfit_core::seq_lengths::step_at): row b
// of a [steps, batch, width] sequence at step min(t, L - 1), L = lengths[b] in 1..=steps.
__device__ __forceinline__ i64 step_at(int t, float len, int steps) {
    if (len < 1.0f || len > (float)steps) return -1;
    i64 last = (i64)len - 1;
    return last < t ? last : t;
}

// out[b, :] = x[step_at(b), b, :]; rows of empty sequences are left as they are (h0 for an
// LSTM's h_n; zeros for slice_time, which fills them first).
extern "C" __global__ void gather_steps(const float* lengths, const float* x, float* out, int t,
                                        int steps, int batch, int width) {
    GRID_STRIDE(idx, (i64)batch * width) {
        i64 s = step_at(t, lengths[idx / width], steps);
        if (s >= 0) out[idx] = x[s * batch * width + idx];
    }
}

// The gradient of gather_steps over a zeroed out: out[step_at(b), b, :] = x[b, :].
extern "C" __global__ void scatter_steps(const float* lengths, const float* x, float* out, int t,
                                         int steps, int batch, int width) {
    GRID_STRIDE(idx, (i64)batch * width) {
        i64 s = step_at(t, lengths[idx / width], steps);
        if (s >= 0) out[s * batch * width + idx] = x[idx];
    }
}
