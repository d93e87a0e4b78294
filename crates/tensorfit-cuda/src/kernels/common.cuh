// Helpers shared by every kernel source. The Rust side prepends this text to each `.cu`
// file before NVRTC compiles it (one translation unit per file, no include paths needed).
//
// Conventions of every kernel: tensors are f32, row-major and contiguous; element counts
// are 64-bit (`i64`) so that long sequences cannot overflow an index; per-row widths are
// `int` (the host checks they fit). Elementwise kernels use a grid-stride loop, so any
// grid size covers any count.

typedef long long i64;

#define GRID_STRIDE(i, n) \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (i64)blockDim.x * gridDim.x)

// The batch row `r` and the unit `j` of element `idx` of a [batch, hidden] state: what one
// thread of a fused recurrent cell kernel (lstm.cu, gru.cu) computes
// (`auto [r, j] = unit_of(idx, hidden);`).
struct Unit {
    int r, j;
};

__device__ __forceinline__ Unit unit_of(i64 idx, int hidden) {
    int r = (int)(idx / hidden);
    return {r, (int)(idx - (i64)r * hidden)};
}

// The logistic function written as the CPU reference writes it (finite for large |x|).
__device__ __forceinline__ float sigmoid_f(float x) {
    if (x >= 0.0f) {
        return 1.0f / (1.0f + expf(-x));
    }
    float e = expf(x);
    return e / (1.0f + e);
}

// The sum of every thread's `s` over one block of 256 threads, by a tree in shared memory
// (the same order on every call); every thread gets it.
__device__ double block_sum_256(double s) {
    __shared__ double part[256];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int stride = 128; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            part[threadIdx.x] += part[threadIdx.x + stride];
        }
        __syncthreads();
    }
    return part[0];
}

// Error codes a kernel can leave in the backend's status word (status[0]); status[1] holds
// the row. The host reads the word at the next synchronize or read and turns it into an
// error, so bad user data costs no host round trip on the fast path.
#define STATUS_BAD_LABEL 1
#define STATUS_BAD_TOKEN 2

__device__ __forceinline__ void report(int* status, int code, int row) {
    if (atomicCAS(status, 0, code) == 0) {
        status[1] = row;
    }
}
