// SGD and gradient clipping with PyTorch's formulas, mirroring tensorfit-cpu's
// kernels/optim.rs: `sgd_update` (one thread per parameter; lr and the gradient's weight
// in the buffer arrive as scalars[0], scalars[1], written by the host each step),
// `sum_squares` (one block) and `clip_grad`.

extern "C" __global__ void sgd_update(const float* grad, const float* scalars, float* param,
                                      float* buf, i64 n, float momentum, int nesterov,
                                      float weight_decay) {
    float lr = scalars[0];
    float weight = scalars[1];
    GRID_STRIDE(i, n) {
        float g = grad[i] + weight_decay * param[i];
        float b = momentum * buf[i] + weight * g;
        buf[i] = b;
        float d = nesterov ? g + momentum * b : b;
        param[i] -= lr * d;
    }
}

// total[0] = sum of x^2, by one block of 256 threads: strided double sums, then
// block_sum_256.
extern "C" __global__ void sum_squares(const float* x, float* total, i64 n) {
    double s = 0.0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        double v = x[i];
        s += v * v;
    }
    double sum = block_sum_256(s);
    if (threadIdx.x == 0) {
        total[0] = (float)sum;
    }
}

// y = clamp(x * min(1, max_norm / (sqrt(total_sq) + 1e-6)), -value, value); a limit of
// +inf is no limit (fminf/fmaxf with infinities are exact).
extern "C" __global__ void clip_grad(const float* x, const float* total_sq, float* y, i64 n,
                                     float max_norm, float value) {
    float factor = fminf(1.0f, max_norm / (sqrtf(total_sq[0]) + 1e-6f));
    GRID_STRIDE(i, n) {
        y[i] = fminf(fmaxf(x[i] * factor, -value), value);
    }
}
