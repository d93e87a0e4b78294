//! Without any Vulkan driver, opening the backend is an error that says why, never a
//! panic. The Vulkan loader is pointed at a driver list that does not exist, so this
//! runs the same on a machine with a GPU.

use tensorfit_wgpu::WgpuBackend;

#[test]
fn no_driver_is_an_error_not_a_panic() {
    // This binary has only this test, so no other thread reads the environment.
    for var in ["VK_ICD_FILENAMES", "VK_DRIVER_FILES"] {
        std::env::set_var(var, "/nonexistent/tensorfit-no-driver.json");
    }
    std::env::set_var("WGPU_BACKEND", "vulkan");
    match WgpuBackend::new() {
        Ok(b) => panic!("opened {b:?} without a driver"),
        Err(e) => {
            println!("wgpu without a driver: {e}");
            assert!(e.to_string().contains("no GPU adapter"), "{e}");
        }
    }
    assert!(WgpuBackend::adapters().is_empty());
}
