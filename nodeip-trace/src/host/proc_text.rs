//! Small `/proc` files read in as few system calls as the kernel allows. `std::fs::read_to_string`
//! asks the size first (`statx`, which says 0 for `/proc` files) and then reads in growing
//! steps from 32 bytes, so a 2 KiB `maps` took ten calls; the tracer reads such files at
//! every exec of the node, so this reads into one page-sized buffer: open, read, read (the
//! end), close.
use std::io::Read as _;
use std::path::Path;

/// Bytes asked for by the first read: a page, what the kernel's seq_file fills at once.
const FIRST_READ: usize = 4096;

/// The text of `path` (lossy UTF-8), read to its end.
pub fn read(path: impl AsRef<Path>) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; FIRST_READ];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(len);
    Ok(String::from_utf8(buf)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::read;

    #[test]
    fn a_proc_file_longer_than_a_page_is_read_whole() {
        let maps = read("/proc/self/maps").expect("own maps");
        assert!(maps.ends_with('\n'), "{maps}");
        let big = std::env::temp_dir().join(format!("nit-proc-text-{}", std::process::id()));
        let text = "x".repeat(3 * 4096 + 17);
        std::fs::write(&big, &text).unwrap();
        assert_eq!(read(&big).unwrap(), text);
        std::fs::remove_file(&big).unwrap();
        assert_eq!(
            read("/proc/self/nonexistent").unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
    }
}
