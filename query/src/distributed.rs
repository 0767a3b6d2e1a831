//! Queries beyond one process, on `datafusion-distributed` workers.
//!
//! A session given [`Workers`] plans as today and then lets the distributed planner cut the plan
//! into stages at its repartitions: the stages that scan the lake's Parquet run on the workers,
//! each task on its own slice of the files the catalog listed, and stream their batches back
//! over Arrow Flight. A query too small to split (the planner's threshold is
//! [`Workers::bytes_per_task`] of Parquet per task) runs in-process as it would without workers.
//!
//! `gpuledger worker` ([`WorkerServer`]) runs a worker over the same lake: the same functions
//! (bounded as in a limited session), the lake's object store, and the codec of the one node of
//! ours a stage can carry, the team barrier [`TeamRowsExec`]. A worker trusts only coordinators
//! that present the cluster's secret, runs only plans that read the lake (a plan that writes, or
//! scans another store, is refused before it runs), and bounds each task's memory.
//!
//! Team scoping holds on a worker because the barrier travels inside the stage: a team's scan is
//! a `TeamRowsExec` over its slice of the files, so no row of another team leaves the worker.
//!
//! Between hosts the traffic can be TLS: a worker given a certificate (`--tls-cert`, `--tls-key`)
//! serves only TLS, and coordinators (and workers reading each other's shuffles) reach
//! `https://` workers trusting the cluster's CA (`--worker-ca`), or the public roots without one
//! ([`WorkerChannels`]). The secret then crosses the network encrypted.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DataFusionError, Result as DfResult, exec_err, internal_err};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileGroup, FileGroupPartitioner, FileScanConfig};
use datafusion::datasource::sink::DataSinkExec;
use datafusion::execution::SessionState;
use datafusion::execution::TaskContext;
use datafusion::execution::context::QueryPlanner;
use datafusion::execution::object_store::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{DefaultPhysicalPlanner, PhysicalPlanner};
use datafusion::prelude::SessionContext;
use datafusion_distributed::{ChannelResolver, WorkerChannel, grpc};
use datafusion_distributed::{
    DesiredTaskCountEvent, DesiredTaskCountEventResponse, DistributedConfig, DistributedExt,
    DistributedLeafExec, ScaleUpLeafNodeEvent, ScaleUpLeafNodeEventResponse,
    SessionStateBuilderExt, Worker, WorkerPlanRewriteEvent, WorkerPlanRewriteEventResponse,
    WorkerQueryContext, WorkerResolver,
};
use datafusion_proto::physical_plan::{
    PhysicalExtensionCodec, PhysicalPlanDecodeContext, PhysicalProtoConverterExtension,
};
use datafusion_proto::protobuf::PhysicalPlanNode;
use gpuledger_lake::Lake;
use http::{HeaderMap, HeaderValue};
use prost::Message;
pub use tonic::transport::Identity;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, ServerTlsConfig};
use url::Url;

use crate::cancel::Cancellation;
use crate::error::QueryError;
use crate::gpu_hours_exec::{self, GpuHoursCodec};
use crate::hidden_inputs::hidden_inputs;
use crate::lake_table::{file_scan, file_scans, with_file_scans};
use crate::scope::TeamRowsExec;
use crate::session::{LAKE_URL, register_functions};

/// The header in which a coordinator presents the cluster's secret to its workers (and a worker
/// to the workers it reads a shuffle from).
const SECRET_HEADER: &str = "x-gpuledger-worker-secret";

/// The workers a session may run its stages on, and the secret they share.
#[derive(Debug, Clone, Default)]
pub struct Workers {
    secret: Option<String>,
    channels: WorkerChannels,
    bytes_per_task: Option<usize>,
    /// The workers and which of them answer, shared by every session given these workers.
    health: Arc<Health>,
}

impl Workers {
    /// `list` as the CLI takes it: `host:port`, `http://host:port` or `https://host:port` (a
    /// worker serving TLS), comma-separated; empty means none (everything in-process).
    pub fn parse(list: &str) -> Result<Self, String> {
        let urls = list
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                let url = if entry.contains("://") {
                    entry.to_string()
                } else {
                    format!("http://{entry}")
                };
                match Url::parse(&url) {
                    // A scheme's default port is not written in the URL: https://w:443 has none.
                    Ok(url)
                        if matches!(url.scheme(), "http" | "https")
                            && url.host_str().is_some()
                            && (url.port().is_some() || entry.contains("://")) =>
                    {
                        Ok(url)
                    }
                    _ => Err(format!(
                        "'{entry}' is not host:port (or http://host:port, https://host:port)"
                    )),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            health: Arc::new(Health::new(urls)),
            ..Self::default()
        })
    }

    /// The secret the workers were started with (`GPULEDGER_WORKER_SECRET`).
    pub fn with_secret(mut self, secret: Option<String>) -> Self {
        self.secret = secret;
        self
    }

    /// How `https://` workers are reached (`--worker-ca`).
    pub fn with_channels(mut self, channels: WorkerChannels) -> Self {
        self.channels = channels;
        self
    }

    /// Bytes of Parquet one task scans before a scan is split over more workers (the planner's
    /// default is 16 MiB); tests set it low to split tiny lakes.
    pub fn with_bytes_per_task(mut self, bytes: Option<usize>) -> Self {
        self.bytes_per_task = bytes.filter(|b| *b > 0);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.health.urls.is_empty()
    }

    pub fn urls(&self) -> &[Url] {
        &self.health.urls
    }

    /// Each worker's `host:port` and whether it accepted a connection at the last probe (the
    /// first call probes first); from then on they are probed every half second, as while
    /// sessions plan.
    pub async fn answering(&self) -> Vec<(String, bool)> {
        if self.is_empty() {
            return Vec::new();
        }
        if !self.health.probed.load(Ordering::Acquire) {
            self.health.probe().await;
        }
        self.health.watch();
        self.health
            .each()
            .map(|worker| (worker.address.to_string(), worker.up))
            .collect()
    }
}

/// The workers of every session this process builds, unless its options say otherwise: the
/// CLI's `--workers`, set once at start.
static THIS_PROCESS: OnceLock<Workers> = OnceLock::new();

impl Workers {
    /// Makes `workers` this process's (the first call wins: the CLI makes it, once).
    pub fn use_in_this_process(workers: Workers) {
        let _ = THIS_PROCESS.set(workers);
    }

    /// This process's workers; none unless [`Self::use_in_this_process`] set some.
    pub fn of_this_process() -> Workers {
        THIS_PROCESS.get().cloned().unwrap_or_default()
    }
}

/// Which workers answer: a worker that stops accepting connections is left out of the next
/// plans until it accepts them again. A query planned before a worker died fails
/// ([`explain_failure`]); the next one runs on the others (on none: in-process).
#[derive(Debug, Default)]
struct Health {
    urls: Vec<Url>,
    /// `host:port` of each of `urls`.
    addresses: Vec<String>,
    down: Vec<AtomicBool>,
    /// Whether `down` says what a probe found (until the first probe, no worker is down).
    probed: AtomicBool,
    probing: OnceLock<()>,
}

/// One worker, and whether it answered the last probe.
struct WorkerHealth<'a> {
    url: &'a Url,
    address: &'a str,
    up: bool,
}

/// How often the coordinator checks that its workers accept connections.
const PROBE_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

impl Health {
    fn new(urls: Vec<Url>) -> Self {
        Self {
            addresses: urls
                .iter()
                .map(|url| {
                    format!(
                        "{}:{}",
                        url.host_str().unwrap_or_default(),
                        url.port_or_known_default().unwrap_or_default()
                    )
                })
                .collect(),
            down: urls.iter().map(|_| AtomicBool::new(false)).collect(),
            urls,
            probed: AtomicBool::new(false),
            probing: OnceLock::new(),
        }
    }

    /// Each worker as the last probe found it (until the first probe, every worker is up).
    fn each(&self) -> impl Iterator<Item = WorkerHealth<'_>> {
        self.urls
            .iter()
            .zip(&self.addresses)
            .zip(&self.down)
            .map(|((url, address), down)| WorkerHealth {
                url,
                address,
                up: !down.load(Ordering::Acquire),
            })
    }

    /// Connects to every worker now, all at once (a probe takes at most [`PROBE_EVERY`] however
    /// many workers drop packets): the addresses of those that do not answer (and they are
    /// left out of plans until they do).
    async fn probe(&self) -> Vec<String> {
        let answers = futures::future::join_all(self.addresses.iter().map(|address| async move {
            tokio::time::timeout(PROBE_EVERY, tokio::net::TcpStream::connect(address))
                .await
                .is_ok_and(|connected| connected.is_ok())
        }))
        .await;
        let mut down = Vec::new();
        for ((address, flag), answers) in self.addresses.iter().zip(&self.down).zip(answers) {
            let was_down = flag.swap(!answers, Ordering::AcqRel);
            match (was_down, answers) {
                (true, true) => tracing::info!("worker {address} answers again"),
                (false, false) => {
                    tracing::warn!("worker {address} does not answer: left out of plans");
                }
                _ => {}
            }
            if !answers {
                down.push(address.clone());
            }
        }
        self.probed.store(true, Ordering::Release);
        down
    }

    /// Probes every [`PROBE_EVERY`] on the current runtime, from the first session on; the
    /// probe ends with the last session holding these workers.
    fn watch(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        self.probing.get_or_init(|| {
            let health = Arc::downgrade(self);
            runtime.spawn(async move {
                while let Some(health) = health.upgrade() {
                    health.probe().await;
                    drop(health);
                    tokio::time::sleep(PROBE_EVERY).await;
                }
            });
        });
    }
}

/// `error` as the caller should see it: when it came over a worker's connection and a worker
/// no longer answers, [`QueryError::WorkerLost`] naming it; otherwise as it is.
pub async fn explain_failure(ctx: &SessionContext, error: DataFusionError) -> QueryError {
    match lost_workers(ctx, &error).await {
        Some(down) => QueryError::WorkerLost {
            down,
            cause: match transport_status(&error) {
                Some(status) => status.message().to_string(),
                None => error.find_root().to_string(),
            },
        },
        None => QueryError::from_datafusion(error),
    }
}

/// When `error` may be a worker's connection breaking and workers no longer answer: their
/// addresses (they are left out of the session's next plans).
///
/// A connection that breaks between the coordinator and a worker reaches the coordinator as a
/// gRPC status; one between two workers, as the reading worker's own error, which crosses the
/// wire as text (an external or internal error). Errors of the query itself (its data, its
/// limits, ours) are never a lost worker.
pub async fn lost_workers(ctx: &SessionContext, error: &DataFusionError) -> Option<String> {
    let workers = ctx.state().config().get_extension::<Workers>()?;
    let transport = transport_status(error).is_some()
        || (QueryError::ours_inside(error).is_none()
            && matches!(
                error.find_root(),
                DataFusionError::External(_) | DataFusionError::Internal(_)
            ));
    if !transport {
        return None;
    }
    // A worker killed resets its connections a moment before its port stops accepting: look
    // again for a short while before deciding that every worker answers.
    for attempt in 0..5 {
        let down = workers.health.probe().await;
        if !down.is_empty() {
            return Some(down.join(", "));
        }
        if attempt < 4 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    None
}

/// The gRPC status in `error`'s chain: what a worker's connection reported.
fn transport_status(error: &DataFusionError) -> Option<&tonic::Status> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = current {
        if let Some(status) = error.downcast_ref::<tonic::Status>() {
            return Some(status);
        }
        current = error.source();
    }
    match error.find_root() {
        DataFusionError::External(inner) => inner.downcast_ref::<tonic::Status>(),
        _ => None,
    }
}

/// The planner asks for the worker list each time it plans and assigns tasks: the ones that
/// answer.
#[derive(Debug)]
struct LiveWorkers(Arc<Health>);

impl WorkerResolver for LiveWorkers {
    fn get_urls(&self) -> DfResult<Vec<Url>> {
        Ok(self
            .0
            .each()
            .filter(|worker| worker.up)
            .map(|worker| worker.url.clone())
            .collect())
    }
}

/// `builder` of a coordinating session: its plans are distributed over `workers`.
pub(crate) fn coordinate(
    builder: datafusion::execution::SessionStateBuilder,
    workers: &Workers,
) -> DfResult<datafusion::execution::SessionStateBuilder> {
    workers.health.watch();
    let mut builder = builder
        .with_distributed_worker_resolver(LiveWorkers(Arc::clone(&workers.health)))
        .with_distributed_channel_resolver(workers.channels.clone())
        .with_distributed_planner();
    let distributed = builder
        .query_planner()
        .take()
        .expect("with_distributed_planner sets the query planner");
    let mut builder = builder
        .with_query_planner(Arc::new(WhereWorkersCan { distributed }))
        .with_distributed_user_codec(TeamRowsCodec)
        .with_distributed_user_codec(GpuHoursCodec)
        .with_distributed_desired_task_count_handler(team_rows_task_count)
        .with_distributed_desired_task_count_handler(gpu_hours_exec::task_count)
        .with_distributed_scale_up_leaf_node_handler(team_rows_scale_up)
        .with_distributed_scale_up_leaf_node_handler(gpu_hours_exec::scale_up);
    if let Some(bytes) = workers.bytes_per_task {
        builder = builder.with_distributed_file_scan_config_bytes_per_partition(bytes)?;
    }
    builder
        .config()
        .get_or_insert_default()
        .set_extension(Arc::new(workers.clone()));
    builder.with_distributed_passthrough_headers(secret_headers(workers.secret.as_deref())?)
}

/// Plans over the workers only what they can run: a plan calling a function the workers do
/// not have (the Postgres port's `pg_catalog` functions, a session's own registrations) is
/// planned in-process, as without workers.
#[derive(Debug)]
struct WhereWorkersCan {
    distributed: Arc<dyn QueryPlanner + Send + Sync>,
}

/// The functions every worker has: DataFusion's own and [`register_functions`]'s.
static WORKER_FUNCTIONS: LazyLock<HashSet<String>> = LazyLock::new(|| {
    let ctx = SessionContext::new();
    // A bounded session registers the same names as an unbounded one.
    register_functions(&ctx, None).expect("the session's functions register");
    let state = ctx.state();
    state
        .scalar_functions()
        .keys()
        .chain(state.aggregate_functions().keys())
        .chain(state.window_functions().keys())
        .cloned()
        .collect()
});

/// Whether every function `plan` calls (in its subqueries too) is one a worker has.
fn workers_can_run(plan: &LogicalPlan) -> bool {
    let mut known = true;
    let _ = plan.apply_with_subqueries(|node| {
        node.apply_expressions(|expr| {
            expr.apply(|expr| {
                let name = match expr {
                    Expr::ScalarFunction(call) => Some(call.func.name()),
                    Expr::AggregateFunction(call) => Some(call.func.name()),
                    Expr::WindowFunction(call) => Some(call.fun.name()),
                    _ => None,
                };
                if name.is_some_and(|name| !WORKER_FUNCTIONS.contains(name)) {
                    known = false;
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
    known
}

#[async_trait::async_trait]
impl QueryPlanner for WhereWorkersCan {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &dyn datafusion::catalog::Session,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if workers_can_run(logical_plan) {
            self.distributed
                .create_physical_plan(logical_plan, session_state)
                .await
        } else {
            DefaultPhysicalPlanner::default()
                .create_physical_plan(logical_plan, session_state)
                .await
        }
    }
}

fn secret_headers(secret: Option<&str>) -> DfResult<HeaderMap> {
    let mut headers = HeaderMap::new();
    if let Some(secret) = secret {
        let value = HeaderValue::from_str(secret).map_err(|_| {
            DataFusionError::Configuration(
                "the worker secret must be printable ASCII (it travels in a header)".into(),
            )
        })?;
        headers.insert(SECRET_HEADER, value);
    }
    Ok(headers)
}

/// How many tasks a team's scan asks for: as many as its Parquet would get without the barrier.
/// Anything else under a barrier (a table function's plan) runs as one task.
fn team_rows_task_count(
    event: DesiredTaskCountEvent,
) -> Option<DfResult<DesiredTaskCountEventResponse>> {
    let barrier = event.plan.downcast_ref::<TeamRowsExec>()?;
    let Some(scans) = file_scans(barrier.input()) else {
        return Some(Ok(DesiredTaskCountEventResponse::maximum(1)));
    };
    let per_partition = match DistributedConfig::from_session_config(event.session_config) {
        Ok(config) => config.file_scan_config_bytes_per_partition.max(1),
        Err(error) => return Some(Err(error)),
    };
    let bytes: u64 = scans
        .iter()
        .flat_map(|scan| scan.file_groups.iter().flat_map(FileGroup::iter))
        .map(PartitionedFile::effective_size)
        .sum();
    let tasks = (bytes as usize)
        .div_ceil(per_partition)
        .div_ceil(event.session_config.target_partitions().max(1));
    Some(Ok(DesiredTaskCountEventResponse::desired(tasks.max(1))))
}

/// A team's scan over `task_count` tasks: each task's barrier over its own slice of the files,
/// every scan under the barrier sliced alike.
fn team_rows_scale_up(
    event: ScaleUpLeafNodeEvent,
) -> Option<DfResult<ScaleUpLeafNodeEventResponse>> {
    let barrier = event.plan.downcast_ref::<TeamRowsExec>()?;
    let scans = file_scans(barrier.input())?;
    // `sliced[scan][task]`, turned into each task's scans in plan order.
    let mut sliced: Vec<_> = scans
        .iter()
        .map(|scan| slices(scan, event.task_count).into_iter())
        .collect();
    let variants = (0..event.task_count).map(|_| {
        let own: Vec<_> = sliced.iter_mut().filter_map(Iterator::next).collect();
        let input = with_file_scans(barrier.input(), &mut own.into_iter())?;
        barrier
            .with_input(input)
            .map(|b| Arc::new(b) as Arc<dyn ExecutionPlan>)
    });
    let variants = match variants.collect::<DfResult<Vec<_>>>() {
        Ok(variants) => variants,
        Err(error) => return Some(Err(error)),
    };
    Some(
        DistributedLeafExec::try_new(Arc::clone(event.plan), variants)
            .map(|leaf| ScaleUpLeafNodeEventResponse::new(Arc::new(leaf))),
    )
}

/// `scan` cut into `tasks` scans that together read its files once, each showing the same
/// partitions (a task with fewer groups scans nothing in the rest).
fn slices(scan: &FileScanConfig, tasks: usize) -> Vec<FileScanConfig> {
    let groups = FileGroupPartitioner::new()
        .with_target_partitions(scan.file_groups.len().max(1) * tasks)
        .with_repartition_file_min_size(0)
        .with_preserve_order_within_groups(!scan.output_ordering.is_empty())
        .repartition_file_groups(&scan.file_groups)
        .unwrap_or_else(|| scan.file_groups.clone());
    let mut slices = vec![scan.clone(); tasks];
    for slice in &mut slices {
        slice.file_groups.clear();
    }
    for (i, group) in groups.into_iter().enumerate() {
        slices[i % tasks].file_groups.push(group);
    }
    let width = slices
        .iter()
        .map(|s| s.file_groups.len())
        .max()
        .unwrap_or(1);
    for slice in &mut slices {
        slice
            .file_groups
            .resize_with(width, || FileGroup::new(Vec::new()));
    }
    slices
}

/// Carries a [`TeamRowsExec`] (its team, its columns and the plan under it) to a worker.
#[derive(Debug)]
pub(crate) struct TeamRowsCodec;

#[derive(Clone, PartialEq, Message)]
struct TeamRowsNode {
    #[prost(string, tag = "1")]
    team: String,
    #[prost(uint64, tag = "2")]
    team_position: u64,
    #[prost(uint64, tag = "3")]
    output_columns: u64,
    #[prost(message, optional, tag = "4")]
    input: Option<PhysicalPlanNode>,
}

impl PhysicalExtensionCodec for TeamRowsCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        _inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let node = TeamRowsNode::decode(buf)
            .map_err(|e| DataFusionError::Internal(format!("a team barrier's bytes: {e}")))?;
        let Some(input) = node.input else {
            return internal_err!("a team barrier arrived without its input");
        };
        let input = proto_converter
            .proto_to_execution_plan(&input, &PhysicalPlanDecodeContext::new(ctx, self))?;
        Ok(Arc::new(TeamRowsExec::new(
            input,
            node.team_position as usize,
            node.output_columns as usize,
            node.team,
        )?))
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> DfResult<()> {
        let Some(barrier) = node.downcast_ref::<TeamRowsExec>() else {
            return internal_err!("{} is not a node this codec carries", node.name());
        };
        let input = proto_converter.execution_plan_to_proto(barrier.input(), self)?;
        let (team, team_position, output_columns) = barrier.parts();
        TeamRowsNode {
            team: team.to_string(),
            team_position: team_position as u64,
            output_columns: output_columns as u64,
            input: Some(input),
        }
        .encode(buf)
        .map_err(|e| DataFusionError::Internal(format!("encoding a team barrier: {e}")))
    }
}

/// How this process connects to workers: `http://` ones in the clear, `https://` ones over TLS,
/// verifying their certificates against the cluster's CA (`--worker-ca`) or, without one, the
/// public roots. One connection per worker, kept and shared by every session of the process.
#[derive(Clone)]
pub struct WorkerChannels(Arc<Channels>);

struct Channels {
    plain: grpc::DefaultChannelResolver,
    tls: ClientTlsConfig,
    secure: std::sync::Mutex<HashMap<Url, Channel>>,
}

/// How long reaching a worker over TLS (TCP and handshake) may take: a worker that accepts the
/// connection and never answers the handshake fails the query instead of holding it.
const TLS_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl WorkerChannels {
    /// `ca_pem`: the PEM of the CA that signed the workers' certificates.
    pub fn new(ca_pem: Option<&[u8]>) -> Self {
        let tls = match ca_pem {
            Some(pem) => ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)),
            None => ClientTlsConfig::new().with_webpki_roots(),
        };
        Self(Arc::new(Channels {
            plain: grpc::DefaultChannelResolver::default(),
            tls,
            secure: std::sync::Mutex::new(HashMap::new()),
        }))
    }

    /// The channel to `url`, connected on first use and kept (tonic reconnects it should the
    /// worker restart). Connections to different workers are made at once, never one waiting on
    /// another; two sessions racing to the same new worker keep the first channel made.
    async fn secure_channel(&self, url: &Url) -> DfResult<Channel> {
        if let Some(channel) = self.0.secure.lock().expect("not poisoned").get(url) {
            return Ok(channel.clone());
        }
        let failed = |reason: String| {
            DataFusionError::Execution(format!("cannot reach the worker {url} over TLS: {reason}"))
        };
        // The bound holds for the reconnections tonic makes later (a restarted worker) too.
        let endpoint = Endpoint::from_shared(url.to_string())
            .map(|endpoint| endpoint.connect_timeout(TLS_CONNECT_TIMEOUT))
            .and_then(|endpoint| endpoint.tls_config(self.0.tls.clone()))
            .map_err(|error| failed(with_causes(&error)))?;
        let channel = match tokio::time::timeout(TLS_CONNECT_TIMEOUT, endpoint.connect()).await {
            Ok(connected) => connected.map_err(|error| failed(with_causes(&error)))?,
            Err(_) => {
                return Err(failed(format!(
                    "no TLS connection within {} s",
                    TLS_CONNECT_TIMEOUT.as_secs()
                )));
            }
        };
        Ok(self
            .0
            .secure
            .lock()
            .expect("not poisoned")
            .entry(url.clone())
            .or_insert(channel)
            .clone())
    }
}

impl Default for WorkerChannels {
    fn default() -> Self {
        Self::new(None)
    }
}

impl std::fmt::Debug for WorkerChannels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerChannels").finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl ChannelResolver for WorkerChannels {
    async fn get_worker_client_for_url(&self, url: &Url) -> DfResult<Box<dyn WorkerChannel>> {
        if url.scheme() == "https" {
            let channel = self.secure_channel(url).await?;
            Ok(grpc::create_worker_client(grpc::BoxCloneSyncChannel::new(
                channel,
            )))
        } else {
            self.0.plain.get_worker_client_for_url(url).await
        }
    }
}

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Bytes one task's operators may hold on this worker.
    pub memory_limit: usize,
    /// The secret coordinators must present; `None` accepts any (loopback and trusted networks).
    pub secret: Option<String>,
    /// How long one task may run here. A coordinator that stops waiting (its time limit, a
    /// client gone) drops its streams, but a worker goes on computing what it was asked until
    /// the task ends; past this every operator of the task stops at its next batch.
    pub task_timeout: std::time::Duration,
    /// Its certificate and key ([`Identity::from_pem`]): with them it serves only TLS.
    pub tls: Option<Identity>,
    /// How it reaches the other workers whose shuffles its tasks read.
    pub peers: WorkerChannels,
}

/// A worker over `lake`: the tonic service `gpuledger worker` serves.
pub fn worker(lake: &Lake, options: WorkerOptions) -> Worker {
    let registry: Arc<dyn ObjectStoreRegistry> = Arc::new(DefaultObjectStoreRegistry::new());
    registry.register_store(&LAKE_URL, lake.table_reader());
    Worker::from_session_builder(move |ctx: WorkerQueryContext| {
        let registry = Arc::clone(&registry);
        let options = options.clone();
        async move { worker_session(ctx, registry, &options) }
    })
}

fn worker_session(
    ctx: WorkerQueryContext,
    registry: Arc<dyn ObjectStoreRegistry>,
    options: &WorkerOptions,
) -> DfResult<SessionState> {
    if let Some(secret) = &options.secret {
        let presented = ctx
            .headers
            .get(SECRET_HEADER)
            .map(HeaderValue::as_bytes)
            .unwrap_or_default();
        if !same_secret(presented, secret.as_bytes()) {
            return exec_err!(
                "this worker refuses the plan: the coordinator did not present the cluster's worker secret (GPULEDGER_WORKER_SECRET)"
            );
        }
    }
    let runtime = RuntimeEnvBuilder::new()
        .with_object_store_registry(registry)
        .with_memory_limit(options.memory_limit, 1.0)
        .with_disk_manager_builder(
            datafusion::execution::disk_manager::DiskManagerBuilder::default()
                .with_mode(datafusion::execution::disk_manager::DiskManagerMode::Disabled),
        )
        .build_arc()?;
    let state = ctx
        .builder
        .with_runtime_env(runtime)
        .with_distributed_user_codec(TeamRowsCodec)
        .with_distributed_user_codec(GpuHoursCodec)
        .with_distributed_channel_resolver(options.peers.clone())
        .with_distributed_passthrough_headers(secret_headers(options.secret.as_deref())?)?
        .with_distributed_worker_plan_rewrite_handler(refuse_unless_reading_the_lake)
        .with_distributed_worker_plan_rewrite_handler(stop_after(options.task_timeout))
        .build();
    let ctx = SessionContext::new_with_state(state);
    register_functions(&ctx, Some(options.memory_limit))?;
    Ok(ctx.state())
}

/// Compares in time independent of where the two differ.
fn same_secret(presented: &[u8], secret: &[u8]) -> bool {
    presented.len() == secret.len()
        && presented
            .iter()
            .zip(secret)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// A worker runs what reads the lake, nothing else: no plan that writes (`COPY`, `INSERT`), no
/// scan of a store other than the lake's.
fn refuse_unless_reading_the_lake(
    event: WorkerPlanRewriteEvent<'_>,
) -> DfResult<WorkerPlanRewriteEventResponse> {
    check_reads_the_lake(&event.plan)?;
    Ok(WorkerPlanRewriteEventResponse::new(event.plan))
}

pub(crate) fn check_reads_the_lake(plan: &Arc<dyn ExecutionPlan>) -> DfResult<()> {
    if plan.downcast_ref::<DataSinkExec>().is_some() {
        return exec_err!("this worker refuses the plan: it writes, and workers only read");
    }
    if let Some(scan) = file_scan(plan)
        && scan.object_store_url.as_str() != LAKE_URL.as_str()
    {
        return exec_err!(
            "this worker refuses the plan: it reads {}, and workers read only the lake",
            scan.object_store_url.as_str()
        );
    }
    hidden_inputs(plan.as_ref())
        .into_iter()
        .chain(plan.children())
        .try_for_each(check_reads_the_lake)
}

/// Wraps a task's operators so that they stop at their next batch once `timeout` has passed.
fn stop_after(
    timeout: std::time::Duration,
) -> impl Fn(WorkerPlanRewriteEvent<'_>) -> DfResult<WorkerPlanRewriteEventResponse> + Send + Sync {
    move |event| {
        let cancellation = Cancellation::until(std::time::Instant::now() + timeout);
        Ok(WorkerPlanRewriteEventResponse::new(
            cancellation.guard(event.plan)?,
        ))
    }
}

/// `gpuledger worker`'s gRPC server over a lake, ready to serve.
pub struct WorkerServer {
    server: tonic::transport::Server,
    worker: Worker,
}

impl WorkerServer {
    /// The server of a worker over `lake`; over TLS when `options` has a certificate, which is
    /// checked here (before the worker says it listens).
    pub fn new(lake: &Lake, options: WorkerOptions) -> Result<Self, String> {
        let mut server = tonic::transport::Server::builder();
        if let Some(identity) = options.tls.clone() {
            server = server
                .tls_config(ServerTlsConfig::new().identity(identity))
                .map_err(|error| {
                    format!(
                        "the worker's certificate or key (--tls-cert, --tls-key) is not usable: {}",
                        with_causes(&error)
                    )
                })?;
        }
        Ok(Self {
            server,
            worker: worker(lake, options),
        })
    }

    /// Serves on `listener` until `shutdown` resolves.
    pub async fn serve(
        mut self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), String> {
        self.server
            .add_service(self.worker.into_worker_server())
            .serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(listener),
                shutdown,
            )
            .await
            .map_err(|error| with_causes(&error))
    }
}

/// `error` and each of its causes, `: `-separated (tonic's transport errors say only
/// "transport error"; what went wrong is their source).
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

#[cfg(test)]
pub(crate) mod tests;
