//! Delivering trigger files: claim a target's file, hand each line to its live route in
//! order, quarantine what can't be a message, keep what the route could not take, and
//! skip message ids delivered already.

use squidbot_core::sync::lock;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use super::{Bus, DeliveryStatus, HandOver, Source};
use crate::message::{BusMessage, new_id};
use crate::targets::normalize;
use crate::triggers::{Claim, ClaimedLine, TriggerError, TriggerFiles, TriggerLine};

/// Message ids remembered to skip trigger lines delivered twice.
const REMEMBERED_IDS: usize = 4096;

/// What one pass over a target's trigger files did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestReport {
    /// The target.
    pub target: String,
    /// Messages a route took.
    pub delivered: usize,
    /// Lines moved to `<target>.bad`.
    pub quarantined: usize,
    /// Lines skipped because their message was delivered already.
    pub duplicates: usize,
    /// Lines kept for the next pass (the route went away).
    pub left: usize,
    /// True when the pending file was left to a writer still writing it.
    pub writer_busy: bool,
}

/// Ids of messages delivered from trigger files, oldest forgotten first.
#[derive(Default)]
pub(super) struct RecentIds {
    order: VecDeque<String>,
    known: HashSet<String>,
}

impl Bus {
    /// Delivers what waits in the trigger files of every target with a live route.
    pub async fn ingest_live(self: &Arc<Self>) -> Vec<IngestReport> {
        let mut reports = Vec::new();
        for target in self.routes.targets() {
            match self.ingest(&target).await {
                Ok(report) => reports.push(report),
                Err(error) => tracing::warn!(target_name = %target, %error, "can't read the trigger file"),
            }
        }
        reports
    }

    /// Delivers what waits in `target`'s trigger files, in order, stopping at the first
    /// message its route can't take (that one and the rest wait for the next pass).
    pub async fn ingest(self: &Arc<Self>, target: &str) -> Result<IngestReport, TriggerError> {
        let triggers = self.triggers.clone();
        let now = self.clock.now();
        let name = target.to_owned();
        let mut claim = blocking(move || triggers.claim(&name, now)).await?;
        let mut report = IngestReport {
            target: target.to_owned(),
            quarantined: claim.quarantined,
            writer_busy: claim.writer_busy,
            ..IngestReport::default()
        };
        let mut left: Vec<ClaimedLine> = Vec::new();
        for claimed in std::mem::take(&mut claim.lines) {
            if !left.is_empty() {
                left.push(claimed);
                continue;
            }
            let message = match self.message_from_line(target, &claimed.line) {
                Ok(message) => message,
                Err(reason) => {
                    self.quarantine(target, &claimed.raw, &reason).await?;
                    report.quarantined += 1;
                    continue;
                }
            };
            if self.was_delivered(&message.id) {
                report.duplicates += 1;
                continue;
            }
            let (result, detail) = match self.hand_over(&message, Source::TriggerFile).await {
                HandOver::Acked(ack) => (DeliveryStatus::Verified.as_str(), ack.detail),
                HandOver::NoAckYet => (DeliveryStatus::Unverified.as_str(), None),
                HandOver::Unavailable(reason) => {
                    tracing::info!(target_name = target, %reason, "trigger file delivery paused");
                    left.push(claimed);
                    continue;
                }
                HandOver::Rejected(reason) => {
                    self.quarantine(target, &claimed.raw, &format!("the target rejected it: {reason}")).await?;
                    self.record(self.entry(&message, "rejected", Some(format!("from the trigger file: {reason}"))))
                        .await;
                    report.quarantined += 1;
                    continue;
                }
            };
            self.remember_delivered(&message.id);
            let detail = Some(match detail {
                Some(detail) => format!("from the trigger file: {detail}"),
                None => "from the trigger file".to_owned(),
            });
            self.record(self.entry(&message, result, detail)).await;
            report.delivered += 1;
        }
        report.left = left.len();
        let triggers = self.triggers.clone();
        blocking(move || finish(&triggers, claim, &left)).await?;
        if report.delivered + report.quarantined > 0 {
            tracing::info!(
                target_name = target,
                delivered = report.delivered,
                quarantined = report.quarantined,
                left = report.left,
                "delivered trigger file messages"
            );
        }
        Ok(report)
    }

    async fn quarantine(&self, target: &str, raw: &str, reason: &str) -> Result<(), TriggerError> {
        let triggers = self.triggers.clone();
        let (target, raw, reason) = (target.to_owned(), raw.to_owned(), reason.to_owned());
        blocking(move || triggers.quarantine(&target, &raw, &reason).map(drop)).await
    }

    /// A trigger line as a message to `target`, or why it can't be one.
    fn message_from_line(&self, target: &str, line: &TriggerLine) -> Result<BusMessage, String> {
        let from = normalize(&line.from).map_err(|error| format!("bad sender: {error}"))?;
        let role = match &line.role {
            Some(role) => normalize(role).map_err(|error| format!("bad role: {error}"))?,
            None => from.clone(),
        };
        self.check_body(&line.body).map_err(|error| error.to_string())?;
        Ok(BusMessage {
            id: line.id.clone().filter(|id| !id.is_empty()).unwrap_or_else(new_id),
            seq: line.seq.unwrap_or_else(|| self.sequences.next(&from)),
            from,
            role,
            target: target.to_owned(),
            priority: line.priority,
            body: line.body.clone(),
            correlation_id: line.correlation_id.clone().filter(|id| !id.is_empty()).unwrap_or_else(new_id),
            time: line.time.unwrap_or_else(|| self.now()),
            session: line.session.clone(),
        })
    }

    fn was_delivered(&self, id: &str) -> bool {
        lock(&self.delivered).known.contains(id)
    }

    fn remember_delivered(&self, id: &str) {
        let mut delivered = lock(&self.delivered);
        if delivered.known.insert(id.to_owned()) {
            delivered.order.push_back(id.to_owned());
        }
        while delivered.order.len() > REMEMBERED_IDS {
            if let Some(oldest) = delivered.order.pop_front() {
                delivered.known.remove(&oldest);
            }
        }
    }
}

fn finish(triggers: &TriggerFiles, claim: Claim, left: &[ClaimedLine]) -> Result<(), TriggerError> {
    triggers.finish(claim, left)
}

/// Runs file work off the async workers.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, TriggerError> + Send + 'static,
) -> Result<T, TriggerError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(error) => Err(TriggerError::Io {
            action: "work on",
            path: std::path::PathBuf::from("the trigger directory"),
            source: std::io::Error::other(error.to_string()),
        }),
    }
}
