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
