//! `FsMemoryDocuments`: one `memory.md` per context, written atomically.

use std::fs;

use squidbot_core::memory::MemoryDocuments;
use squidbot_store::{FsMemoryDocuments, encode_key};

#[test]
fn documents_are_replaced_whole_and_leave_no_temporary_files() {
    let directory = tempfile::tempdir().unwrap();
    let documents = FsMemoryDocuments::new(directory.path().join("memory"));
    assert_eq!(documents.read("cli:local").unwrap(), None);
    let big = format!("# Memory\n{}", "- a remembered line\n".repeat(500));
    documents.write("cli:local", &big).unwrap();
    assert_eq!(documents.read("cli:local").unwrap().as_deref(), Some(big.as_str()));
    documents.write("cli:local", "# Memory\n- short now\n").unwrap();
    assert_eq!(documents.read("cli:local").unwrap().as_deref(), Some("# Memory\n- short now\n"));
    let names: Vec<String> = fs::read_dir(directory.path().join("memory/cli:local"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["memory.md".to_owned()]);
}

#[test]
fn odd_context_names_stay_inside_the_root() {
    let directory = tempfile::tempdir().unwrap();
    let root = directory.path().join("memory");
    let documents = FsMemoryDocuments::new(root.clone());
    let contexts = ["../../etc", "a/b", ".hidden", "..", "with space", "日本:🦑", "matrix:@user:example.org", "100%"];
    for context in contexts {
        documents.write(context, &format!("about {context}")).unwrap();
    }
    for context in contexts {
        assert_eq!(documents.read(context).unwrap(), Some(format!("about {context}")), "{context}");
        let expected = root.join(encode_key(context).unwrap()).join("memory.md");
        assert_eq!(documents.location(context), expected.display().to_string());
        assert!(expected.is_file(), "{context}");
    }
    // Every document is one directory below the root, and nothing escaped it.
    let directories = fs::read_dir(&root).unwrap().count();
    assert_eq!(directories, contexts.len());
    assert_eq!(fs::read_dir(directory.path()).unwrap().count(), 1);
}

/// A home with a `memory/` directory; its documents and the home's path.
fn home() -> (tempfile::TempDir, FsMemoryDocuments) {
    let directory = tempfile::tempdir().unwrap();
    let documents = FsMemoryDocuments::new(directory.path().join("memory"));
    (directory, documents)
}

#[test]
fn people_and_groups_keep_their_document_in_their_directory_and_the_owner_under_memory() {
    let (home, documents) = home();
    documents.write("user:bob", "- plays chess\n").unwrap();
    documents.write("group:telegram:-100", "- meets on Tuesdays\n").unwrap();
    documents.write("owner", "- likes tea\n").unwrap();
    let read = |relative: &str| fs::read_to_string(home.path().join(relative)).unwrap();
    assert_eq!(read("users/bob/memory.md"), "- plays chess\n");
    assert_eq!(read("groups/telegram:-100/memory.md"), "- meets on Tuesdays\n");
    assert_eq!(read("memory/owner/memory.md"), "- likes tea\n");
    assert_eq!(documents.location("user:bob"), home.path().join("users/bob/memory.md").display().to_string());
    let names: Vec<String> = fs::read_dir(home.path().join("memory"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["owner"], "only the owner's stays under memory/");
}

#[test]
fn an_old_document_is_moved_on_first_use() {
    let (home, documents) = home();
    let old = home.path().join("memory/user:bob");
    fs::create_dir_all(&old).unwrap();
    fs::write(old.join("memory.md"), "# Bob\n- plays chess\n").unwrap();
    assert_eq!(documents.read("user:bob").unwrap().as_deref(), Some("# Bob\n- plays chess\n"));
    assert_eq!(fs::read_to_string(home.path().join("users/bob/memory.md")).unwrap(), "# Bob\n- plays chess\n");
    assert!(!old.exists(), "the old file and its directory are gone");
    assert_eq!(documents.read("user:bob").unwrap().as_deref(), Some("# Bob\n- plays chess\n"), "read again");

    // The owner's stays where it is.
    fs::create_dir_all(home.path().join("memory/owner")).unwrap();
    fs::write(home.path().join("memory/owner/memory.md"), "- mine\n").unwrap();
    assert_eq!(documents.read("owner").unwrap().as_deref(), Some("- mine\n"));
    assert!(home.path().join("memory/owner/memory.md").is_file());
}

#[test]
fn an_old_document_beside_a_new_one_is_appended_never_overwriting() {
    let (home, documents) = home();
    documents.write("group:slack:C1", "# Team\n- ships on Fridays\n").unwrap();
    let old = home.path().join("memory/group:slack:C1");
    fs::create_dir_all(&old).unwrap();
    fs::write(old.join("memory.md"), "\n- the old notes\n\n").unwrap();
    // A write moves it too, keeping it below what it writes.
    documents.write("user:carol", "- new\n").unwrap();
    fs::create_dir_all(home.path().join("memory/user:carol")).unwrap();
    fs::write(home.path().join("memory/user:carol/memory.md"), "- old\n").unwrap();
    documents.write("user:carol", "- rewritten with both in mind\n").unwrap();

    assert_eq!(
        documents.read("group:slack:C1").unwrap().as_deref(),
        Some("# Team\n- ships on Fridays\n\n## Moved from memory/group:slack:C1\n\n- the old notes\n")
    );
    assert!(!old.exists());
    assert_eq!(
        documents.read("user:carol").unwrap().as_deref(),
        Some("- rewritten with both in mind\n\n## Moved from memory/user:carol\n\n- old\n"),
        "a write that never saw the old document keeps it"
    );
    assert!(!home.path().join("memory/user:carol").exists());
}
