//! Store paths shared by the benchmark commands.

use std::path::Path;

/// Removes the store at `path` so a benchmark starts empty: a directory's volume file, or the
/// volume file itself. Nothing else is deleted; a block device is refused. `tool` names the
/// command in the error.
pub fn destroy(path: &Path, tool: &str) -> Result<(), Box<dyn std::error::Error>> {
    let target =
        if path.is_dir() { path.join(shale_space::VOLUME_FILE_NAME) } else { path.to_path_buf() };
    match std::fs::metadata(&target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
        Ok(m) if m.is_file() => Ok(std::fs::remove_file(&target)?),
        Ok(_) => Err(format!(
            "--db {} is not a directory or volume file; {tool} only empties those \
             (pass --use_existing_db to keep it)",
            path.display()
        )
        .into()),
    }
}
