//! HEARTBEAT.md as scheduler jobs: one job for a checklist, one per section, with
//! deterministic ids and jitter seeds (an edit re-rolls nothing), and what a heartbeat
//! turn is asked and how its "nothing to report" answer is recognised.

use jiff::Timestamp;

use super::{Checklist, HeartbeatFile, HeartbeatSection, content_hash, parse};
use crate::jobs::{ContextMode, Job, JobKind, JobStatus};
use crate::schedule::{Schedule, resolve_zone};

/// The answer of a heartbeat turn that found nothing worth telling the user.
pub const HEARTBEAT_OK: &str = "HEARTBEAT_OK";

/// Settings from `[scheduler]` that a file does not state itself.
#[derive(Debug, Clone, Copy)]
pub struct HeartbeatDefaults<'a> {
    /// Schedule of a checklist file (`every 30m`).
    pub every: &'a str,
    /// IANA zone of cadence slots and active hours.
    pub timezone: &'a str,
    /// Window of heartbeats whose section names none (`HH:MM-HH:MM`).
    pub active_hours: Option<&'a str>,
    /// Context mode of heartbeats whose section names none.
    pub context: ContextMode,
}

/// The jobs a HEARTBEAT.md stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatJobs {
    /// The file's [`content_hash`], stored in each job's `source_hash`.
    pub hash: String,
    /// The jobs; empty for an effectively empty checklist (its ticks are skipped).
    pub jobs: Vec<Job>,
    /// What was wrong (sections skipped, a default that doesn't parse), one line each.
    pub warnings: Vec<String>,
}

/// Why a file made no jobs at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeartbeatJobsError {
    /// The file can't be used; the jobs it made before stay as they are.
    #[error(transparent)]
    File(#[from] super::HeartbeatError),
}

/// The heartbeat jobs of `context` from HEARTBEAT.md `text`, first due after `now`.
/// `previous` are the context's current heartbeat jobs: a job that survives an edit
/// (same id, same schedule) keeps its status, next run, last run and failure count, so
/// pausing a heartbeat or its jittered slot outlives unrelated edits of the file.
pub fn heartbeat_jobs(
    context: &str,
    text: &str,
    defaults: &HeartbeatDefaults<'_>,
    previous: &[Job],
    now: Timestamp,
) -> Result<HeartbeatJobs, HeartbeatJobsError> {
    let file = parse(text)?;
    let hash = content_hash(text);
    let mut warnings: Vec<String> = file.warnings().iter().map(ToString::to_string).collect();
    let mut jobs = Vec::new();
    let base = Base { context, defaults, hash: &hash, now };
    match file {
        HeartbeatFile::Checklist(Checklist::Empty) => {}
        HeartbeatFile::Checklist(Checklist::Prompt(prompt)) => match Schedule::parse(defaults.every) {
            Ok(_) => jobs.push(base.job("HEARTBEAT.md", defaults.every.trim(), None, prompt, None, None)),
            Err(error) => warnings.push(format!("scheduler.heartbeat.every: {error}; the checklist can't run")),
        },
        HeartbeatFile::Sections(file) => {
            for section in file.sections {
                jobs.push(base.section_job(section));
            }
        }
    }
    let zone = resolve_zone(defaults.timezone);
    let mut ready = Vec::with_capacity(jobs.len());
    for mut job in jobs {
        let Ok(zone) = &zone else {
            warnings
                .push(format!("scheduler.timezone {:?} is not a known zone; heartbeats can't run", defaults.timezone));
            break;
        };
        if let Some(old) = previous.iter().find(|old| old.id == job.id && old.schedule == job.schedule) {
            job.keep_state_of(old);
        } else {
            match job
                .parsed_schedule()
                .map_err(|error| error.to_string())
                .and_then(|schedule| schedule.first_due(now, zone).map_err(|error| error.to_string()))
            {
                Ok(first) => job.next_run = Some(first.as_millisecond()),
                Err(error) => {
                    warnings.push(format!("heartbeat {:?}: {error}; skipped", job.name));
                    continue;
                }
            }
        }
        ready.push(job);
    }
    Ok(HeartbeatJobs { hash, jobs: ready, warnings })
}

struct Base<'a> {
    context: &'a str,
    defaults: &'a HeartbeatDefaults<'a>,
    hash: &'a str,
    now: Timestamp,
}

impl Base<'_> {
    fn section_job(&self, section: HeartbeatSection) -> Job {
        let active_hours = section.active_hours.map(|window| window.to_string());
        let seed = fnv1a(&format!("{}\n{}", self.context, section.name.to_lowercase()));
        self.job(&section.name, section.cadence.name(), Some(seed), section.prompt, section.context, active_hours)
    }

    fn job(
        &self,
        name: &str,
        schedule: &str,
        seed: Option<u64>,
        prompt: String,
        context: Option<ContextMode>,
        active_hours: Option<String>,
    ) -> Job {
        let identity = format!("{}\n{}", self.context, name.to_lowercase());
        Job {
            id: format!("hb-{:08x}", fnv1a(&identity) & 0xffff_ffff),
            kind: JobKind::Heartbeat,
            name: name.to_owned(),
            schedule: schedule.to_owned(),
            timezone: self.defaults.timezone.to_owned(),
            message: prompt,
            channel: None,
            context_mode: context.unwrap_or(self.defaults.context),
            owner_context: self.context.to_owned(),
            status: JobStatus::Active,
            next_run: None,
            last_run: None,
            last_error: None,
            consecutive_failures: 0,
            created: self.now.as_millisecond(),
            source_hash: Some(self.hash.to_owned()),
            // Seeds are stored as SQLite integers; the bit pattern round-trips.
            seed: seed.map(|seed| seed as i64),
            active_hours: active_hours.or_else(|| self.defaults.active_hours.map(str::to_owned)),
        }
    }
}

/// What the heartbeat role is asked on a tick of heartbeat `name`.
pub fn heartbeat_task(name: &str, prompt: &str) -> String {
    format!(
        "Scheduled heartbeat check \"{name}\" (not a message from the user).\n\n{prompt}\n\nIf nothing here needs \
         the user's attention, answer with exactly {HEARTBEAT_OK} and nothing else. Otherwise answer with a short \
         message for the user."
    )
}

/// Whether `reply` begins or ends with [`HEARTBEAT_OK`] (Markdown emphasis, code marks
/// and punctuation around it don't count): such replies are dropped, not delivered.
pub fn is_heartbeat_ok(reply: &str) -> bool {
    let decoration = |character: char| character.is_whitespace() || "*_`.!\"'".contains(character);
    let trimmed = reply.trim_matches(decoration);
    trimmed.starts_with(HEARTBEAT_OK) || trimmed.ends_with(HEARTBEAT_OK)
}

fn fnv1a(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-03-04T12:00:00Z";

    fn defaults() -> HeartbeatDefaults<'static> {
        HeartbeatDefaults {
            every: "every 30m",
            timezone: "Europe/Berlin",
            active_hours: None,
            context: ContextMode::Session,
        }
    }

    fn generate(text: &str, previous: &[Job]) -> HeartbeatJobs {
        heartbeat_jobs("owner", text, &defaults(), previous, NOW.parse().unwrap()).unwrap()
    }

    const SECTIONS: &str = "# Heartbeats\n\n## Email triage\nCadence: hourly\nPrompt: Check the inbox.\n\n\
                            ## Weekly review\n- cadence: Weekly\n- context: isolated\n- Active hours: 09:00-17:00\n\
                            Prompt: Summarise the week.\nKeep it short.\n\n## Broken\nPrompt: no cadence here\n";

    #[test]
    fn sections_become_one_job_each_and_a_broken_one_is_skipped_with_a_warning() {
        let made = generate(SECTIONS, &[]);
        let names: Vec<&str> = made.jobs.iter().map(|job| job.name.as_str()).collect();
        assert_eq!(names, ["Email triage", "Weekly review"]);
        assert!(made.warnings.iter().any(|warning| warning.contains("Broken")), "{:?}", made.warnings);
        let weekly = &made.jobs[1];
        assert_eq!((weekly.schedule.as_str(), weekly.context_mode), ("weekly", ContextMode::Isolated));
        assert_eq!(weekly.active_hours.as_deref(), Some("09:00-17:00"));
        assert_eq!(weekly.message, "Summarise the week.\nKeep it short.");
        assert!(
            made.jobs.iter().all(|job| job.kind == JobKind::Heartbeat && job.source_hash.as_ref() == Some(&made.hash))
        );
        let now: Timestamp = NOW.parse().unwrap();
        for job in &made.jobs {
            let next = job.next_run.unwrap();
            assert!(next > now.as_millisecond(), "{job:?}");
            assert!(job.parsed_schedule().is_ok(), "{job:?}");
        }
        // hourly: within the next hour; the jitter is the seeded minute.
        assert!(made.jobs[0].next_run.unwrap() <= now.as_millisecond() + 3_600_000);
    }

    #[test]
    fn ids_and_slots_are_stable_across_edits_and_survivors_keep_their_state() {
        let first = generate(SECTIONS, &[]);
        let mut paused = first.jobs[0].clone();
        paused.status = JobStatus::Paused;
        paused.last_run = Some(1);
        paused.consecutive_failures = 2;
        let edited = SECTIONS.replace("Check the inbox.", "Check the inbox and the calendar.");
        let second = generate(&edited, &[paused.clone(), first.jobs[1].clone()]);
        assert_ne!(first.hash, second.hash);
        assert_eq!(second.jobs[0].id, first.jobs[0].id);
        assert_eq!(second.jobs[0].seed, first.jobs[0].seed);
        assert_eq!(
            (second.jobs[0].status, second.jobs[0].last_run, second.jobs[0].consecutive_failures),
            (JobStatus::Paused, Some(1), 2)
        );
        assert_eq!(second.jobs[0].message, "Check the inbox and the calendar.");
        // Another context gets other slots.
        let other = heartbeat_jobs("group:ops", SECTIONS, &defaults(), &[], NOW.parse().unwrap()).unwrap();
        assert_ne!(other.jobs[0].id, first.jobs[0].id);
    }

    #[test]
    fn a_checklist_is_one_job_on_the_configured_schedule_and_an_empty_one_none() {
        let made = generate("# Checks\n\n- Anything urgent in the inbox?\n", &[]);
        assert_eq!(made.jobs.len(), 1);
        assert_eq!(
            (made.jobs[0].schedule.as_str(), made.jobs[0].message.as_str()),
            ("every 30m", "# Checks\n\n- Anything urgent in the inbox?")
        );
        assert!(generate("# Heartbeat checklist\n\n## Later\n\n- [ ]\n", &[]).jobs.is_empty());
        let bad = heartbeat_jobs(
            "owner",
            "- check things",
            &HeartbeatDefaults { every: "every now and then", ..defaults() },
            &[],
            NOW.parse().unwrap(),
        )
        .unwrap();
        assert!(bad.jobs.is_empty() && bad.warnings[0].contains("scheduler.heartbeat.every"), "{bad:?}");
        let zone = heartbeat_jobs(
            "owner",
            "- x",
            &HeartbeatDefaults { timezone: "Mars/Base", ..defaults() },
            &[],
            NOW.parse().unwrap(),
        )
        .unwrap();
        assert!(zone.jobs.is_empty() && zone.warnings[0].contains("Mars/Base"), "{zone:?}");
    }

    #[test]
    fn an_oversized_file_is_an_error_so_the_old_jobs_stay() {
        let huge = "x".repeat(super::super::MAX_FILE_BYTES + 1);
        assert!(heartbeat_jobs("owner", &huge, &defaults(), &[], NOW.parse().unwrap()).is_err());
    }

    #[test]
    fn heartbeat_ok_is_recognised_at_either_end_only() {
        for reply in [
            "HEARTBEAT_OK",
            "  **HEARTBEAT_OK**\n",
            "All quiet. HEARTBEAT_OK",
            "HEARTBEAT_OK - nothing new",
            "`HEARTBEAT_OK`.",
        ] {
            assert!(is_heartbeat_ok(reply), "{reply:?}");
        }
        for reply in ["", "The build failed; HEARTBEAT_OK would be wrong here, look at CI.", "HEARTBEAT", "ok"] {
            assert!(!is_heartbeat_ok(reply), "{reply:?}");
        }
        assert!(heartbeat_task("Email", "Check mail").contains(HEARTBEAT_OK));
    }
}
