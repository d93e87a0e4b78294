// The positions of a sequence: `add_time_rows` (a table of positions added to each step),
// its gradient at the table `sum_batch_to_rows`, and `sinusoids`, mirroring tensorfit-cpu's
// kernels/positions.rs. Sequences are [steps, batch, width], tables [rows, width]. One
// thread per output element, grid-stride throughout.

// out[t, b, c] = x[t, b, c] + table[t, c] over the n elements of x, `step` = batch·width
// of them per step.
extern "C" __global__ void add_time_rows(const float* x, const float* table, float* out,
                                         i64 n, i64 step, int width) {
    GRID_STRIDE(i, n) {
        i64 t = i / step;
        int c = (int)(i % width);
        out[i] = x[i] + table[t * width + c];
    }
}

// dtable[t, c] = Σ_b dout[t, b, c], summed in b order (the CPU's sums), for t < steps;
// 0 for the rows steps..rows.
extern "C" __global__ void sum_batch_to_rows(const float* dout, float* dtable, int steps,
                                             int batch, int width, int rows) {
    GRID_STRIDE(i, (i64)rows * width) {
        i64 t = i / width;
        int c = (int)(i % width);
        float s = 0.0f;
        if (t < steps) {
            for (int b = 0; b < batch; ++b) s += dout[(t * batch + b) * width + c];
        }
        dtable[i] = s;
    }
}

// table[pos, 2i] = sin(pos · w_i), table[pos, 2i + 1] = cos(pos · w_i) over the n
// elements of table [steps, dim]. w_i is the product of f_k for the bits k of i in
// ascending k (the host's tensorfit_core::positions_ops::sinusoid_factors, unused ones
// 1): multiplications alone, as every backend forms it, so the argument f32(pos) · w_i
// is the CPU's bits; sinf and cosf reduce any argument exactly (no fast math here).
#define SINUSOID_FACTORS 16

extern "C" __global__ void sinusoids(float* table, i64 n, int dim,
                                     float f0, float f1, float f2, float f3,
                                     float f4, float f5, float f6, float f7,
                                     float f8, float f9, float f10, float f11,
                                     float f12, float f13, float f14, float f15) {
    const float f[SINUSOID_FACTORS] = {f0, f1, f2,  f3,  f4,  f5,  f6,  f7,
                                       f8, f9, f10, f11, f12, f13, f14, f15};
    GRID_STRIDE(idx, n) {
        i64 pos = idx / dim;
        int j = (int)(idx % dim);
        int i = j / 2;
        float w = 1.0f;
#pragma unroll
        for (int k = 0; k < SINUSOID_FACTORS; ++k) {
            if ((i >> k) & 1) w = w * f[k];
        }
        float a = (float)pos * w;
        table[idx] = (j & 1) ? cosf(a) : sinf(a);
    }
}
