//! When a remembered file timestamp can be trusted: the racy-timestamp rule shared by the
//! caches that hand out what they read while a file's `stat` is unchanged (skills,
//! workspace prompt files).

use std::time::{Duration, SystemTime};

/// How close to being read a timestamp with whole seconds may be and still be shared by
/// a later change: such timestamps come from coarse filesystems (FAT's 2 s, ext3's and
/// HFS+'s 1 s), so two writes within the same second or two look the same.
const COARSE_RACY_WINDOW: Duration = Duration::from_secs(2);

/// The same for a timestamp with a sub-second part, which comes from a filesystem keeping
/// nanoseconds (ext4, XFS, btrfs, tmpfs, APFS; exFAT's 10 ms). Their granularity is the
/// kernel's coarse clock, one tick (at most 10 ms) behind the clock `SystemTime::now`
/// reads, so 50 ms covers it with room to spare.
const FINE_RACY_WINDOW: Duration = Duration::from_millis(50);

/// True when a file or directory modified at `modified` and read at `observed_at` may
/// have changed again since without its mtime moving. As with git's "racily clean" index
/// entries: a change after the read gets a timestamp no earlier than the read, less the
/// filesystem's granularity, so only an mtime older than the read by more than that
/// granularity tells every later change apart. A racy entry is read again next time.
pub fn is_racy(modified: SystemTime, observed_at: SystemTime) -> bool {
    let fine = modified.duration_since(SystemTime::UNIX_EPOCH).is_ok_and(|since| since.subsec_nanos() != 0);
    let window = if fine { FINE_RACY_WINDOW } else { COARSE_RACY_WINDOW };
    // A timestamp so far in the future that nothing can be added to it is never trusted.
    modified.checked_add(window).is_none_or(|trusted_after| trusted_after >= observed_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_racy_window_fits_the_timestamp_granularity() {
        let read_at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        // Nanoseconds: a fine-grained filesystem, trusted once a few ticks old.
        let fine = read_at - Duration::from_millis(10) + Duration::from_nanos(1);
        assert!(is_racy(fine, read_at));
        assert!(!is_racy(fine - Duration::from_millis(100), read_at));
        // Whole seconds: a coarse filesystem, trusted only two seconds on.
        let coarse = read_at - Duration::from_secs(1);
        assert!(is_racy(coarse, read_at), "whole seconds: a coarse filesystem");
        assert!(!is_racy(coarse - Duration::from_secs(2), read_at));
        assert!(is_racy(read_at + Duration::from_secs(60), read_at), "an mtime in the future");
    }
}
