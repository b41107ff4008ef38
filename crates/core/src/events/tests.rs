//! Tests of the event hub: filters, watchlists and the index behind them, lagging subscribers.

use super::*;

fn event(run: &str, session: &str, seq: u64) -> TurnEvent {
    TurnEvent {
        run_id: run.into(),
        session_key: session.into(),
        seq,
        at_ms: 0,
        correlation_id: String::new(),
        kind: TurnEventKind::Delta { text: format!("{seq}") },
    }
}

#[tokio::test]
async fn filters_choose_what_each_subscriber_sees() {
    let hub = EventHub::new();
    let mut all = hub.subscribe(Filter::All);
    let mut session = hub.subscribe(Filter::Session("s1".into()));
    let mut run = hub.subscribe(Filter::Run("r2".into()));
    let mut custom = hub.subscribe(Filter::Custom(Arc::new(|event: &TurnEvent| event.seq == 3)));
    hub.publish(event("r1", "s1", 1));
    hub.publish(event("r2", "s2", 2));
    hub.publish(event("r3", "s1", 3));
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(all.recv().await.unwrap().seq);
    }
    assert_eq!(got, [1, 2, 3]);
    assert_eq!(session.recv().await.unwrap().seq, 1);
    assert_eq!(session.recv().await.unwrap().seq, 3);
    assert_eq!(run.recv().await.unwrap().seq, 2);
    assert_eq!(custom.recv().await.unwrap().seq, 3);
    assert_eq!(hub.subscriber_count(), 4);
    drop(run);
    assert_eq!(hub.subscriber_count(), 3);
}

#[tokio::test]
async fn a_subscriber_that_never_reads_is_cut_off_and_others_go_on() {
    let hub = EventHub::with_max_idle(Duration::ZERO);
    let mut idle = hub.subscribe(Filter::All);
    let mut busy = hub.subscribe(Filter::All);
    for seq in 0..(MAX_PENDING as u64 + 5) {
        hub.publish(event("r", "s", seq));
        assert_eq!(busy.recv().await.unwrap().seq, seq);
    }
    assert_eq!(hub.subscriber_count(), 1);
    assert!(idle.was_cut_off());
    let mut drained = 0;
    while idle.recv().await.is_some() {
        drained += 1;
    }
    assert_eq!(drained, MAX_PENDING);
    assert!(!busy.was_cut_off());
}

#[tokio::test]
async fn a_busy_reader_survives_a_burst_beyond_the_soft_limit() {
    let hub = EventHub::new();
    let mut busy = hub.subscribe(Filter::All);
    let burst = |from: u64| {
        for seq in from..from + MAX_PENDING as u64 + 100 {
            hub.publish(event("r", "s", seq));
        }
    };
    burst(0);
    assert_eq!(busy.recv().await.unwrap().seq, 0, "it took an event just now");
    burst(MAX_PENDING as u64 + 100);
    let mut received = 1;
    while busy.try_recv().is_some() {
        received += 1;
    }
    assert_eq!(received, 2 * (MAX_PENDING + 100));
    assert!(!busy.was_cut_off());
}

fn pending(subscription: &mut Subscription) -> Vec<u64> {
    let mut seqs = Vec::new();
    while let Some(event) = subscription.try_recv() {
        seqs.push(event.seq);
    }
    seqs
}

#[tokio::test]
async fn a_watchlist_subscriber_sees_exactly_what_it_watches() {
    let hub = EventHub::new();
    let mut watcher = hub.subscribe(Filter::Watched);
    hub.publish(event("r1", "s1", 1));
    watcher.watch_session("s1");
    watcher.watch_run("r9");
    hub.publish(event("r1", "s1", 2));
    hub.publish(event("r2", "s2", 3));
    hub.publish(event("r9", "s2", 4));
    // Watched under both its session and its run: still delivered once.
    hub.publish(event("r9", "s1", 5));
    assert_eq!(pending(&mut watcher), [2, 4, 5]);
}

#[tokio::test]
async fn unwatching_stops_the_events_and_keeps_the_rest() {
    let hub = EventHub::new();
    let mut watcher = hub.subscribe(Filter::Session("s1".into()));
    let watchlist = watcher.watchlist();
    watchlist.watch_session("s2");
    watchlist.watch_run("r3");
    hub.publish(event("r1", "s1", 1));
    hub.publish(event("r2", "s2", 2));
    watchlist.unwatch_session("s1");
    watchlist.unwatch_run("r3");
    hub.publish(event("r1", "s1", 3));
    hub.publish(event("r3", "s3", 4));
    hub.publish(event("r2", "s2", 5));
    // Unwatching what was never watched changes nothing.
    watchlist.unwatch_session("never");
    hub.publish(event("r2", "s2", 6));
    assert_eq!(pending(&mut watcher), [1, 2, 5, 6]);
}

#[tokio::test]
async fn watching_adds_to_a_broad_filter_without_doubling_events() {
    let hub = EventHub::new();
    let mut all = hub.subscribe(Filter::All);
    all.watch_session("s1");
    let mut custom = hub.subscribe(Filter::Custom(Arc::new(|event: &TurnEvent| event.seq.is_multiple_of(2))));
    custom.watch_run("r1");
    for seq in 1..=4 {
        hub.publish(event("r1", "s1", seq));
    }
    hub.publish(event("r2", "s2", 5));
    hub.publish(event("r2", "s2", 6));
    assert_eq!(pending(&mut all), [1, 2, 3, 4, 5, 6]);
    assert_eq!(pending(&mut custom), [1, 2, 3, 4, 6]);
}

#[tokio::test]
async fn dropping_a_subscription_unsubscribes_it_everywhere() {
    let hub = EventHub::new();
    let watcher = hub.subscribe(Filter::Run("r1".into()));
    let watchlist = watcher.watchlist();
    watchlist.watch_session("s1");
    watchlist.watch_run("r2");
    let _all = hub.subscribe(Filter::All);
    assert_eq!(hub.subscriber_count(), 2);
    drop(watcher);
    assert_eq!(hub.subscriber_count(), 1);
    {
        let subscribers = hub.lock();
        assert!(subscribers.by_session.is_empty(), "no session index entry is left behind");
        assert!(subscribers.by_run.is_empty(), "no run index entry is left behind");
        assert_eq!(subscribers.broad.len(), 1);
    }
    // A watchlist kept past its subscription does nothing.
    watchlist.watch_session("s3");
    assert!(hub.lock().by_session.is_empty());
    hub.publish(event("r1", "s1", 1));
}

#[tokio::test]
async fn publishing_to_one_of_a_thousand_watchers_reaches_only_that_one() {
    let hub = EventHub::new();
    let mut watchers: Vec<Subscription> = (0..1000)
        .map(|number| {
            let subscription = hub.subscribe(Filter::Watched);
            subscription.watch_session(&format!("session-{number}"));
            subscription
        })
        .collect();
    assert_eq!(hub.lock().candidates(&event("r", "session-417", 1)).len(), 1, "the index picks one subscriber");
    hub.publish(event("r", "session-417", 1));
    for (number, watcher) in watchers.iter_mut().enumerate() {
        let expected: &[u64] = if number == 417 { &[1] } else { &[] };
        assert_eq!(pending(watcher), expected, "watcher {number}");
    }
    drop(watchers);
    assert_eq!(hub.subscriber_count(), 0);
    assert!(hub.lock().by_session.is_empty());
}

#[tokio::test]
async fn a_lagging_watcher_is_cut_off_and_leaves_the_index() {
    let hub = EventHub::with_max_idle(Duration::ZERO);
    let idle = hub.subscribe(Filter::Watched);
    idle.watch_session("s");
    for seq in 0..=(MAX_PENDING as u64) {
        hub.publish(event("r", "s", seq));
    }
    assert!(idle.was_cut_off());
    assert_eq!(hub.subscriber_count(), 0);
    assert!(hub.lock().by_session.is_empty());
}

#[test]
fn a_long_tool_output_is_cut_in_its_event_with_a_note() {
    assert_eq!(tool_output_for_event("short"), "short");
    let long = "é".repeat(TOOL_OUTPUT_EVENT_CHARS + 10);
    let cut = tool_output_for_event(&long);
    assert!(cut.starts_with(&"é".repeat(TOOL_OUTPUT_EVENT_CHARS)), "cut on a character boundary");
    assert!(cut.ends_with("[… 10 more characters; the session keeps the whole output]"), "{cut}");
}
