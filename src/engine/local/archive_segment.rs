//! Archive segments on disk: one tar stream compressed with zstd (`<period>.<run>.tar.zst`),
//! readable by `tar --zstd -xf`, and beside it its member list
//! (`<period>.<run>.index.jsonl.zst`, `zstdcat` reads it): one JSON line per member, in tar
//! order, with its size and SHA-256. The only code that knows the tar and zstd crates.
//!
//! Writing streams: a member's bytes go through a SHA-256 as tar reads them, so memory stays
//! flat whatever the sizes. Every write to disk passes the fault hook (`CIRCE_FAIL_IO`), so
//! a failing disk is tested at each step. Reading checks every member's path before anything
//! is done with it: only regular files under the segment's own folder, no `..`, no absolute
//! path, no link.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use super::root::io_err;
use crate::archive::{Entry, segment_stem};
use crate::error::{Error, Result};
use crate::fault::io_step;

/// zstd level: 3 is zstd's own default (fast, and what `tar --zstd` uses).
const LEVEL: i32 = 3;

/// A file whose every write and sync is a store mutation for fault injection, and which
/// counts and hashes what it writes.
struct Sink {
    file: File,
    bytes: u64,
    sha: Sha256,
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        io_step()?;
        let n = self.file.write(buf)?;
        self.bytes += n as u64;
        self.sha.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

fn hex(d: impl AsRef<[u8]>) -> String {
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of `bytes`, as hex.
pub(super) fn sha256(bytes: &[u8]) -> String {
    hex(Sha256::digest(bytes))
}

/// SHA-256 of a whole file, read as a stream (`None` when it is gone).
pub(super) fn sha256_file(path: &Path) -> Result<Option<(String, u64)>> {
    let (f, _) = match super::atomic::open_regular(path) {
        Ok(x) => x,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("cannot read", path, e)),
    };
    let mut r = Hashing { inner: f, sha: Sha256::new(), bytes: 0 };
    io::copy(&mut r, &mut io::sink()).map_err(io_err("cannot read", path))?;
    Ok(Some((hex(r.sha.finalize()), r.bytes)))
}

/// A reader that hashes what passes through it.
struct Hashing<R> {
    inner: R,
    sha: Sha256,
    bytes: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.sha.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

fn create(path: &Path) -> io::Result<File> {
    io_step()?;
    File::options().write(true).create_new(true).open(path)
}

/// A segment being written in the staging folder.
pub(super) struct SegmentWriter {
    tar: tar::Builder<zstd::Encoder<'static, BufWriter<Sink>>>,
    list: zstd::Encoder<'static, BufWriter<Sink>>,
    pub(super) path: PathBuf,
    pub(super) list_path: PathBuf,
    pub(super) stem: String,
    mtime: u64,
}

/// A finished segment: where it is, and its size and checksum.
#[derive(Debug, Clone)]
pub(super) struct Written {
    pub path: PathBuf,
    pub list_path: PathBuf,
    pub bytes: u64,
    pub sha256: String,
}

fn sink(path: &Path) -> Result<BufWriter<Sink>> {
    let file = create(path).map_err(io_err("cannot create", path))?;
    Ok(BufWriter::with_capacity(256 * 1024, Sink { file, bytes: 0, sha: Sha256::new() }))
}

impl SegmentWriter {
    /// Start `<dir>/<name>` (`<period>.<run>.tar.zst`) and its member list.
    pub(super) fn create(dir: &Path, name: &str, mtime: u64) -> Result<SegmentWriter> {
        let path = dir.join(name);
        let stem = segment_stem(name).to_string();
        let list_path = dir.join(format!("{stem}.index.jsonl.zst"));
        let enc =
            zstd::Encoder::new(sink(&path)?, LEVEL).map_err(io_err("cannot compress", &path))?;
        let list = zstd::Encoder::new(sink(&list_path)?, LEVEL)
            .map_err(io_err("cannot compress", &list_path))?;
        let mut tar = tar::Builder::new(enc);
        tar.mode(tar::HeaderMode::Deterministic);
        Ok(SegmentWriter { tar, list, path, list_path, stem, mtime })
    }

    /// Add a member of `size` bytes read from `data` at `<stem>/<rel>`; `entry` gets its
    /// size and checksum and is listed. Returns the listed entry.
    pub(super) fn add(
        &mut self,
        mut entry: Entry,
        rel: &str,
        size: u64,
        data: &mut dyn Read,
    ) -> Result<Entry> {
        entry.member = format!("{}/{rel}", self.stem);
        let mut h = tar::Header::new_gnu();
        h.set_size(size);
        h.set_mode(0o644);
        h.set_mtime(self.mtime);
        h.set_entry_type(tar::EntryType::Regular);
        let mut r = Hashing { inner: data.take(size), sha: Sha256::new(), bytes: 0 };
        self.tar
            .append_data(&mut h, &entry.member, &mut r)
            .map_err(io_err("cannot write", &self.path))?;
        if r.bytes != size {
            return Err(Error::internal(format!(
                "{} changed size while it was archived",
                entry.member
            ))
            .hint("run `circe archive` again"));
        }
        entry.bytes = size;
        entry.sha256 = hex(r.sha.finalize());
        let line = serde_json::to_string(&entry).unwrap_or_default() + "\n";
        self.list.write_all(line.as_bytes()).map_err(io_err("cannot write", &self.list_path))?;
        Ok(entry)
    }

    pub(super) fn add_bytes(&mut self, entry: Entry, rel: &str, bytes: &[u8]) -> Result<Entry> {
        self.add(entry, rel, bytes.len() as u64, &mut &bytes[..])
    }

    /// End the tar and both zstd streams, fsync both files.
    pub(super) fn finish(self) -> Result<Written> {
        let SegmentWriter { tar, list, path, list_path, .. } = self;
        let enc = tar.into_inner().map_err(io_err("cannot write", &path))?;
        let sink = end(enc.finish(), &path)?;
        end(list.finish(), &list_path)?;
        Ok(Written { path, list_path, bytes: sink.bytes, sha256: hex(sink.sha.finalize()) })
    }
}

fn end(w: io::Result<BufWriter<Sink>>, path: &Path) -> Result<Sink> {
    let sink = w
        .and_then(|b| b.into_inner().map_err(io::IntoInnerError::into_error))
        .map_err(io_err("cannot write", path))?;
    io_step().and_then(|()| sink.file.sync_all()).map_err(io_err("cannot sync", path))?;
    Ok(sink)
}

/// The member list of a segment, one entry at a time.
pub(super) struct ListReader {
    lines: io::Lines<BufReader<zstd::Decoder<'static, BufReader<File>>>>,
    path: PathBuf,
}

impl ListReader {
    pub(super) fn open(path: &Path) -> Result<ListReader> {
        let (f, _) = super::atomic::open_regular(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => {
                Error::not_found(format!("no member list {}", path.display()))
            }
            _ => Error::io("cannot read", path, e),
        })?;
        let dec = zstd::Decoder::new(f).map_err(io_err("cannot decompress", path))?;
        Ok(ListReader { lines: BufReader::new(dec).lines(), path: path.to_path_buf() })
    }
}

impl Iterator for ListReader {
    type Item = Result<Entry>;
    fn next(&mut self) -> Option<Result<Entry>> {
        let line = match self.lines.next()? {
            Ok(l) => l,
            Err(e) => return Some(Err(Error::io("cannot read", &self.path, e))),
        };
        Some(serde_json::from_str(&line).map_err(|e| {
            Error::internal(format!("{} holds a line that does not read: {e}", self.path.display()))
                .hint("`circe archive verify` reads every segment and says which are damaged")
        }))
    }
}

/// Check a member's path: `<stem>/<a>/<b>...`, every part a plain name. Returns the part
/// after `<stem>/`.
pub(super) fn safe_member<'a>(stem: &str, member: &'a str) -> Result<&'a str> {
    let bad = || {
        Error::refused(format!("archive member `{member}` has an unsafe path"))
            .hint("a member outside its segment's folder (absolute, `..`, or empty parts) is never written; the segment may have been tampered with")
    };
    let rest = member.strip_prefix(stem).and_then(|r| r.strip_prefix('/')).ok_or_else(bad)?;
    let ok = !rest.is_empty()
        && Path::new(member).components().all(|c| matches!(c, Component::Normal(_)))
        && rest.split('/').all(|p| !p.is_empty() && p != "." && p != "..");
    if ok { Ok(rest) } else { Err(bad()) }
}

/// Read every member of a segment in order: `each(rel, bytes)` gets the path after the
/// segment's folder and the member's bytes (members `want` rejects are skipped unread).
/// Returns the SHA-256 of the whole compressed file.
pub(super) fn read_members(
    path: &Path,
    want: &dyn Fn(&str) -> bool,
    each: &mut dyn FnMut(&str, Vec<u8>) -> Result<bool>,
) -> Result<String> {
    visit_members(path, want, &mut |rel, size, data| {
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        data.read_to_end(&mut bytes).map_err(io_err("cannot read", path))?;
        each(rel, bytes)
    })
}

/// `read_members` as streams: `each(rel, size, data)` reads the member from `data` (a
/// member may be a whole log segment: it is never held in memory here).
pub(super) fn visit_members(
    path: &Path,
    want: &dyn Fn(&str) -> bool,
    each: &mut dyn FnMut(&str, u64, &mut dyn Read) -> Result<bool>,
) -> Result<String> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let stem = segment_stem(name).to_string();
    let (f, _) = super::atomic::open_regular(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => {
            Error::not_found(format!("no archive segment {}", path.display()))
        }
        _ => Error::io("cannot read", path, e),
    })?;
    let hashing = Hashing { inner: f, sha: Sha256::new(), bytes: 0 };
    let dec = zstd::Decoder::new(hashing).map_err(io_err("cannot decompress", path))?;
    let mut ar = tar::Archive::new(dec);
    for entry in ar.entries().map_err(io_err("cannot read", path))? {
        let mut entry = entry.map_err(io_err("cannot read", path))?;
        let member = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let rel = safe_member(&stem, &member)?.to_string();
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Err(Error::refused(format!("archive member `{member}` is not a regular file"))
                .hint("circe writes only regular files; the segment may have been tampered with"));
        }
        if !want(&rel) {
            continue;
        }
        let size = entry.size();
        if !each(&rel, size, &mut entry)? {
            return Ok(String::new());
        }
    }
    let dec = ar.into_inner();
    let mut hashing = dec.finish().into_inner();
    io::copy(&mut hashing, &mut io::sink()).map_err(io_err("cannot read", path))?;
    Ok(hex(hashing.sha.finalize()))
}

/// Verify a segment against its member list: the same members in the same order, each of
/// the listed size and checksum, and the whole file of `sha256`. Reads both as streams.
pub(super) fn verify(path: &Path, list_path: &Path, sha: Option<&str>) -> Result<u64> {
    let mut list = ListReader::open(list_path)?;
    let mut n = 0u64;
    let problem = |what: String| {
        Error::internal(format!("archive segment {} does not verify: {what}", path.display()))
            .hint("the archived copy is not trusted: the originals stay where they are; run `circe archive` again")
    };
    let whole = visit_members(path, &|_| true, &mut |rel, _, data| {
        let want = list
            .next()
            .transpose()?
            .ok_or_else(|| problem(format!("{rel} is not in the member list")))?;
        let mut h = Hashing { inner: data, sha: Sha256::new(), bytes: 0 };
        io::copy(&mut h, &mut io::sink()).map_err(io_err("cannot read", path))?;
        let got = hex(h.sha.finalize());
        if !want.member.ends_with(rel) || want.bytes != h.bytes || want.sha256 != got {
            return Err(problem(format!(
                "{rel}: listed {} bytes {}, found {} bytes {got}",
                want.bytes, want.sha256, h.bytes
            )));
        }
        n += 1;
        Ok(true)
    })?;
    if let Some(extra) = list.next().transpose()? {
        return Err(problem(format!("{} is listed but missing", extra.member)));
    }
    if let Some(s) = sha
        && s != whole
    {
        return Err(problem(format!("file checksum {whole}, index says {s}")));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::EntryKind;

    fn entry(kind: EntryKind) -> Entry {
        super::super::archive_build::entry(kind, None, None)
    }

    #[test]
    fn write_verify_read_and_refuse_tampering() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = SegmentWriter::create(dir.path(), "2026-01.R1.tar.zst", 0).unwrap();
        let long = "x".repeat(300);
        w.add_bytes(entry(EntryKind::Message), "loose/LOGS/a.md", b"hello\n").unwrap();
        w.add_bytes(entry(EntryKind::Record), &format!("tasks/T/TASKS/{long}.status"), b"s")
            .unwrap();
        let written = w.finish().unwrap();
        assert_eq!(verify(&written.path, &written.list_path, Some(&written.sha256)).unwrap(), 2);
        let mut got = Vec::new();
        read_members(&written.path, &|_| true, &mut |rel, b| {
            got.push((rel.to_string(), b));
            Ok(true)
        })
        .unwrap();
        assert_eq!(got[0], ("loose/LOGS/a.md".to_string(), b"hello\n".to_vec()));
        assert!(got[1].0.ends_with(".status"), "long names survive");
        // Readable without circe.
        let o = std::process::Command::new("tar")
            .arg("--zstd")
            .arg("-tf")
            .arg(&written.path)
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&o.stdout).contains("2026-01.R1/loose/LOGS/a.md"), "{o:?}");
        // A changed byte is caught.
        let mut bytes = std::fs::read(&written.path).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0xff;
        std::fs::write(&written.path, &bytes).unwrap();
        assert!(verify(&written.path, &written.list_path, Some(&written.sha256)).is_err());
    }

    #[test]
    fn unsafe_member_paths_are_refused() {
        assert_eq!(safe_member("s", "s/tasks/T/LOGS/a.md").unwrap(), "tasks/T/LOGS/a.md");
        for bad in
            ["/etc/passwd", "s/../x", "s/a/../../x", "t/a", "s", "s/", "s//a", "s/./a", "../s/a"]
        {
            assert!(safe_member("s", bad).is_err(), "{bad}");
        }
    }
}
