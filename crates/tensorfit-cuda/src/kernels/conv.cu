// The columns of a 1-D convolution over time and their gradient: `unfold_time` and
// `fold_time`, mirroring tensorfit-cpu's kernels/conv.rs. One thread per element written
// (no atomics), grid-stride. Output step t's tap k reads step s = t - left + k·dilation;
// the host keeps steps + (kernel - 1)·dilation within `int`.

// The steps of row b: `steps` when `lengths` is null, else its length when it is in
// 1..=steps, and 0 otherwise (an empty row's rule, as pool.cu's): a kernel cannot refuse
// a bad length, and must not read outside its input.
__device__ __forceinline__ int conv_length(const float* lengths, int b, int steps) {
    if (lengths == nullptr) return steps;
    float l = lengths[b];
    return (l >= 1.0f && l <= (float)steps) ? (int)l : 0;
}

// cols[t, b, c·K + k] = x[t - left + k·dilation, b, c] for t < L and that step in 0..L,
// else 0; x [steps, batch, channels], cols [steps, batch, channels·kernel].
extern "C" __global__ void unfold_time(const float* x, const float* lengths, float* cols,
                                       int steps, int batch, int channels, int kernel,
                                       int dilation, int left) {
    i64 width = (i64)channels * kernel;
    GRID_STRIDE(idx, (i64)steps * batch * width) {
        i64 row = idx / width;
        int j = (int)(idx - row * width);
        int t = (int)(row / batch);
        int b = (int)(row - (i64)t * batch);
        int c = j / kernel;
        int k = j - c * kernel;
        int len = conv_length(lengths, b, steps);
        int s = t - left + k * dilation;
        cols[idx] = (t < len && s >= 0 && s < len) ? x[((i64)s * batch + b) * channels + c] : 0.0f;
    }
}

// dx[s, b, c] = Σ_k dcols[t, b, c·K + k] over the taps whose step t = s + left - k·dilation
// lies in 0..L, in tap order from 0; 0 for s ≥ L.
extern "C" __global__ void fold_time(const float* dcols, const float* lengths, float* dx,
                                     int steps, int batch, int channels, int kernel,
                                     int dilation, int left) {
    i64 width = (i64)channels * kernel;
    GRID_STRIDE(idx, (i64)steps * batch * channels) {
        i64 row = idx / channels;
        int c = (int)(idx - row * channels);
        int s = (int)(row / batch);
        int b = (int)(row - (i64)s * batch);
        int len = conv_length(lengths, b, steps);
        float sum = 0.0f;
        if (s < len) {
            for (int k = 0; k < kernel; ++k) {
                int t = s + left - k * dilation;
                if (t >= 0 && t < len) sum += dcols[((i64)t * batch + b) * width + (i64)c * kernel + k];
            }
        }
        dx[idx] = sum;
    }
}
