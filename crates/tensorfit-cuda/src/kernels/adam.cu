// The optimizer step, `adam_update`: one Adam step with PyTorch's formula, one thread per
// parameter. The bias corrections arrive folded into scalars[0] = lr / (1 - beta1^t) and
// scalars[1] = sqrt(1 - beta2^t), and AdamW's decay as scalars[2] = 1 - lr * decay,
// written by the host each step, so the kernel needs no step counter and the graph stays
// the same from step to step.
extern "C" __global__ void adam_update(const float* grad, const float* scalars, float* param,
                                       float* m, float* v, i64 n, float beta1, float beta2,
                                       float eps, float weight_decay) {
    float step_size = scalars[0];
    float bias2_sqrt = scalars[1];
    float decay = scalars[2];
    GRID_STRIDE(i, n) {
        float w0 = param[i];
        float g = grad[i] + weight_decay * w0;
        float w = w0 * decay;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        param[i] = w - step_size * mi / (sqrtf(vi) / bias2_sqrt + eps);
    }
}
