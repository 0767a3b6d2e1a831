//! The service's background work: the live ledger, compaction, the budget evaluator, the scrape
//! scheduler and the Postgres listener run as tasks of one set, stopped together when the server
//! stops taking requests.
//!
//! Stopping drops each task where it is. Every round is safe to stop anywhere (a ledger round or a
//! compaction pass commits in one catalog transaction, or not at all, as after a crash) and is
//! done again by the next process, once the lease the round held is freed (`serve::run` frees
//! them after stopping). Stopping them before the runtime goes keeps a shutdown quiet:
//! left to the runtime's teardown, a round could see the tasks it waits on cancelled first and
//! report that as a failure.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;

/// When a loop's first round runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstRound {
    /// As the loop starts.
    AtStart,
    /// One interval after it starts.
    AfterAnInterval,
}

#[derive(Default)]
pub struct Background(JoinSet<()>);

impl Background {
    /// Runs `round` every `interval` until stopped; a zero interval runs nothing (the work is
    /// left to its command). A round that overruns the interval delays the next one: rounds
    /// never overlap. A round that panics is logged and the next one runs on schedule: one bad
    /// round must not stop the live ledger, compaction or budget alerts until a restart.
    pub fn every<R, F>(&mut self, interval: Duration, first: FirstRound, mut round: R)
    where
        R: FnMut() -> F + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        if interval.is_zero() {
            return;
        }
        self.0.spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
            if first == FirstRound::AfterAnInterval {
                ticks.tick().await;
            }
            loop {
                ticks.tick().await;
                let this_round = async { round().await };
                if let Err(panic) = AssertUnwindSafe(this_round).catch_unwind().await {
                    tracing::error!(
                        panic = super::panic_message(panic.as_ref()),
                        "a background round panicked; the next runs on schedule"
                    );
                }
            }
        });
    }

    /// Runs `task` until stopped.
    pub fn run(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.0.spawn(task);
    }

    /// Stops every task and waits until each is dropped.
    pub async fn stop(mut self) {
        self.0.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// The first round panics; the loop goes on, and the rounds after it run.
    #[tokio::test]
    async fn a_round_that_panics_does_not_end_its_loop() {
        let rounds = Arc::new(AtomicUsize::new(0));
        let (ran, mut after_the_panic) = tokio::sync::mpsc::unbounded_channel();
        let mut background = Background::default();
        background.every(Duration::from_millis(5), FirstRound::AtStart, {
            let rounds = Arc::clone(&rounds);
            move || {
                let (rounds, ran) = (Arc::clone(&rounds), ran.clone());
                async move {
                    let round = rounds.fetch_add(1, Ordering::SeqCst);
                    assert!(round > 0, "the first round fails");
                    let _ = ran.send(round);
                }
            }
        });
        for expected in 1..=3 {
            let round = tokio::time::timeout(Duration::from_secs(30), after_the_panic.recv())
                .await
                .expect("rounds go on after a panic");
            assert_eq!(round, Some(expected));
        }
        background.stop().await;
    }
}
