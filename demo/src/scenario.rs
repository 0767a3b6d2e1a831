//! The plan of the demo cluster: which nodes exist, what ran where and when, which GPUs were held
//! idle on purpose, and when a node was down. Every writer prints this one plan, so telemetry,
//! events, bills and tokens agree with each other.
//!
//! Nodes take eight roles in turn (a cluster of 64 GPUs has one node of each):
//!
//! | role | node group | what it does |
//! |---|---|---|
//! | `Train` | h100-ondemand | gang training over the whole node; the waits between jobs are `gang_wait` |
//! | `Serve` | h100-ondemand | the `chat` service; top GPUs on standby (`ha_redundancy`, then `latency_guarantee`) |
//! | `SpotTrain` | h100-spot | training on spot capacity: preempted often, restarted from checkpoints |
//! | `Mig` | h100-mig | every GPU split 3g + 2g + 1g + 1g: an embedding service, fine-tunes, notebooks |
//! | `Batch` | h100-ondemand | evaluation jobs, some labelled outside the policy, some stuck; a `maintenance` window |
//! | `ServeWarm` | a100-ondemand | the `assist` service; top GPUs a `warm_pool` (a `release_overlap` during a rollout) |
//! | `SpotBatch` | a100-spot | preemptible batch work; the node goes down once (XID 79) |
//! | `Dev` | a100-onprem | notebooks on owned hardware (priced by the rate card); most of its idle is unexplained |

use chrono::{DateTime, NaiveDate, Utc};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::DemoError;

pub const MINUTE: i64 = 60;
pub const HOUR: i64 = 3_600;
pub const DAY: i64 = 86_400;

/// The cluster every object and record belongs to.
pub const CLUSTER: &str = "demo";

/// What to generate. Times in the plan are seconds since `start` (midnight UTC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoSpec {
    /// GPUs in the cluster: a multiple of 8, at least 16 (eight nodes of 2 to 8 GPUs, or more nodes
    /// of 8).
    pub gpus: u32,
    pub days: u32,
    pub seed: u64,
    pub start: NaiveDate,
    /// Seconds between dcgm-exporter scrapes (its default is 30).
    pub scrape_interval_s: u32,
}

impl DemoSpec {
    pub const DEFAULT_GPUS: u32 = 64;
    pub const DEFAULT_DAYS: u32 = 30;
    /// Ten years: the longest demo, checked before any date is computed from it.
    pub const MAX_DAYS: u32 = 3_660;
    pub const DEFAULT_SEED: u64 = 42;
    pub const DEFAULT_SCRAPE_INTERVAL_S: u32 = 30;

    pub fn check(&self) -> Result<(), DemoError> {
        if self.gpus < 16 || !self.gpus.is_multiple_of(8) {
            return Err(DemoError::Spec {
                flag: "--gpus",
                reason: format!(
                    "must be a multiple of 8 and at least 16 (got {})",
                    self.gpus
                ),
            });
        }
        if !(1..=Self::MAX_DAYS).contains(&self.days) {
            return Err(DemoError::Spec {
                flag: "--days",
                reason: format!("must be 1 to {} (got {})", Self::MAX_DAYS, self.days),
            });
        }
        if self.scrape_interval_s == 0 || !(DAY as u32).is_multiple_of(self.scrape_interval_s) {
            return Err(DemoError::Spec {
                flag: "--scrape-interval",
                reason: format!(
                    "must divide a day into whole scrapes (got {} s)",
                    self.scrape_interval_s
                ),
            });
        }
        Ok(())
    }

    /// GPUs per node: eight nodes share the GPUs until each has 8, then nodes are added.
    pub fn gpus_per_node(&self) -> u32 {
        (self.gpus / 8).min(8)
    }

    pub fn window_seconds(&self) -> i64 {
        self.days as i64 * DAY
    }

    pub fn start_time(&self) -> DateTime<Utc> {
        self.start.and_hms_opt(0, 0, 0).expect("midnight").and_utc()
    }

    /// Scrapes in the window.
    pub fn scrapes(&self) -> u64 {
        (self.window_seconds() / self.scrape_interval_s as i64) as u64
    }
}

/// A GPU model as the catalog, dcgm-exporter and the price list name it.
#[derive(Debug, PartialEq)]
pub struct GpuModel {
    /// The catalog's `gpu_model`.
    pub name: &'static str,
    /// dcgm-exporter's `modelName`.
    pub model_name: &'static str,
    pub fb_total_mib: u32,
    pub idle_w: f64,
    pub max_w: f64,
    pub busy_clock_mhz: u32,
    /// On-demand list price per GPU-hour, in micro-dollars.
    pub list_micros_per_gpu_hour: i64,
    /// The 8-GPU instance type, for SKUs.
    pub instance_type: &'static str,
}

/// p5.48xlarge: 98.32 USD per hour for 8 H100.
pub const H100: GpuModel = GpuModel {
    name: "H100",
    model_name: "NVIDIA H100 80GB HBM3",
    fb_total_mib: 81_559,
    idle_w: 72.0,
    max_w: 700.0,
    busy_clock_mhz: 1_980,
    list_micros_per_gpu_hour: 12_290_000,
    instance_type: "p5.48xlarge",
};

/// p4de.24xlarge: 40.97 USD per hour for 8 A100 80GB.
pub const A100: GpuModel = GpuModel {
    name: "A100",
    model_name: "NVIDIA A100-SXM4-80GB",
    fb_total_mib: 81_920,
    idle_w: 58.0,
    max_w: 400.0,
    busy_clock_mhz: 1_410,
    list_micros_per_gpu_hour: 5_121_250,
    instance_type: "p4de.24xlarge",
};

/// What a node is for; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Train,
    Serve,
    SpotTrain,
    Mig,
    Batch,
    ServeWarm,
    SpotBatch,
    Dev,
}

impl Role {
    pub const CYCLE: [Role; 8] = [
        Role::Train,
        Role::Serve,
        Role::SpotTrain,
        Role::Mig,
        Role::Batch,
        Role::ServeWarm,
        Role::SpotBatch,
        Role::Dev,
    ];

    pub fn model(self) -> &'static GpuModel {
        match self {
            Role::Train | Role::Serve | Role::SpotTrain | Role::Mig | Role::Batch => &H100,
            Role::ServeWarm | Role::SpotBatch | Role::Dev => &A100,
        }
    }

    pub fn capacity(self) -> Capacity {
        match self {
            Role::SpotTrain | Role::SpotBatch => Capacity::Spot,
            Role::Dev => Capacity::OnPrem,
            _ => Capacity::OnDemand,
        }
    }

    pub fn group(self) -> &'static str {
        match self {
            Role::Train | Role::Serve | Role::Batch => "h100-ondemand",
            Role::SpotTrain => "h100-spot",
            Role::Mig => "h100-mig",
            Role::ServeWarm => "a100-ondemand",
            Role::SpotBatch => "a100-spot",
            Role::Dev => "a100-onprem",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capacity {
    OnDemand,
    Spot,
    /// Owned hardware: no bill; the rate card prices it.
    OnPrem,
}

impl Capacity {
    /// The catalog's `capacity_type`.
    pub fn catalog_name(self) -> &'static str {
        match self {
            Capacity::OnDemand => "on_demand",
            Capacity::Spot => "spot",
            Capacity::OnPrem => "reserved",
        }
    }
}

/// The MIG layout of every GPU of the `Mig` node: (profile, GPU instance id, slices) — 7 slices.
pub const MIG_LAYOUT: [(&str, u32, u32); 4] = [
    ("3g.40gb", 2, 3),
    ("2g.20gb", 3, 2),
    ("1g.10gb", 9, 1),
    ("1g.10gb", 10, 1),
];

#[derive(Debug, Clone, PartialEq)]
pub struct NodePlan {
    pub name: String,
    pub role: Role,
    pub gpus: u32,
    /// The EC2 instance id billing names; `None` on premises.
    pub resource_id: Option<String>,
    pub gpu_uuids: Vec<String>,
    pub availability_zone: &'static str,
}

impl NodePlan {
    pub fn model(&self) -> &'static GpuModel {
        self.role.model()
    }

    pub fn is_mig(&self) -> bool {
        self.role == Role::Mig
    }
}

/// The attribution labels of a workload (docs/design.md §3); `None` is a label not set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Labels {
    pub team: Option<&'static str>,
    pub environment: Option<&'static str>,
    pub workload_type: Option<&'static str>,
    pub model: Option<&'static str>,
    pub cost_center: Option<&'static str>,
}

/// The label policy's allowed teams; `growth` and `intern-lab` label workloads outside it.
pub const POLICY_TEAMS: [&str; 5] = ["research", "vision", "assistant", "search", "platform"];
pub const POLICY_ENVIRONMENTS: [&str; 3] = ["prod", "staging", "dev"];
pub const POLICY_WORKLOAD_TYPES: [&str; 4] = ["training", "inference", "notebook", "batch"];
pub const POLICY_MODELS: [&str; 5] = [
    "llama-3-70b",
    "llama-3-8b",
    "mistral-7b",
    "bge-large",
    "vit-h",
];
pub const POLICY_COST_CENTERS: [&str; 5] = ["cc-1001", "cc-2002", "cc-3003", "cc-4004", "cc-5005"];

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Finished,
    /// A `stop` with this reason (`failed: …`).
    Failed(&'static str),
    /// A spot reclaim or a higher-priority job: a `preempted` event.
    Preempted,
    /// Still running at the end of the window: no stop.
    Running,
}

/// What a run does to its GPU, for telemetry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Activity {
    /// Training at this SM activity, dipping while it writes a checkpoint.
    Training {
        sm: f64,
    },
    /// Serving [`Scenario::services`]`[service]`: follows the day's traffic.
    Serving {
        service: usize,
    },
    /// A notebook: mostly idle, with short bursts.
    Notebook,
    Batch {
        sm: f64,
    },
    /// A job that hangs holding its GPU (a zombie): SM activity zero.
    Stuck,
}

/// One pod's hold on GPUs from `start` to `end`.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub namespace: &'static str,
    pub workload: String,
    pub pod: String,
    pub container: &'static str,
    pub labels: Labels,
    pub node: usize,
    pub gpus: Vec<u32>,
    /// Index into [`MIG_LAYOUT`] for a pod on a MIG instance.
    pub mig: Option<usize>,
    /// When the scheduler queued and admitted it; `None` for services already up at the start.
    pub queued: Option<i64>,
    pub admitted: Option<i64>,
    pub start: i64,
    /// May lie past the window for a run still going (`Outcome::Running`).
    pub end: i64,
    pub outcome: Outcome,
    pub checkpoints: Vec<i64>,
    pub activity: Activity,
    /// Training samples per GPU-second (0 for other work).
    pub samples_per_gpu_second: f64,
}

/// A declared reservation: GPUs held idle on purpose.
#[derive(Debug, Clone, PartialEq)]
pub struct ReservationPlan {
    pub name: String,
    pub node: usize,
    /// `None` for every GPU of the node.
    pub gpus: Option<Vec<u32>>,
    pub from: i64,
    pub to: i64,
    pub reason: &'static str,
    pub note: &'static str,
}

/// A node down (no telemetry, `node_down` … `node_up`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub node: usize,
    pub down: i64,
    pub up: i64,
}

/// An inference service behind the LLM gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct Service {
    pub name: &'static str,
    pub namespace: &'static str,
    pub labels: Labels,
    /// Requests per hour per replica at the busiest time of day.
    pub peak_requests_per_replica_hour: f64,
    pub ttft_base_ms: f64,
    pub ms_per_output_token: f64,
    /// Embeddings: no output tokens.
    pub embedding: bool,
    /// SM activity of a replica at peak traffic.
    pub peak_sm: f64,
}

/// Everything that happens in the demo cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub spec: DemoSpec,
    pub nodes: Vec<NodePlan>,
    pub runs: Vec<Run>,
    pub reservations: Vec<ReservationPlan>,
    pub faults: Vec<Fault>,
    pub services: Vec<Service>,
}

const CHAT: usize = 0;
const ASSIST: usize = 1;
const EMBED: usize = 2;

fn services() -> Vec<Service> {
    let inference = |team, model, cost_center| Labels {
        team: Some(team),
        environment: Some("prod"),
        workload_type: Some("inference"),
        model: Some(model),
        cost_center: Some(cost_center),
    };
    vec![
        Service {
            name: "chat",
            namespace: "assistant",
            labels: inference("assistant", "llama-3-70b", "cc-3003"),
            peak_requests_per_replica_hour: 50.0,
            ttft_base_ms: 420.0,
            ms_per_output_token: 28.0,
            embedding: false,
            peak_sm: 0.82,
        },
        Service {
            name: "assist",
            namespace: "search",
            labels: inference("search", "mistral-7b", "cc-4004"),
            peak_requests_per_replica_hour: 60.0,
            ttft_base_ms: 140.0,
            ms_per_output_token: 9.0,
            embedding: false,
            peak_sm: 0.7,
        },
        Service {
            name: "embed",
            namespace: "search",
            labels: inference("search", "bge-large", "cc-4004"),
            peak_requests_per_replica_hour: 60.0,
            ttft_base_ms: 25.0,
            ms_per_output_token: 0.0,
            embedding: true,
            peak_sm: 0.55,
        },
    ]
}

/// Traffic through the day, 0.05 at 03:00 UTC to 1.0 at 15:00 UTC.
pub fn daily_load(t: i64) -> f64 {
    let hour = t.rem_euclid(DAY) as f64 / HOUR as f64;
    0.525 - 0.475 * (std::f64::consts::TAU * (hour - 3.0) / 24.0).cos()
}

/// A span a lane must leave free, and why.
#[derive(Debug, Clone, Copy)]
struct Block {
    from: i64,
    to: i64,
    fault: bool,
}

/// A job before it is placed: how long after the lane frees up it is submitted, how long it runs,
/// and how it ends (after `fraction` of its duration for a failure or preemption).
struct Draft {
    gap: i64,
    wait: i64,
    duration: i64,
    outcome: Outcome,
    fraction: f64,
    template: RunTemplate,
}

/// The parts of a run that do not depend on where it is placed.
#[derive(Clone)]
struct RunTemplate {
    namespace: &'static str,
    workload: String,
    container: &'static str,
    labels: Labels,
    activity: Activity,
    samples_per_gpu_second: f64,
    checkpoint_every: Option<i64>,
}

/// GPUs (or one MIG instance) scheduled together.
struct Lane {
    node: usize,
    gpus: Vec<u32>,
    mig: Option<usize>,
}

impl Scenario {
    /// Lays the cluster out for `spec` (which must pass [`DemoSpec::check`]).
    pub fn plan(spec: &DemoSpec) -> Scenario {
        let mut planner = Planner {
            rng: ChaCha8Rng::seed_from_u64(spec.seed),
            window: spec.window_seconds(),
            scenario: Scenario {
                spec: spec.clone(),
                nodes: Vec::new(),
                runs: Vec::new(),
                reservations: Vec::new(),
                faults: Vec::new(),
                services: services(),
            },
            workloads: 0,
        };
        planner.nodes();
        for node in 0..planner.scenario.nodes.len() {
            planner.node_work(node);
        }
        planner.scenario
    }

    pub fn window_seconds(&self) -> i64 {
        self.spec.window_seconds()
    }

    /// Replicas of each service (runs serving it).
    pub fn replicas(&self, service: usize) -> usize {
        self.runs
            .iter()
            .filter(|r| r.activity == Activity::Serving { service })
            .count()
    }
}

struct Planner {
    rng: ChaCha8Rng,
    window: i64,
    scenario: Scenario,
    workloads: u32,
}

impl Planner {
    fn nodes(&mut self) {
        let spec = &self.scenario.spec;
        let per_node = spec.gpus_per_node();
        let count = spec.gpus / per_node;
        let mut in_group: std::collections::HashMap<&str, u32> = Default::default();
        for index in 0..count as usize {
            let role = Role::CYCLE[index % Role::CYCLE.len()];
            let number = in_group.entry(role.group()).or_default();
            *number += 1;
            let name = format!("{}-{:02}", role.group(), number);
            let resource_id = (role.capacity() != Capacity::OnPrem)
                .then(|| format!("i-0{:016x}", self.rng.random::<u64>()));
            let gpu_uuids = (0..per_node)
                .map(|_| {
                    let a: u64 = self.rng.random();
                    let b: u64 = self.rng.random();
                    format!(
                        "GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                        a >> 32,
                        (a >> 16) & 0xffff,
                        a & 0xffff,
                        b >> 48,
                        b & 0xffff_ffff_ffff
                    )
                })
                .collect();
            self.scenario.nodes.push(NodePlan {
                name,
                role,
                gpus: per_node,
                resource_id,
                gpu_uuids,
                availability_zone: ["us-east-1a", "us-east-1b"][index % 2],
            });
        }
    }

    /// Plans one node's reservations, faults and runs, by its role.
    fn node_work(&mut self, node: usize) {
        let (role, gpus) = {
            let n = &self.scenario.nodes[node];
            (n.role, n.gpus)
        };
        // Nodes of the same role (clusters over 64 GPUs) do not all do things at the same hour.
        let shift = (node / Role::CYCLE.len()) as i64 * 5 * HOUR;
        let mid = (self.window / 2 + shift).min(self.window - HOUR);
        let standby = (gpus / 4).max(1);
        let serving: Vec<u32> = (0..gpus - standby).collect();
        let top: Vec<u32> = (gpus - standby..gpus).collect();
        match role {
            Role::Train => {
                let lane = Lane::whole(node, gpus);
                let before = self.scenario.runs.len();
                self.fill(&lane, &[], |p, seq| p.training(seq, "research", false));
                self.gang_waits(node, before);
            }
            Role::Serve => {
                self.reserve(
                    node,
                    Some(top.clone()),
                    0,
                    mid,
                    "ha_redundancy",
                    "hot standby for chat",
                );
                self.reserve(
                    node,
                    Some(top),
                    mid,
                    self.window,
                    "latency_guarantee",
                    "headroom for chat's TTFT target",
                );
                for gpu in serving {
                    self.serve(node, gpu, None, CHAT);
                }
            }
            Role::SpotTrain => {
                for lane in Lane::halves(node, gpus) {
                    self.fill(&lane, &[], |p, seq| p.training(seq, "vision", true));
                }
            }
            Role::Mig => {
                for gpu in 0..gpus {
                    self.serve(node, gpu, Some(0), EMBED);
                    let lane = Lane {
                        node,
                        gpus: vec![gpu],
                        mig: Some(1),
                    };
                    self.fill(&lane, &[], Planner::fine_tune);
                    for instance in [2, 3] {
                        let lane = Lane {
                            node,
                            gpus: vec![gpu],
                            mig: Some(instance),
                        };
                        self.fill(&lane, &[], |p, seq| p.notebook(seq, false));
                    }
                }
            }
            Role::Batch => {
                let from = mid + 2 * HOUR;
                let to = (from + 4 * HOUR).min(self.window);
                self.reserve(node, None, from, to, "maintenance", "driver upgrade");
                let blocks = [Block {
                    from,
                    to,
                    fault: false,
                }];
                for gpu in 0..gpus {
                    let lane = Lane {
                        node,
                        gpus: vec![gpu],
                        mig: None,
                    };
                    self.fill(&lane, &blocks, Planner::evaluation);
                }
            }
            Role::ServeWarm => {
                let overlap_end = (mid + 2 * HOUR).min(self.window);
                self.reserve(
                    node,
                    Some(top.clone()),
                    0,
                    mid,
                    "warm_pool",
                    "scale-out capacity for assist",
                );
                self.reserve(
                    node,
                    Some(top.clone()),
                    mid,
                    overlap_end,
                    "release_overlap",
                    "assist v2 rollout",
                );
                if overlap_end < self.window {
                    self.reserve(
                        node,
                        Some(top),
                        overlap_end,
                        self.window,
                        "warm_pool",
                        "scale-out capacity for assist",
                    );
                }
                for gpu in serving {
                    self.serve(node, gpu, None, ASSIST);
                }
            }
            Role::SpotBatch => {
                let down = mid + 10 * HOUR;
                let up = down + 3 * HOUR;
                if down < self.window {
                    self.scenario.faults.push(Fault { node, down, up });
                }
                let blocks = [Block {
                    from: down,
                    to: up,
                    fault: true,
                }];
                for lane in Lane::halves(node, gpus) {
                    self.fill(&lane, &blocks, |p, seq| p.training(seq, "vision", true));
                }
            }
            Role::Dev => {
                for gpu in 0..gpus {
                    let lane = Lane {
                        node,
                        gpus: vec![gpu],
                        mig: None,
                    };
                    self.fill(&lane, &[], |p, seq| p.notebook(seq, true));
                }
            }
        }
    }

    fn reserve(
        &mut self,
        node: usize,
        gpus: Option<Vec<u32>>,
        from: i64,
        to: i64,
        reason: &'static str,
        note: &'static str,
    ) {
        if from >= to {
            return;
        }
        let name = format!(
            "{}-{}-{}",
            self.scenario.nodes[node].name,
            reason.replace('_', "-"),
            from / MINUTE
        );
        self.scenario.reservations.push(ReservationPlan {
            name,
            node,
            gpus,
            from,
            to,
            reason,
            note,
        });
    }

    /// The time a `Train` node's GPUs sat waiting for a whole gang: declared as `gang_wait`.
    fn gang_waits(&mut self, node: usize, first_run: usize) {
        let waits: Vec<(i64, i64)> = self.scenario.runs[first_run..]
            .iter()
            .filter_map(|r| Some((r.queued?, r.admitted?)))
            .filter(|(queued, admitted)| admitted - queued >= 10 * MINUTE)
            .collect();
        for (queued, admitted) in waits {
            self.reserve(
                node,
                None,
                queued,
                admitted,
                "gang_wait",
                "waiting for all 8 GPUs of a gang",
            );
        }
    }

    /// A service replica on one GPU (or MIG instance), up for the whole window.
    fn serve(&mut self, node: usize, gpu: u32, mig: Option<usize>, service: usize) {
        let s = &self.scenario.services[service];
        let replica = self
            .scenario
            .runs
            .iter()
            .filter(|r| r.activity == Activity::Serving { service })
            .count();
        let suffix: u32 = self.rng.random_range(0x10000..0xfffff);
        self.scenario.runs.push(Run {
            namespace: s.namespace,
            workload: s.name.to_string(),
            pod: format!("{}-{:05x}-{replica}", s.name, suffix),
            container: if s.embedding { "tei" } else { "vllm" },
            labels: s.labels,
            node,
            gpus: vec![gpu],
            mig,
            queued: None,
            admitted: None,
            start: 0,
            end: self.window + DAY,
            outcome: Outcome::Running,
            checkpoints: vec![],
            activity: Activity::Serving { service },
            samples_per_gpu_second: 0.0,
        });
    }

    fn next_workload(&mut self) -> u32 {
        self.workloads += 1;
        self.workloads
    }

    /// Gang training: hours long, checkpoints every two hours; some fail after a checkpoint,
    /// spot ones are often preempted.
    fn training(&mut self, seq: u32, team: &'static str, spot: bool) -> Draft {
        let id = self.next_workload();
        let (model, namespace, cost_center) = match team {
            "research" => ("llama-3-8b", "ml-research", "cc-1001"),
            _ => ("vit-h", "vision", "cc-2002"),
        };
        let roll: f64 = self.rng.random();
        let (outcome, fraction) = if spot && roll < 0.3 {
            (Outcome::Preempted, self.rng.random_range(0.3..0.9))
        } else if roll > 0.8 {
            (
                Outcome::Failed("failed: NCCL watchdog timeout"),
                self.rng.random_range(0.45..0.9),
            )
        } else {
            (Outcome::Finished, 1.0)
        };
        Draft {
            gap: if seq == 0 {
                self.rng.random_range(0..2 * HOUR)
            } else {
                self.rng
                    .random_range(15 * MINUTE..if spot { 5 * HOUR } else { 2 * HOUR })
            },
            wait: self.rng.random_range(5 * MINUTE..90 * MINUTE),
            duration: self.rng.random_range(5 * HOUR..20 * HOUR),
            outcome,
            fraction,
            template: RunTemplate {
                namespace,
                workload: format!("train-{model}-{id:03}"),
                container: "pytorch",
                labels: Labels {
                    team: Some(team),
                    environment: Some(if spot { "staging" } else { "prod" }),
                    workload_type: Some("training"),
                    model: Some(model),
                    cost_center: Some(cost_center),
                },
                activity: Activity::Training {
                    sm: self.rng.random_range(0.68..0.93),
                },
                samples_per_gpu_second: if team == "research" { 42.0 } else { 610.0 },
                checkpoint_every: Some(2 * HOUR),
            },
        }
    }

    /// Fine-tunes on a 2g.20gb MIG instance.
    fn fine_tune(&mut self, seq: u32) -> Draft {
        let id = self.next_workload();
        Draft {
            gap: self
                .rng
                .random_range(if seq == 0 { 0 } else { 30 * MINUTE }..4 * HOUR),
            wait: self.rng.random_range(MINUTE..15 * MINUTE),
            duration: self.rng.random_range(2 * HOUR..9 * HOUR),
            outcome: Outcome::Finished,
            fraction: 1.0,
            template: RunTemplate {
                namespace: "ml-research",
                workload: format!("finetune-mistral-7b-{id:03}"),
                container: "trainer",
                labels: Labels {
                    team: Some("research"),
                    environment: Some("dev"),
                    workload_type: Some("training"),
                    model: Some("mistral-7b"),
                    cost_center: Some("cc-1001"),
                },
                activity: Activity::Training {
                    sm: self.rng.random_range(0.55..0.85),
                },
                samples_per_gpu_second: 12.0,
                checkpoint_every: Some(HOUR),
            },
        }
    }

    /// Notebooks: hours of mostly nothing. On the on-premises node some belong to teams outside
    /// the label policy, or to nobody.
    fn notebook(&mut self, seq: u32, on_prem: bool) -> Draft {
        let id = self.next_workload();
        let roll: f64 = self.rng.random();
        let (team, namespace) = match roll {
            r if r < 0.35 => (Some("research"), "ml-research"),
            r if r < 0.6 => (Some("vision"), "vision"),
            r if r < 0.8 && on_prem => (Some("intern-lab"), "interns"),
            r if r < 0.9 && on_prem => (None, "default"),
            _ => (Some("growth"), "growth"),
        };
        Draft {
            gap: self.rng.random_range(
                if seq == 0 { 0 } else { HOUR }..if on_prem { 14 * HOUR } else { 8 * HOUR },
            ),
            wait: self.rng.random_range(10..5 * MINUTE),
            duration: self.rng.random_range(HOUR..10 * HOUR),
            outcome: Outcome::Finished,
            fraction: 1.0,
            template: RunTemplate {
                namespace,
                workload: format!("notebook-{id:04}"),
                container: "jupyter",
                labels: Labels {
                    team,
                    environment: Some("dev"),
                    workload_type: Some("notebook"),
                    model: None,
                    cost_center: None,
                },
                activity: Activity::Notebook,
                samples_per_gpu_second: 0.0,
                checkpoint_every: None,
            },
        }
    }

    /// Evaluation and batch-embedding jobs on single GPUs; one in ten hangs, a fifth carry a team
    /// outside the policy and some carry no team at all.
    fn evaluation(&mut self, seq: u32) -> Draft {
        let id = self.next_workload();
        let roll: f64 = self.rng.random();
        let team = match roll {
            r if r < 0.55 => Some("platform"),
            r if r < 0.75 => Some("growth"),
            r if r < 0.85 => None,
            _ => Some("search"),
        };
        let stuck = self.rng.random_bool(0.1);
        let failed = !stuck && self.rng.random_bool(0.08);
        Draft {
            gap: self
                .rng
                .random_range(if seq == 0 { 0 } else { 20 * MINUTE }..5 * HOUR),
            wait: self.rng.random_range(MINUTE..20 * MINUTE),
            duration: self.rng.random_range(HOUR..6 * HOUR),
            outcome: if failed {
                Outcome::Failed("failed: OOMKilled")
            } else {
                Outcome::Finished
            },
            fraction: if failed {
                self.rng.random_range(0.1..0.6)
            } else {
                1.0
            },
            template: RunTemplate {
                namespace: if team == Some("growth") {
                    "growth"
                } else {
                    "platform"
                },
                workload: format!("eval-{id:04}"),
                container: "runner",
                labels: Labels {
                    team,
                    environment: Some("prod"),
                    workload_type: Some("batch"),
                    model: Some("llama-3-70b"),
                    cost_center: team.map(|_| "cc-5005"),
                },
                activity: if stuck {
                    Activity::Stuck
                } else {
                    Activity::Batch {
                        sm: self.rng.random_range(0.45..0.9),
                    }
                },
                samples_per_gpu_second: 0.0,
                checkpoint_every: None,
            },
        }
    }

    /// Places drafted jobs one after another on a lane until the window ends, keeping `blocks`
    /// free: a job that would run into a block ends at its start (a fault fails it), one that
    /// would start inside a block waits for its end. Failed and preempted jobs are resubmitted.
    fn fill(
        &mut self,
        lane: &Lane,
        blocks: &[Block],
        mut draft: impl FnMut(&mut Planner, u32) -> Draft,
    ) {
        let mut free_at = 0;
        let mut seq = 0;
        let mut retry: Option<(RunTemplate, u32)> = None;
        loop {
            let mut d = draft(self, seq);
            seq += 1;
            let attempt = match retry.take() {
                Some((template, attempt)) => {
                    d.template = template;
                    d.gap = self.rng.random_range(10 * MINUTE..45 * MINUTE);
                    attempt
                }
                None => 0,
            };
            let mut start = free_at + d.gap;
            while let Some(b) = blocks.iter().find(|b| b.from <= start && start < b.to) {
                start = b.to + 5 * MINUTE;
            }
            if start >= self.window {
                break;
            }
            let mut end = start + (d.duration as f64 * d.fraction) as i64;
            let mut outcome = d.outcome;
            if let Some(b) = blocks
                .iter()
                .filter(|b| b.from > start && b.from < end)
                .min_by_key(|b| b.from)
            {
                end = b.from;
                if b.fault {
                    outcome = Outcome::Failed("failed: node lost (XID 79)");
                } else if outcome != Outcome::Finished {
                    outcome = Outcome::Finished;
                }
            }
            if end >= self.window {
                outcome = Outcome::Running;
            }
            let queued = (start - d.wait).max(free_at);
            let admitted = start - 5;
            let template = d.template;
            let checkpoints = template
                .checkpoint_every
                .map(|every| {
                    (1..)
                        .map(|k| start + k * every)
                        .take_while(|t| *t < end.min(self.window))
                        .collect()
                })
                .unwrap_or_default();
            self.scenario.runs.push(Run {
                namespace: template.namespace,
                workload: template.workload.clone(),
                pod: format!("{}-{}", template.workload, attempt),
                container: template.container,
                labels: template.labels,
                node: lane.node,
                gpus: lane.gpus.clone(),
                mig: lane.mig,
                queued: Some(queued),
                admitted: Some(admitted),
                start,
                end,
                outcome,
                checkpoints,
                activity: template.activity,
                samples_per_gpu_second: template.samples_per_gpu_second,
            });
            if matches!(outcome, Outcome::Failed(_) | Outcome::Preempted) {
                retry = Some((template, attempt + 1));
            }
            free_at = end;
        }
    }
}

impl Lane {
    fn whole(node: usize, gpus: u32) -> Lane {
        Lane {
            node,
            gpus: (0..gpus).collect(),
            mig: None,
        }
    }

    /// The node's GPUs in two halves, each scheduled on its own.
    fn halves(node: usize, gpus: u32) -> [Lane; 2] {
        let half = gpus / 2;
        [
            Lane {
                node,
                gpus: (0..half).collect(),
                mig: None,
            },
            Lane {
                node,
                gpus: (half..gpus).collect(),
                mig: None,
            },
        ]
    }
}

#[cfg(test)]
mod tests;
