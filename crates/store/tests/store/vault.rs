//! The secrets vault: sealed at rest, bound to names, refusing wrong keys and tampering.

use squidbot_store::{Database, Vault, VaultError, VaultKey};

fn database(directory: &tempfile::TempDir) -> Database {
    Database::open(&directory.path().join("squidbot.db")).unwrap()
}

fn raw(database: &Database) -> rusqlite::Connection {
    rusqlite::Connection::open(database.path()).unwrap()
}

#[test]
fn a_secret_round_trips_and_is_not_stored_in_plain_text() {
    let directory = tempfile::tempdir().unwrap();
    let database = database(&directory);
    let vault = Vault::open(database.clone(), &VaultKey::from_bytes([7; 32])).unwrap();
    vault.set("openai", "sk-plain-value-123").unwrap();
    assert_eq!(vault.get("openai").unwrap().unwrap().expose(), "sk-plain-value-123");
    assert!(vault.get("missing").unwrap().is_none());
    drop(vault);
    let reopened = Vault::open(database.clone(), &VaultKey::from_bytes([7; 32])).unwrap();
    assert_eq!(reopened.get("openai").unwrap().unwrap().expose(), "sk-plain-value-123");
    let stored: Vec<u8> =
        raw(&database).query_row("SELECT ciphertext FROM vault_secrets", [], |row| row.get(0)).unwrap();
    assert!(!stored.windows(5).any(|window| window == b"plain"), "sealed at rest");
    assert_eq!(stored.len(), "sk-plain-value-123".len() + 16, "value and tag");
}

#[test]
fn a_wrong_key_is_refused_at_open_with_a_clear_error() {
    let directory = tempfile::tempdir().unwrap();
    let database = database(&directory);
    let key_path = directory.path().join("vault.key");
    let vault = Vault::open(database.clone(), &VaultKey::load_or_create_file(&key_path).unwrap()).unwrap();
    vault.set("openai", "sk-right").unwrap();
    drop(vault);
    let error = Vault::open(database.clone(), &VaultKey::from_bytes([1; 32])).unwrap_err();
    assert!(matches!(error, VaultError::WrongKey { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("can't unlock the vault") && message.contains("key file"), "{message}");
}

#[test]
fn a_row_sealed_under_another_key_never_yields_garbage() {
    let directory = tempfile::tempdir().unwrap();
    let database = database(&directory);
    let other = tempfile::tempdir().unwrap();
    let other_database = Database::open(&other.path().join("squidbot.db")).unwrap();
    let foreign = Vault::open(other_database.clone(), &VaultKey::from_bytes([9; 32])).unwrap();
    foreign.set("openai", "sk-foreign").unwrap();
    let (nonce, sealed): (Vec<u8>, Vec<u8>) = raw(&other_database)
        .query_row("SELECT nonce, ciphertext FROM vault_secrets", [], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap();
    let vault = Vault::open(database.clone(), &VaultKey::from_bytes([7; 32])).unwrap();
    vault.set("openai", "sk-mine").unwrap();
    raw(&database)
        .execute("UPDATE vault_secrets SET nonce = ?1, ciphertext = ?2", rusqlite::params![nonce, sealed])
        .unwrap();
    let fresh = Vault::open(database, &VaultKey::from_bytes([7; 32])).unwrap();
    assert!(matches!(fresh.get("openai"), Err(VaultError::Tampered { .. })));
}

#[test]
fn nonces_are_fresh_for_every_write() {
    let directory = tempfile::tempdir().unwrap();
    let database = database(&directory);
    let vault = Vault::open(database.clone(), &VaultKey::from_bytes([7; 32])).unwrap();
    let mut nonces = std::collections::HashSet::new();
    for round in 0..50 {
        vault.set("same", "same value").unwrap();
        vault.set(&format!("name-{round}"), "same value").unwrap();
        let nonce: Vec<u8> = raw(&database)
            .query_row("SELECT nonce FROM vault_secrets WHERE name = 'same'", [], |row| row.get(0))
            .unwrap();
        assert_eq!(nonce.len(), 24);
        assert!(nonces.insert(nonce), "a nonce came twice");
    }
    let all: Vec<Vec<u8>> = raw(&database)
        .prepare("SELECT nonce FROM vault_secrets")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let distinct: std::collections::HashSet<_> = all.iter().collect();
    assert_eq!(distinct.len(), all.len());
}

#[test]
fn tampered_ciphertext_is_refused() {
    let directory = tempfile::tempdir().unwrap();
    let database = database(&directory);
    let vault = Vault::open(database.clone(), &VaultKey::from_bytes([7; 32])).unwrap();
    vault.set("openai", "sk-value").unwrap();
    let mut sealed: Vec<u8> =
        raw(&database).query_row("SELECT ciphertext FROM vault_secrets", [], |row| row.get(0)).unwrap();
    sealed[0] ^= 1;
    raw(&database).execute("UPDATE vault_secrets SET ciphertext = ?1", [sealed]).unwrap();
    let fresh = Vault::open(database, &VaultKey::from_bytes([7; 32])).unwrap();
    let error = fresh.get("openai").unwrap_err();
    assert!(error.to_string().contains("altered"), "{error}");
}

#[test]
fn swapping_two_rows_values_fails_because_the_name_is_bound() {
    let directory = tempfile::tempdir().unwrap();
    let database = database(&directory);
    let vault = Vault::open(database.clone(), &VaultKey::from_bytes([7; 32])).unwrap();
    vault.set("alpha", "value-a").unwrap();
    vault.set("beta", "value-b").unwrap();
    let connection = raw(&database);
    connection
        .execute_batch(
            "CREATE TEMP TABLE swap AS SELECT name, nonce, ciphertext FROM vault_secrets;
             UPDATE vault_secrets SET
                 nonce = (SELECT nonce FROM swap WHERE swap.name <> vault_secrets.name),
                 ciphertext = (SELECT ciphertext FROM swap WHERE swap.name <> vault_secrets.name);",
        )
        .unwrap();
    let fresh = Vault::open(database, &VaultKey::from_bytes([7; 32])).unwrap();
    assert!(matches!(fresh.get("alpha"), Err(VaultError::Tampered { .. })));
    assert!(matches!(fresh.get("beta"), Err(VaultError::Tampered { .. })));
}

#[test]
fn list_shows_names_and_dates_never_values() {
    let directory = tempfile::tempdir().unwrap();
    let vault = Vault::open(database(&directory), &VaultKey::from_bytes([7; 32])).unwrap();
    vault.set("zeta", "zeta-value-secret").unwrap();
    vault.set("alpha", "alpha-value-secret").unwrap();
    let entries = vault.list().unwrap();
    assert_eq!(entries.iter().map(|entry| entry.name.as_str()).collect::<Vec<_>>(), ["alpha", "zeta"]);
    assert!(entries.iter().all(|entry| entry.last_used_ms.is_none()));
    let shown = format!("{entries:?}");
    assert!(!shown.contains("value-secret"), "{shown}");
    vault.get("alpha").unwrap();
    let used = vault.list().unwrap();
    assert!(used[0].last_used_ms.is_some() && used[1].last_used_ms.is_none());
}

#[test]
fn rotate_needs_an_existing_secret_and_remove_forgets_it() {
    let directory = tempfile::tempdir().unwrap();
    let vault = Vault::open(database(&directory), &VaultKey::from_bytes([7; 32])).unwrap();
    assert!(matches!(vault.rotate("openai", "new"), Err(VaultError::NotFound { .. })));
    vault.set("openai", "old").unwrap();
    let created = vault.list().unwrap()[0].created_ms;
    vault.rotate("openai", "new").unwrap();
    assert_eq!(vault.get("openai").unwrap().unwrap().expose(), "new");
    assert_eq!(vault.list().unwrap()[0].created_ms, created);
    assert!(vault.remove("openai").unwrap());
    assert!(!vault.remove("openai").unwrap());
    assert!(vault.get("openai").unwrap().is_none());
    assert!(matches!(vault.set("bad name", "x"), Err(VaultError::InvalidName { .. })));
}

#[test]
fn every_value_is_read_for_the_scanner_without_counting_as_a_use() {
    let directory = tempfile::tempdir().unwrap();
    let database = database(&directory);
    let vault = Vault::open(database.clone(), &VaultKey::from_bytes([7; 32])).unwrap();
    vault.set("GH_TOKEN", "ghp-value-1").unwrap();
    vault.set("openai", "sk-value-2").unwrap();
    let fresh = Vault::open(database, &VaultKey::from_bytes([7; 32])).unwrap();
    let values: Vec<(String, String)> =
        fresh.values().unwrap().into_iter().map(|(name, value)| (name, value.expose().to_owned())).collect();
    assert_eq!(
        values,
        [("GH_TOKEN".to_owned(), "ghp-value-1".to_owned()), ("openai".to_owned(), "sk-value-2".to_owned())]
    );
    assert!(fresh.list().unwrap().iter().all(|entry| entry.last_used_ms.is_none()), "knowing is not using");
}
