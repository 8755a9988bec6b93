#![allow(clippy::unwrap_used)]
use serde_json::json;

use super::*;

#[test]
fn a_file_uri_is_an_absolute_path_percent_decoded() {
    let ok = |uri: &str| uri_path(uri).unwrap();
    assert_eq!(ok("file:///home/me/work"), Path::new("/home/me/work"));
    assert_eq!(ok("file://localhost/home/me"), Path::new("/home/me"));
    assert_eq!(ok("FILE:///a%20b/c%C3%A9"), Path::new("/a b/c\u{e9}"));
    // Bytes that are not UTF-8 are a Linux path's own.
    assert_eq!(
        ok("file:///x%FF").into_os_string().into_vec(),
        b"/x\xff".to_vec()
    );
}

#[test]
fn anything_but_a_local_absolute_file_uri_is_refused_saying_why() {
    for (uri, why) in [
        ("work", "is not a URI"),
        ("https://example.org/x", "is not a file:// URI"),
        ("vscode-remote://ssh/x", "is not a file:// URI"),
        ("file:work", "is not an absolute file:// URI"),
        ("file:/home/me", "is not an absolute file:// URI"),
        ("file://server/share", "names another machine"),
        ("file://", "holds no path"),
        ("file:///a?b", "has a query or a fragment"),
        ("file:///a%00b", "holds a NUL byte"),
    ] {
        let err = uri_path(uri).unwrap_err();
        assert!(
            err.starts_with("the client's first root `") && err.contains(why),
            "{uri}: {err}"
        );
    }
}

#[test]
fn the_first_root_is_read_from_the_answer() {
    let answer = json!({"roots": [{"uri": "file:///a", "name": "A"}, {"uri": "file:///b"}]});
    assert_eq!(first_root(&answer), Ok(Some("file:///a".to_owned())));
    assert_eq!(first_root(&json!({"roots": []})), Ok(None));
    assert!(first_root(&json!({})).is_err());
    assert!(first_root(&json!({"roots": [{"name": "no uri"}]})).is_err());
}

#[test]
fn a_project_folder_is_an_existing_folder_away_from_what_the_agent_must_not_reach() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().canonicalize().unwrap();
    let home = real.join("home");
    let work = home.join("work");
    let state = home.join(".local/state/lnk"); // not made yet
    let keyring = real.join("keys");
    let cache = real.join("cache");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(cache.join("registry")).unwrap();
    std::fs::create_dir_all(keyring.join("inner")).unwrap();
    std::fs::write(real.join("file"), b"").unwrap();
    std::os::unix::fs::symlink(&work, real.join("link")).unwrap();
    let forbidden = Forbidden {
        home: Some(home.clone()),
        state: Some(resolved(&state)),
        keyring: Some(keyring.clone()),
        caches: vec![cache.clone()],
    };
    let check = |path: &Path| check_folder(path, "the project folder", &forbidden);
    assert_eq!(check(&work), Ok(work.clone()));
    assert_eq!(
        check(&real.join("link")),
        Ok(work.clone()),
        "made canonical"
    );
    for (path, why) in [
        (Path::new("/"), "is the whole file system"),
        (home.as_path(), "is your home folder"),
        (real.as_path(), "holds your home folder"),
        (&real.join("file"), "is not a folder"),
        (&real.join("missing"), "cannot be used"),
        (&keyring, "is the keyring"),
        (&keyring.join("inner"), "lies inside the keyring"),
        (&cache, "is a cache folder"),
        (&cache.join("registry"), "lies inside a cache folder"),
        (Path::new("relative"), "is not an absolute path"),
    ] {
        let err = check(path).unwrap_err();
        assert!(err.contains(why), "{}: {err}", path.display());
        assert!(err.ends_with(WHAT_TO_DO), "{err}");
    }
    // Away from the home: a folder that holds the state folder, or lies in it.
    let forbidden = Forbidden {
        home: None,
        ..forbidden
    };
    let check = |path: &Path| check_folder(path, "the project folder", &forbidden);
    let err = check(&home).unwrap_err();
    assert!(err.contains("holds the state folder"), "{err}");
    std::fs::create_dir_all(state.join("inner")).unwrap();
    let err = check(&state.join("inner")).unwrap_err();
    assert!(err.contains("lies inside the state folder"), "{err}");
}
