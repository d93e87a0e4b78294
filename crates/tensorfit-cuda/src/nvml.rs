//! NVML, read for one number: the device's free memory *before* this backend creates its
//! context, so that the backend's own overhead (context, cuBLAS workspace, modules) can be
//! measured as a drop in free memory. The CUDA driver cannot say this itself: its
//! `cuMemGetInfo` needs a context, which is part of what is being measured.
//!
//! NVML ships with the NVIDIA driver (`libnvidia-ml.so.1`); where it is missing or fails,
//! the readings are `None` and the backend falls back to what the driver alone can measure
//! (see `CudaBackend`'s documentation). The device is found by its UUID, which is the same
//! in both APIs (NVML's device indices can differ from CUDA's ordinals).
//!
//! One of the crate's few modules allowed `unsafe` (see `lib.rs`); every block states its
//! invariant in a `// SAFETY:` line.
use std::ffi::{c_char, c_int, c_void, CString};

use libloading::Library;

/// NVML's `nvmlMemory_t` (version 1): bytes.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct NvmlMemory {
    total: u64,
    free: u64,
    used: u64,
}

type InitFn = unsafe extern "C" fn() -> c_int;
type ShutdownFn = unsafe extern "C" fn() -> c_int;
type HandleByUuidFn = unsafe extern "C" fn(*const c_char, *mut *mut c_void) -> c_int;
type MemoryInfoFn = unsafe extern "C" fn(*mut c_void, *mut NvmlMemory) -> c_int;

/// NVML's text form of a CUDA device UUID: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub fn uuid_string(bytes: &[u8; 16]) -> String {
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        hex[0..4].concat(),
        hex[4..6].concat(),
        hex[6..8].concat(),
        hex[8..10].concat(),
        hex[10..16].concat()
    )
}

/// Free bytes of the device with this UUID, as NVML reports them now; `None` if NVML is
/// missing or any call fails.
pub fn free_bytes(uuid: &[u8; 16]) -> Option<u64> {
    let name = CString::new(uuid_string(uuid)).ok()?;
    // SAFETY: loading NVML runs its library initialisers, which have no preconditions;
    // the library handle outlives every symbol taken from it below (all used in this
    // function only).
    let lib = unsafe { Library::new("libnvidia-ml.so.1") }.ok()?;
    // SAFETY: the symbol types are NVML's documented C signatures (nvml.h, v2 entry points).
    let (init, shutdown, by_uuid, memory) = unsafe {
        (
            *lib.get::<InitFn>(b"nvmlInit_v2").ok()?,
            *lib.get::<ShutdownFn>(b"nvmlShutdown").ok()?,
            *lib.get::<HandleByUuidFn>(b"nvmlDeviceGetHandleByUUID")
                .ok()?,
            *lib.get::<MemoryInfoFn>(b"nvmlDeviceGetMemoryInfo").ok()?,
        )
    };
    // SAFETY: nvmlInit has no preconditions; every successful init is paired with one
    // shutdown below. The handle is written by NVML before it is used, `name` is a valid
    // NUL-terminated string and `mem` a valid NvmlMemory for NVML to fill.
    unsafe {
        if init() != 0 {
            return None;
        }
        let mut handle: *mut c_void = std::ptr::null_mut();
        let mut mem = NvmlMemory::default();
        let ok = by_uuid(name.as_ptr(), &mut handle) == 0 && memory(handle, &mut mem) == 0;
        shutdown();
        ok.then_some(mem.free)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_text_matches_nvml_format() {
        let b: [u8; 16] = [
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
            0xcd, 0xef,
        ];
        assert_eq!(uuid_string(&b), "GPU-12345678-9abc-def0-0123-456789abcdef");
    }

    #[test]
    fn missing_nvml_is_none_not_a_panic() {
        // On a machine without the NVIDIA driver this is None; with it, the zero UUID
        // matches no device. Either way: no panic.
        assert_eq!(free_bytes(&[0; 16]), None);
    }
}
