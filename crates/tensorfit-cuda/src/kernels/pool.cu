// Global pooling over time, each sequence over its own steps: `mean_time`, `max_time`
// and their gradients `mean_time_backward`, `max_time_backward`, mirroring tensorfit-cpu's
// kernels/pool.rs. The forwards run one thread per (row, feature) of [batch, width],
// looping over the row's steps in order; the backwards one thread per element of dx,
// each writing only its own, so no value of `at` or of a length can send a write outside
// dx. Grid-stride throughout.

// The steps row b pools: `steps` when `lengths` is null, else its length when it is in
// 1..=steps, and 0 otherwise (an empty row's rule, as reverse_time's): a kernel cannot
// refuse a bad length, and must not read outside x.
__device__ __forceinline__ int pooled_steps(const float* lengths, int b, int steps) {
    if (lengths == nullptr) return steps;
    float l = lengths[b];
    return (l >= 1.0f && l <= (float)steps) ? (int)l : 0;
}

// Whether `v`, seen after `best`, is the new maximum: larger, or the first NaN (a NaN,
// once held, stays), as the CPU's max_time compares.
__device__ __forceinline__ bool replaces(float v, float best) {
    return !isnan(best) && (isnan(v) || v > best);
}

// out[b, f] = (1 / L) Σ_{t < L} x[t, b, f], summed in step order; 0 for L = 0.
extern "C" __global__ void mean_time(const float* x, const float* lengths, float* out,
                                     int steps, int batch, int width) {
    GRID_STRIDE(idx, (i64)batch * width) {
        int b = (int)(idx / width);
        int len = pooled_steps(lengths, b, steps);
        float sum = 0.0f;
        for (int t = 0; t < len; ++t) sum += x[(i64)t * batch * width + idx];
        out[idx] = len > 0 ? sum / (float)len : 0.0f;
    }
}

// out[b, f] = max_{t < L} x[t, b, f], at[b, f] the first step holding it; 0 and -1 for
// L = 0.
extern "C" __global__ void max_time(const float* x, const float* lengths, float* out,
                                    float* at, int steps, int batch, int width) {
    GRID_STRIDE(idx, (i64)batch * width) {
        int b = (int)(idx / width);
        int len = pooled_steps(lengths, b, steps);
        if (len == 0) {
            out[idx] = 0.0f;
            at[idx] = -1.0f;
            continue;
        }
        float best = x[idx];
        int best_at = 0;
        for (int t = 1; t < len; ++t) {
            float v = x[(i64)t * batch * width + idx];
            if (replaces(v, best)) {
                best = v;
                best_at = t;
            }
        }
        out[idx] = best;
        at[idx] = (float)best_at;
    }
}

// dx[t, b, f] = dout[b, f] / L for t < L, else 0.
extern "C" __global__ void mean_time_backward(const float* dout, const float* lengths,
                                              float* dx, int steps, int batch, int width) {
    i64 step = (i64)batch * width;
    GRID_STRIDE(idx, (i64)steps * step) {
        int t = (int)(idx / step);
        i64 k = idx - (i64)t * step;
        int len = pooled_steps(lengths, (int)(k / width), steps);
        dx[idx] = t < len ? dout[k] / (float)len : 0.0f;
    }
}

// dx[t, b, f] = dout[b, f] where at[b, f] = t, else 0: an `at` outside 0..steps (or not
// whole) matches no step.
extern "C" __global__ void max_time_backward(const float* dout, const float* at, float* dx,
                                             int steps, int batch, int width) {
    i64 step = (i64)batch * width;
    GRID_STRIDE(idx, (i64)steps * step) {
        int t = (int)(idx / step);
        i64 k = idx - (i64)t * step;
        dx[idx] = at[k] == (float)t ? dout[k] : 0.0f;
    }
}
