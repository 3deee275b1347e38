//! What every verb shares: reading the files it is given, and writing what it reports.

use crate::error::Error;
use std::path::{Path, PathBuf};

pub fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::read(path, e))
}

pub fn read_text(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| Error::read(path, e))
}

/// Pretty JSON, one trailing newline.
pub fn json(value: &impl serde::Serialize) -> Result<String, Error> {
    serde_json::to_string_pretty(value)
        .map(|text| text + "\n")
        .map_err(|e| Error::encode("JSON", e.to_string()))
}

/// Writes `text` to file `name` in folder `dir`, made if missing; the path written.
pub fn write_in(dir: &Path, name: &str, text: &str) -> Result<PathBuf, Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::write(dir, e))?;
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|e| Error::write(&path, e))?;
    Ok(path)
}

/// Writes the verb's output; a reader that stopped early (`| head`) is not an error.
pub fn emit(text: &str) -> Result<(), Error> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::stream("stdout", e)),
        _ => Ok(()),
    }
}

/// This process's peak resident memory (Linux's `VmHWM`), for the closing line of the verbs
/// that read whole clusters: `, peak memory N MiB`, or nothing where the kernel does not say.
pub fn peak_memory() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
    kib.map_or_else(String::new, |kib| {
        format!(", peak memory {} MiB", kib / 1024)
    })
}
