//! Unit tests of schedule parsing, next due times across DST, jitter and catch-up. Zones
//! come from POSIX TZ rules, so no test depends on the machine's time zone database.

use std::collections::HashSet;

use jiff::civil::{DateTime, Weekday};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use super::*;

/// America/New_York's current rules: DST from the second Sunday of March to the first
/// Sunday of November. In 2026: 2026-03-08 02:00 → 03:00 and 2026-11-01 02:00 → 01:00.
fn new_york() -> TimeZone {
    TimeZone::posix("EST5EDT,M3.2.0,M11.1.0").expect("valid POSIX TZ string")
}

fn instant(text: &str) -> Timestamp {
    text.parse().expect("valid timestamp")
}

fn schedule(text: &str) -> Schedule {
    Schedule::parse(text).unwrap_or_else(|error| panic!("{text:?} should parse: {error}"))
}

fn problem(text: &str) -> ParseProblem {
    match Schedule::parse(text) {
        Err(ScheduleError::Parse { problem, .. }) => problem,
        other => panic!("{text:?} should fail to parse, got {other:?}"),
    }
}

/// The next `count` due times after `start`.
fn runs(schedule: &Schedule, start: &str, zone: &TimeZone, count: usize) -> Vec<Timestamp> {
    let mut after = instant(start);
    let mut due = Vec::new();
    for _ in 0..count {
        after = schedule.next_after(after, zone).expect("a next run");
        due.push(after);
    }
    due
}

fn civil(instant: Timestamp, zone: &TimeZone) -> DateTime {
    zone.to_datetime(instant)
}

#[test]
fn schedule_parses_every_documented_form() {
    assert!(matches!(schedule("0 9 * * 1"), Schedule::Cron(_)));
    assert!(matches!(schedule("*/15 * * * *"), Schedule::Cron(_)));
    assert!(matches!(schedule("1-30/5 0-23/2 1,15 JAN-mar Mon-FRI"), Schedule::Cron(_)));
    assert!(matches!(schedule("0 0 * * 7"), Schedule::Cron(_)));
    assert_eq!(schedule("every 30s"), Schedule::Every(Interval::new(30).unwrap()));
    assert_eq!(schedule("every 5m"), Schedule::Every(Interval::new(300).unwrap()));
    assert_eq!(schedule("every 2h"), Schedule::Every(Interval::new(7200).unwrap()));
    assert_eq!(schedule("Every 3 days"), Schedule::Every(Interval::new(3 * 86_400).unwrap()));
    assert_eq!(schedule("at 2026-12-01T09:00:00Z"), Schedule::At(OneShot::Instant(instant("2026-12-01T09:00:00Z"))));
    assert_eq!(
        schedule("at 2026-12-01T09:00:00+02:00"),
        Schedule::At(OneShot::Instant(instant("2026-12-01T07:00:00Z")))
    );
    assert_eq!(
        schedule("at 2026-12-01T09:00:00"),
        Schedule::At(OneShot::Local(jiff::civil::datetime(2026, 12, 1, 9, 0, 0, 0)))
    );
    assert_eq!(schedule("daily 09:00"), Schedule::Daily(ClockTime::new(9, 0).unwrap()));
    assert_eq!(schedule("  DAILY 9:05 "), Schedule::Daily(ClockTime::new(9, 5).unwrap()));
    assert_eq!(
        schedule("weekly mon 09:00"),
        Schedule::Weekly { weekday: Weekday::Monday, time: ClockTime::new(9, 0).unwrap() }
    );
    assert_eq!(
        schedule("weekly Sunday 23:59"),
        Schedule::Weekly { weekday: Weekday::Sunday, time: ClockTime::new(23, 59).unwrap() }
    );
}

#[test]
fn schedule_display_round_trips_through_the_parser() {
    let cases = [
        ("0 9 * * 1", "0 9 * * 1"),
        ("1-30/5  0-23/2 1,15 JAN-mar Mon-FRI", "1-30/5 0-23/2 1,15 jan-mar mon-fri"),
        ("every 30s", "every 30s"),
        ("every 90m", "every 90m"),
        ("every 3600s", "every 1h"),
        ("every 48h", "every 2d"),
        ("every 2 hours", "every 2h"),
        ("at 2026-12-01T09:00:00Z", "at 2026-12-01T09:00:00Z"),
        ("at 2026-12-01T09:00:00+02:00", "at 2026-12-01T07:00:00Z"),
        ("at 2026-12-01T09:00", "at 2026-12-01T09:00:00"),
        ("daily 9:00", "daily 09:00"),
        ("weekly MONDAY 09:00", "weekly mon 09:00"),
    ];
    for (input, shown) in cases {
        let parsed = schedule(input);
        assert_eq!(parsed.to_string(), shown, "display of {input:?}");
        assert_eq!(schedule(shown), parsed, "{shown:?} parses back to the same schedule");
    }
}

#[test]
fn schedule_rejects_bad_strings_naming_the_problem() {
    use CronField::{DayOfWeek, Hour, Minute, Month};
    assert_eq!(problem("61 * * * *"), ParseProblem::ValueOutOfRange { field: Minute, value: 61, min: 0, max: 59 });
    assert_eq!(problem("* * *"), ParseProblem::CronFieldCount { found: 3 });
    assert_eq!(problem("* * * * * *"), ParseProblem::CronFieldCount { found: 6 });
    assert_eq!(problem("0 24 * * *"), ParseProblem::ValueOutOfRange { field: Hour, value: 24, min: 0, max: 23 });
    assert_eq!(problem("0 0 * foo *"), ParseProblem::InvalidValue { field: Month, text: "foo".into() });
    assert_eq!(problem("0 0 * * 8"), ParseProblem::ValueOutOfRange { field: DayOfWeek, value: 8, min: 0, max: 7 });
    assert_eq!(problem("5-1 * * * *"), ParseProblem::ReversedRange { field: Minute, start: 5, end: 1 });
    assert_eq!(problem("*/0 * * * *"), ParseProblem::StepOutOfRange { field: Minute, step: 0, max: 59 });
    assert_eq!(problem("5/15 * * * *"), ParseProblem::StepWithoutRange { field: Minute, text: "5/15".into() });
    assert_eq!(problem("1,,2 * * * *"), ParseProblem::EmptyListItem { field: Minute });
    assert_eq!(
        problem("99999999999999999999999 * * * *"),
        ParseProblem::ValueOutOfRange { field: Minute, value: u64::MAX, min: 0, max: 59 }
    );
    assert_eq!(problem("every 0s"), ParseProblem::ZeroInterval);
    assert_eq!(problem("every 5x"), ParseProblem::UnknownIntervalUnit { unit: "x".into() });
    assert_eq!(problem("every"), ParseProblem::MissingInterval);
    assert_eq!(problem("every 5"), ParseProblem::MissingInterval);
    assert_eq!(problem("every 366d"), ParseProblem::IntervalTooLong { max_days: 365 });
    assert_eq!(problem("every 99999999999999999999h"), ParseProblem::IntervalTooLong { max_days: 365 });
    assert!(matches!(problem("at 2026-02-30T09:00:00Z"), ParseProblem::InvalidDateTime { .. }));
    assert!(matches!(problem("at 2026-02-30T09:00:00"), ParseProblem::InvalidDateTime { .. }));
    assert!(matches!(problem("at tomorrow"), ParseProblem::InvalidDateTime { .. }));
    assert_eq!(problem("weekly funday 09:00"), ParseProblem::UnknownWeekday { text: "funday".into() });
    assert_eq!(problem("daily 25:00"), ParseProblem::InvalidClockTime { text: "25:00".into() });
    assert_eq!(problem("daily 09:60"), ParseProblem::InvalidClockTime { text: "09:60".into() });
    assert!(matches!(problem("weekly 09:00"), ParseProblem::UnexpectedText { .. }));
    assert_eq!(problem("hourly"), ParseProblem::CadenceWithoutTime { word: "hourly".into() });
    assert_eq!(problem("   "), ParseProblem::Empty);
    assert_eq!(problem("sometimes"), ParseProblem::UnknownForm);
}

#[test]
fn schedule_error_messages_say_what_is_wrong() {
    let message = |text: &str| Schedule::parse(text).expect_err("a bad schedule").to_string();
    assert_eq!(message("61 * * * *"), "can't parse schedule \"61 * * * *\": minute 61 is out of range 0-59");
    assert!(message("* * *").contains("5 fields"), "{}", message("* * *"));
    assert!(message("every 5x").contains("\"x\" is not an interval unit"), "{}", message("every 5x"));
    let invalid_date = message("at 2026-02-30T09:00:00Z");
    assert!(invalid_date.starts_with(
        "can't parse schedule \"at 2026-02-30T09:00:00Z\": \"2026-02-30T09:00:00Z\" is not a date and time: "
    ));
    assert!(invalid_date.contains("30"), "{invalid_date}");
    assert!(message("0 0 31 2 *").contains("never fires"), "{}", message("0 0 31 2 *"));
}

#[test]
fn schedule_refuses_cron_that_never_fires() {
    assert_eq!(problem("0 0 31 2 *"), ParseProblem::NeverFires);
    assert_eq!(problem("0 0 30 feb *"), ParseProblem::NeverFires);
    assert_eq!(problem("0 0 31 4,6,9,11 *"), ParseProblem::NeverFires);
    // A restricted weekday makes it "either", so these do fire.
    schedule("0 0 31 2 mon");
    schedule("0 12 29 2 *");
}

#[test]
fn schedule_unknown_zone_is_an_error() {
    let error = resolve_zone("Mars/Olympus_Mons").expect_err("no such zone");
    assert!(matches!(&error, ScheduleError::UnknownZone { name, .. } if name == "Mars/Olympus_Mons"));
    assert!(error.to_string().starts_with("can't use time zone \"Mars/Olympus_Mons\": "), "{error}");
    assert!(matches!(resolve_zone(""), Err(ScheduleError::UnknownZone { .. })));
}

#[test]
fn schedule_resolves_iana_zones_without_a_system_database() {
    let rules = new_york();
    // The copy compiled into the binary, which answers on a machine without zoneinfo,
    // and whichever database `resolve_zone` picked here.
    let bundled = jiff::tz::TimeZoneDatabase::bundled().get("America/New_York").expect("bundled database");
    let resolved = resolve_zone("America/New_York").expect("a database");
    for text in ["2026-03-08T06:59:00Z", "2026-03-08T07:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z"] {
        assert_eq!(civil(instant(text), &bundled), civil(instant(text), &rules), "bundled at {text}");
        assert_eq!(civil(instant(text), &resolved), civil(instant(text), &rules), "resolved at {text}");
    }
    let gap = schedule("30 2 * * *");
    let after = instant("2026-03-08T05:00:00Z");
    assert_eq!(gap.next_after(after, &bundled), gap.next_after(after, &rules));
    assert_eq!(resolve_zone(" UTC ").expect("UTC"), TimeZone::UTC);
}

#[test]
fn schedule_cron_next_after_rolls_over_months_and_years() {
    let utc = TimeZone::UTC;
    // 2026-01-04 is a Sunday.
    assert_eq!(
        runs(&schedule("0 9 * * 1"), "2026-01-04T12:00:00Z", &utc, 2),
        [instant("2026-01-05T09:00:00Z"), instant("2026-01-12T09:00:00Z")]
    );
    // Strictly after: at a due time, the next one.
    assert_eq!(
        schedule("0 9 * * 1").next_after(instant("2026-01-05T09:00:00Z"), &utc),
        Some(instant("2026-01-12T09:00:00Z"))
    );
    assert_eq!(
        schedule("0 0 1 * *").next_after(instant("2026-01-31T23:59:59Z"), &utc),
        Some(instant("2026-02-01T00:00:00Z"))
    );
    assert_eq!(
        schedule("30 23 31 12 *").next_after(instant("2026-12-31T23:30:00Z"), &utc),
        Some(instant("2027-12-31T23:30:00Z"))
    );
    assert_eq!(
        runs(&schedule("*/20 * * * *"), "2026-12-31T23:45:10Z", &utc, 2),
        [instant("2027-01-01T00:00:00Z"), instant("2027-01-01T00:20:00Z")]
    );
    assert_eq!(
        runs(&schedule("0 0 31 * *"), "2026-01-31T00:00:00Z", &utc, 2),
        [instant("2026-03-31T00:00:00Z"), instant("2026-05-31T00:00:00Z")]
    );
    assert_eq!(
        runs(&schedule("15 10 * jan,jul *"), "2026-01-31T11:00:00Z", &utc, 2),
        [instant("2026-07-01T10:15:00Z"), instant("2026-07-02T10:15:00Z")]
    );
}

#[test]
fn schedule_cron_leap_day_waits_for_a_leap_year() {
    let utc = TimeZone::UTC;
    assert_eq!(
        runs(&schedule("0 12 29 2 *"), "2026-03-01T00:00:00Z", &utc, 2),
        [instant("2028-02-29T12:00:00Z"), instant("2032-02-29T12:00:00Z")]
    );
    // 2100 is not a leap year: eight years between leap days.
    assert_eq!(
        schedule("0 12 29 2 *").next_after(instant("2096-03-01T00:00:00Z"), &utc),
        Some(instant("2104-02-29T12:00:00Z"))
    );
}

#[test]
fn schedule_cron_day_fields_follow_the_or_rule() {
    let utc = TimeZone::UTC;
    // Both restricted: the 13th or any Friday. 2026-01-02 is a Friday, 01-13 a Tuesday.
    let days: Vec<i8> = runs(&schedule("0 0 13 * fri"), "2026-01-01T00:00:00Z", &utc, 5)
        .iter()
        .map(|due| civil(*due, &utc).day())
        .collect();
    assert_eq!(days, [2, 9, 13, 16, 23]);
    // Day-of-month starting with `*` does not restrict alone: both must match.
    for due in runs(&schedule("0 0 */10 * mon"), "2026-01-01T00:00:00Z", &utc, 6) {
        let date = civil(due, &utc);
        assert_eq!(date.weekday(), Weekday::Monday, "{date}");
        assert!([1, 11, 21, 31].contains(&date.day()), "{date}");
    }
    // Day-of-week 7 and 0 are both Sunday; 5-7 runs Friday to Sunday.
    assert_eq!(
        schedule("0 0 * * 7").next_after(instant("2026-01-01T00:00:00Z"), &utc),
        Some(instant("2026-01-04T00:00:00Z"))
    );
    let weekdays: Vec<Weekday> = runs(&schedule("0 0 * * 5-7"), "2026-01-01T00:00:00Z", &utc, 3)
        .iter()
        .map(|due| civil(*due, &utc).weekday())
        .collect();
    assert_eq!(weekdays, [Weekday::Friday, Weekday::Saturday, Weekday::Sunday]);
    // A rare date still comes within the search: 29 February on a Sunday.
    let rare = schedule("0 0 29 2 */7").next_after(instant("2026-01-01T00:00:00Z"), &utc).expect("a rare run");
    assert_eq!(civil(rare, &utc).date(), jiff::civil::date(2032, 2, 29));
}

#[test]
fn schedule_spring_forward_gap_runs_once_at_the_end_of_the_gap() {
    let zone = new_york();
    // 02:30 does not exist on 2026-03-08: it runs at 03:00 EDT, then normally again.
    assert_eq!(
        runs(&schedule("30 2 * * *"), "2026-03-08T05:00:00Z", &zone, 2),
        [instant("2026-03-08T07:00:00Z"), instant("2026-03-09T06:30:00Z")]
    );
    assert_eq!(runs(&schedule("daily 02:30"), "2026-03-08T05:00:00Z", &zone, 1), [instant("2026-03-08T07:00:00Z")]);
    // Several slots inside the gap collapse into one run.
    assert_eq!(
        runs(&schedule("*/15 * * * *"), "2026-03-08T06:50:00Z", &zone, 3),
        [instant("2026-03-08T07:00:00Z"), instant("2026-03-08T07:15:00Z"), instant("2026-03-08T07:30:00Z")]
    );
    let at = schedule("at 2026-03-08T02:30:00");
    assert_eq!(at.next_after(instant("2026-03-08T00:00:00Z"), &zone), Some(instant("2026-03-08T07:00:00Z")));
}

#[test]
fn schedule_fall_back_repeat_runs_once_at_the_first_occurrence() {
    let zone = new_york();
    // 01:30 happens twice on 2026-11-01 (EDT at 05:30Z, EST at 06:30Z): only the first.
    assert_eq!(
        runs(&schedule("30 1 * * *"), "2026-11-01T04:00:00Z", &zone, 2),
        [instant("2026-11-01T05:30:00Z"), instant("2026-11-02T06:30:00Z")]
    );
    // Hourly: the repeated 01:00 EST is skipped.
    assert_eq!(
        runs(&schedule("0 * * * *"), "2026-11-01T05:00:00Z", &zone, 2),
        [instant("2026-11-01T07:00:00Z"), instant("2026-11-01T08:00:00Z")]
    );
    // From inside the second pass of the hour, the next run is after the repeat.
    assert_eq!(
        schedule("*/15 * * * *").next_after(instant("2026-11-01T06:10:00Z"), &zone),
        Some(instant("2026-11-01T07:00:00Z"))
    );
    let at = schedule("at 2026-11-01T01:30:00");
    assert_eq!(at.next_after(instant("2026-11-01T00:00:00Z"), &zone), Some(instant("2026-11-01T05:30:00Z")));
    assert_eq!(at.next_after(instant("2026-11-01T05:30:00Z"), &zone), None);
}

#[test]
fn schedule_every_is_absolute_time_across_dst() {
    let zone = new_york();
    assert_eq!(
        runs(&schedule("every 1h"), "2026-03-08T05:30:00Z", &zone, 3),
        [instant("2026-03-08T06:00:00Z"), instant("2026-03-08T07:00:00Z"), instant("2026-03-08T08:00:00Z")]
    );
    // 24 hours apart, so the wall-clock time shifts by the DST change.
    let daily = runs(&schedule("every 1d"), "2026-03-07T12:00:00Z", &zone, 2);
    assert_eq!(daily[1].duration_since(daily[0]), SignedDuration::from_hours(24));
    assert_eq!(civil(daily[0], &zone).hour() + 1, civil(daily[1], &zone).hour());
    // Anchored at creation, it keeps the creation's phase.
    let created = instant("2026-05-01T10:37:12Z");
    let interval = Schedule::Every(Interval::new(300).unwrap().anchored_at(created));
    assert_eq!(interval.next_after(created, &zone), Some(instant("2026-05-01T10:42:12Z")));
    assert_eq!(interval.next_after(instant("2026-05-01T10:00:00Z"), &zone), Some(instant("2026-05-01T10:02:12Z")));
    assert_eq!(
        schedule("every 30s").next_after(instant("2026-05-01T10:00:29.5Z"), &zone),
        Some(instant("2026-05-01T10:00:30Z"))
    );
}

#[test]
fn schedule_daily_weekly_and_one_shots_in_a_zone() {
    let zone = new_york();
    // 2026-01-09 is a Friday; 09:00 EST is 14:00Z.
    assert_eq!(
        schedule("weekly mon 09:00").next_after(instant("2026-01-09T12:00:00Z"), &zone),
        Some(instant("2026-01-12T14:00:00Z"))
    );
    assert_eq!(
        schedule("daily 09:00").next_after(instant("2026-07-01T13:00:00Z"), &zone),
        Some(instant("2026-07-02T13:00:00Z"))
    );
    let once = schedule("at 2026-12-01T09:00:00Z");
    assert_eq!(once.next_after(instant("2026-11-30T00:00:00Z"), &zone), Some(instant("2026-12-01T09:00:00Z")));
    assert_eq!(once.next_after(instant("2026-12-01T09:00:00Z"), &zone), None);
    assert!(!once.is_recurring());
    assert_eq!(
        once.first_due(instant("2027-01-01T00:00:00Z"), &zone),
        Err(ScheduleError::NoFutureRun { schedule: "at 2026-12-01T09:00:00Z".into() })
    );
    assert_eq!(once.first_due(instant("2026-01-01T00:00:00Z"), &zone), Ok(instant("2026-12-01T09:00:00Z")));
}

#[test]
fn schedule_cadence_jitter_is_deterministic_and_within_its_window() {
    let cadences = [Cadence::Hourly, Cadence::Daily, Cadence::Weekly, Cadence::Biweekly, Cadence::Monthly];
    let window = ClockTime::new(6, 0).unwrap()..ClockTime::new(22, 0).unwrap();
    for seed in 0..500u64 {
        for cadence in cadences {
            let slot = cadence.choose_slot(seed);
            assert_eq!(slot, cadence.choose_slot(seed), "same seed, same slot");
            assert_eq!(slot.cadence(), cadence);
            match slot {
                CadenceSlot::Hourly { minute } => assert!(minute < 60),
                CadenceSlot::Daily { time } | CadenceSlot::Weekly { time, .. } | CadenceSlot::Biweekly { time, .. } => {
                    assert!(window.contains(&time), "{slot}")
                }
                CadenceSlot::Monthly { day, time } => {
                    assert!((1..=28).contains(&day), "{slot}");
                    assert!(window.contains(&time), "{slot}");
                }
            }
        }
    }
}

#[test]
fn schedule_cadence_jitter_spreads_across_seeds() {
    let seeds = 0..500u64;
    let minutes: HashSet<_> = seeds.clone().map(|seed| Cadence::Hourly.choose_slot(seed)).collect();
    let times: HashSet<_> = seeds.clone().map(|seed| Cadence::Daily.choose_slot(seed)).collect();
    let weekdays: HashSet<_> = seeds
        .clone()
        .filter_map(|seed| match Cadence::Biweekly.choose_slot(seed) {
            CadenceSlot::Biweekly { weekday, parity, .. } => Some((weekday, parity)),
            _ => None,
        })
        .collect();
    let days: HashSet<_> = seeds
        .filter_map(|seed| match Cadence::Monthly.choose_slot(seed) {
            CadenceSlot::Monthly { day, .. } => Some(day),
            _ => None,
        })
        .collect();
    assert!(minutes.len() >= 55, "{} distinct minutes", minutes.len());
    assert!(times.len() >= 300, "{} distinct daily times", times.len());
    assert_eq!(weekdays.len(), 14, "every weekday in both week parities");
    assert_eq!(days.len(), 28, "every day of the month");
}

#[test]
fn schedule_cadence_slots_fire_at_their_slot() {
    let utc = TimeZone::UTC;
    let time = ClockTime::new(14, 23).unwrap();
    let hourly = Schedule::Cadence(CadenceSlot::Hourly { minute: 17 });
    assert_eq!(
        runs(&hourly, "2026-01-01T10:17:00Z", &utc, 2),
        [instant("2026-01-01T11:17:00Z"), instant("2026-01-01T12:17:00Z")]
    );
    let monthly = Schedule::Cadence(CadenceSlot::Monthly { day: 28, time });
    assert_eq!(runs(&monthly, "2026-01-30T00:00:00Z", &utc, 1), [instant("2026-02-28T14:23:00Z")]);
    for parity in [WeekParity::Even, WeekParity::Odd] {
        let biweekly = Schedule::Cadence(CadenceSlot::Biweekly { weekday: Weekday::Thursday, time, parity });
        let due = runs(&biweekly, "2026-12-20T00:00:00Z", &utc, 4);
        for pair in due.windows(2) {
            assert_eq!(pair[1].duration_since(pair[0]), SignedDuration::from_hours(14 * 24), "across the new year too");
        }
        assert!(due.iter().all(|run| civil(*run, &utc).weekday() == Weekday::Thursday));
    }
    let even = Schedule::Cadence(CadenceSlot::Biweekly { weekday: Weekday::Thursday, time, parity: WeekParity::Even });
    let odd = Schedule::Cadence(CadenceSlot::Biweekly { weekday: Weekday::Thursday, time, parity: WeekParity::Odd });
    let start = instant("2026-01-01T00:00:00Z");
    assert_ne!(even.next_after(start, &utc), odd.next_after(start, &utc));
    assert_eq!(CadenceSlot::Hourly { minute: 7 }.to_string(), "hourly at :07");
    assert_eq!(CadenceSlot::Weekly { weekday: Weekday::Thursday, time }.to_string(), "weekly on thu at 14:23");
    assert_eq!(even.to_string(), "biweekly on thu at 14:23 (even weeks)");
    assert_eq!(monthly.to_string(), "monthly on day 28 at 14:23");
    assert_eq!(CadenceSlot::Daily { time }.to_string(), "daily at 14:23");
}

#[test]
fn schedule_cadence_names_parse() {
    assert_eq!(Cadence::parse(" Hourly "), Ok(Cadence::Hourly));
    assert_eq!("BIWEEKLY".parse::<Cadence>(), Ok(Cadence::Biweekly));
    assert_eq!(Cadence::parse("monthly").map(|cadence| cadence.to_string()), Ok("monthly".to_string()));
    assert_eq!(Cadence::parse("fortnightly"), Err(ScheduleError::UnknownCadence { input: "fortnightly".into() }));
}

#[test]
fn schedule_catch_up_runs_a_missed_job_once() {
    let utc = TimeZone::UTC;
    let hourly = schedule("every 1h");
    // Down from 10:00 to 15:30: five slots missed, one run now.
    let outcome = hourly.catch_up(instant("2026-01-01T10:00:00Z"), instant("2026-01-01T15:30:00Z"), &utc);
    assert_eq!(
        outcome,
        CatchUp { missed: Some(instant("2026-01-01T11:00:00Z")), next: Some(instant("2026-01-01T16:00:00Z")) }
    );
    // Nothing missed since the last run.
    let outcome = hourly.catch_up(instant("2026-01-01T15:10:00Z"), instant("2026-01-01T15:30:00Z"), &utc);
    assert_eq!(outcome, CatchUp { missed: None, next: Some(instant("2026-01-01T16:00:00Z")) });
    let once = schedule("at 2026-01-01T12:00:00Z");
    // Created before its time, missed while down: runs once, then never.
    let outcome = once.catch_up(instant("2026-01-01T09:00:00Z"), instant("2026-01-02T00:00:00Z"), &utc);
    assert_eq!(outcome, CatchUp { missed: Some(instant("2026-01-01T12:00:00Z")), next: None });
    // Already ran: nothing.
    let outcome = once.catch_up(instant("2026-01-01T12:00:00Z"), instant("2026-01-02T00:00:00Z"), &utc);
    assert_eq!(outcome, CatchUp { missed: None, next: None });
    // Still ahead.
    let outcome = once.catch_up(instant("2026-01-01T09:00:00Z"), instant("2026-01-01T10:00:00Z"), &utc);
    assert_eq!(outcome, CatchUp { missed: None, next: Some(instant("2026-01-01T12:00:00Z")) });
}
