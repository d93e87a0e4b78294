// Mean squared error, PyTorch's nn.MSELoss() (the mean over every element), mirroring
// tensorfit-cpu's kernels/mse.rs: `mse_loss_forward` (one block) and `mse_loss_backward`.

// loss[0] = mean of (pred - target)^2 over n elements, by one block of 256 threads:
// strided double sums, then block_sum_256.
extern "C" __global__ void mse_loss_forward(const float* pred, const float* target,
                                            float* loss, i64 n) {
    double s = 0.0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        double d = (double)pred[i] - (double)target[i];
        s += d * d;
    }
    double total = block_sum_256(s);
    if (threadIdx.x == 0) {
        loss[0] = (float)(total / (double)n);
    }
}

// dpred = 2 (pred - target) * dloss / n.
extern "C" __global__ void mse_loss_backward(const float* pred, const float* target,
                                             const float* dloss, float* dpred, i64 n) {
    float scale = 2.0f * dloss[0] / (float)n;
    GRID_STRIDE(i, n) {
        dpred[i] = (pred[i] - target[i]) * scale;
    }
}
