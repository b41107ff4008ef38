//! Reading, checking and reloading the certificate and key files.

use super::*;

/// A self-signed certificate for `name` and its key, as PEM.
fn pair(name: &str) -> (String, String) {
    let certified = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
    (certified.cert.pem(), certified.signing_key.serialize_pem())
}

fn files(directory: &Path, (cert, key): &(String, String)) -> TlsFiles {
    let files = TlsFiles { cert: directory.join("cert.pem"), key: directory.join("key.pem") };
    std::fs::write(&files.cert, cert).unwrap();
    std::fs::write(&files.key, key).unwrap();
    files
}

fn served(tls: &Tls) -> Vec<u8> {
    tls.pair.cert[0].as_ref().to_vec()
}

fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap().as_ref().to_vec()
}

#[test]
fn bad_files_are_refused_naming_the_key_they_are_about() {
    let directory = tempfile_directory();
    let good = pair("localhost");
    let files = files(directory.path(), &good);
    assert!(Tls::load(files.clone()).is_ok());

    let missing = TlsFiles { cert: directory.path().join("nope.pem"), key: files.key.clone() };
    let error = Tls::load(missing).unwrap_err();
    assert_eq!(error.key(), "gateway.tls.cert");
    let error = error.to_string();
    assert!(error.starts_with("can't use ") && error.contains("nope.pem"), "{error}");

    std::fs::write(directory.path().join("garbage.pem"), "not a key\n").unwrap();
    let garbage = TlsFiles { cert: files.cert.clone(), key: directory.path().join("garbage.pem") };
    let error = Tls::load(garbage).unwrap_err();
    assert_eq!(error.key(), "gateway.tls.key");
    assert!(error.to_string().contains("no private key"), "{error}");

    let other = pair("localhost");
    std::fs::write(directory.path().join("other.pem"), &other.1).unwrap();
    let mismatched = TlsFiles { cert: files.cert.clone(), key: directory.path().join("other.pem") };
    let error = Tls::load(mismatched).unwrap_err();
    assert_eq!(error.key(), "gateway.tls.key");
    assert!(error.to_string().contains("is not the key of the certificate"), "{error}");

    let swapped = TlsFiles { cert: files.key.clone(), key: files.cert.clone() };
    let error = Tls::load(swapped).unwrap_err();
    assert_eq!(error.key(), "gateway.tls.cert");
    assert!(error.to_string().contains("no certificate"), "{error}");
}

#[test]
fn a_changed_pair_is_served_and_a_bad_one_keeps_the_old() {
    let directory = tempfile_directory();
    let first = pair("first.test");
    let files = files(directory.path(), &first);
    let mut tls = Tls::load(files.clone()).unwrap();
    assert_eq!(served(&tls), der(&first.0));

    // Half a renewal: the new certificate beside the old key is refused, the old pair stays.
    let second = pair("second.test");
    write(&files.cert, &second.0, 1);
    tls.reload_if_changed();
    assert_eq!(served(&tls), der(&first.0));
    assert!(tls.failed.is_some());

    // With the key in place too, the next check serves the new pair.
    let before = tls.config.clone();
    write(&files.key, &second.1, 2);
    tls.reload_if_changed();
    assert_eq!(served(&tls), der(&second.0));
    assert!(!Arc::ptr_eq(&before, &tls.config), "a fresh configuration: no resumed session skips the new pair");
    assert!(tls.failed.is_none());

    write(&files.key, "garbage", 3);
    tls.reload_if_changed();
    assert_eq!(served(&tls), der(&second.0), "a broken key file keeps the pair in use");
}

#[test]
fn the_pinned_client_trusts_only_the_gateways_certificate() {
    let directory = tempfile_directory();
    let first = pair("localhost");
    let files = files(directory.path(), &first);
    assert!(pinned_client_config(&files.cert).is_ok());
    let pinned = Pinned {
        certificate: CertificateDer::from_pem_slice(first.0.as_bytes()).unwrap(),
        provider: Arc::new(ring::default_provider()),
    };
    let name = ServerName::try_from("anything").unwrap();
    let own = CertificateDer::from(der(&first.0));
    assert!(pinned.verify_server_cert(&own, &[], &name, &[], UnixTime::now()).is_ok());
    let stranger = CertificateDer::from(der(&pair("localhost").0));
    assert!(pinned.verify_server_cert(&stranger, &[], &name, &[], UnixTime::now()).is_err());
}

fn tempfile_directory() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Writes `contents` to `path` with a modification time `seconds` after the epoch, so a
/// change shows even when two writes fall in one tick of the file system's clock.
fn write(path: &Path, contents: &str, seconds: u64) {
    std::fs::write(path, contents).unwrap();
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)).unwrap();
}
