// The ops a bidirectional recurrent layer is built from, which only move values:
// `reverse_time`, and `copy_features` (concat_features and slice_features), mirroring
// tensorfit-cpu's kernels/bidir.rs. One thread per element written, grid-stride.

// y[t, b, :] = x[s, b, :] of [steps, batch, width] sequences, s = L - 1 - t for t < L and
// s = t after (see tensorfit_core::seq_lengths::reversed_step), L = lengths[b], or steps
// for every row when `lengths` is null. A length not in 1..=steps passes its row through
// (an empty row's rule): a kernel cannot refuse it, and must not read outside x.
extern "C" __global__ void reverse_time(const float* x, float* y, const float* lengths,
                                        int steps, int batch, int width) {
    GRID_STRIDE(idx, (i64)steps * batch * width) {
        i64 row = idx / width;
        int f = (int)(idx - row * width);
        int t = (int)(row / batch);
        int b = (int)(row - (i64)t * batch);
        int len = steps;
        if (lengths != nullptr) {
            float l = lengths[b];
            len = (l >= 1.0f && l <= (float)steps) ? (int)l : 0;
        }
        int s = t < len ? len - 1 - t : t;
        y[idx] = x[((i64)s * batch + b) * width + f];
    }
}

// dst[r, dst_col + j] = src[r, src_col + j] for r < rows, j < width, src a [rows, src_ld]
// matrix and dst a [rows, dst_ld] one: concat_features copies each operand into its
// columns of out, slice_features its columns of x into out.
extern "C" __global__ void copy_features(const float* src, float* dst, i64 rows, int width,
                                         int src_ld, int src_col, int dst_ld, int dst_col) {
    GRID_STRIDE(idx, rows * width) {
        i64 r = idx / width;
        int j = (int)(idx - r * width);
        dst[r * dst_ld + dst_col + j] = src[r * src_ld + src_col + j];
    }
}
