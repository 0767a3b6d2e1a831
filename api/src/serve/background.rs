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
use std::time::Duration;

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
    /// never overlap.
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
                round().await;
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
