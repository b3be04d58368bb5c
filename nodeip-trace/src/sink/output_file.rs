//! Output files as every sink and command opens them: owner-only (0600), copies beside an
//! output that replace it by a rename, and a JSON-lines file cut back to its last whole line
//! after a failed write.

/// Creates (or truncates) an output file readable by its owner only (0600): captures and
/// recordings hold other processes' addresses and requests, and travel to laptops.
pub fn create_private(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    open_private(
        path,
        std::fs::OpenOptions::new().create(true).truncate(true),
    )
}

/// Creates an output file readable by its owner only, failing if anything (a file, a
/// symbolic link) is already at `path`: for copies made beside an output ([`beside`]).
pub fn create_private_new(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    open_private(path, std::fs::OpenOptions::new().create_new(true))
}

/// Opens `path` for writing with `options`, mode 0600 (an existing regular file's mode narrowed
/// too; a device or a FIFO — `-o /dev/null` — keeps its own: narrowing /dev/null's would break
/// every other user's writes to it).
fn open_private(
    path: &std::path::Path,
    options: &mut std::fs::OpenOptions,
) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = options.write(true).mode(0o600).open(path)?;
    // An existing file keeps its mode on open: narrow it too.
    if file.metadata()?.is_file() {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// A hidden file beside `path`, named for this process and `purpose`, that replaces it by a
/// rename (the same directory, so the same file system): `dir/.name.nodeip-trace-PID.purpose`.
pub fn beside(path: &std::path::Path, purpose: &str) -> std::path::PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    path.with_file_name(format!(
        ".{name}.nodeip-trace-{}.{purpose}",
        std::process::id()
    ))
}

/// Cuts a JSON-lines file back to its last complete line (after a failed write, e.g. disk full),
/// so every line in it stays parseable. Only a regular file: a FIFO or a device (`-o
/// /dev/null`, a pipe whose reader went away) is left alone — reading a FIFO the tracer itself
/// still holds open for writing would wait for ever. The file is read backwards from its end,
/// 64 KiB at a time, until a newline: not read whole into memory (a recording runs to GBs).
pub fn cut_to_last_line(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    const CHUNK: u64 = 64 << 10;
    // Looked at before opening: opening a FIFO waits for its other end.
    if !std::fs::metadata(path)?.is_file() {
        return Ok(());
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let len = file.metadata()?.len();
    let mut end = len;
    let mut chunk = vec![0u8; CHUNK as usize];
    let keep = loop {
        if end == 0 {
            break 0;
        }
        let start = end.saturating_sub(CHUNK);
        let piece = &mut chunk[..(end - start) as usize];
        file.read_exact_at(piece, start)?;
        if let Some(at) = piece.iter().rposition(|&b| b == b'\n') {
            break start + at as u64 + 1;
        }
        end = start;
    };
    if keep < len {
        file.set_len(keep)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_is_cut_back_to_its_last_whole_line() {
        let dir = std::env::temp_dir().join(format!("nit-cut-line-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rec.jsonl");
        // The last newline 100 KiB before the end: found across two chunks.
        let mut bytes = b"{\"a\":1}\n{\"b\":2}\n".to_vec();
        let whole = bytes.len();
        bytes.extend(std::iter::repeat_n(b'x', 100 << 10));
        std::fs::write(&path, &bytes).unwrap();
        cut_to_last_line(&path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), &bytes[..whole]);
        // Whole lines stay whole; no line at all is cut to nothing.
        cut_to_last_line(&path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap().len(), whole);
        std::fs::write(&path, b"{\"cut").unwrap();
        cut_to_last_line(&path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Regression: `trace -o /dev/null` narrowed /dev/null to 0600, and other users' writes to
    /// it failed. Only a regular file is narrowed (or cut back); here a FIFO stands for the
    /// device.
    #[test]
    fn outputs_narrow_a_regular_file_but_not_a_device_or_fifo() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("nit-private-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let regular = dir.join("old.jsonl");
        std::fs::write(&regular, b"x").unwrap();
        std::fs::set_permissions(&regular, std::fs::Permissions::from_mode(0o644)).unwrap();
        drop(create_private(&regular).unwrap());
        assert_eq!(mode(&regular), 0o600);
        let fifo = dir.join("fifo");
        let c_fifo = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o666) }, 0);
        std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o666)).unwrap();
        // A reader first, so that opening it for writing does not wait.
        let reader = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo)
                .unwrap()
        };
        let writer = create_private(&fifo).unwrap();
        // Regression: cutting a recording that is a FIFO read it, and waited for ever; with
        // its reader gone, opening it waits for ever too.
        cut_to_last_line(&fifo).unwrap();
        drop(writer);
        drop(reader);
        cut_to_last_line(&fifo).unwrap();
        assert_eq!(mode(&fifo), 0o666, "the FIFO keeps its mode");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
