//! The archive's bucket files: what a run's scan finds for each task, written to the
//! staging folder spread by a hash of the task's id, so that one bucket at a time is
//! gathered in memory (`archive::stage`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::archive_scan::Sink;
use super::root::io_err;
use crate::error::Result;
use crate::fault::io_step;
use crate::names::TaskId;

/// Bucket files in the staging folder: what belongs to each task, spread by a hash of its
/// id, so that one bucket at a time is gathered in memory.
pub(super) struct Buckets {
    files: Vec<BufWriter<File>>,
    paths: Vec<PathBuf>,
    loose: BufWriter<File>,
    loose_path: PathBuf,
}

/// A new file in the staging folder, buffered.
pub(super) fn staged_file(path: &Path) -> Result<BufWriter<File>> {
    io_step().map_err(io_err("cannot create", path))?;
    let f = File::options()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io_err("cannot create", path))?;
    Ok(BufWriter::with_capacity(16 * 1024, f))
}

/// Which of `n` buckets holds `task`.
pub(super) fn bucket_of(task: &str, n: usize) -> usize {
    let h = task
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    usize::try_from(h % n as u64).unwrap_or(0)
}

impl Buckets {
    pub(super) fn new(dir: &Path, n: usize) -> Result<Buckets> {
        let paths: Vec<PathBuf> = (0..n).map(|i| dir.join(format!("bucket-{i:04}"))).collect();
        let files = paths.iter().map(|p| staged_file(p)).collect::<Result<_>>()?;
        let loose_path = dir.join("loose");
        Ok(Buckets { files, paths, loose: staged_file(&loose_path)?, loose_path })
    }

    fn put(&mut self, task: &TaskId, line: &str) -> Result<()> {
        let i = bucket_of(task.as_str(), self.files.len());
        io_step()
            .and_then(|()| self.files[i].write_all(line.as_bytes()))
            .map_err(io_err("cannot write", &self.paths[i]))
    }

    pub(super) fn close(self) -> Result<(Vec<PathBuf>, PathBuf)> {
        for (mut f, p) in self.files.into_iter().zip(&self.paths) {
            f.flush().map_err(io_err("cannot write", p))?;
        }
        let mut l = self.loose;
        l.flush().map_err(io_err("cannot write", &self.loose_path))?;
        Ok((self.paths, self.loose_path))
    }
}

/// A file name as one line of a bucket file: `\`, line feed and carriage return written
/// `\\`, `\n`, `\r` (any other byte a name may hold, a tab too, stands as it is: it is
/// the line's last field). A name may hold a line break, and the file is read by lines.
pub(super) fn escape(name: &str) -> String {
    name.replace('\\', "\\\\").replace('\n', "\\n").replace('\r', "\\r")
}

/// A name `escape` wrote, as it was.
pub(super) fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

impl Sink for Buckets {
    fn task_message(&mut self, task: &TaskId, name: &str, _: u64) -> Result<()> {
        self.put(task, &format!("m\t{task}\t{}\n", escape(name)))
    }
    fn task_event(&mut self, task: &TaskId, line: &str) -> Result<()> {
        self.put(task, &format!("e\t{task}\t{line}\n"))
    }
    fn loose(&mut self, period: &str, name: &str, _: u64) -> Result<()> {
        io_step()
            .and_then(|()| self.loose.write_all(format!("{period}\t{}\n", escape(name)).as_bytes()))
            .map_err(io_err("cannot write", &self.loose_path))
    }
}

/// The number in a bucket file's name.
pub(super) fn bucket_index(p: &Path) -> usize {
    p.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("bucket-"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_with_line_breaks_and_backslashes_comes_back_as_it_was() {
        for name in ["a\nb.md", "x\\n.md", "tab\there\r", "\\", "plain.md", "a\\\nb"] {
            let e = escape(name);
            assert!(!e.contains('\n') && !e.contains('\r'), "{e:?}");
            assert_eq!(unescape(&e), name);
        }
    }
}
