// Batch normalisation over the batch of x [B, C]: `batchnorm_forward_stats`,
// `batchnorm_forward_apply`, `batchnorm_backward`, `batchnorm_stats_update`.
//
// The reductions run one thread per channel, walking the rows: consecutive threads read
// consecutive channels of a row, so the loads are coalesced, and each channel's sum is a
// plain sequential loop in double precision, as the CPU reference's backward is (its
// result is a difference of nearly equal terms). The batch is small in this op set
// (it is the minibatch), so one pass per channel is cheap next to the LSTM.

// Training: the batch mean and the biased batch variance (two passes, mean first).
extern "C" __global__ void batchnorm_forward_stats(const float* x, float* mean, float* var,
                                                   int batch, int channels) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= channels) return;
    double s = 0.0;
    for (int r = 0; r < batch; ++r) s += x[(i64)r * channels + c];
    float m = (float)(s / batch);
    double v = 0.0;
    for (int r = 0; r < batch; ++r) {
        double d = (double)x[(i64)r * channels + c] - m;
        v += d * d;
    }
    mean[c] = m;
    var[c] = (float)(v / batch);
}

// y = (x - mean) / sqrt(var + eps) * gamma + beta, with batch or running statistics.
extern "C" __global__ void batchnorm_forward_apply(const float* x, const float* gamma,
                                                   const float* beta, const float* mean,
                                                   const float* var, float* y, float eps,
                                                   i64 n, int channels) {
    GRID_STRIDE(i, n) {
        int c = (int)(i % channels);
        float inv_std = 1.0f / sqrtf(var[c] + eps);
        y[i] = (x[i] - mean[c]) * inv_std * gamma[c] + beta[c];
    }
}

// dbeta = sum dy, dgamma = sum dy x_hat, and
// training:  dx = gamma inv_std / B (B dy - sum dy - x_hat sum dy x_hat);
// inference: dx = dy gamma inv_std.
extern "C" __global__ void batchnorm_backward(const float* x, const float* gamma,
                                              const float* mean, const float* var,
                                              const float* dy, float* dx, float* dgamma,
                                              float* dbeta, float eps, int training,
                                              int batch, int channels) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= channels) return;
    double inv_std = 1.0 / sqrt((double)var[c] + (double)eps);
    double m = mean[c];
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int r = 0; r < batch; ++r) {
        i64 k = (i64)r * channels + c;
        double d = dy[k];
        sum_dy += d;
        sum_dy_xhat += d * ((x[k] - m) * inv_std);
    }
    dgamma[c] = (float)sum_dy_xhat;
    dbeta[c] = (float)sum_dy;
    double g = gamma[c];
    double b = batch;
    for (int r = 0; r < batch; ++r) {
        i64 k = (i64)r * channels + c;
        double d = dy[k];
        if (training) {
            double x_hat = (x[k] - m) * inv_std;
            dx[k] = (float)(g * inv_std / b * (b * d - sum_dy - x_hat * sum_dy_xhat));
        } else {
            dx[k] = (float)(d * g * inv_std);
        }
    }
}

// Update op: running = (1 - momentum) running + momentum stat, the variance unbiased first.
extern "C" __global__ void batchnorm_stats_update(const float* mean, const float* var,
                                                  float* running_mean, float* running_var,
                                                  float momentum, float unbias, i64 n) {
    GRID_STRIDE(i, n) {
        running_mean[i] = (1.0f - momentum) * running_mean[i] + momentum * mean[i];
        running_var[i] = (1.0f - momentum) * running_var[i] + momentum * var[i] * unbias;
    }
}
