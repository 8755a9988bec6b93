//! Both sides of the output file against each other, in one process: a writer that appends
//! and rotates as a supervisor does, and readers at the run's offsets, which must never see a
//! byte at another offset than its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::*;
use crate::record::{Launch, Limits, Program};
use crate::run_files;

/// The byte the run wrote at offset `at`: a pattern no two nearby offsets share.
fn byte_at(at: u64) -> u8 {
    (at % 251) as u8
}

struct TestRun {
    _dir: tempfile::TempDir,
    state: StateDir,
    background: BackgroundDir,
    record: Record,
}

fn made_run(cap: u64) -> TestRun {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path().join("state"));
    state.create().unwrap();
    crate::index::init(&state).unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    let background = FilesDir::open(&files)
        .unwrap()
        .ensure_background_dir()
        .unwrap();
    let launch = Launch {
        files: files.clone(),
        sandbox: vec!["bwrap".into()],
        program: Program {
            name: "yes".into(),
            args: vec![],
            dir: ".".into(),
            path: "/usr/bin/yes".into(),
            cwd: files,
        },
        vars: Default::default(),
        limits: Limits {
            timeout_ms: 60_000,
            output_cap_bytes: cap,
            keep_ms: 60_000,
        },
        thread: String::new(),
        hops: 0,
        tell_to: None,
        stdin: Default::default(),
        caches: Vec::new(),
        net_allow: Vec::new(),
    };
    let mut record = Record::new(
        RunId::generate().unwrap(),
        "boot".into(),
        crate::time::UnixMs(1),
        launch,
    );
    run_files::make(&state, &background, &mut record)
        .unwrap()
        .keep();
    TestRun {
        _dir: dir,
        state,
        background,
        record,
    }
}

/// Appends the pattern's next `n` bytes as a supervisor does, rotating at the cap.
struct TestWriter<'a> {
    run: &'a mut TestRun,
    file: File,
    len: u64,
}

impl<'a> TestWriter<'a> {
    fn new(run: &'a mut TestRun) -> Self {
        let file = run
            .background
            .open_output_for_append(&run.record.id)
            .unwrap();
        TestWriter { run, file, len: 0 }
    }

    fn append(&mut self, n: u64) {
        let at = self.run.record.output.written_bytes;
        let bytes: Vec<u8> = (at..at + n).map(byte_at).collect();
        self.file.write_all(&bytes).unwrap();
        self.len += n;
        self.run.record.output.written_bytes += n;
        let cap = self.run.record.launch.limits.output_cap_bytes;
        if self.len >= cap {
            let keep = cap / 2;
            let run = &mut *self.run;
            self.file = rotate(
                &run.state,
                &run.background,
                &mut run.record,
                &self.file,
                self.len,
                keep,
            )
            .unwrap();
            self.len = keep;
        }
    }
}

fn check(read: &OutputBytes) {
    for (i, byte) in read.bytes.iter().enumerate() {
        let at = read.from + i as u64;
        assert_eq!(
            *byte,
            byte_at(at),
            "the byte read at offset {at} is another offset's"
        );
    }
}

#[test]
fn a_rotation_keeps_the_newest_half_at_its_offsets() {
    let mut run = made_run(1000);
    let id = run.record.id.clone();
    let mut writer = TestWriter::new(&mut run);
    for _ in 0..25 {
        writer.append(100);
    }
    drop(writer);
    // 2500 bytes written under a cap of 1000: rotated at 1000, 1500, 2000 and 2500.
    let read = read_at_offsets(&run.state, &id, Some(0), 10_000).unwrap();
    assert_eq!(read.total, 2500);
    assert_eq!(read.dropped, 2000);
    assert_eq!(read.skipped, 2000);
    assert_eq!(read.from, 2000);
    assert_eq!(read.bytes.len(), 500);
    check(&read);
    let last = read_at_offsets(&run.state, &id, None, 100).unwrap();
    assert_eq!(last.from, 2400);
    check(&last);
    // The record stored at the last rotation is the one a reader uses.
    let stored = Record::load(&run.state, &id).unwrap();
    assert_eq!(stored.output.dropped_bytes, 2000);
    assert_eq!(stored.output.file, run.record.output.file);
}

#[test]
fn a_rotation_under_a_reader_never_yields_stale_offsets() {
    let mut run = made_run(4096);
    let id = run.record.id.clone();
    let state = run.state.clone();
    let done = AtomicBool::new(false);
    let reads = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..2)
            .map(|n| {
                let (state, id, done) = (&state, &id, &done);
                scope.spawn(move || {
                    let mut reads = 0u32;
                    let mut offset = 0u64;
                    while !done.load(Ordering::Relaxed) {
                        let asked = (n == 0).then_some(offset);
                        match read_at_offsets(state, id, asked, 3000) {
                            Ok(read) => {
                                check(&read);
                                offset = read.from + read.bytes.len() as u64;
                                reads += 1;
                            }
                            Err(ReadError::KeepsChanging) => {}
                            Err(e) => panic!("{e}: {:?}", std::error::Error::source(&e)),
                        }
                    }
                    reads
                })
            })
            .collect();
        let mut writer = TestWriter::new(&mut run);
        let until = Instant::now() + Duration::from_millis(1500);
        let mut rotations = 0u64;
        while Instant::now() < until {
            writer.append(97);
            rotations = writer.run.record.output.dropped_bytes;
        }
        done.store(true, Ordering::Relaxed);
        assert!(rotations > 0, "the writer rotated");
        readers.into_iter().map(|r| r.join().unwrap()).sum::<u32>()
    });
    assert!(reads > 0, "the readers read");
}
