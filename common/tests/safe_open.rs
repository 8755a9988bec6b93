//! Opening output files in a files folder the agent controls: links, FIFOs, hard links and
//! folders planted where output files go are refused, without hanging and without touching
//! anything outside `background/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use lnk_common::error::FileKind;
use lnk_common::layout::{output_relative_path, rotation_temp_name};
use lnk_common::record::FileId;
use lnk_common::safe_open::{BackgroundDir, FilesDir};
use lnk_common::{Error, RunId};

/// A files folder, and a sibling `outside` folder holding a `secret` the agent would like us
/// to overwrite or show.
struct World {
    _root: tempfile::TempDir,
    files: PathBuf,
    outside: PathBuf,
}

impl World {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let files = root.path().join("files");
        let outside = root.path().join("outside");
        fs::create_dir(&files).unwrap();
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("secret"), b"secret").unwrap();
        World {
            _root: root,
            files,
            outside,
        }
    }

    fn secret(&self) -> PathBuf {
        self.outside.join("secret")
    }

    /// Nothing outside was written, created or removed.
    fn assert_outside_untouched(&self) {
        let names: Vec<_> = fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["secret"]);
        assert_eq!(fs::read(self.secret()).unwrap(), b"secret");
    }

    /// The files folder's `background/`, made.
    fn background(&self) -> BackgroundDir {
        FilesDir::open(&self.files)
            .unwrap()
            .ensure_background_dir()
            .unwrap()
    }

    fn out_path(&self, id: &RunId) -> PathBuf {
        self.files.join(output_relative_path(id))
    }
}

/// Runs `f` on another thread and fails the test if it has not returned within 10 s, so a
/// FIFO that blocks an open shows up as a failure instead of a hung test.
fn within_deadline<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the open blocked")
}

#[test]
fn the_normal_life_of_an_output_file() {
    let w = World::new();
    let id = RunId::generate().unwrap();
    let files = FilesDir::open(&w.files).unwrap();
    assert!(files.open_background_dir().unwrap().is_none());
    let bg = files.ensure_background_dir().unwrap();
    let mode = fs::metadata(w.files.join("background"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    assert!(bg.open_output_for_read(&id).unwrap().is_none());

    let mut out = bg.create_output(&id).unwrap();
    out.write_all(b"hello ").unwrap();
    bg.open_output_for_append(&id)
        .unwrap()
        .write_all(b"world")
        .unwrap();
    assert_eq!(fs::read(w.out_path(&id)).unwrap(), b"hello world");

    // Rotation: keep the newest half in a new file, rename it over.
    let before = FileId::of(&bg.open_output_for_read(&id).unwrap().unwrap()).unwrap();
    let mut temp = bg.create_rotation_temp(&id).unwrap();
    assert!(temp.name().starts_with(&format!(".tmp-{id}-")));
    temp.file.write_all(b"world").unwrap();
    let mut new_out = bg.install_rotation(temp, &id).unwrap();
    new_out.write_all(b"!").unwrap();
    let mut reader = bg.open_output_for_read(&id).unwrap().unwrap();
    let after = FileId::of(&reader).unwrap();
    assert_ne!(before, after, "a rotation gives the output a new identity");
    assert_eq!(after, FileId::of(&new_out).unwrap());
    let mut text = String::new();
    reader.read_to_string(&mut text).unwrap();
    assert_eq!(text, "world!");

    // A second background handle reaches the same folder without creating anything.
    let again = files.open_background_dir().unwrap().unwrap();
    assert!(again.open_output_for_read(&id).unwrap().is_some());

    assert!(bg.remove_output(&id).unwrap());
    assert!(!bg.remove_output(&id).unwrap());
    assert_eq!(fs::read_dir(w.files.join("background")).unwrap().count(), 0);
    w.assert_outside_untouched();
}

#[test]
fn a_symlinked_background_folder_is_refused() {
    let w = World::new();
    symlink(&w.outside, w.files.join("background")).unwrap();
    let files = FilesDir::open(&w.files).unwrap();
    let err = files.ensure_background_dir().unwrap_err();
    assert!(
        matches!(err, Error::Symlink { ref path } if path.ends_with("background")),
        "{err:?}"
    );
    assert!(matches!(
        files.open_background_dir(),
        Err(Error::Symlink { .. })
    ));
    w.assert_outside_untouched();
}

#[test]
fn a_file_where_the_background_folder_goes_is_refused() {
    let w = World::new();
    fs::write(w.files.join("background"), b"").unwrap();
    let files = FilesDir::open(&w.files).unwrap();
    assert!(matches!(
        files.ensure_background_dir(),
        Err(Error::NotDirectory { .. })
    ));
}

#[test]
fn a_symlinked_output_file_is_refused_and_the_target_untouched() {
    let w = World::new();
    let id = RunId::generate().unwrap();
    let bg = w.background();
    symlink(w.secret(), w.out_path(&id)).unwrap();

    assert!(matches!(
        bg.open_output_for_append(&id),
        Err(Error::Symlink { .. })
    ));
    assert!(matches!(
        bg.open_output_for_read(&id),
        Err(Error::Symlink { .. })
    ));
    // Rotating over the link replaces the link itself.
    let temp = bg.create_rotation_temp(&id).unwrap();
    bg.install_rotation(temp, &id).unwrap();
    assert!(fs::symlink_metadata(w.out_path(&id)).unwrap().is_file());
    w.assert_outside_untouched();

    // Creating the output over a planted link removes the link, not its target.
    fs::remove_file(w.out_path(&id)).unwrap();
    symlink(w.secret(), w.out_path(&id)).unwrap();
    bg.create_output(&id).unwrap().write_all(b"mine").unwrap();
    assert!(fs::symlink_metadata(w.out_path(&id)).unwrap().is_file());
    assert_eq!(fs::read(w.out_path(&id)).unwrap(), b"mine");
    w.assert_outside_untouched();
}

#[test]
fn a_fifo_output_file_is_refused_without_hanging() {
    let w = World::new();
    let id = RunId::generate().unwrap();
    let bg = w.background();
    let fifo = w.out_path(&id);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();

    let (bg, id2) = within_deadline(move || {
        // No writer: a blocking read open would wait forever.
        let read = bg.open_output_for_read(&id);
        assert!(
            matches!(
                read,
                Err(Error::NotRegularFile {
                    kind: FileKind::Fifo,
                    ..
                })
            ),
            "{read:?}"
        );
        // No reader: a blocking write open would wait forever.
        let append = bg.open_output_for_append(&id);
        assert!(
            matches!(
                append,
                Err(Error::NotRegularFile {
                    kind: FileKind::Fifo,
                    ..
                })
            ),
            "{append:?}"
        );
        (bg, id)
    });

    // With a reader present the open succeeds at once, and fstat refuses it.
    let _reader = rustix::fs::open(
        &fifo,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let (bg, id) = within_deadline(move || {
        let append = bg.open_output_for_append(&id2);
        assert!(
            matches!(
                append,
                Err(Error::NotRegularFile {
                    kind: FileKind::Fifo,
                    ..
                })
            ),
            "{append:?}"
        );
        (bg, id2)
    });

    // Creating the output over a FIFO replaces it with a regular file.
    within_deadline(move || bg.create_output(&id).map(drop)).unwrap();
    assert!(fs::symlink_metadata(&fifo).unwrap().is_file());
    w.assert_outside_untouched();
}

#[test]
fn a_hard_linked_output_file_is_refused() {
    let w = World::new();
    let id = RunId::generate().unwrap();
    let bg = w.background();
    fs::hard_link(w.secret(), w.out_path(&id)).unwrap();
    let append = bg.open_output_for_append(&id);
    assert!(
        matches!(append, Err(Error::HardLinked { links: 2, .. })),
        "{append:?}"
    );
    assert!(matches!(
        bg.open_output_for_read(&id),
        Err(Error::HardLinked { .. })
    ));
    w.assert_outside_untouched();
}

#[test]
fn a_folder_where_the_output_file_goes_is_refused() {
    let w = World::new();
    let id = RunId::generate().unwrap();
    let bg = w.background();
    fs::create_dir(w.out_path(&id)).unwrap();
    for result in [
        bg.open_output_for_read(&id).map(|_| ()),
        bg.open_output_for_append(&id).map(drop),
        bg.create_output(&id).map(drop),
    ] {
        assert!(
            matches!(
                result,
                Err(Error::NotRegularFile {
                    kind: FileKind::Directory,
                    ..
                })
            ),
            "{result:?}"
        );
    }
    assert!(w.out_path(&id).is_dir());
}

/// The rotation's temporary name can be guessed (`.tmp-<id>-next`): a folder planted there,
/// or at `<id>.out` between two rotations, is moved aside whole, and the rotation goes on.
#[test]
fn a_folder_planted_at_a_rotation_name_is_moved_aside_and_the_rotation_goes_on() {
    let w = World::new();
    let id = RunId::generate().unwrap();
    let bg = w.background();
    let mut out = bg.create_output(&id).unwrap();
    out.write_all(b"first").unwrap();
    let background = w.files.join("background");
    let planted = background.join(rotation_temp_name(&id).unwrap());
    fs::create_dir_all(planted.join("sub")).unwrap();
    fs::write(planted.join("sub/kept"), b"the agent's").unwrap();
    symlink(w.secret(), planted.join("link")).unwrap();

    let mut temp = bg.create_rotation_temp(&id).unwrap();
    temp.file.write_all(b"second").unwrap();
    assert!(fs::symlink_metadata(&planted).unwrap().is_file());
    let moved = |prefix: &str| -> Vec<PathBuf> {
        fs::read_dir(&background)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
            .collect()
    };
    let aside_prefix = format!(".tmp-{id}-moved-");
    let aside = moved(&aside_prefix);
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(fs::read(aside[0].join("sub/kept")).unwrap(), b"the agent's");
    bg.install_rotation(temp, &id).unwrap();
    assert_eq!(fs::read(w.out_path(&id)).unwrap(), b"second");

    // A folder put at `<id>.out` itself: the next rotation exchanges it to the temporary
    // name, and moves it aside from there.
    fs::remove_file(w.out_path(&id)).unwrap();
    fs::create_dir(w.out_path(&id)).unwrap();
    fs::write(w.out_path(&id).join("inside"), b"x").unwrap();
    let mut temp = bg.create_rotation_temp(&id).unwrap();
    temp.file.write_all(b"third").unwrap();
    bg.install_rotation(temp, &id).unwrap();
    assert_eq!(fs::read(w.out_path(&id)).unwrap(), b"third");
    assert_eq!(moved(&aside_prefix).len(), 2);
    assert!(!planted.exists());

    // Removing the run leaves a folder planted at its rotation name (a program's) in place.
    fs::create_dir(&planted).unwrap();
    assert!(bg.remove_output(&id).unwrap());
    assert!(planted.is_dir());
    w.assert_outside_untouched();
}

#[test]
fn renames_take_plain_names_only() {
    let w = World::new();
    let bg = w.background();
    for (from, to) in [
        ("", "x"),
        ("x", ".."),
        ("../files", "x"),
        ("a/b", "c"),
        (".", "x"),
    ] {
        assert!(
            matches!(bg.rename_within(from, to), Err(Error::BadName { .. })),
            "{from:?} -> {to:?}"
        );
    }
    w.assert_outside_untouched();
}

#[test]
fn removing_an_output_removes_only_that_runs_leftovers() {
    let w = World::new();
    let id = RunId::generate().unwrap();
    let other = RunId::generate().unwrap();
    let bg = w.background();
    bg.create_output(&id).unwrap();
    bg.create_output(&other).unwrap();
    let mine = bg.create_rotation_temp(&id).unwrap();
    let theirs = bg.create_rotation_temp(&other).unwrap();
    let agent_file = w.files.join("background/notes.txt");
    fs::write(&agent_file, b"agent").unwrap();
    // A link whose name looks like a leftover: removing it removes the link only.
    let planted = w
        .files
        .join("background")
        .join(rotation_temp_name(&id).unwrap());
    assert_eq!(planted.file_name().unwrap(), mine.name());
    fs::remove_file(&planted).unwrap();
    symlink(w.secret(), &planted).unwrap();

    assert!(bg.remove_output(&id).unwrap());
    let bgp = w.files.join("background");
    assert!(!bgp.join(mine.name()).exists());
    assert!(fs::symlink_metadata(&planted).is_err());
    assert!(bgp.join(theirs.name()).exists());
    assert!(w.out_path(&other).exists());
    assert!(agent_file.exists());
    w.assert_outside_untouched();
}

#[test]
fn a_symlinked_files_folder_is_refused() {
    let w = World::new();
    let link = w.files.parent().unwrap().join("link-to-outside");
    symlink(&w.outside, &link).unwrap();
    assert!(matches!(FilesDir::open(&link), Err(Error::Symlink { .. })));
    assert!(matches!(
        FilesDir::open(&w.secret()),
        Err(Error::NotDirectory { .. })
    ));
    assert!(
        FilesDir::open(Path::new("/nonexistent/files"))
            .unwrap_err()
            .is_not_found()
    );
    let _ = File::open(w.secret()).unwrap();
    w.assert_outside_untouched();
}

#[test]
fn a_working_folder_is_opened_without_following_any_link() {
    let w = World::new();
    fs::create_dir_all(w.files.join("a/b")).unwrap();
    symlink(&w.outside, w.files.join("a/out")).unwrap();
    symlink(w.files.join("a/b"), w.files.join("in")).unwrap();
    let files = FilesDir::open(&w.files).unwrap();

    let fd = files.open_dir_beneath(Path::new("a/b")).unwrap();
    let stat = rustix::fs::fstat(&fd).unwrap();
    let b = fs::metadata(w.files.join("a/b")).unwrap();
    assert_eq!(
        FileId::from_stat(&stat),
        FileId {
            dev: std::os::unix::fs::MetadataExt::dev(&b),
            ino: std::os::unix::fs::MetadataExt::ino(&b)
        }
    );
    files.open_dir_beneath(Path::new(".")).unwrap();
    files.open_dir_beneath(Path::new("")).unwrap();

    for (relative, what) in [
        ("a/out", "a link out"),
        ("in", "a link in"),
        ("a/../a", ".."),
    ] {
        let err = files.open_dir_beneath(Path::new(relative));
        assert!(err.is_err(), "{what} was followed");
    }
    // With O_DIRECTORY|O_NOFOLLOW, a link is "not a directory" (ENOTDIR) or a link (ELOOP).
    assert!(matches!(
        files.open_dir_beneath(Path::new("a/out")),
        Err(Error::Symlink { .. } | Error::NotDirectory { .. })
    ));
    assert!(files.open_dir_beneath(Path::new("/etc")).is_err());
}

/// A supervisor killed between storing the record that names a rotation's new file and
/// renaming it: a sweep puts that file in place, once, and leaves a file no record names.
#[test]
fn a_rotation_cut_short_is_finished_when_the_record_names_its_file() {
    let w = World::new();
    let id = RunId::generate().unwrap();
    let bg = w.background();
    bg.create_output(&id).unwrap().write_all(b"old").unwrap();
    let mut temp = bg.create_rotation_temp(&id).unwrap();
    temp.file.write_all(b"new").unwrap();
    let named = FileId::of(&temp.file).unwrap();
    let old = FileId::of(&bg.open_output_for_read(&id).unwrap().unwrap()).unwrap();
    assert!(
        !bg.finish_cut_rotation(&id, old).unwrap(),
        "named the old file"
    );
    assert_eq!(fs::read(w.out_path(&id)).unwrap(), b"old");
    assert!(bg.finish_cut_rotation(&id, named).unwrap());
    assert_eq!(fs::read(w.out_path(&id)).unwrap(), b"new");
    assert!(!w.files.join("background").join(temp.name()).exists());
    assert!(
        !bg.finish_cut_rotation(&id, named).unwrap(),
        "finished twice"
    );
    w.assert_outside_untouched();
}
