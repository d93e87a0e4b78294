// Layer normalisation over the features of each row of x [rows, F]: `layernorm_forward`,
// `layernorm_backward_dx`, `layernorm_backward_sums`.
//
// The forward and dx run one thread per row, walking its features (a head's rows are few
// and short next to the LSTM); the parameter gradients one thread per feature, walking
// the rows so that consecutive threads read consecutive features. Sums are in double
// precision, as the backward's are a difference of nearly equal terms.

// y = (x - mean) * rstd * gamma + beta, with each row's mean and rstd = 1/sqrt(var + eps)
// (biased variance, two passes).
extern "C" __global__ void layernorm_forward(const float* x, const float* gamma,
                                             const float* beta, float* y, float* mean,
                                             float* rstd, float eps, int rows, int features) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (i64)r * features;
    double s = 0.0;
    for (int c = 0; c < features; ++c) s += xr[c];
    float m = (float)(s / features);
    double v = 0.0;
    for (int c = 0; c < features; ++c) {
        double d = (double)xr[c] - m;
        v += d * d;
    }
    float inv = (float)(1.0 / sqrt(v / features + (double)eps));
    mean[r] = m;
    rstd[r] = inv;
    float* yr = y + (i64)r * features;
    for (int c = 0; c < features; ++c) yr[c] = (xr[c] - m) * inv * gamma[c] + beta[c];
}

// dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)) per row, g = dy * gamma.
extern "C" __global__ void layernorm_backward_dx(const float* x, const float* gamma,
                                                 const float* mean, const float* rstd,
                                                 const float* dy, float* dx, int rows,
                                                 int features) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    i64 row = (i64)r * features;
    double m = mean[r], inv = rstd[r];
    double g_mean = 0.0, gx_mean = 0.0;
    for (int c = 0; c < features; ++c) {
        double g = (double)dy[row + c] * gamma[c];
        g_mean += g;
        gx_mean += g * ((x[row + c] - m) * inv);
    }
    g_mean /= features;
    gx_mean /= features;
    for (int c = 0; c < features; ++c) {
        double g = (double)dy[row + c] * gamma[c];
        double x_hat = (x[row + c] - m) * inv;
        dx[row + c] = (float)(inv * (g - g_mean - x_hat * gx_mean));
    }
}

// dbeta = sum over rows of dy, dgamma = sum over rows of dy * x_hat.
extern "C" __global__ void layernorm_backward_sums(const float* x, const float* mean,
                                                   const float* rstd, const float* dy,
                                                   float* dgamma, float* dbeta, int rows,
                                                   int features) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= features) return;
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int r = 0; r < rows; ++r) {
        i64 k = (i64)r * features + c;
        double d = dy[k];
        sum_dy += d;
        sum_dy_xhat += d * (((double)x[k] - mean[r]) * rstd[r]);
    }
    dgamma[c] = (float)sum_dy_xhat;
    dbeta[c] = (float)sum_dy;
}
