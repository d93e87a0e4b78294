// Softmax cross-entropy: `softmax_cross_entropy_forward` and `..._backward`.
//
// Labels are class indices stored as f32. A label that is not a whole number in [0, K) is
// bad user data: the kernel records the row in the status word (see common.cuh) and the
// host reports it as an input error at the next synchronize or read, as the CPU reference
// reports it at once. A label of -1 (tensorfit_core::rows::IGNORE_LABEL) marks a row that
// adds no loss and gets a zero gradient.

#define IGNORE_LABEL -1.0f

__device__ __forceinline__ bool class_index(float label, int classes, int* k) {
    // NaN fails every comparison; infinities fail the range test.
    if (label >= 0.0f && label < (float)classes && floorf(label) == label) {
        *k = (int)label;
        return true;
    }
    return false;
}

// One block of 256 threads: each thread takes rows tid, tid + 256, ...; the mean loss is a
// shared-memory tree over the threads' double partial sums, written by thread 0. The batch
// of a classifier head is small, so one block is enough and needs no second pass.
extern "C" __global__ void softmax_cross_entropy_forward(const float* logits,
                                                         const float* labels, float* loss,
                                                         float* probs, int* status, int batch,
                                                         int classes) {
    __shared__ double part[256];
    double total = 0.0;
    for (int r = threadIdx.x; r < batch; r += blockDim.x) {
        const float* x = logits + (i64)r * classes;
        float* p = probs + (i64)r * classes;
        float mx = -__int_as_float(0x7f800000);  // -inf (NVRTC has no math.h macros)
        for (int k = 0; k < classes; ++k) mx = fmaxf(mx, x[k]);
        float sum = 0.0f;
        for (int k = 0; k < classes; ++k) {
            float e = expf(x[k] - mx);
            p[k] = e;
            sum += e;
        }
        for (int k = 0; k < classes; ++k) p[k] /= sum;
        int label;
        if (class_index(labels[r], classes, &label)) {
            total += (double)(logf(sum) - (x[label] - mx));
        } else if (labels[r] != IGNORE_LABEL) {
            report(status, STATUS_BAD_LABEL, r);
        }
    }
    part[threadIdx.x] = total;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) part[threadIdx.x] += part[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) loss[0] = batch > 0 ? (float)(part[0] / batch) : 0.0f;
}

// dlogits = (probs - onehot(labels)) dloss / B (zero on ignored rows), one thread per element.
extern "C" __global__ void softmax_cross_entropy_backward(const float* probs,
                                                          const float* labels,
                                                          const float* dloss, float* dlogits,
                                                          int* status, int batch,
                                                          int classes) {
    i64 n = (i64)batch * classes;
    float scale = dloss[0] / (float)batch;
    GRID_STRIDE(i, n) {
        int r = (int)(i / classes);
        int k = (int)(i - (i64)r * classes);
        int label;
        if (labels[r] == IGNORE_LABEL) {
            dlogits[i] = 0.0f;
            continue;
        }
        if (!class_index(labels[r], classes, &label)) {
            if (k == 0) report(status, STATUS_BAD_LABEL, r);
            label = -1;
        }
        float d = probs[i] * scale;
        dlogits[i] = k == label ? d - scale : d;
    }
}
