//! Trigger files on a real temporary directory: line format, claiming, half-written and
//! malformed lines, leftovers and file names.

use std::time::{Duration, SystemTime};

use super::*;

fn message(target: &str, seq: u64, body: &str) -> BusMessage {
    BusMessage {
        id: format!("id-{seq}"),
        from: "user".into(),
        role: "user".into(),
        target: target.into(),
        seq,
        priority: Priority::Urgent,
        body: body.into(),
        correlation_id: format!("corr-{seq}"),
        time: jiff::Timestamp::from_second(1_800_000_000).unwrap(),
        session: None,
    }
}

fn files() -> (tempfile::TempDir, TriggerFiles) {
    let directory = tempfile::tempdir().unwrap();
    let files = TriggerFiles::new(directory.path().join("triggers"));
    (directory, files)
}

fn set_age(path: &Path, age: Duration) {
    let file = File::options().append(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

#[test]
fn one_json_line_per_message_with_every_field() {
    let (_directory, files) = files();
    let path = files.append(&message("assistant", 1, "first\nline two")).unwrap();
    files.append(&message("assistant", 2, "second")).unwrap();
    assert_eq!(path, files.directory().join("assistant.txt"));
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'));
    let lines: Vec<serde_json::Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0],
        serde_json::json!({
            "id": "id-1", "from": "user", "role": "user", "target": "assistant", "seq": 1, "priority": "urgent",
            "body": "first\nline two", "correlation_id": "corr-1", "time": "2027-01-15T08:00:00Z",
        })
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(files.directory()).unwrap().permissions().mode() & 0o777, 0o700);
    }
    assert_eq!(files.waiting_targets().unwrap(), ["assistant"]);
}

#[test]
fn a_claim_takes_every_line_and_finishing_removes_the_file() {
    let (_directory, files) = files();
    files.append(&message("worker", 1, "one")).unwrap();
    files.append(&message("worker", 2, "two")).unwrap();
    let claim = files.claim("worker", SystemTime::now()).unwrap();
    let bodies: Vec<&str> = claim.lines.iter().map(|line| line.line.body.as_str()).collect();
    assert_eq!(bodies, ["one", "two"]);
    assert!(!files.pending_file("worker").unwrap().exists(), "claimed files are renamed away");
    // A writer after the claim starts a fresh file.
    files.append(&message("worker", 3, "three")).unwrap();
    files.finish(claim, &[]).unwrap();
    assert!(!files.directory().join("worker.processing").exists());
    let next = files.claim("worker", SystemTime::now()).unwrap();
    assert_eq!(next.lines.len(), 1);
    assert_eq!(next.lines[0].line.body, "three");
}

#[test]
fn undelivered_lines_stay_for_the_next_claim_before_newer_ones() {
    let (_directory, files) = files();
    for seq in 1..=3 {
        files.append(&message("coder", seq, &format!("m{seq}"))).unwrap();
    }
    let claim = files.claim("coder", SystemTime::now()).unwrap();
    let left = claim.lines[1..].to_vec();
    files.finish(claim, &left).unwrap();
    files.append(&message("coder", 4, "m4")).unwrap();
    let again = files.claim("coder", SystemTime::now()).unwrap();
    let bodies: Vec<&str> = again.lines.iter().map(|line| line.line.body.as_str()).collect();
    assert_eq!(bodies, ["m2", "m3"], "the leftover comes first; the newer file waits");
    files.finish(again, &[]).unwrap();
    let last = files.claim("coder", SystemTime::now()).unwrap();
    assert_eq!(last.lines[0].line.body, "m4");
}

#[test]
fn a_half_written_last_line_waits_for_its_writer() {
    let (_directory, files) = files();
    files.append(&message("assistant", 1, "whole")).unwrap();
    let path = files.pending_file("assistant").unwrap();
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(br#"{"from":"user","bo"#).unwrap();
    let claim = files.claim("assistant", SystemTime::now()).unwrap();
    assert!(claim.writer_busy);
    assert!(claim.lines.is_empty());
    assert!(path.exists(), "nothing is moved while the writer writes");
    file.write_all(b"dy\":\"late half\"}\n").unwrap();
    let claim = files.claim("assistant", SystemTime::now()).unwrap();
    let bodies: Vec<&str> = claim.lines.iter().map(|line| line.line.body.as_str()).collect();
    assert_eq!(bodies, ["whole", "late half"]);
    assert_eq!(claim.lines[1].line.seq, None, "a hand-written line may leave the rest to the reader");
}

#[test]
fn an_abandoned_half_line_is_quarantined_not_lost() {
    let (_directory, files) = files();
    files.append(&message("assistant", 1, "whole")).unwrap();
    let path = files.pending_file("assistant").unwrap();
    OpenOptions::new().append(true).open(&path).unwrap().write_all(br#"{"from":"user","bo"#).unwrap();
    set_age(&path, WRITE_GRACE + Duration::from_secs(1));
    let claim = files.claim("assistant", SystemTime::now()).unwrap();
    assert!(!claim.writer_busy);
    assert_eq!(claim.lines.len(), 1);
    assert_eq!(claim.quarantined, 1);
    let bad = fs::read_to_string(files.quarantine_file("assistant").unwrap()).unwrap();
    assert_eq!(bad, "{\"from\":\"user\",\"bo\n");
}

#[test]
fn malformed_lines_go_to_the_bad_file_and_the_rest_is_claimed() {
    let (_directory, files) = files();
    let path = files.pending_file("assistant").unwrap();
    fs::create_dir_all(files.directory()).unwrap();
    fs::write(
        &path,
        "not json at all\n{\"from\":\"user\",\"body\":\"good\"}\n\n{\"body\":\"no sender\"}\r\n{\"from\":\"user\",\"body\":\"x\",\"priority\":\"soon\"}\n",
    )
    .unwrap();
    let claim = files.claim("assistant", SystemTime::now()).unwrap();
    assert_eq!(claim.lines.len(), 1);
    assert_eq!(claim.lines[0].line.body, "good");
    assert_eq!(claim.quarantined, 3);
    let bad = fs::read_to_string(files.quarantine_file("assistant").unwrap()).unwrap();
    assert_eq!(
        bad.lines().collect::<Vec<_>>(),
        ["not json at all", "{\"body\":\"no sender\"}", "{\"from\":\"user\",\"body\":\"x\",\"priority\":\"soon\"}"]
    );
}

#[test]
fn target_names_cannot_escape_the_directory() {
    let (_directory, files) = files();
    for bad in ["../escape", "a/b", "..", ".", "", "x.txt", "/etc/passwd"] {
        assert!(matches!(files.pending_file(bad), Err(TriggerError::BadTarget(_))), "{bad:?}");
        assert!(files.claim(bad, SystemTime::now()).is_err(), "{bad:?}");
    }
    let mut escaping = message("ok", 1, "x");
    escaping.target = "../../outside".into();
    assert!(files.append(&escaping).is_err());
    assert_eq!(files.pending_file("Worker-2").unwrap(), files.directory().join("worker-2.txt"));
}

#[test]
fn nothing_to_claim_is_an_empty_claim() {
    let (_directory, files) = files();
    let claim = files.claim("assistant", SystemTime::now()).unwrap();
    assert!(claim.lines.is_empty() && !claim.writer_busy && claim.quarantined == 0);
    files.finish(claim, &[]).unwrap();
    assert!(files.waiting_targets().unwrap().is_empty());
}
