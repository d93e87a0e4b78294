// Inverted dropout with the counter-based mask of tensorfit-core's dropout.rs, whose
// `mix32`, `site_key` and `element_bits` the three functions below repeat line for line
// (unsigned 32-bit arithmetic wraps as Rust's wrapping_* do), so the mask is the CPU's bit
// for bit. `key` holds the step's key as two 16-bit halves (exact in f32).

__device__ __forceinline__ unsigned int mix32(unsigned int x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    return x ^ (x >> 16);
}

__device__ __forceinline__ unsigned int site_key(unsigned int key, unsigned int site) {
    return mix32(key ^ mix32(site + 0x9e3779b9u));
}

__device__ __forceinline__ unsigned int element_bits(unsigned int k, unsigned int index) {
    return mix32(mix32(index ^ k) + k);
}

// y[i] = x[i] * m, m = scale where element_bits(site_key(key, site), offset + i) >=
// threshold, else 0 (a product, as on the CPU; the index wraps at 2^32).
extern "C" __global__ void dropout(const float* x, const float* key, float* y, i64 n,
                                   unsigned int site, unsigned int offset,
                                   unsigned int threshold, float scale) {
    unsigned int k = site_key((((unsigned int)key[0]) << 16) | (((unsigned int)key[1]) & 0xffffu), site);
    GRID_STRIDE(i, n) {
        bool kept = element_bits(k, offset + (unsigned int)i) >= threshold;
        y[i] = x[i] * (kept ? scale : 0.0f);
    }
}
