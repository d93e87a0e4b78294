//! NVRTC, the run-time compiler: its presence, version and target architectures, and the
//! compilation of one kernel source to PTX.
//!
//! cudarc's safe `compile_ptx` unwraps a few results (the log, the program's destruction)
//! and panics when the library is missing, so this module calls the `result` layer
//! directly after checking that the library and every symbol it uses are present. Every
//! failure is a `String` that says what is wrong, for `tensorfit devices` and the tests.
//!
//! One of the crate's few modules allowed `unsafe` (see `lib.rs`); every block states its
//! invariant in a `// SAFETY:` line.
use std::ffi::{c_char, c_int, CString};

use cudarc::nvrtc::{result, sys};

/// The NVRTC symbols this crate calls, checked before the first call (a missing symbol is
/// a panic inside cudarc, not an error).
const SYMBOLS: &[&str] = &[
    "nvrtcVersion",
    "nvrtcGetNumSupportedArchs",
    "nvrtcGetSupportedArchs",
    "nvrtcCreateProgram",
    "nvrtcCompileProgram",
    "nvrtcGetPTXSize",
    "nvrtcGetPTX",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcDestroyProgram",
];

/// What the NVRTC library on this machine is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvrtcInfo {
    /// (major, minor), such as (13, 0).
    pub version: (i32, i32),
    /// The real architectures it can target, as 10·major + minor (75, 80, 86, 89, 90, ...).
    pub archs: Vec<i32>,
}

/// Checks that NVRTC can be loaded and has every symbol used here, then reads its version
/// and supported architectures.
pub fn info() -> Result<NvrtcInfo, String> {
    // SAFETY: `is_culib_present` only tries to dlopen the candidate library names and
    // drops what it opened; it has no preconditions.
    if !unsafe { sys::is_culib_present() } {
        return Err(
            "no NVRTC library found (libnvrtc.so): install the CUDA toolkit's NVRTC \
                    or put its lib folder on LD_LIBRARY_PATH"
                .into(),
        );
    }
    // SAFETY: the library is present (checked just above), so `culib` opens it instead of
    // panicking; `get` only looks a symbol up, and the pointer is never called here.
    let lib = unsafe { sys::culib() };
    for name in SYMBOLS {
        // SAFETY: as above: a lookup, the typed pointer is dropped unused.
        if unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_err() {
            return Err(format!(
                "the NVRTC library is too old for the bindings (no `{name}`)"
            ));
        }
    }
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: every symbol is present; both pointers are valid for writes.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| format!("nvrtcVersion failed: {e:?}"))?;
    let mut count: c_int = 0;
    // SAFETY: as above.
    unsafe { sys::nvrtcGetNumSupportedArchs(&mut count) }
        .result()
        .map_err(|e| format!("nvrtcGetNumSupportedArchs failed: {e:?}"))?;
    let mut archs = vec![0 as c_int; count.max(0) as usize];
    // SAFETY: `archs` holds exactly the number of entries NVRTC said it will write.
    unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }
        .result()
        .map_err(|e| format!("nvrtcGetSupportedArchs failed: {e:?}"))?;
    archs.sort_unstable();
    Ok(NvrtcInfo {
        version: (major, minor),
        archs,
    })
}

/// Compiles one CUDA C source to PTX for the virtual architecture `compute_{arch}`.
/// `name` appears in NVRTC's messages. The error carries NVRTC's log. Call only after
/// [`info`] succeeded.
pub fn compile(source: &str, name: &str, arch: i32) -> Result<String, String> {
    let src = CString::new(source).map_err(|_| format!("{name}: source contains a NUL byte"))?;
    let cname = CString::new(name).map_err(|_| format!("{name}: name contains a NUL byte"))?;
    let prog = result::create_program(&src, Some(&cname))
        .map_err(|e| format!("{name}: nvrtcCreateProgram failed: {e:?}"))?;
    let options = [
        format!("--gpu-architecture=compute_{arch}"),
        // The reference is IEEE f32: no flush-to-zero, exact division and square root.
        "--ftz=false".to_string(),
        "--prec-div=true".to_string(),
        "--prec-sqrt=true".to_string(),
    ];
    // SAFETY: `prog` was just created from `src`, which outlives it; the options are
    // plain ASCII without NUL bytes (cudarc's CString conversion cannot fail on them).
    let compiled = unsafe { result::compile_program(prog, &options) };
    let out = match compiled {
        Ok(()) => {
            // SAFETY: `prog` compiled successfully and is still alive.
            unsafe { result::get_ptx(prog) }
                .map(|ptx| c_chars_to_string(&ptx))
                .map_err(|e| format!("{name}: nvrtcGetPTX failed: {e:?}"))
        }
        Err(e) => {
            // SAFETY: `prog` is alive; the log exists after a failed compilation.
            let log = unsafe { result::get_program_log(prog) }
                .map(|l| c_chars_to_string(&l))
                .unwrap_or_default();
            Err(format!(
                "{name}: NVRTC failed for compute_{arch} ({e:?}):\n{log}"
            ))
        }
    };
    // SAFETY: `prog` is alive and destroyed exactly once; nothing refers to it afterwards.
    // A failure to destroy leaks a program, which is not worth failing the compile for.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

/// NVRTC's NUL-terminated `char` buffers as a string.
fn c_chars_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The architecture to compile for a device of compute capability `cc`: the device's own
/// if NVRTC supports it, else the newest NVRTC knows below it (PTX for an older virtual
/// architecture runs on newer GPUs: the driver compiles it on load). A device older than
/// everything NVRTC targets is an error naming both, such as the GTX 750's sm_50 under
/// CUDA 13, which starts at sm_75.
pub fn select_arch(cc: (i32, i32), info: &NvrtcInfo) -> Result<i32, String> {
    let want = cc.0 * 10 + cc.1;
    match info.archs.iter().copied().filter(|&a| a <= want).max() {
        Some(a) => Ok(a),
        None => Err(format!(
            "NVRTC {}.{} cannot target sm_{want} (it supports {}): this GPU needs an older CUDA",
            info.version.0,
            info.version.1,
            match (info.archs.first(), info.archs.last()) {
                (Some(lo), Some(hi)) => format!("sm_{lo} to sm_{hi}"),
                _ => "no architecture".to_string(),
            }
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_selection_explains_an_unsupported_gpu() {
        let cuda13 = NvrtcInfo {
            version: (13, 0),
            archs: vec![75, 80, 86, 87, 89, 90, 100, 120],
        };
        assert_eq!(select_arch((9, 0), &cuda13), Ok(90));
        // A newer GPU than NVRTC knows gets the newest PTX, which the driver JIT-compiles.
        assert_eq!(select_arch((12, 1), &cuda13), Ok(120));
        // An in-between capability gets the closest older architecture.
        assert_eq!(select_arch((8, 8), &cuda13), Ok(87));
        let err = select_arch((5, 0), &cuda13).unwrap_err();
        assert!(err.contains("cannot target sm_50"), "{err}");
        assert!(err.contains("sm_75 to sm_120"), "{err}");
    }
}
