use super::*;

fn toolset(tools: &[(&str, Option<&str>)]) -> StoredToolset {
    StoredToolset {
        description: Some("for tests".to_owned()),
        tools: tools
            .iter()
            .map(|(name, alias)| StoredTool {
                name: (*name).to_owned(),
                alias: alias.map(str::to_owned),
            })
            .collect(),
        prompts: vec!["review".to_owned()],
    }
}

fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn fresh_store_is_empty_and_creates_its_directory_on_first_write() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("deep").join("er").join("toolsets.json");
    let (mut store, opened) = Store::open(path.clone());
    assert_eq!(opened, Opened::Fresh);
    assert!(store.toolsets().is_empty());
    assert!(!store.is_read_only());
    assert!(!path.parent().unwrap().exists());
    assert_eq!(store.path(), path);

    store.put("a", toolset(&[("git__status", None)])).unwrap();
    assert!(path.exists());
    assert_eq!(dir_names(path.parent().unwrap()), ["toolsets.json"]);
}

#[test]
fn round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("toolsets.json");
    let (mut store, _) = Store::open(path.clone());
    let review = toolset(&[("git__status", Some("status")), ("git__diff", None)]);
    let bare = StoredToolset {
        description: None,
        tools: vec![StoredTool {
            name: "fs__read".to_owned(),
            alias: None,
        }],
        prompts: vec![],
    };
    store.put("review", review.clone()).unwrap();
    store.put("bare", bare.clone()).unwrap();
    store.put("gone", bare.clone()).unwrap();
    assert!(store.remove("gone").unwrap());
    assert!(!store.remove("gone").unwrap());

    let (reopened, opened) = Store::open(path.clone());
    assert_eq!(opened, Opened::Loaded);
    assert_eq!(reopened.toolsets(), store.toolsets());
    assert_eq!(reopened.toolsets().len(), 2);
    assert_eq!(reopened.toolsets()["review"], review);
    assert_eq!(reopened.toolsets()["bare"], bare);

    // Pretty-printed, versioned, toolsets sorted by name, optional fields omitted.
    let text = fs::read_to_string(&path).unwrap();
    let expected = r#"{
  "version": 1,
  "toolsets": {
    "bare": {
      "tools": [
        {
          "name": "fs__read"
        }
      ]
    },
    "review": {
      "description": "for tests",
      "tools": [
        {
          "name": "git__status",
          "alias": "status"
        },
        {
          "name": "git__diff"
        }
      ],
      "prompts": [
        "review"
      ]
    }
  }
}
"#;
    assert_eq!(text, expected);
}

#[test]
fn put_replaces_an_existing_toolset() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("toolsets.json");
    let (mut store, _) = Store::open(path.clone());
    store.put("a", toolset(&[("x__one", None)])).unwrap();
    store.put("a", toolset(&[("x__two", None)])).unwrap();
    let (reopened, _) = Store::open(path);
    assert_eq!(reopened.toolsets().len(), 1);
    assert_eq!(reopened.toolsets()["a"].tools[0].name, "x__two");
}

#[test]
fn corrupt_file_is_moved_aside_with_its_contents() {
    for garbage in [
        &b"{\"version\": 1, \"toolsets\": {"[..],
        b"not json at all",
        b"\xff\xfe\x00",
        b"[1, 2]",
        b"{\"toolsets\": {}}",
        b"{\"version\": 1, \"toolsets\": {\"a\": {\"tools\": 3}}}",
        b"{\"version\": 0, \"toolsets\": {}}",
        b"",
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("toolsets.json");
        fs::write(&path, garbage).unwrap();

        let (mut store, opened) = Store::open(path.clone());
        let Opened::MovedAside { to, reason } = opened else {
            panic!("{garbage:?}: expected MovedAside, got {opened:?}");
        };
        assert!(!reason.is_empty());
        assert!(!path.exists(), "the corrupt file must not stay in place");
        assert_eq!(fs::read(&to).unwrap(), garbage, "contents preserved");
        let to_name = to.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            to_name.starts_with("toolsets.json.corrupt-"),
            "moved to {to_name}"
        );
        assert_eq!(to.parent(), path.parent());
        assert!(store.toolsets().is_empty());
        assert!(!store.is_read_only());

        // The store works again, and the moved file stays untouched.
        store.put("a", toolset(&[("x__y", None)])).unwrap();
        assert_eq!(Store::open(path.clone()).1, Opened::Loaded);
        assert_eq!(fs::read(&to).unwrap(), garbage);
    }
}

#[test]
fn moving_aside_never_overwrites_an_earlier_corrupt_file() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("toolsets.json");
    let mut moved = Vec::new();
    for round in 0..3 {
        let contents = format!("garbage {round}");
        fs::write(&path, &contents).unwrap();
        let (_, opened) = Store::open(path.clone());
        let Opened::MovedAside { to, .. } = opened else {
            panic!("expected MovedAside, got {opened:?}");
        };
        moved.push((to, contents));
    }
    // Within one second the names collide; each move must pick a new one.
    for (to, contents) in &moved {
        assert_eq!(&fs::read_to_string(to).unwrap(), contents);
    }
}

#[test]
fn newer_version_is_read_only_and_never_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("toolsets.json");
    let newer = br#"{
  "version": 2,
  "toolsets": {
    "old-shape": {"tools": [{"name": "git__status", "alias": "st"}], "colour": "blue"},
    "new-shape": {"members": ["git__diff"]}
  },
  "extra": true
}"#;
    fs::write(&path, newer).unwrap();

    let (mut store, opened) = Store::open(path.clone());
    let Opened::ReadOnly { reason } = opened else {
        panic!("expected ReadOnly, got {opened:?}");
    };
    assert!(reason.contains("newer moniker"), "{reason}");
    assert!(store.is_read_only());
    // What reads as a current toolset is still served.
    assert_eq!(
        store.toolsets().keys().collect::<Vec<_>>(),
        ["old-shape"],
        "salvaged what can be read"
    );
    let before = store.toolsets().clone();

    let err = store.put("mine", toolset(&[("x__y", None)])).unwrap_err();
    assert!(matches!(err, StoreError::Newer { found: 2, .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("newer moniker"), "{message}");
    assert!(
        message.contains(&format!("`{}`", path.display())),
        "{message}"
    );
    assert!(store.remove("old-shape").is_err());
    assert!(store.remove("absent").is_err());

    assert_eq!(store.toolsets(), &before);
    assert_eq!(fs::read(&path).unwrap(), newer, "byte-identical");
    assert_eq!(dir_names(tmp.path()), ["toolsets.json"]);
}

#[test]
fn newer_version_with_unreadable_toolsets_is_read_only_and_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("toolsets.json");
    let newer = br#"{"version": 7, "toolsets": ["a", "list", "now"]}"#;
    fs::write(&path, newer).unwrap();
    let (mut store, opened) = Store::open(path.clone());
    assert!(matches!(opened, Opened::ReadOnly { .. }), "{opened:?}");
    assert!(store.toolsets().is_empty());
    assert!(store.put("a", toolset(&[])).is_err());
    assert_eq!(fs::read(&path).unwrap(), newer);
}

#[test]
fn unreadable_path_is_read_only() {
    // The parent of the store is a regular file: reading fails with something other than
    // not-found (this holds even for root, unlike permission bits).
    let tmp = tempfile::tempdir().unwrap();
    let blocker = tmp.path().join("not-a-dir");
    fs::write(&blocker, b"keep me").unwrap();
    let path = blocker.join("toolsets.json");

    let (mut store, opened) = Store::open(path.clone());
    let Opened::ReadOnly { reason } = opened else {
        panic!("expected ReadOnly, got {opened:?}");
    };
    assert!(!reason.is_empty());
    let err = store.put("a", toolset(&[("x__y", None)])).unwrap_err();
    assert!(matches!(err, StoreError::Unreadable { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&format!("`{}`", path.display())),
        "{err}"
    );
    assert!(store.toolsets().is_empty());
    assert_eq!(fs::read(&blocker).unwrap(), b"keep me");
}

#[test]
fn store_path_that_is_a_directory_is_read_only() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("toolsets.json");
    fs::create_dir(&path).unwrap();
    let (mut store, opened) = Store::open(path.clone());
    assert!(matches!(opened, Opened::ReadOnly { .. }), "{opened:?}");
    assert!(store.put("a", toolset(&[])).is_err());
    assert!(path.is_dir());
    assert_eq!(dir_names(tmp.path()), ["toolsets.json"]);
}

#[test]
fn permission_denied_is_read_only_and_untouched() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("locked");
    fs::create_dir(&dir).unwrap();
    let path = dir.join("toolsets.json");
    let contents = br#"{"version": 1, "toolsets": {}}"#;
    fs::write(&path, contents).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o000)).unwrap();
    if fs::read(&path).is_ok() {
        // Running as root (or with CAP_DAC_OVERRIDE): permission bits mean nothing here;
        // `unreadable_path_is_read_only` covers the read-only path instead.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        return;
    }
    let (mut store, opened) = Store::open(path.clone());
    let Opened::ReadOnly { reason } = opened else {
        panic!("expected ReadOnly, got {opened:?}");
    };
    assert!(reason.to_lowercase().contains("permission"), "{reason}");
    assert!(store.put("a", toolset(&[])).is_err());
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(fs::read(&path).unwrap(), contents);
    assert_eq!(dir_names(&dir), ["toolsets.json"]);
}

#[test]
fn failed_write_leaves_memory_equal_to_disk() {
    // The store starts fresh, then its directory becomes impossible to create: the write
    // fails and nothing changes, in memory or on disk.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("sub").join("toolsets.json");
    let (mut store, opened) = Store::open(path.clone());
    assert_eq!(opened, Opened::Fresh);
    fs::write(tmp.path().join("sub"), b"a file now").unwrap();

    let err = store.put("a", toolset(&[("x__y", None)])).unwrap_err();
    assert!(matches!(err, StoreError::CreateDir { .. }), "{err:?}");
    assert!(err.to_string().contains('`'), "{err}");
    assert!(store.toolsets().is_empty());

    // Once the obstacle is gone, writing works again.
    fs::remove_file(tmp.path().join("sub")).unwrap();
    store.put("a", toolset(&[("x__y", None)])).unwrap();
    assert_eq!(Store::open(path).0.toolsets(), store.toolsets());
}

#[test]
fn failed_rename_leaves_memory_equal_to_disk_and_no_temp_file() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("toolsets.json");
    let (mut store, _) = Store::open(path.clone());
    store.put("a", toolset(&[("x__y", None)])).unwrap();
    let on_disk = fs::read(&path).unwrap();

    // Replace the file with a non-empty directory: renaming a file over it fails.
    fs::remove_file(&path).unwrap();
    fs::create_dir(&path).unwrap();
    fs::write(path.join("inside"), b"").unwrap();
    let before = store.toolsets().clone();
    let err = store.put("b", toolset(&[])).unwrap_err();
    assert!(matches!(err, StoreError::Write { .. }), "{err:?}");
    assert_eq!(store.toolsets(), &before);
    assert_eq!(
        dir_names(tmp.path()),
        ["toolsets.json"],
        "temp file removed"
    );

    fs::remove_dir_all(&path).unwrap();
    fs::write(&path, &on_disk).unwrap();
    store.put("b", toolset(&[])).unwrap();
    assert_eq!(Store::open(path).0.toolsets().len(), 2);
}

#[test]
fn leftover_temp_files_are_ignored_and_cleaned() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("toolsets.json");
    let (mut store, _) = Store::open(path.clone());
    store.put("a", toolset(&[("x__y", None)])).unwrap();

    // A writer that died mid-write (no such process), one that is still alive (us), and an
    // unrelated file that merely looks similar.
    let dead = tmp.path().join(".toolsets.json.tmp-2147483646-0");
    let live = tmp
        .path()
        .join(format!(".toolsets.json.tmp-{}-99999", std::process::id()));
    let unrelated = tmp.path().join(".toolsets.json.tmp-notes");
    fs::write(&dead, b"{\"version\": 1, \"toolse").unwrap();
    fs::write(&live, b"").unwrap();
    fs::write(&unrelated, b"mine").unwrap();

    let (mut reopened, opened) = Store::open(path.clone());
    assert_eq!(opened, Opened::Loaded);
    assert_eq!(reopened.toolsets(), store.toolsets());
    assert!(!dead.exists(), "a dead writer's temp file is cleaned");
    assert!(live.exists(), "a live writer's temp file is left alone");
    assert!(unrelated.exists());

    reopened.put("b", toolset(&[])).unwrap();
    assert_eq!(Store::open(path).0.toolsets().len(), 2);
}

#[test]
fn errors_are_lowercase_and_name_the_path() {
    let path = PathBuf::from("/some/where/toolsets.json");
    let errors = [
        StoreError::Newer {
            path: path.clone(),
            found: 2,
            supported: STORE_VERSION,
        },
        StoreError::Unreadable {
            path: path.clone(),
            reason: "permission denied".to_owned(),
        },
        StoreError::CreateDir {
            path: path.clone(),
            source: io::Error::other("boom"),
        },
        StoreError::Write {
            path: path.clone(),
            source: io::Error::other("boom"),
        },
        StoreError::SyncDir {
            path: path.clone(),
            source: io::Error::other("boom"),
        },
    ];
    for err in errors {
        let message = err.to_string();
        assert!(message.starts_with(char::is_lowercase), "{message}");
        assert!(message.contains("`/some/where/toolsets.json`"), "{message}");
    }
}

#[test]
fn default_path_is_under_the_data_dir() {
    if let Some(path) = Store::default_path() {
        assert!(
            path.ends_with("moniker/toolsets.json"),
            "{}",
            path.display()
        );
    }
}
