//! Keeping a Vulkan driver's warnings about the desktop session out of an app's output.

/// Stops Mesa's Vulkan drivers printing "error: XDG_RUNTIME_DIR is invalid or not set in
/// the environment." on every device discovery where the variable is unset (servers,
/// containers, CI): Mesa's device-selection layer looks for a desktop session there.
/// Sets `XDG_RUNTIME_DIR` to a private directory (`tensorfit-runtime-<uid>` in the
/// temporary directory, mode 0700, one per user, reused by every run); does nothing where
/// the variable is set or the directory cannot be made private. The `tensorfit` command
/// calls it first thing.
///
/// It changes the process's environment, so call it at the start of `main`, before any
/// thread exists (another thread reading the environment meanwhile is undefined behaviour
/// in C libraries). tensorfit never calls it on its own: the environment is the app's.
///
/// ```
/// // First thing in `main`, before any thread starts.
/// tensorfit::quiet_mesa();
/// ```
pub fn quiet_mesa() {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
        if std::env::var_os("XDG_RUNTIME_DIR").is_some() {
            return;
        }
        // Linux tells the process its own user through /proc; elsewhere Mesa is rare.
        let Ok(uid) = std::fs::metadata("/proc/self").map(|m| m.uid()) else {
            return;
        };
        let dir = std::env::temp_dir().join(format!("tensorfit-runtime-{uid}"));
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
        // Only a directory of this user's, private, is a runtime directory.
        let private = std::fs::symlink_metadata(&dir)
            .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.permissions().mode() & 0o077 == 0);
        if private {
            std::env::set_var("XDG_RUNTIME_DIR", &dir);
        }
    }
}
