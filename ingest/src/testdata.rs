//! Locates the real sample files in `../shared/data` (beside the repository) for conformance
//! tests. When the folder is absent the tests say so plainly and skip; CI always has it.

use std::path::PathBuf;

/// The path of a file under `shared/data`, or `None` (with a message) when the folder is absent.
pub fn shared_data(relative: &str) -> Option<PathBuf> {
    let root = std::env::var_os("GPULEDGER_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"));
    if !root.is_dir() {
        eprintln!(
            "skipped: conformance data folder {} not found",
            root.display()
        );
        return None;
    }
    let path = root.join(relative);
    assert!(
        path.exists(),
        "{} is missing from the shared data folder",
        path.display()
    );
    Some(path)
}
