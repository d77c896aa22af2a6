//! Files outside the root that a command names or makes: `--file` input, standard input,
//! scratch folders for `demo`/`replay`, a fixture's starting tree, the host and boot ids.

/// This machine's host name (for `.owner` records), or `localhost`.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

pub use crate::engine::Capped;

/// Read a file a user named on the command line (`--file`, `validate`): symlinks, FIFOs,
/// devices and folders are refused before anything is read (FS_RULES 12).
pub fn read_input_file(path: &std::path::Path) -> crate::error::Result<Vec<u8>> {
    atomic_read(path).map_err(|e| input_error(path, e))
}

/// `read_input_file` reading at most `cap + 1` bytes: a huge file is never read whole.
pub fn read_input_file_capped(path: &std::path::Path, cap: usize) -> crate::error::Result<Capped> {
    super::atomic::read_regular_capped(path, cap)
        .map(|(bytes, len)| Capped { bytes, size: Some(len) })
        .map_err(|e| input_error(path, e))
}

fn input_error(path: &std::path::Path, e: std::io::Error) -> crate::error::Error {
    use crate::error::Error;
    match (e.kind(), e.raw_os_error()) {
        (std::io::ErrorKind::NotFound, _) => {
            let e = Error::not_found(format!("no file {}", path.display()));
            if path.is_relative() {
                let here =
                    std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default();
                return e.hint(format!("a relative path is read from the current folder ({here})"));
            }
            match path.parent().filter(|p| !p.as_os_str().is_empty()) {
                Some(dir) if dir.is_dir() => {
                    e.hint(format!("check the name: `ls {}` lists that folder", dir.display()))
                }
                Some(dir) => e.hint(format!("its folder {} does not exist either", dir.display())),
                None => e,
            }
        }
        (_, Some(40)) => Error::refused(format!(
            "{} is a symbolic link; circe does not follow links",
            path.display()
        ))
        .hint("pass the path of the file itself"),
        (std::io::ErrorKind::InvalidInput, _) => {
            Error::refused(format!("{} is not a regular file", path.display()))
                .hint("FIFOs, devices and folders are refused; write the text to a regular file and pass that")
        }
        _ => Error::io("cannot read", path, e),
    }
}

fn atomic_read(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    super::atomic::read_regular(path)
}

/// A fresh folder under the system temp dir (`circe demo`, `circe replay`), removed when
/// dropped unless `keep` was called.
pub struct ScratchDir {
    path: std::path::PathBuf,
    keep: bool,
}

impl ScratchDir {
    pub fn new(prefix: &str) -> crate::error::Result<ScratchDir> {
        let path = std::env::temp_dir().join(format!("{prefix}-{}", crate::clock::random_suffix()));
        std::fs::create_dir(&path)
            .map_err(|e| crate::error::Error::io("cannot create", &path, e))?;
        Ok(ScratchDir { path, keep: false })
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    pub fn keep(&mut self) {
        self.keep = true;
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Copy a fixture's starting tree into `dest` (regular files and folders only; links and
/// anything else are skipped).
pub fn copy_tree(src: &std::path::Path, dest: &std::path::Path) -> crate::error::Result<()> {
    use crate::error::Error;
    for entry in std::fs::read_dir(src).map_err(|e| Error::io("cannot list", src, e))? {
        let entry = entry.map_err(|e| Error::io("cannot list", src, e))?;
        let ty = entry.file_type().map_err(|e| Error::io("cannot stat", entry.path(), e))?;
        let to = dest.join(entry.file_name());
        if ty.is_dir() {
            std::fs::create_dir_all(&to).map_err(|e| Error::io("cannot create", &to, e))?;
            copy_tree(&entry.path(), &to)?;
        } else if ty.is_file() {
            std::fs::copy(entry.path(), &to).map_err(|e| Error::io("cannot copy to", &to, e))?;
        }
    }
    Ok(())
}

/// Read standard input up to `cap + 1` bytes (`send --file -`): a stream without end is
/// cut there, never read whole.
pub fn read_stdin_capped(cap: usize) -> crate::error::Result<Capped> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let max = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    std::io::stdin()
        .lock()
        .take(max)
        .read_to_end(&mut bytes)
        .map_err(|e| crate::error::Error::io("cannot read", "standard input", e))?;
    Ok(Capped { bytes, size: None })
}

/// This boot's id: derived files that are not fsynced are rebuilt after a reboot.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// A small private text file of the user's (the database password file); `None` when
/// unreadable, or (as libpq does) when group or others may read it, with a warning.
pub fn read_small_file(path: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let m = std::fs::metadata(path).ok()?;
    if m.permissions().mode() & 0o077 != 0 {
        // Said once a process, however many connections look for a password.
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            crate::error::warn(&format!(
                "password file {} has group or world access and is not used; `chmod 600` it",
                path.display()
            ));
        });
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// Where `path` lies once every link in the part of it that exists is resolved (the rest
/// appended as written): to tell whether a folder about to be made lies inside another.
pub fn resolved(path: &std::path::Path) -> std::path::PathBuf {
    use std::path::{Component, PathBuf};
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let parts: Vec<Component<'_>> = abs.components().collect();
    // The longest part that exists, with its links resolved; what does not exist yet holds
    // no link: its `..` and `.` are read as written.
    for k in (1..=parts.len()).rev() {
        let Ok(real) = std::fs::canonicalize(parts[..k].iter().collect::<PathBuf>()) else {
            continue;
        };
        return parts[k..].iter().fold(real, |mut p, c| {
            match c {
                Component::ParentDir => {
                    p.pop();
                }
                Component::CurDir => {}
                c => p.push(c),
            }
            p
        });
    }
    abs
}

/// What stands at `path` (links not followed): `Some(true)` a folder, `Some(false)` anything
/// else, `None` nothing.
pub fn is_folder(path: &std::path::Path) -> Option<bool> {
    std::fs::symlink_metadata(path).ok().map(|m| m.is_dir())
}

/// What stands at `path` when it is neither a plain file nor a folder (a link is not
/// followed): `a device` (`/dev/null`), `a pipe`, `a socket`; `None` for a file, a folder,
/// a link or nothing.
pub fn special_file(path: &std::path::Path) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::symlink_metadata(path).ok()?.file_type();
    if t.is_char_device() || t.is_block_device() {
        Some("a device")
    } else if t.is_fifo() {
        Some("a pipe")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        None
    }
}

/// `dir` is a folder, or can be made one: no file stands on its path. A file there is the
/// caller's mistake, said as such (exit 2), not an I/O error.
pub fn folder_can_be(dir: &std::path::Path) -> crate::error::Result<()> {
    let mut at = Some(dir);
    while let Some(p) = at {
        if let Ok(m) = std::fs::symlink_metadata(p) {
            if !p.is_dir() {
                let what = if m.file_type().is_symlink() { "a link" } else { "a file" };
                return Err(crate::error::Error::usage(format!(
                    "{} is {what}, not a folder",
                    p.display()
                ))
                .hint(format!("name a folder (made when missing) for {}", dir.display())));
            }
            return Ok(());
        }
        at = p.parent();
    }
    Ok(())
}

/// Make folder `dir` (and what leads to it) when missing (`folder_can_be` first).
pub fn make_folder(dir: &std::path::Path) -> crate::error::Result<()> {
    folder_can_be(dir)?;
    std::fs::create_dir_all(dir).map_err(super::root::io_err("cannot create", dir))
}
