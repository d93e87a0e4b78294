// Elementwise kernels: `binary`, `activation_forward`, `activation_backward` and the one
// reduction of the op set, `sum_to_shape`. `fill`, `slice_time`, `scatter_time` and `copy`
// need no kernel: they are driver memsets and device-to-device copies (kernels/elementwise.rs).
//
// Broadcasting is the op set's only kind: `b` is a suffix of `a`'s shape, so it repeats
// every `nb` elements of `a`.

// op: 0 = add, 1 = mul (BinaryOp's order).
extern "C" __global__ void binary(int op, const float* a, const float* b, float* out,
                                  i64 n, i64 nb) {
    GRID_STRIDE(i, n) {
        float x = a[i];
        float y = b[nb == n ? i : i % nb];
        out[i] = op == 0 ? x + y : x * y;
    }
}

// Φ(x), the standard normal distribution function, as 0.5·erfc(-x/√2) (no cancellation
// in its left tail); GELU (PyTorch's exact nn.GELU()) is x·Φ(x), its derivative
// Φ(x) + x·φ(x) with φ(x) = exp(-x²/2)/√(2π).
__device__ __forceinline__ float normal_cdf(float x) {
    return 0.5f * erfcf(-x * 0.70710678f);
}

__device__ __forceinline__ float gelu_derivative(float x) {
    return normal_cdf(x) + x * expf(-0.5f * x * x) * 0.39894228f;
}

// kind: 0 = identity, 1 = relu, 2 = tanh, 3 = sigmoid, 4 = gelu (Activation's order).
extern "C" __global__ void activation_forward(int kind, const float* x, float* y, i64 n) {
    GRID_STRIDE(i, n) {
        float v = x[i];
        float r;
        switch (kind) {
            case 1: r = fmaxf(v, 0.0f); break;
            case 2: r = tanhf(v); break;
            case 3: r = sigmoid_f(v); break;
            case 4: r = v * normal_cdf(v); break;
            default: r = v; break;
        }
        y[i] = r;
    }
}

// dx = dy * f'(x), with f' written in terms of v: the forward output y, or for gelu
// (whose derivative needs it) the input x; the host passes whichever.
extern "C" __global__ void activation_backward(int kind, const float* from, const float* dy,
                                               float* dx, i64 n) {
    GRID_STRIDE(i, n) {
        float v = from[i];
        float d;
        switch (kind) {
            case 1: d = v > 0.0f ? 1.0f : 0.0f; break;
            case 2: d = 1.0f - v * v; break;
            case 3: d = v * (1.0f - v); break;
            case 4: d = gelu_derivative(v); break;
            default: d = 1.0f; break;
        }
        dx[i] = dy[i] * d;
    }
}

// out[j] = sum_i x[i, j] for x [rows, width]. Block (32, 32): 32 columns per block, 32
// lanes striding the rows (coalesced across the columns), then a shared-memory tree over
// the lanes. Deterministic: no atomics. Also the LSTM bias gradient (column sums of dgates).
extern "C" __global__ void sum_to_shape(const float* x, float* out, i64 rows, int width) {
    __shared__ float part[32][33];
    int col = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (col < width) {
        for (i64 r = threadIdx.y; r < rows; r += 32) {
            s += x[r * width + col];
        }
    }
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    for (int stride = 16; stride > 0; stride >>= 1) {
        if (threadIdx.y < stride) {
            part[threadIdx.y][threadIdx.x] += part[threadIdx.y + stride][threadIdx.x];
        }
        __syncthreads();
    }
    if (threadIdx.y == 0 && col < width) {
        out[col] = part[0][threadIdx.x];
    }
}
