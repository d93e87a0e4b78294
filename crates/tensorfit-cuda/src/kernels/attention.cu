// Multi-head scaled dot-product self-attention, mirroring tensorfit-cpu's
// kernels/attention.rs (and wgpu's shaders/attention.wgsl, which the host builds the ops
// from the same way): attention_dot (the raw scores q·kᵀ, and the weights' gradient
// dout·vᵀ), attention_softmax (each row of scores in place, masked), attention_rowsum
// (each query row's r = Σ_j p·dp) and attention_mix (a weighted sum over steps: the mix
// p·v, its gradient pᵀ·dout, and the scores' gradients ds·k, dsᵀ·q with
// ds = p ∘ (dp − r) formed on the fly). One thread per element written, grid-stride.
//
// Per head, a [T, B, D] tensor is [T, P, Dh] (P = B·heads pairs, pair p = b·heads + h):
// element (t, p, f) at (t·P + p)·Dh + f; the weights [B, heads, T, T] are [P, T, T]:
// element (p, i, j) at (p·T + i)·T + j.

// The keys 0..n query i attends to in a row whose length is `lengths[b]` (all `steps`
// when `lengths` is null): the length when it is in 1..=steps, else 0 (a kernel cannot
// refuse a bad length), and at most i + 1 when `causal`.
__device__ __forceinline__ int attention_keys(const float* lengths, int b, int steps,
                                              int causal, int i) {
    int n = steps;
    if (lengths != nullptr) {
        float l = lengths[b];
        n = (l >= 1.0f && l <= (float)steps) ? (int)l : 0;
    }
    return causal ? min(n, i + 1) : n;
}

// out[p, i, j] = Σ_f a[i, p, f] · b[j, p, f].
extern "C" __global__ void attention_dot(const float* a, const float* b, float* out,
                                         int pairs, int steps, int dh) {
    GRID_STRIDE(idx, (i64)pairs * steps * steps) {
        i64 row = idx / steps;
        int j = (int)(idx - row * steps);
        int p = (int)(row / steps);
        int i = (int)(row - (i64)p * steps);
        const float* x = a + ((i64)i * pairs + p) * dh;
        const float* y = b + ((i64)j * pairs + p) * dh;
        float sum = 0.0f;
        for (int f = 0; f < dh; ++f) sum = fmaf(x[f], y[f], sum);
        out[idx] = sum;
    }
}

// Each row of raw scores in place: the softmax over its keys j < n of
// (s_j - max)·scale, summed in key order; 0 for j >= n, a row of no keys all 0.
extern "C" __global__ void attention_softmax(const float* lengths, float* probs, int pairs,
                                             int steps, int heads, float scale, int causal) {
    GRID_STRIDE(r, (i64)pairs * steps) {
        int p = (int)(r / steps);
        int i = (int)(r - (i64)p * steps);
        int n = attention_keys(lengths, p / heads, steps, causal, i);
        float* row = probs + r * steps;
        float top = n > 0 ? row[0] : 0.0f;
        for (int j = 1; j < n; ++j) top = fmaxf(top, row[j]);
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) {
            float e = expf((row[j] - top) * scale);
            row[j] = e;
            sum += e;
        }
        for (int j = 0; j < steps; ++j) row[j] = j < n ? row[j] / sum : 0.0f;
    }
}

// rsum[(i·P + p)·Dh] = Σ_j probs[p, i, j] · dprobs[p, i, j]: the first feature of the
// pair's head at step i of a [T, P, Dh] tensor (the scores' backward keeps it in dq until
// dk is done).
extern "C" __global__ void attention_rowsum(const float* probs, const float* dprobs,
                                            float* rsum, int pairs, int steps, int dh) {
    GRID_STRIDE(r, (i64)pairs * steps) {
        int p = (int)(r / steps);
        int i = (int)(r - (i64)p * steps);
        float sum = 0.0f;
        for (int j = 0; j < steps; ++j) sum = fmaf(probs[r * steps + j], dprobs[r * steps + j], sum);
        rsum[((i64)i * pairs + p) * dh] = sum;
    }
}

// out[t, p, f] = alpha · Σ_s w · x[s, p, f] over every step s, where w is probs[p, t, s]
// (`transposed` 0) or probs[p, s, t] (1); with `grad`, w·(dprobs − r) at the same
// element, r the rowsum of its query row (t: recomputed over the row; s: read from rsum,
// see attention_rowsum). dprobs and rsum are read only with `grad` (rsum only
// transposed).
extern "C" __global__ void attention_mix(const float* probs, const float* dprobs,
                                         const float* rsum, const float* x, float* out,
                                         int pairs, int steps, int dh, int grad,
                                         int transposed, float alpha) {
    GRID_STRIDE(idx, (i64)steps * pairs * dh) {
        i64 head = idx / dh;
        int f = (int)(idx - head * dh);
        int t = (int)(head / pairs);
        int p = (int)(head - (i64)t * pairs);
        i64 block = (i64)p * steps * steps;
        float rt = 0.0f;
        if (grad && !transposed) {
            i64 row = block + (i64)t * steps;
            for (int j = 0; j < steps; ++j) rt = fmaf(probs[row + j], dprobs[row + j], rt);
        }
        float sum = 0.0f;
        for (int s = 0; s < steps; ++s) {
            i64 at = transposed ? block + (i64)s * steps + t : block + (i64)t * steps + s;
            float w = probs[at];
            if (grad) {
                float r = transposed ? rsum[((i64)s * pairs + p) * dh] : rt;
                w = w * (dprobs[at] - r);
            }
            sum = fmaf(w, x[((i64)s * pairs + p) * dh + f], sum);
        }
        out[idx] = alpha * sum;
    }
}
