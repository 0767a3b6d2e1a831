//! The runtime users' queries run on, apart from the one that serves HTTP and the Postgres wire.
//!
//! Planning and executing a query recurses over its expressions and plans; DataFusion protects
//! some of those recursions (`recursive_protection` grows the stack of its optimizer passes) but
//! not all of them: dropping, cloning, comparing and printing an `Expr` or a sqlparser AST recurse
//! on whatever stack the thread has, and a tokio worker has 2 MiB. The statement limits of
//! [`crate::sandbox`] bound the depth; the threads here have a stack far larger than that depth
//! needs. A CPU-bound query also keeps these threads busy, not the server's: `/healthz`, the
//! API and the Postgres connections are answered on theirs meanwhile.
//!
//! [`run`] is the only way in: the query's future runs as a task here, and dropping the caller's
//! future (a time limit, a client that went away) cancels it ([`Cancellation`]: the operators of
//! a plan guarded by it stop at their next batch) and aborts the task, which drops the plan's
//! streams and so the tasks DataFusion spawned for it.

use std::future::Future;
use std::sync::LazyLock;
use std::time::Duration;

use datafusion::error::DataFusionError;
use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinHandle;

use crate::cancel::Cancellation;
use crate::error::QueryError;

/// The stack of each query thread. Reserved, not committed: only the pages a query touches are
/// memory.
pub const QUERY_STACK_BYTES: usize = 256 << 20;

static RUNTIME: LazyLock<Runtime> = LazyLock::new(|| {
    let threads = std::thread::available_parallelism()
        .map(std::num::NonZero::get)
        .unwrap_or(2)
        .max(2);
    Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("gpuledger-query")
        .thread_stack_size(QUERY_STACK_BYTES)
        .enable_all()
        .build()
        .expect("the query runtime starts")
});

/// A task of the query runtime, cancelled and aborted when this is dropped.
struct AbortOnDrop<T> {
    task: JoinHandle<T>,
    cancellation: Cancellation,
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.cancellation.cancel();
        self.task.abort();
    }
}

/// Runs the future `work` makes on the query runtime and waits for it. Dropping the returned
/// future cancels the [`Cancellation`] given to `work` and aborts the task.
pub async fn run<W, F, T>(work: W) -> Result<T, QueryError>
where
    W: FnOnce(Cancellation) -> F,
    F: Future<Output = Result<T, QueryError>> + Send + 'static,
    T: Send + 'static,
{
    let cancellation = Cancellation::default();
    let mut task = AbortOnDrop {
        task: RUNTIME.spawn(work(cancellation.clone())),
        cancellation,
    };
    match (&mut task.task).await {
        Ok(result) => result,
        Err(join_error) => Err(DataFusionError::ExecutionJoin(Box::new(join_error)).into()),
    }
}

/// [`run`] within `limit`: past it the work is aborted and the answer is [`QueryError::Timeout`].
pub async fn run_within<W, F, T>(limit: Duration, work: W) -> Result<T, QueryError>
where
    W: FnOnce(Cancellation) -> F,
    F: Future<Output = Result<T, QueryError>> + Send + 'static,
    T: Send + 'static,
{
    match tokio::time::timeout(limit, run(work)).await {
        Ok(result) => result,
        Err(_elapsed) => Err(QueryError::Timeout(limit)),
    }
}

/// Runs a synchronous `work` on a query thread (its large stack), e.g. parsing a statement.
pub async fn run_sync<F, T>(work: F) -> Result<T, QueryError>
where
    F: FnOnce() -> Result<T, QueryError> + Send + 'static,
    T: Send + 'static,
{
    run(|_| async move { work() }).await
}
